"""Forgetting and maintenance: removal with re-linking, purge, the forgetting
policy, consolidation."""
