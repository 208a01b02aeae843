"""The ``holomem`` command line (docs/cli.md): the parser (:mod:`.parser`), the commands
(:mod:`.commands`, :mod:`.store`, :mod:`.graph`, :mod:`.servers`), opening a store
(:mod:`.opening`), what they print (:mod:`.printing`) and the demo (:mod:`.demo`).

``main`` is handed on here so that ``holomem.api.doors.cli:main``, the console script's
entry point before the command line became a package, keeps working.
"""

from holomem.api.doors.cli.commands import main

__all__ = ["main"]
