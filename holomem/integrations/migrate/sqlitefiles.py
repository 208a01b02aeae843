"""A peer's SQLite file opened read-only, so that a migration never changes it, nor
creates one where a wrong path pointed (docs/migrate.md).

Owns: :func:`open_read_only` (the file's URI, its name escaped so that SQLite opens
that very file, whatever characters its name holds) and :func:`tables` (the tables it
has, or ``invalid_request`` when it is not an SQLite database). Imports sqlite3.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse

from holomem.errors import InvalidError


def uri(path: str) -> str:
    """The read-only SQLite URI of the file at ``path``: every character SQLite would
    read as part of the URI (``%``, ``?``, ``#``, a space...) percent-encoded."""
    return "file:" + urllib.parse.quote(os.path.abspath(path), safe="/") + "?mode=ro"


def open_read_only(path: str, what: str) -> sqlite3.Connection:
    """A connection to the existing SQLite file at ``path``, read-only (a missing file
    is not created). ``what`` names the file in errors. Errors: ``invalid_request``."""
    if not os.path.isfile(path):
        raise InvalidError(f"{path}: no such file ({what} is expected)")
    try:
        return sqlite3.connect(uri(path), uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise InvalidError(f"{path}: SQLite cannot open it: {exc}") from exc


def tables(conn: sqlite3.Connection, path: str) -> set[str]:
    """The names of the tables of ``conn``'s database. Errors: ``invalid_request`` (not
    an SQLite database)."""
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InvalidError(f"{path}: not an SQLite database ({exc})") from exc
    return {str(name) for (name,) in rows}
