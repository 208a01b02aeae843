"""``holomem hermes install``: write the Hermes Agent plugin directory for holomem.

Owns: the two files of ``$HERMES_HOME/plugins/holomem/``, where that is, and whether
Hermes is installed at all (:func:`find_hermes`): the command writes nothing, and exits
1 with the install command, when it finds no Hermes — a plugin no Hermes will ever load
is no success. Hermes needs holomem importable in its own Python to load the plugin;
when the Hermes found is not this Python's, the command says so.

What Hermes 0.19.0 expects, from its loaders (``plugins/memory/__init__.py`` picks
memory providers; ``hermes_cli/plugins.py`` lists every plugin):

- a directory ``$HERMES_HOME/plugins/<name>/``; the directory name is the provider
  name that ``memory.provider`` selects (bundled providers win a name clash);
- ``__init__.py`` whose first 8 KiB mention ``register_memory_provider`` (a text
  scan decides whether the directory is a memory provider at all), with
  ``register(ctx)`` calling ``ctx.register_memory_provider(provider)``;
- ``plugin.yaml`` (or ``plugin.yml``): ``name``, ``version``, ``description``;
  ``kind: exclusive`` (one active provider per category; the general plugin loader
  records it and leaves loading to the memory loader); ``pip_dependencies``, bare
  package names — ``hermes memory setup`` imports each name as written (a version
  specifier would never import, so it would reinstall every time).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

from holomem.api.memory.about import holomem_version
from holomem.log import fs

PLUGIN_NAME = "holomem"
#: What installs Hermes Agent and holomem together, in one Python.
INSTALL_HINT = "pip install 'holomem-db[hermes]'"
#: Hermes' command-line package: importable where Hermes runs.
HERMES_PACKAGE = "hermes_cli"

INIT_PY = '''"""holomem as a Hermes Agent memory provider (written by `holomem hermes install`).

Activate it with `hermes config set memory.provider holomem`. The provider itself
lives in the holomem package (holomem.integrations.hermes); this file registers it.
"""

from holomem.integrations.hermes import HolomemMemoryProvider


def register(ctx):
    ctx.register_memory_provider(HolomemMemoryProvider())
'''

DESCRIPTION = ("holomem: event-sourced memory of facts over time; supersession instead of "
               "overwriting, explainable recall, forgetting that removes the bytes.")


def manifest(version: str) -> str:
    """plugin.yaml (JSON-quoted scalars are valid YAML: no YAML library needed)."""
    return "\n".join([
        f"name: {PLUGIN_NAME}",
        f"version: {json.dumps(version)}",
        f"description: {json.dumps(DESCRIPTION)}",
        "kind: exclusive",
        "pip_dependencies:",
        "  - holomem-db",
        "",
    ])


def hermes_home(explicit: str | None = None) -> Path:
    """Hermes' home: ``explicit``, else what Hermes itself would use."""
    if explicit:
        return Path(explicit).expanduser()
    try:
        from hermes_constants import get_hermes_home
    except ImportError:
        pass
    else:
        return Path(get_hermes_home())
    env = os.environ.get("HERMES_HOME", "").strip()
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA", "").strip()
        return (Path(local) if local else Path.home() / "AppData" / "Local") / "hermes"
    return Path.home() / ".hermes"


def install(home: Path) -> Path:
    """Write (or refresh) ``<home>/plugins/holomem/``; returns the directory."""
    target = home / "plugins" / PLUGIN_NAME
    fs.make_dirs(str(target))
    fs.write_file_atomic(str(target / "plugin.yaml"), manifest(holomem_version()).encode("utf-8"))
    fs.write_file_atomic(str(target / "__init__.py"), INIT_PY.encode("utf-8"))
    return target


def find_hermes() -> tuple[str, bool] | None:
    """Where Hermes Agent is: ``(where, here)``, ``here`` when this Python runs it (its
    package imports here); else the ``hermes`` command on ``PATH``; None: no Hermes."""
    try:
        spec = importlib.util.find_spec(HERMES_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        return f"{sys.executable} (its {HERMES_PACKAGE} package)", True
    command = shutil.which("hermes")
    if command is not None:
        return command, False
    return None


def main(args: argparse.Namespace) -> int:
    found = find_hermes()
    if found is None:
        print("error: Hermes Agent is not installed: there is no hermes command on PATH "
              f"and no {HERMES_PACKAGE} package in this Python ({sys.executable}); nothing "
              f"was written. Install both into one Python with {INSTALL_HINT}, then run "
              "holomem hermes install again.", file=sys.stderr)
        return 1
    where, here = found
    try:
        path = install(hermes_home(args.hermes_home))
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    print(f"installed the holomem memory provider for Hermes in {path}")
    if not here:
        print(f"note: the Hermes found is {where}, not this Python's: it loads the plugin "
              "only if holomem imports in its own Python (install holomem-db there, e.g. "
              f"with {INSTALL_HINT})")
    print("activate it:  hermes config set memory.provider holomem")
    return 0
