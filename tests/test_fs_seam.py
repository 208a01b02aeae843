"""Every file operation of holomem goes through holomem/log/fs/ (issue 12, item 3).

A call that opens, reads, writes, syncs, renames, unlinks, creates or lists a file or
directory anywhere else escapes the crash points and the tap the crash harness records
through (holomem.log.tap), so the power-loss model would never see it. This walks
``holomem/`` and ``tools/`` with ``ast`` and fails on any such call outside it:
``os.<file op>``, the builtin ``open``, ``io.open``, ``shutil``, ``tempfile``, ``glob``,
``fcntl``, ``mmap`` and pathlib's reading and writing methods (aliases and
``from os import ...`` included). ``os.path`` predicates, ``os.urandom``,
``os.getpid`` and ``os.environ`` are not file operations.

The file layer is a package imported as one module (``from holomem.log import fs``);
what its modules split among themselves is its own business, so nothing outside it
imports them.
"""

from __future__ import annotations

import ast
import functools
import os

import pytest

from tests import sourcetree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCANNED = ("holomem", "tools")
#: The one package allowed to touch files, and its one import point.
FILE_LAYER = "holomem/log/fs/"
FILE_LAYER_MODULE = "holomem.log.fs"

#: ``os`` functions that operate on files, directories or file descriptors.
OS_FILE_OPS = frozenset({
    "open", "read", "write", "pread", "pwrite", "readv", "writev", "preadv", "pwritev",
    "fsync", "fdatasync", "sync", "rename", "renames", "replace", "unlink", "remove",
    "rmdir", "removedirs", "mkdir", "makedirs", "mkfifo", "mknod", "listdir", "scandir",
    "walk", "fwalk", "truncate", "ftruncate", "close", "closerange", "fstat", "stat",
    "lstat", "link", "symlink", "readlink", "chmod", "fchmod", "lchmod", "chown",
    "fchown", "lchown", "utime", "lseek", "sendfile", "copy_file_range",
    "posix_fallocate", "posix_fadvise", "fdopen", "dup", "dup2", "statvfs", "fstatvfs",
})
#: ``os.path`` functions that are a ``stat`` in disguise (the predicates are fine).
OS_PATH_FILE_OPS = frozenset({"getsize", "getmtime", "getatime", "getctime", "samefile"})
#: Modules every function of which (but these harmless ones) touches files.
FILE_MODULES = {
    "shutil": frozenset({"which", "get_terminal_size"}),
    "tempfile": frozenset({"gettempdir", "gettempprefix"}),
    "glob": frozenset({"escape"}),
    "fcntl": frozenset(),
    "mmap": frozenset(),
}
#: Methods that only a pathlib path (or a file object) has: reading and writing files.
PATH_METHODS = frozenset({
    "read_text", "write_text", "read_bytes", "write_bytes", "touch", "iterdir", "rglob",
    "mkdir", "rmdir", "unlink", "symlink_to", "hardlink_to", "rename", "chmod", "lchmod",
})


def forbidden_calls(source: str, filename: str = "<snippet>") -> list[str]:
    """Every file operation in ``source`` that bypasses the file layer, as
    ``file:line: what``."""
    tree = sourcetree.parse(source, filename)
    aliases: dict[str, str] = {}  # local name -> module it stands for
    found: list[str] = []

    def hit(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', 0)}: {what}")

    watched = {"os", "io", "codecs", "pathlib", *FILE_MODULES}
    file_layer = {"fs"}  # names bound to holomem.log.fs, whose own functions are the seam
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in watched or a.name == "os.path":
                    aliases[(a.asname or a.name).split(".")[0]] = a.name.split(".")[0]
                elif a.name == "holomem.log.fs" and a.asname:
                    file_layer.add(a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "holomem.log":
            file_layer.update(a.asname or a.name for a in node.names if a.name == "fs")
        elif isinstance(node, ast.ImportFrom) and node.module in watched:
            for a in node.names:
                name = a.name
                if ((node.module == "os" and name in OS_FILE_OPS)
                        or (node.module in ("io", "codecs") and name == "open")
                        or (node.module in FILE_MODULES
                        and name not in FILE_MODULES[node.module])):
                    hit(node, f"from {node.module} import {name}")
                elif node.module == "os" and name == "path":
                    aliases[a.asname or name] = "os.path"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "open":
            hit(node, "open() (the builtin)")
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in aliases:
            module = aliases[base.id]
            if module == "os" and node.attr in OS_FILE_OPS:
                hit(node, f"os.{node.attr}")
            elif module in ("io", "codecs") and node.attr == "open":
                hit(node, f"{module}.open")
            elif module in FILE_MODULES and node.attr not in FILE_MODULES[module]:
                hit(node, f"{module}.{node.attr}")
            elif module == "os.path" and node.attr in OS_PATH_FILE_OPS:
                hit(node, f"os.path.{node.attr}")
        elif (isinstance(base, ast.Attribute) and base.attr == "path"
              and isinstance(base.value, ast.Name) and aliases.get(base.value.id) == "os"
              and node.attr in OS_PATH_FILE_OPS):
            hit(node, f"os.path.{node.attr}")
        elif node.attr in PATH_METHODS and not (
                (isinstance(base, ast.Name) and base.id in file_layer)
                or (isinstance(base, ast.Attribute) and base.attr == "fs")):
            hit(node, f".{node.attr}() (a pathlib path's method)")
    return found


def _sources() -> dict[str, str]:
    return {os.path.relpath(path, ROOT).replace(os.sep, "/"): sourcetree.source(path)
            for top in SCANNED for path in sourcetree.files(top)}


def test_no_file_operation_bypasses_the_file_layer() -> None:
    found = [hit for rel, source in sorted(_sources().items())
             if not rel.startswith(FILE_LAYER)
             for hit in forbidden_calls(source, rel)]
    assert found == [], f"file operations outside {FILE_LAYER}:\n" + "\n".join(found)


@functools.cache
def _layer_modules() -> frozenset[str]:
    return frozenset(name.removesuffix(".py")
                     for name in os.listdir(os.path.join(ROOT, FILE_LAYER))
                     if name.endswith(".py") and name != "__init__.py")


def layer_module_imports(source: str) -> list[str]:
    """The modules of the file layer that ``source`` imports by name (rather than
    through ``holomem.log.fs``)."""
    found = []
    for node in ast.walk(sourcetree.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names
                      if a.name.startswith(FILE_LAYER_MODULE + ".")]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module.startswith(FILE_LAYER_MODULE + "."):
                found.append(node.module)
            elif node.module == FILE_LAYER_MODULE:
                found += [f"{node.module}.{a.name}" for a in node.names
                          if a.name in _layer_modules()]
    return found


def test_the_file_layer_is_imported_through_its_one_import_point() -> None:
    found = [f"{rel}: {name}" for rel, source in sorted(_sources().items())
             if not rel.startswith(FILE_LAYER)
             for name in layer_module_imports(source)]
    assert found == [], "modules of the file layer imported directly:\n" + "\n".join(found)


@pytest.mark.parametrize("snippet", [
    "from holomem.log.fs import files",
    "from holomem.log.fs.durable import sync",
    "import holomem.log.fs.erasing",
])
def test_the_import_check_catches_a_way_past_the_import_point(snippet: str) -> None:
    assert layer_module_imports(snippet), snippet


def test_the_import_check_lets_the_import_point_through() -> None:
    assert layer_module_imports("from holomem.log import fs\nimport holomem.log.fs as f\n"
                                "from holomem.log.fs import write_at") == []


@pytest.mark.parametrize("name", sorted(OS_FILE_OPS))
def test_the_checker_catches_every_os_file_operation(name: str) -> None:
    assert forbidden_calls(f"import os\nos.{name}(3)\n")
    assert forbidden_calls(f"import os as system\nsystem.{name}(3)\n")
    assert forbidden_calls(f"from os import {name}\n")


@pytest.mark.parametrize("snippet", [
    "open('f', 'rb').read()",
    "import io\nio.open('f')",
    "import shutil\nshutil.rmtree('d')",
    "from shutil import copytree",
    "import tempfile\ntempfile.mkdtemp()",
    "import glob\nglob.glob('*')",
    "import fcntl\nfcntl.flock(3, 2)",
    "import os\nos.path.getsize('f')",
    "import pathlib\npathlib.Path('f').write_bytes(b'')",
    "from pathlib import Path\nPath('f').read_text()",
    "import os\nfsync = os.fsync",
])
def test_the_checker_catches_a_forbidden_call(snippet: str) -> None:
    assert forbidden_calls(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "import os\nos.path.join('a', 'b'); os.path.isdir('a'); os.path.exists('a')",
    "import os\nos.urandom(8); os.getpid(); os.environ.get('X'); os.O_RDONLY",
    "from holomem import Store\nStore.open('s').close()",
    "from holomem.log import fs\nfs.write_at(3, b'x', 0, 'f'); fs.mkdir('d'); fs.unlink('f')",
    "import holomem.log.fs as files\nfiles.rename('a', 'b'); files.rmdir('d')",
    "import shutil\nshutil.which('python')",
    "envelope.open(blob, aad)",
])
def test_the_checker_lets_through_what_is_no_file_operation(snippet: str) -> None:
    assert forbidden_calls(snippet) == [], snippet

