"""Projections: state derived from the journal's events by replay.

Each takes ``(seq, event)`` in sequence order and can be rebuilt from empty. They
never see segments, files or keys (STYLE.md §1): they may import only
:mod:`holomem.events`, :mod:`holomem.errors`, numpy and msgspec. The one projection
with a file, the text segment, gets it through :class:`~holomem.projections.base.RecordStore`.
"""
