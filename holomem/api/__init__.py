"""The API layer, in three tiers that import one way: doors -> memory API -> engine.

- :mod:`holomem.api.engine`: ``Store``, the journal wired to the projections, and
  its read handle ``View`` — the only way up.
- the memory API (this package's modules): ``Memory`` and the concepts it
  orchestrates — planning a remember, recall and explain, fact records, listing,
  rendering, forgetting, consolidation, holographic operations, the JSON contract;
  ``types`` and ``validate`` hold the shapes and the checks every tier shares.
- :mod:`holomem.api.doors`: CLI, HTTP, MCP, the demo and tool schemas, which
  translate a protocol into the contract and never reach past it.
"""
