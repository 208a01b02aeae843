"""Holographic operations: HRR algebra (probe, related, reason) and contradictions."""
