"""The journal on a NATS JetStream stream (docs/scale-out.md).

A store's journal is one stream per generation, one message per transaction holding
the same frame bytes as a file segment; a key-value bucket holds the live generation's
record and the writer's lease. The only part of holomem that imports ``nats`` (the
``nats`` extra); imported only for a ``nats://`` store.
"""
