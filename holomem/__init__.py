"""holomem: an embedded, event-sourced memory for AI agents."""

from holomem.api.documents import Document, DocumentInput, Hit, Store, StoreStats
from holomem.errors import HolomemError, StoreLockedError
from holomem.log import Journal

__all__ = [
    "Document",
    "DocumentInput",
    "Hit",
    "HolomemError",
    "Journal",
    "Store",
    "StoreLockedError",
    "StoreStats",
]
__version__ = "0.1.0"
