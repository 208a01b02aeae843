"""Fixtures the integration tests share: ``offline_mem0`` (a Mem0 that runs offline,
for the migration tests; :mod:`tests.integrations.migrate_peers`)."""

from tests.integrations.migrate_peers import offline_mem0

__all__ = ["offline_mem0"]
