"""The MCP door: tools over stdio (``holomem mcp``) and over streamable HTTP (``/mcp``)."""
