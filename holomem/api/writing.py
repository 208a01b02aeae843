"""The calls of ``Memory`` that write: remember, feedback, confidence, forgetting and
maintenance (docs/contract.md §3, §4).

Owns: :class:`Writing`, the writing half of ``Memory`` — each call checks its request,
plans its events under the write lock through its own module (:mod:`.remember`,
:mod:`.forgetting`, :mod:`.consolidation`), commits and notifies. Imports the memory
API's modules and the engine; ``Memory`` (:mod:`.memory`) composes it.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from holomem.api import (
    consolidation,
    embedding,
    forgetting,
    records,
    remember,
    validate,
)
from holomem.api.configuration import Configured
from holomem.api.engine import View
from holomem.api.policies import feedback_balance, usefulness_multiplier
from holomem.api.progress import Progress, callback
from holomem.api.remember import Checked
from holomem.api.types import (
    ConsolidateOptions,
    ConsolidationConfig,
    ConsolidationReport,
    FactRecord,
    FeedbackReport,
    ForgetOptions,
    ForgetReport,
    ForgetScope,
    ForgettingConfig,
    MaintenanceOptions,
    Relink,
    Remembered,
    RememberInput,
)
from holomem.errors import InvalidError, LimitError, NotFoundError
from holomem.events import ConfidenceSet, Event, FeedbackGiven
from holomem.projections.base import gc_paused

#: Facts in one remember_many call (one transaction; the plan is linear in it).
MAX_FACTS = 10_000

class Writing(Configured):
    """Remember, feedback, confidence, forget and maintenance.

    (Annotations here say ``builtins.list``: in Memory, ``list`` is a method.)
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
        return self._remember_checked([remember.check(x, 0)])[0]

    def remember_many(self, inputs: Iterable[RememberInput | Mapping[str, Any]], *,
                      progress: Progress | None = None) -> builtins.list[Remembered]:
        """Store several facts in one transaction: all or none; later inputs see earlier ones.

        ``progress(n)``: with an embedder, the inputs embedded so far, as they are; then
        all of them, once written (docs/contract.md §4, "Progress").
        Limits: at most :data:`MAX_FACTS` facts; each as :meth:`remember`.
        Errors: ``invalid_request``, ``limit``, ``conflict``.
        """
        if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Iterable):
            raise InvalidError("remember_many takes a list of inputs")
        progress = callback(progress)
        # A batch makes a few dozen objects per fact, all kept until it is applied: the
        # collector would walk them again and again (a quarter of a bulk load's time).
        # The call's work is bounded (MAX_FACTS), so is what waits for the next pass.
        with gc_paused():
            return self._remember_many(inputs, progress)

    def _remember_many(self, inputs: Iterable[RememberInput | Mapping[str, Any]],
                       progress: Progress | None) -> builtins.list[Remembered]:
        # Counted while reading: an endless iterable stops here.
        items = list(itertools.islice(inputs, MAX_FACTS + 1))
        converted = remember.convert_all(items) if len(items) <= MAX_FACTS else None
        if converted is not None:
            checked = remember.check_all(converted)
        else:  # one at a time: the first bad input (or the limit) is the one named
            checked = []
            for i, x in enumerate(items):
                if i >= MAX_FACTS:
                    raise LimitError(f"more than {MAX_FACTS} facts in one call")
                item = validate.to_struct(RememberInput, x, {}, f"input {i}",
                                          validate.TIME_FIELDS)
                checked.append(remember.check(item, i))
        if not checked:
            raise InvalidError("remember_many needs at least one input")
        return self._remember_checked(checked, progress)

    def _remember_checked(self, checked: builtins.list[Checked],
                          progress: Progress | None = None) -> builtins.list[Remembered]:
        """remember_many of inputs already checked (``remember.check``), one transaction."""
        embedded = False
        if self.embedder is not None:  # outside the write lock: a model takes time
            checked, embedded = embedding.fill(checked, self.embedder, progress)
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
        if progress is not None:
            progress(len(results))
        return list(results)


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
        now = self.clock.now_ms()
        record = self.store.read(lambda view: records.get(view, fid, now))
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
                                purged=False, unlinked=plan.unlinked)
        return self._remove(plan.ids, purge=opts.purge)

    def _remove(self, ids: builtins.list[str], *, purge: bool) -> ForgetReport:
        """Delete ``ids`` in batches of ``forgetting.BATCH``, re-linking around them."""
        removed: builtins.list[str] = []
        relinked: builtins.list[Relink] = []
        unlinked = 0
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
                unlinked += done[0].unlinked
        if removed:
            self.store.sync_text()  # the zeroed records reach the disk before we return
            self.notify("forget", removed, last)
        if purge:
            self.store.compact(purge=True)
        return ForgetReport(removed=removed, relinked=relinked, dry_run=False, purged=purge,
                            unlinked=unlinked)

    def apply_forgetting(self, options: MaintenanceOptions | Mapping[str, Any] | None = None,
                         **fields: Any) -> ForgetReport:
        """What the forgetting policy selects; removed only with ``dry_run=False``."""
        opts = validate.to_struct(MaintenanceOptions, options, fields,
                                  "apply_forgetting options")
        now = self.clock.now_ms()
        cfg = forgetting.builtin(self.config.forgetting)
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

