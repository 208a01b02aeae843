"""What the migration tests share: a tiny deterministic embedder that holomem and Mem0
both run (so a test can make their models match or not), and a Mem0 memory that runs
offline on a temporary directory.

Mem0 is the peer of these tests as it is installed (the ``peers`` extra): its memory
runs on Chroma in a directory of the test's, with ``infer=False`` (no LLM is called)
and this module's embedder in place of its Hugging Face one (Mem0 embeds every memory
it adds, and its own embedders load models from the network). Its telemetry is off.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from holomem.embedders import EmbedderIdentity

# Before anything imports Mem0 (it reads them at import): no telemetry, and its home
# (where it writes a config file) in a temporary directory, not the user's.
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="holomem-mem0-home-"))

DIM = 8
#: The model name both embedders give: the one Mem0's config names, holomem's identity's.
MODEL = "tiny-hash"


def tiny_vectors(texts: list[str]) -> npt.NDArray[np.float32]:
    """Each word hashed into one of :data:`DIM` buckets, normalised: same text, same
    vector, and texts that share words are near."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.lower().split():
            out[i, int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIM] += 1.0
        norm = float(np.linalg.norm(out[i])) or 1.0
        out[i] /= norm
    return out


class Tiny:
    """holomem's side: an embedder whose identity names :data:`MODEL` (or ``name``)."""

    def __init__(self, name: str = MODEL) -> None:
        self.identity = EmbedderIdentity(name=name, digest="0" * 64, dim=DIM,
                                         normalized=True, pooling="mean", max_tokens=512)

    def embed(self, texts: Any) -> npt.NDArray[np.float32]:
        return tiny_vectors(list(texts))


def mem0_module() -> Any:
    """Mem0, imported with its telemetry off and its home in a temporary directory
    (skipped where the peers extra is not installed)."""
    return pytest.importorskip("mem0", reason="mem0ai (the peers extra) is not installed")


def _embedder_class() -> type:
    from mem0.embeddings.base import EmbeddingBase

    class TinyMem0(EmbeddingBase):  # type: ignore[misc,valid-type]
        """Mem0's side of :class:`Tiny`."""

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return [float(x) for x in tiny_vectors([text])[0]]

    return TinyMem0


def mem0_config(base: Path, provider: str = "chroma") -> dict[str, Any]:
    """A Mem0 config of files under ``base`` (what ``holomem migrate mem0`` reads), its
    vectors in a local Chroma or Qdrant (``provider``)."""
    store: dict[str, Any] = {"collection_name": "mem0", "path": str(base / "vectors")}
    if provider == "qdrant":
        store.update(embedding_model_dims=DIM, on_disk=True)
    return {
        "vector_store": {"provider": provider, "config": store},
        "embedder": {"provider": "huggingface",
                     "config": {"model": MODEL, "embedding_dims": DIM}},
        "llm": {"provider": "openai", "config": {"api_key": "unused: infer=False"}},
        "history_db_path": str(base / "history.db"),
    }


@pytest.fixture
def offline_mem0(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Makes Mem0's "huggingface" embedder :class:`Tiny`'s twin for the test; returns
    the mem0 module."""
    mem0 = mem0_module()
    from mem0.utils import factory

    cls = _embedder_class()
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "TinyMem0", cls, raising=False)
    monkeypatch.setitem(factory.EmbedderFactory.provider_to_class, "huggingface",
                        f"{__name__}.TinyMem0")
    return mem0


def new_mem0(mem0: Any, base: Path, provider: str = "chroma") -> Any:
    base.mkdir(parents=True, exist_ok=True)
    return mem0.Memory.from_config(mem0_config(base, provider))
