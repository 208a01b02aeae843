"""A compaction whose renumbered projections are not whole is abandoned, even under
``python -O`` (docs/guarantees.md §6).

A compaction builds its new generation's projections by renumbering the old ones
(``ProjectionState.compacted``), not by a replay, and checks on the way that what it
built is whole. Those checks must not vanish with ``assert`` statements under ``-O``:
a compaction that fails one leaves the old generation in place, answering as before,
instead of switching in a state that a replay of its journal would not build.

The fault is injected in a child process run with ``-O``: the relations projection
stops dropping a link when one of its ends is forgotten (a projection that missed a
removal), so the compaction meets a live link to a document it does not keep.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import json, sys
    from holomem import Memory, Store
    from holomem.projections.relations import Relations

    assert not __debug__, "run me with python -O"
    Relations._kill = lambda self, row: None  # the injected fault: links never die

    path = sys.argv[1]
    with Store.open(path, sync="none") as store:
        memory = Memory(store)
        for i, text in enumerate(["river stone", "moon tea", "river lamp"]):
            memory.remember(id=f"f{i}", text=text)
        memory.relate("f0", "f1", "near")
        memory.forget({"ids": ["f1"]})
        before = [f.id for f in memory.recall("river")]
        generation = store.stats().generation
        try:
            store.compact()
            error = None
        except AssertionError as exc:
            error = str(exc)
        out = {"error": error, "generation_kept": store.stats().generation == generation,
               "recall_before": before,
               "recall_after": [f.id for f in memory.recall("river")]}
    with Store.open(path) as store:
        out["reopened"] = [f.id for f in Memory(store).recall("river")]
    print(json.dumps(out))
""")


def test_a_compaction_that_fails_its_checks_under_python_O_leaves_the_old_generation(
        tmp_path: os.PathLike[str]) -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    proc = subprocess.run([sys.executable, "-O", "-c", CHILD, os.path.join(tmp_path, "s")],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] == "compaction: a live link has an end that is not kept"
    assert out["generation_kept"]
    assert out["recall_before"] == ["f0", "f2"]
    assert out["recall_after"] == out["recall_before"] == out["reopened"]
