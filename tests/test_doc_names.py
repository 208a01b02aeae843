"""The docs name places the code has: every dotted holomem name the README, docs/ and
FORMAT.md give in backquotes (``holomem.api.memory.ops``, ``holomem.Memory.recall``) is a
module, or an object reached from one — so a module that moves takes its docs along.
"""

from __future__ import annotations

import importlib
import os
import re
import warnings

from tests.test_docs import ROOT, pages, read

#: Dotted names that are not Python objects: logger names, and the names of the
#: OpenTelemetry spans and span attributes (docs/http.md "Metrics and traces").
NOT_OBJECTS = {"holomem.http", "holomem.op", "holomem.namespace", "holomem.result.count",
               "holomem.recall", "holomem.remember", "holomem.remember_many",
               "holomem.set_confidence"}
NAME = re.compile(r"`(holomem(?:\.[A-Za-z_]\w*)+)")


def _reaches(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        with warnings.catch_warnings():  # a deprecated name is still a name of the code
            warnings.simplefilter("ignore", DeprecationWarning)
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
        return True
    return False


def test_every_dotted_holomem_name_in_the_docs_is_a_place_of_the_code() -> None:
    every = [*pages(), os.path.join(ROOT, "FORMAT.md")]
    missing = sorted({(os.path.relpath(page, ROOT), name) for page in every
                      for name in NAME.findall(read(page))
                      if name not in NOT_OBJECTS and not _reaches(name)})
    assert missing == []


def test_a_name_the_code_lacks_is_found() -> None:
    assert not _reaches("holomem.api.reading")  # a module of the old layout
    assert not _reaches("holomem.api.memory.ops.NOPE")
    assert _reaches("holomem.api.memory.ops.OPS") and _reaches("holomem.Memory.recall")
