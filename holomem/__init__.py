"""holomem: an embedded, event-sourced memory for AI agents."""

from holomem.errors import HolomemError
from holomem.log import Journal

__all__ = ["HolomemError", "Journal"]
__version__ = "0.1.0"
