"""The doors: each translates one foreign protocol into the memory tier's contract.

Owns nothing the memory tier needs: the command line (:mod:`.cli`), the HTTP server
(:mod:`.http`) and the MCP server (:mod:`.mcp`, whose tool shapes the Hermes provider
shares), each a package; and what they share — :mod:`.follower` (serving a store
another process writes), :mod:`.scoping` (a door confined to one namespace) and
:mod:`.jsontext` (JSON a client typed into a parameter or a header, decoded).
Doors import the memory tier and the engine's public face, never the log (but for its
file seam); nothing below imports a door. Integrations with other frameworks (Hermes,
LangGraph) are doors too and live in :mod:`holomem.integrations`.
"""
