"""An embedder's identity pins its model and is the same in every process and on every
machine (issue 14, item 2; docs/contract.md §4e).

The store records the identity at first use and refuses another, so it must not
depend on the process, the path the package is installed at, or anything but the
model: ``minilm``'s digest is the SHA-256 of its computation's revision and its two
model files' bytes, pinned as a constant and recomputed from the installed files.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np
import numpy.typing as npt
import pytest

from holomem import ConflictError, Memory, Store
from holomem.embedders import Embedder, EmbedderIdentity, MiniLM, by_name
from holomem.embedders.minilm import DIGEST, archive_path, files_digest

PINNED = EmbedderIdentity(
    name="minilm",
    digest="3b7b65b62a9b0a96c89e2e29eef928891c7b69aebfac79897565e22b66353cf2",
    dim=384, normalized=True, pooling="mean", max_tokens=256)


def test_minilm_identity_is_the_pinned_one() -> None:
    embedder = by_name("minilm")
    assert isinstance(embedder, Embedder)
    assert embedder.identity == PINNED


def test_the_digest_is_recomputed_from_the_installed_files() -> None:
    import zipfile

    with zipfile.ZipFile(archive_path()) as archive:
        weights = archive.read("model.safetensors")
        tokenizer = archive.read("tokenizer.json")
    assert files_digest(weights, tokenizer) == DIGEST == PINNED.digest
    # Each file counts: a changed byte in either changes the digest.
    assert files_digest(weights[:-1] + b"\x00", tokenizer) != DIGEST
    assert files_digest(weights, tokenizer + b" ") != DIGEST
    # The framing keeps the files apart: moving bytes from one to the other shows.
    assert files_digest(weights + tokenizer[:1], tokenizer[1:]) != DIGEST


def test_the_identity_is_the_same_in_a_fresh_process() -> None:
    child = subprocess.run(
        [sys.executable, "-c",
         "import sys, msgspec; from holomem.embedders import by_name; "
         "e = by_name('minilm'); e.load(); "
         "sys.stdout.buffer.write(msgspec.json.encode(e.identity))"],
        capture_output=True, check=True, timeout=120)
    assert msgspec.json.decode(child.stdout, type=EmbedderIdentity) == PINNED


def test_an_identity_is_a_frozen_keyword_only_struct_that_round_trips() -> None:
    identity = MiniLM().identity
    with pytest.raises(AttributeError):
        identity.dim = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        EmbedderIdentity("minilm", DIGEST, 384, True, "mean", 256)  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(identity), type=EmbedderIdentity) == identity
    assert hash(identity) == hash(PINNED)


#: What minilm's identity was at revision 1 (the float32 model run in numpy) and at
#: revision 2 (8-bit weights in blocks of 32 with onnxruntime's MatMulNBits).
OLDER = {
    1: msgspec.structs.replace(
        PINNED, digest="7724eb53b53eb72106f6a5edb9afd7af5043ae750f5a9cca5de825192b6d0c79"),
    2: msgspec.structs.replace(
        PINNED, digest="f0021502724893fe953241c06351d80334620d0ed7c59e0d4371fddebe018406"),
}


class _Older:
    """Stands in for an older holomem: an older revision's identity; its vectors are
    today's, which is all a store can tell apart by."""

    def __init__(self, identity: EmbedderIdentity) -> None:
        self.identity = identity

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return by_name("minilm").embed(texts)


@pytest.mark.parametrize("revision", sorted(OLDER))
def test_a_store_written_by_an_older_revision_is_a_conflict_until_it_is_reembedded(
        tmp_path: Path, revision: int) -> None:
    older = OLDER[revision]
    texts = ["She works as a nurse", "Alice lives in Paris", "Bob drinks green tea"]
    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, embedder=_Older(older)).remember_many([{"text": t} for t in texts])
    with Store.open(tmp_path / "s", sync="none") as store:
        with pytest.raises(ConflictError, match="reembed") as refused:
            Memory(store, embedder="minilm")
        assert older.digest[:12] in str(refused.value)
        assert PINNED.digest[:12] in str(refused.value)
        memory = Memory(store, embedder="minilm", reembed=True)
        assert memory.reembed() == len(texts)
    with Store.open(tmp_path / "s", sync="none") as store:
        hit = Memory(store, embedder="minilm").recall("what is her job", k=1)
        assert [r.text for r in hit] == ["She works as a nurse"]
