"""The API layer: three tiers, one folder each, importing one way: doors -> memory -> engine.

- :mod:`holomem.api.engine`: ``Store``, the journal wired to the projections, its read
  handle ``View`` (the only way up) and the checks of every value a caller hands in.
- :mod:`holomem.api.memory`: ``Memory``, one page over a ``Session``, and one package
  per concept (remember, recall, facts, forget, graph, holographic, window, transfer,
  embedding), each with its calls; the op table describes every op of the JSON
  contract once.
- :mod:`holomem.api.doors`: one package per door (``cli``, ``http``, ``mcp``), each
  translating a protocol into the contract and never reaching past it.

This package holds nothing but the three tiers.
"""
