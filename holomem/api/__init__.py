"""The API layer: wires the log to the projections (Store, Memory, the JSON contract, CLI)."""
