"""The calls of ``Memory`` that read: get, history, recall, explain, list, namespaces,
the prompt block, holographic queries and contradictions (docs/contract.md §4).

Owns: :class:`Reading`, the reading half of ``Memory`` — each call checks its request
and answers from one view of the engine through its own module (:mod:`.records`,
:mod:`.recall`, :mod:`.explain`, :mod:`.listing`, :mod:`.render`,
:mod:`.holographic`, :mod:`.contradiction`). Imports the memory API's modules and the
engine; ``Memory`` (:mod:`.memory`) composes it.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from holomem.api import (
    contradiction,
    embedding,
    explain,
    filters,
    holographic,
    listing,
    recall,
    records,
    render,
    validate,
)
from holomem.api import rerank as reranking
from holomem.api.configuration import Configured
from holomem.api.engine import View
from holomem.api.rerank import Reranker
from holomem.api.types import (
    ContradictResult,
    Explanation,
    FactRecord,
    ListFilter,
    ListPage,
    MemoryInfo,
    NamespacePage,
    ProbeResult,
    ReasonResult,
    Recalled,
    RecallOptions,
    RelatedResult,
)
from holomem.errors import NotFoundError


class Reading(Configured):
    """Get, history, recall, explain, list, holographic queries.

    (Annotations here say ``builtins.list``: in Memory, ``list`` is a method.)
    """

    # -- reading ----------------------------------------------------------------------
    def get(self, id: str) -> FactRecord | None:
        """One stored fact, with its status now, or None. Errors: ``invalid_request``."""
        fid = validate.doc_id(id)
        now = self.clock.now_ms()
        return self.store.read(lambda view: records.get(view, fid, now))

    def history(self, id: str) -> builtins.list[FactRecord]:
        """Every version of ``id``'s supersession chain, in effect order, status now.

        Errors: ``invalid_request``, ``not_found``.
        """
        fid = validate.doc_id(id)
        now = self.clock.now_ms()
        return self.store.read(lambda view: records.history(view, fid, now))

    def recall(self, query: str, options: RecallOptions | Mapping[str, Any] | None = None,
               *, rerank: Reranker | None = None, **fields: Any) -> builtins.list[Recalled]:
        """Facts relevant to ``query``, best first (docs/contract.md §4 Recall).

        ``rerank`` (Python only): a reranker given the whole candidate pool before the
        cut to ``k``, whose order decides the results (:mod:`holomem.api.rerank`;
        the built-in :class:`~holomem.api.rerank.MMR` needs no model).
        Limits: ``query`` <= 64 KiB and ``validate.MAX_QUERY_TERMS`` distinct words,
        ``k`` <= ``recall.MAX_RECALL_K``, ``candidate_limit`` <= ``recall.MAX_CANDIDATES``,
        ``entities`` <= 256, ``embedding`` <= 8192 numbers.
        Errors: ``invalid_request`` (also for a reranker's answer that is not its
        candidates' ids), ``limit``.
        """
        q = validate.query(query)
        o, where = recall.checked(options, fields)
        o, embedded = self._embedded(q, o)
        at = o.as_of if o.as_of is not None else self.clock.now_ms()

        def ranking_of(view: View) -> recall.Ranking:
            if embedded:
                assert self._pinned is not None
                embedding.check_current(view, self._pinned)
            return recall.Ranking(view, self.policies, q, o, at, where)

        if rerank is not None:
            return reranking.recall(self.store, q, ranking_of, rerank)

        def run(view: View) -> builtins.list[Recalled]:
            ranking = ranking_of(view)
            found, statuses = ranking.found()
            why = explain.explain_many(ranking, [s for s, _ in found]) if o.explain else None
            return recall.recalled(ranking, found, why, statuses)

        return self.store.read(run)

    def explain(self, query: str, id: str,
                options: RecallOptions | Mapping[str, Any] | None = None,
                *, rerank: Reranker | None = None, **fields: Any) -> Explanation:
        """Why ``id`` does or does not come back for ``query`` (docs/contract.md §4 Explain);
        with ``rerank``, as :meth:`recall` with that reranker would answer.

        Limits: as :meth:`recall`. Errors: ``invalid_request``, ``limit``, ``not_found``.
        """
        q = validate.query(query)
        fid = validate.doc_id(id)
        o, where = recall.checked(options, fields)
        o, embedded = self._embedded(q, o)
        at = o.as_of if o.as_of is not None else self.clock.now_ms()
        ns = validate.namespace(o.namespace)

        def ranking_of(view: View) -> recall.Ranking:
            if embedded:
                assert self._pinned is not None
                embedding.check_current(view, self._pinned)
            return recall.Ranking(view, self.policies, q, o, at, where)

        def slot_of(view: View) -> int:
            slot = view.slot(fid)
            if slot < 0 or (ns and view.facts.namespace(slot)[:len(ns)] != ns):
                # Outside the namespace asked about: as unknown as a missing id, so a
                # caller scoped to one user learns nothing of another's facts.
                raise NotFoundError(f"no fact {fid!r}")
            return slot

        if rerank is not None:
            self.store.read(slot_of)  # an unknown id fails before the reranker runs
            return reranking.explain(self.store, q, fid, ranking_of, rerank, slot_of)

        def run(view: View) -> Explanation:
            slot = slot_of(view)
            return explain.explain_many(ranking_of(view), [slot])[0]

        return self.store.read(run)

    def _embedded(self, query: str, o: RecallOptions) -> tuple[RecallOptions, bool]:
        """``o`` with the query's vector when it brought none and there is an embedder."""
        if self.embedder is None or o.embedding is not None:
            return o, False
        vector = embedding.query_vector(self.embedder, query)
        return msgspec.structs.replace(o, embedding=vector), True

    def info(self) -> MemoryInfo:
        """The store's facts and namespaces (counts), the embedder identity it pinned,
        a re-embed under way, and the configuration this Memory applies."""
        def read(view: View) -> MemoryInfo:
            state = view.state
            return MemoryInfo(
                facts=view.facts.facts, namespaces=len(view.facts.namespaces.counts(())),
                embedder=msgspec.json.decode(state.embedder) if state.embedder else None,
                reembed_pending=(msgspec.json.decode(state.reembed_target)
                                 if state.reembed_target else None),
                config=self.config)

        return self.store.read(read)

    def list(self, cursor: str | None = None, limit: int = 100,
             filter: ListFilter | Mapping[str, Any] | None = None,
             history: str = "all", namespace: Sequence[str] | None = None) -> ListPage:
        """Every stored fact with its status, in write order, a page at a time.

        Exhaustive and stable: a walk interleaved with writes sees every fact exactly
        once. Limits: ``limit`` <= ``listing.MAX_LIMIT``; a page examines at most
        ``listing.MAX_SCAN`` facts, so a sparse status filter may give a short page
        with a cursor. ``namespace``: only facts at or under that prefix.
        Errors: ``invalid_request``, ``limit``.
        """
        req = listing.request(cursor, limit, filter, history, namespace)
        now = self.clock.now_ms()
        return self.store.read(lambda view: listing.page(view, req, now))

    def list_namespaces(self, prefix: Sequence[str] | None = None,
                        max_depth: int | None = None, limit: int = 100,
                        cursor: str | None = None) -> NamespacePage:
        """The namespaces at or under ``prefix`` that hold facts, with their fact counts,
        sorted, a page at a time (docs/contract.md §4a); ``max_depth`` cuts each namespace to its
        first ``max_depth`` strings. Errors: ``invalid_request``, ``limit``."""
        return self.store.read(lambda view: listing.namespace_page(view, prefix, max_depth,
                                                                   limit, cursor))

    @staticmethod
    def render_context(results: Iterable[Recalled | FactRecord]) -> str:
        """Recalled facts as a prompt block fenced as untrusted data."""
        return render.render_context(results)


    # -- holographic operations ----------------------------------------------------------
    def probe(self, entity: str, k: int = 10, namespace: Sequence[str] | None = None
              ) -> ProbeResult:
        """Facts whose HRR structure binds ``entity`` (algebra, not keyword lookup);
        ``namespace``: only facts at or under that prefix.

        Limits: ``k`` <= ``holographic.MAX_K``; ``entity`` <= 256 characters."""
        ns = validate.namespace(namespace)
        return self.store.read(lambda view: holographic.probe(view, entity, k, ns))

    def related(self, entity: str, k: int = 10, namespace: Sequence[str] | None = None
                ) -> RelatedResult:
        """Entities structurally associated with ``entity`` (bound in the same facts).

        The algebra answers only when it keeps every entity the exact per-fact scoring
        ranks in the top k (else ``path`` is "exact per-fact").
        Limits: ``k`` <= ``holographic.MAX_K``."""
        ns = validate.namespace(namespace)
        return self.store.read(lambda view: holographic.related(view, entity, k, ns))

    def reason(self, entities: Sequence[str], k: int = 10,
               namespace: Sequence[str] | None = None) -> ReasonResult:
        """Facts that bind every one of ``entities`` (AND).

        Limits: 1 to ``holographic.MAX_REASON_ENTITIES`` entities, ``k`` <=
        ``holographic.MAX_K``."""
        ns = validate.namespace(namespace)
        return self.store.read(lambda view: holographic.reason(view, entities, k, ns))

    def contradict(self, *, subject: str | None = None, entity: str | None = None,
                   k: int = 10, max_pairs: int = contradiction.MAX_PAIRS,
                   cursor: str | None = None, namespace: Sequence[str] | None = None,
                   filter: Mapping[str, Any] | None = None) -> ContradictResult:
        """Pairs of current facts that likely contradict; counts what was compared.

        Limits: ``k`` <= ``holographic.MAX_K``, ``max_pairs`` <=
        ``contradiction.MAX_PAIRS_LIMIT``; a page stops there and gives a cursor."""
        now = self.clock.now_ms()
        ns = validate.namespace(namespace)
        where = filters.compile_filter(filter)
        return self.store.read(lambda view: contradiction.contradict(
            view, now, subject=subject, entity=entity, k=k, max_pairs=max_pairs,
            cursor=cursor, namespace=ns, where=where))

