"""The doors: each translates one foreign protocol into the memory API's contract.

Owns nothing the memory API needs: the CLI (:mod:`.cli`), the HTTP server
(:mod:`.http`), the MCP server (:mod:`.mcp`), the demo (:mod:`.demo`) and the tool
schemas agent doors share (:mod:`.toolschema`). Doors import the memory API and
the engine's public names; nothing below imports a door. Integrations with other
frameworks (Hermes, LangGraph) are doors too and live in :mod:`holomem.integrations`.
"""
