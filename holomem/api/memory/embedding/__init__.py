"""Embedders in a Memory: which one, the identity the store pins, re-embedding."""
