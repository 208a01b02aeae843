"""The memory API, ``holomem.Memory`` (docs/contract.md §3, §4): facts over time on a Store.

Owns: a Memory's configuration (policies, clock, observers) and the orchestration
of each call — check the request, read or ``commit`` through the engine, notify
the observers. What each call does is the concern of its own module: planning a
remember (:mod:`.remember`), recall and explain (:mod:`.recall`, :mod:`.explain`),
fact records (:mod:`.records`), listing (:mod:`.listing`), the prompt block
(:mod:`.render`), forgetting (:mod:`.forgetting`), consolidation
(:mod:`.consolidation`), holographic operations (:mod:`.holographic`,
:mod:`.contradiction`) and the JSON contract (:mod:`.contract`). Those modules
take the engine's view and the policies; none of them imports this one.

The fact index is a projection of the Store (:mod:`holomem.projections.facts`), so
every ``Memory`` over one ``Store`` reads the same, current index.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from holomem.api import (
    consolidation,
    contract,
    contradiction,
    embedding,
    explain,
    filters,
    forgetting,
    holographic,
    listing,
    recall,
    records,
    remember,
    render,
    transfer,
    validate,
)
from holomem.api.configuration import Configured
from holomem.api.engine import View
from holomem.api.policies import feedback_balance, usefulness_multiplier
from holomem.api.types import (
    ConsolidateOptions,
    ConsolidationConfig,
    ConsolidationReport,
    ContradictResult,
    Explanation,
    FactRecord,
    FeedbackReport,
    ForgetOptions,
    ForgetReport,
    ForgetScope,
    ForgettingConfig,
    ImportReport,
    ListFilter,
    ListPage,
    MaintenanceOptions,
    MemoryInfo,
    NamespacePage,
    ProbeResult,
    ReasonResult,
    Recalled,
    RecallOptions,
    RelatedResult,
    Relink,
    Remembered,
    RememberInput,
)
from holomem.errors import InvalidError, LimitError, NotFoundError
from holomem.events import ConfidenceSet, Event, FeedbackGiven

#: Facts in one remember_many call (one transaction; the plan is linear in it).
MAX_FACTS = 10_000


class Memory(Configured):
    """Facts that hold over time, on top of a :class:`~holomem.Store`.

    (Annotations here say ``builtins.list``: in this class, ``list`` is the method.)
    """

    # -- remember ---------------------------------------------------------------------
    def remember(self, input: str | RememberInput | Mapping[str, Any] | None = None, /,
                 **fields: Any) -> Remembered:
        """Store one fact: ``remember("text", subject=..., ...)``, ``remember(text=...,
        ...)``, a RememberInput or a dict.

        Same id and same payload again: ``created=False`` and nothing is written.
        Same id, another payload: ``conflict``. The text must hold something other
        than whitespace. Limits: text <= 64 KiB and 4096 words, metadata <= 64 KiB
        of JSON nested <= 32 deep, ids and subject <= 512 characters, <= 256
        entities, embedding <= 8192 numbers, ``supersedes`` <= ``validate.MAX_IDS``
        ids. Errors: ``invalid_request``, ``limit``, ``conflict``.
        """
        if isinstance(input, str):
            input, fields = None, {"text": input, **fields}
        x = validate.to_struct(RememberInput, input, fields, "remember input",
                               validate.TIME_FIELDS)
        return self.remember_many([x])[0]

    def remember_many(self, inputs: Iterable[RememberInput | Mapping[str, Any]]
                      ) -> builtins.list[Remembered]:
        """Store several facts in one transaction: all or none; later inputs see earlier ones.

        Limits: at most :data:`MAX_FACTS` facts; each as :meth:`remember`.
        Errors: ``invalid_request``, ``limit``, ``conflict``.
        """
        if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Iterable):
            raise InvalidError("remember_many takes a list of inputs")
        checked = []
        for i, x in enumerate(inputs):
            if i >= MAX_FACTS:  # counted while reading: an endless iterable stops here
                raise LimitError(f"more than {MAX_FACTS} facts in one call")
            item = validate.to_struct(RememberInput, x, {}, f"input {i}", validate.TIME_FIELDS)
            checked.append(remember.check(item, i))
        if not checked:
            raise InvalidError("remember_many needs at least one input")
        embedded = False
        if self.embedder is not None:  # outside the write lock: a model takes time
            checked, embedded = embedding.fill(checked, self.embedder)
        planners: builtins.list[remember.Planner] = []

        def build(view: View) -> builtins.list[Event]:
            if embedded:
                assert self._pinned is not None
                embedding.check_current(view, self._pinned)
            planners[:] = [remember.Planner(view, self.policies, self.clock.now_ms())]
            return planners[0].plan(checked)

        seq, _ = self.store.commit(build)
        results = planners[0].results
        created = [r.id for r in results if r.created]
        if created:
            self.notify("remember", created, seq)
        return list(results)

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
               **fields: Any) -> builtins.list[Recalled]:
        """Facts relevant to ``query``, best first (docs/contract.md §4 Recall).

        Limits: ``query`` <= 64 KiB and ``validate.MAX_QUERY_TERMS`` distinct words,
        ``k`` <= ``recall.MAX_RECALL_K``, ``candidate_limit`` <= ``recall.MAX_CANDIDATES``,
        ``entities`` <= 256, ``embedding`` <= 8192 numbers.
        Errors: ``invalid_request``, ``limit``.
        """
        q = validate.query(query)
        o, where = recall.checked(options, fields)
        o, embedded = self._embedded(q, o)
        at = o.as_of if o.as_of is not None else self.clock.now_ms()

        def run(view: View) -> builtins.list[Recalled]:
            if embedded:
                assert self._pinned is not None
                embedding.check_current(view, self._pinned)
            ranking = recall.Ranking(view, self.policies, q, o, at, where)
            found = ranking.results()
            why = explain.explain_many(ranking, [s for s, _ in found]) if o.explain else None
            return recall.recalled(ranking, found, why)

        return self.store.read(run)

    def explain(self, query: str, id: str,
                options: RecallOptions | Mapping[str, Any] | None = None,
                **fields: Any) -> Explanation:
        """Why ``id`` does or does not come back for ``query`` (docs/contract.md §4 Explain).

        Limits: as :meth:`recall`. Errors: ``invalid_request``, ``limit``, ``not_found``.
        """
        q = validate.query(query)
        fid = validate.doc_id(id)
        o, where = recall.checked(options, fields)
        o, embedded = self._embedded(q, o)
        at = o.as_of if o.as_of is not None else self.clock.now_ms()

        def run(view: View) -> Explanation:
            if embedded:
                assert self._pinned is not None
                embedding.check_current(view, self._pinned)
            slot = view.slot(fid)
            ns = validate.namespace(o.namespace)
            if slot < 0 or (ns and view.facts.namespace(slot)[:len(ns)] != ns):
                # Outside the namespace asked about: as unknown as a missing id, so a
                # caller scoped to one user learns nothing of another's facts.
                raise NotFoundError(f"no fact {fid!r}")
            return explain.explain_many(recall.Ranking(view, self.policies, q, o, at, where),
                                        [slot])[0]

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

    # -- feedback and confidence --------------------------------------------------------
    def feedback(self, id: str, helpful: bool, note: str | None = None) -> FeedbackReport:
        """Record whether a fact helped. It changes the fact's usefulness (used by recall
        only under a feedback policy), never its confidence, and never hides it.

        The report gives the votes, ``usefulness`` (their balance, (helpful -
        unhelpful) / (n + 2), in (-1, 1): not a multiplier) and ``multiplier``, what
        recall now multiplies the fact's score by (1 without a feedback policy).
        Limits: ``note`` as a fact's text. Errors: ``invalid_request``, ``not_found``.
        """
        fid = validate.doc_id(id)
        if not isinstance(helpful, bool):
            raise InvalidError("helpful must be true or false")
        if note is not None:
            validate.text(note, "note")

        def build(view: View) -> builtins.list[Event]:
            if view.facts.slot(fid) < 0:
                raise NotFoundError(f"no fact {fid!r}")
            return [FeedbackGiven(id=fid, helpful=helpful, time=self.clock.now_ms(), note=note)]

        seq, _ = self.store.commit(build)
        self.notify("feedback", [fid], seq)

        def report(view: View) -> FeedbackReport:
            fb = view.facts.feedback.get(fid, [])
            good = sum(1 for h, _, _ in fb if h)
            return FeedbackReport(
                id=fid, helpful=good, unhelpful=len(fb) - good,
                usefulness=feedback_balance(good, len(fb)),
                multiplier=usefulness_multiplier(self.policies.feedback_weight, good, len(fb)))

        return self.store.read(report)

    def set_confidence(self, id: str, confidence: float) -> FactRecord:
        """Set what the agent believes of a fact, in [0, 1].

        Errors: ``invalid_request``, ``not_found``."""
        fid = validate.doc_id(id)
        value = validate.confidence(confidence)

        def build(view: View) -> builtins.list[Event]:
            if view.facts.slot(fid) < 0:
                raise NotFoundError(f"no fact {fid!r}")
            return [ConfidenceSet(id=fid, confidence=value, time=self.clock.now_ms())]

        self.store.commit(build)
        record = self.get(fid)
        assert record is not None
        return record

    # -- forgetting and maintenance -------------------------------------------------------
    def forget(self, scope: ForgetScope | Mapping[str, Any],
               options: ForgetOptions | Mapping[str, Any] | None = None,
               **fields: Any) -> ForgetReport:
        """Remove facts: exactly one scope field; options include_chain, dry_run, purge.

        Idempotent. Gone means gone from search, recall, get, history, explain and
        every index at once; the text-segment records are zeroed and synced before
        this returns; with ``purge`` no file keeps their text (docs/guarantees.md §6).
        Limits: an ``ids`` scope names at most ``forgetting.MAX_IDS`` ids.
        Errors: ``invalid_request``, ``limit``.
        """
        sc = forgetting.scope(scope)
        opts = forgetting.options(options, fields)
        within = validate.namespace(opts.within, "within")
        plan = self.store.read(lambda view: forgetting.plan(view, sc, opts.include_chain,
                                                            within))
        if opts.dry_run:
            return ForgetReport(removed=plan.ids, relinked=plan.relinks, dry_run=True,
                                purged=False)
        return self._remove(plan.ids, purge=opts.purge)

    def _remove(self, ids: builtins.list[str], *, purge: bool) -> ForgetReport:
        """Delete ``ids`` in batches of ``forgetting.BATCH``, re-linking around them."""
        removed: builtins.list[str] = []
        relinked: builtins.list[Relink] = []
        last = 0
        for start in range(0, len(ids), forgetting.BATCH):
            batch = ids[start : start + forgetting.BATCH]
            done: builtins.list[forgetting.Removal] = []

            def build(view: View, batch: builtins.list[str] = batch,
                      done: builtins.list[forgetting.Removal] = done) -> builtins.list[Event]:
                done[:] = [forgetting.removal(view, batch, self.clock.now_ms(), purge=purge)]
                return done[0].events

            seq, _ = self.store.commit(build)
            if seq:
                last = seq
                removed.extend(done[0].removed)
                relinked.extend(done[0].relinked)
        if removed:
            self.store.sync_text()  # the zeroed records reach the disk before we return
            self.notify("forget", removed, last)
        if purge:
            self.store.compact(purge=True)
        return ForgetReport(removed=removed, relinked=relinked, dry_run=False, purged=purge)

    def apply_forgetting(self, options: MaintenanceOptions | Mapping[str, Any] | None = None,
                         **fields: Any) -> ForgetReport:
        """What the forgetting policy selects; removed only with ``dry_run=False``."""
        opts = validate.to_struct(MaintenanceOptions, options, fields,
                                  "apply_forgetting options")
        now = self.clock.now_ms()
        cfg = self.config.forgetting
        prefix = validate.namespace(opts.namespace)
        if self._forgetting is not None:
            ids = list(self._forgetting(self, now))
        elif isinstance(cfg, ForgettingConfig):
            ids = self.store.read(lambda view: forgetting.candidates(view, cfg, now, prefix))
        else:
            ids = []
        if not ids:
            return ForgetReport(removed=[], relinked=[], dry_run=opts.dry_run, purged=False)
        # A custom policy sees the whole store: the namespace restricts what it picked.
        return self.forget(ForgetScope(ids=ids),
                           ForgetOptions(include_chain=opts.include_chain, dry_run=opts.dry_run,
                                         purge=opts.purge, within=list(prefix) or None))

    def consolidate(self, options: ConsolidateOptions | Mapping[str, Any] | None = None,
                    **fields: Any) -> ConsolidationReport:
        """What the consolidation policy plans; applied only with ``dry_run=False``.

        A consolidation adds a fact that supersedes its sources (they stay, as
        history); its id derives from the sources, so a rerun adds nothing. Summaries
        are written in transactions of at most :data:`MAX_FACTS` facts. Sources are
        removed only when the configuration says ``removeSources`` *and* the call
        passes ``allow_destructive=True``; otherwise ``sources_kept`` says why.
        """
        opts = consolidation.options(options, fields)
        cfg = self.config.consolidation
        now = self.clock.now_ms()
        prefix = validate.namespace(opts.namespace)
        if self._consolidation is not None:
            groups = list(self._consolidation(self, now))
        elif isinstance(cfg, ConsolidationConfig):
            threshold = cfg.duplicates.near_threshold
            groups = self.store.read(
                lambda view: consolidation.duplicate_groups(view, now, threshold, prefix))
        else:
            groups = []
        planned = self.store.read(lambda view: consolidation.plan(view, groups, prefix))
        added: builtins.list[str] = []
        removed: builtins.list[str] = []
        remove_sources = isinstance(cfg, ConsolidationConfig) and cfg.remove_sources
        if not opts.dry_run and planned.inputs:
            for i in range(0, len(planned.inputs), MAX_FACTS):
                added += [r.id for r in self.remember_many(planned.inputs[i : i + MAX_FACTS])
                          if r.created]
            if opts.allow_destructive and remove_sources:
                gone = [s for g in planned.groups for s in g.sources]
                removed = self._remove(gone, purge=False).removed
        # Said in a dry run too: it tells the caller the real run needs the flag.
        kept = (consolidation.KEPT_NOT_ALLOWED
                if planned.groups and remove_sources and not opts.allow_destructive else None)
        return ConsolidationReport(dry_run=opts.dry_run, groups=planned.groups, added=added,
                                   removed=removed, sources_kept=kept)

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

    # -- export and import ----------------------------------------------------------------
    def export(self, namespace: Sequence[str] | None = None
               ) -> Iterator[dict[str, Any]]:
        """Every fact at or under ``namespace`` (default: all), one JSON-ready dict each
        (camelCase; the :class:`~holomem.api.types.FactExport` form), in write order,
        with all it takes to rebuild it exactly: id, namespace, text, subject,
        entities, metadata, the caller's embedding, every time including
        ``ingestTime``, links with their known-at times, confidence and feedback.

        Facts are read ``transfer.EXPORT_BLOCK`` at a time, so writers are never held
        up for long; facts written after the export began are not in it. Plain
        documents (``Store.add_documents``) are not facts and are not exported.
        Errors: ``invalid_request`` (a bad namespace).
        """
        ns = validate.namespace(namespace)
        for block in transfer.export_blocks(self.store, ns):
            yield from (transfer.as_dict(r) for r in block)

    def import_(self, records: Iterable[Any], *, batch_size: int = transfer.IMPORT_BATCH,
                progress: Callable[[int], None] | None = None,
                drop_embeddings: bool = False) -> ImportReport:
        """Restore exported facts: JSON lines (str or bytes), dicts or FactExport records.

        Written ``batch_size`` records per transaction (each all or nothing), keeping
        ids, ingest times, digests, confidence, feedback and links exactly; no policy
        runs. Into an empty store, every recall answers as it did on the source. A
        fact already stored with the same payload is left alone (``unchanged``); one
        with another payload is a ``conflict`` naming its line, and a malformed record
        is ``invalid_request`` naming its line: that batch writes nothing and the
        import stops (earlier batches stay). ``progress(n)`` is called with the
        records done after each batch. With an embedder, a record without an
        embedding is embedded; ``drop_embeddings`` ignores every record's embedding
        (to move facts to a store of another embedder).
        Limits: ``batch_size`` <= ``transfer.MAX_IMPORT_BATCH``; each record as
        :meth:`remember`. Errors: ``invalid_request``, ``limit``, ``conflict``.
        """
        size = transfer.batch_size(batch_size)
        importer = transfer.Importer()
        done = 0
        for batch in transfer.batches(records, size):
            if drop_embeddings or self.embedder is not None:
                batch = transfer.revectored(batch, self._embed_all, drop_embeddings)

            def build(view: View, batch: builtins.list[transfer.Incoming] = batch
                      ) -> builtins.list[Event]:
                return importer.plan(view, batch)

            seq, _ = self.store.commit(build)
            done += len(batch)
            if seq and importer.written:
                self.notify("import", importer.written, seq)
            if progress is not None:
                progress(done)
        return ImportReport(imported=importer.imported, unchanged=importer.unchanged,
                            batches=importer.batches,
                            unresolved_links=importer.unresolved_links)

    def _embed_all(self, texts: builtins.list[str]) -> builtins.list[builtins.list[float]] | None:
        if self.embedder is None:
            return None
        return embedding.vectors(self.embedder, texts).tolist()  # type: ignore[no-any-return]

    def reembed(self, *, batch_size: int = embedding.REEMBED_BATCH,
                progress: Callable[[int], None] | None = None) -> int:
        """Rewrite every stored document's vector with this Memory's embedder, in place
        (order, text and ids unchanged), ``batch_size`` per transaction; the store
        records the new identity with the last batch. Resumable: after a crash, open
        again with ``reembed=True`` and call this again; it goes on where it stopped.
        Meanwhile semantic scores mix both models. Returns the documents rewritten.
        Limits: ``batch_size`` <= ``embedding.MAX_REEMBED_BATCH``.
        Errors: ``invalid_request`` (no embedder), ``conflict`` (another re-embed, to
        another embedder, began meanwhile), ``read_only``.
        """
        if self.embedder is None or self._pinned is None:
            raise InvalidError("reembed() needs a Memory with an embedder")
        done = embedding.reembed(self.store, self.embedder, self._pinned,
                                 embedding.batch_size(batch_size), self.clock.now_ms, progress)
        self._pinned = embedding.Pinned(self._pinned.mine, True)
        return done

    # -- the JSON contract ----------------------------------------------------------------
    def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """Run ``op`` with a camelCase JSON request; return a camelCase response
        (docs/contract.md §5).

        Every op's work is bounded by its request's documented limits (README
        "Limits"); a request nesting deeper than ``contract.MAX_REQUEST_DEPTH`` is
        refused. Errors: ``invalid_request``, ``limit``, ``not_found``, ``conflict``,
        ``read_only``, and nothing else for any request.
        """
        inv = contract.decode(op, request)
        try:
            result = getattr(self, inv.method)(*inv.args, **inv.kwargs)
            return contract.encode(inv.wrap(result))
        except RecursionError as exc:  # a last guard: decode bounds the depth
            raise InvalidError("the request nests too deeply") from exc
