"""Typed links between facts: relations, the evidence walk (why) and graph recall."""
