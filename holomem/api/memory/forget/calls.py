"""The calls that remove facts: forget, apply_forgetting and consolidate
(docs/contract.md §4 Forget, maintenance).

Owns: the concept's calls, each a function of the
:class:`~holomem.api.memory.session.Session` that ``Memory`` offers as a method.
Removal is planned by :mod:`.removal` in batches of one transaction each (re-linking
the survivors), then purged on request; consolidation (:mod:`.consolidation`) adds
summary facts through remember and removes sources only when allowed twice.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import Any

from holomem.api.engine import View, validate
from holomem.api.memory.config import ConsolidationConfig, ForgettingConfig
from holomem.api.memory.forget import consolidation, removal
from holomem.api.memory.remember import calls as remember_calls
from holomem.api.memory.session import Session
from holomem.api.memory.types import (
    ConsolidateOptions,
    ConsolidationGroup,
    ConsolidationReport,
    ForgetOptions,
    ForgetReport,
    ForgetScope,
    MaintenanceOptions,
    Relink,
)
from holomem.errors import InvalidError
from holomem.events import Event


def forget(s: Session, /, scope: ForgetScope | Mapping[str, Any],
           options: ForgetOptions | Mapping[str, Any] | None = None,
           **fields: Any) -> ForgetReport:
    """Remove facts: exactly one scope field; options include_chain, dry_run, purge.

    Idempotent. Gone means gone from search, recall, get, history, explain and
    every index at once; the text-segment records are zeroed and synced before
    this returns; with ``purge`` no file keeps their text (docs/guarantees.md §6).
    Limits: an ``ids`` scope names at most ``forgetting.MAX_IDS`` ids.
    Errors: ``invalid_request``, ``limit``.
    """
    sc = removal.scope(scope)
    opts = removal.options(options, fields)
    within = validate.namespace(opts.within, "within")
    plan = s.store.read(lambda view: removal.plan(view, sc, opts.include_chain,
                                                        within))
    if opts.dry_run:
        return ForgetReport(removed=plan.ids, relinked=plan.relinks, dry_run=True,
                            purged=False, unlinked=plan.unlinked)
    return _remove(s, plan.ids, purge=opts.purge)


def _remove(s: Session, /, ids: builtins.list[str], *, purge: bool) -> ForgetReport:
    """Delete ``ids`` in batches of ``forgetting.BATCH``, re-linking around them."""
    removed: builtins.list[str] = []
    relinked: builtins.list[Relink] = []
    unlinked = 0
    last = 0
    for start in range(0, len(ids), removal.BATCH):
        batch = ids[start : start + removal.BATCH]
        done: builtins.list[removal.Removal] = []

        def build(view: View, batch: builtins.list[str] = batch,
                  done: builtins.list[removal.Removal] = done) -> builtins.list[Event]:
            done[:] = [removal.removal(view, batch, s.now_ms(), purge=purge)]
            return done[0].events

        seq, _ = s.store.commit(build)
        if seq:
            last = seq
            removed.extend(done[0].removed)
            relinked.extend(done[0].relinked)
            unlinked += done[0].unlinked
    if removed:
        s.store.sync_text()  # the zeroed records reach the disk before we return
        s.notify("forget", removed, last)
    if purge:
        s.store.compact(purge=True)
    return ForgetReport(removed=removed, relinked=relinked, dry_run=False, purged=purge,
                        unlinked=unlinked)


def apply_forgetting(s: Session, /, options: MaintenanceOptions | Mapping[str, Any] | None = None,
                     **fields: Any) -> ForgetReport:
    """What the forgetting policy selects; removed only with ``dry_run=False``."""
    opts = validate.to_struct(MaintenanceOptions, options, fields,
                              "apply_forgetting options")
    now = s.now_ms()
    cfg = removal.builtin(s.config.forgetting)
    prefix = validate.namespace(opts.namespace)
    if s.forgetting is not None:
        ids = _policy_ids(s.forgetting(s.owner, now))
    elif isinstance(cfg, ForgettingConfig):
        ids = s.store.read(lambda view: removal.candidates(view, cfg, now, prefix))
    else:
        ids = []
    if not ids:
        return ForgetReport(removed=[], relinked=[], dry_run=opts.dry_run, purged=False)
    # A custom policy sees the whole store: the namespace restricts what it picked.
    return forget(s, ForgetScope(ids=ids),
                       ForgetOptions(include_chain=opts.include_chain, dry_run=opts.dry_run,
                                     purge=opts.purge, within=list(prefix) or None))


def consolidate(s: Session, /, options: ConsolidateOptions | Mapping[str, Any] | None = None,
                **fields: Any) -> ConsolidationReport:
    """What the consolidation policy plans; applied only with ``dry_run=False``.

    A consolidation adds a fact that supersedes its sources (they stay, as
    history); its id derives from the sources, so a rerun adds nothing. Summaries
    are written in transactions of at most :data:`remember_calls.MAX_FACTS` facts. Sources are
    removed only when the configuration says ``removeSources`` *and* the call
    passes ``allow_destructive=True``; otherwise ``sources_kept`` says why. With
    ``removeSources``, the sources an earlier run kept (of the summaries it wrote,
    :func:`consolidation.kept_sources`) are planned, and removed, with the new groups'.
    """
    opts = consolidation.options(options, fields)
    cfg = s.config.consolidation
    now = s.now_ms()
    prefix = validate.namespace(opts.namespace)
    if s.consolidation is not None:
        groups = _policy_groups(s.consolidation(s.owner, now))
    elif isinstance(cfg, ConsolidationConfig):
        threshold = cfg.duplicates.near_threshold
        groups = s.store.read(
            lambda view: consolidation.duplicate_groups(view, now, threshold, prefix))
    else:
        groups = []
    remove_sources = isinstance(cfg, ConsolidationConfig) and cfg.remove_sources

    def read(view: View) -> tuple[consolidation.Planned, builtins.list[ConsolidationGroup]]:
        planned = consolidation.plan(view, groups, now, prefix)
        # The sources an earlier run kept (it lacked the flag, or removeSources was
        # off then): the policy's groups no longer hold them, as they are superseded.
        earlier = consolidation.kept_sources(view, prefix) if remove_sources else []
        return planned, earlier

    planned, earlier = s.store.read(read)
    added: builtins.list[str] = []
    removed: builtins.list[str] = []
    if not opts.dry_run:
        for i in range(0, len(planned.inputs), remember_calls.MAX_FACTS):
            batch = planned.inputs[i : i + remember_calls.MAX_FACTS]
            added += [r.id for r in remember_calls.remember_many(s, batch) if r.created]
        if opts.allow_destructive and remove_sources:
            gone = [source for g in [*earlier, *planned.groups] for source in g.sources]
            if gone:
                removed = _remove(s, builtins.list(dict.fromkeys(gone)), purge=False).removed
    # Said in a dry run too: it tells the caller the real run needs the flag.
    made = [*earlier, *planned.groups]
    kept = (consolidation.KEPT_NOT_ALLOWED
            if made and remove_sources and not opts.allow_destructive else None)
    return ConsolidationReport(dry_run=opts.dry_run, groups=made, added=added,
                               removed=removed, sources_kept=kept)


def _policy_ids(got: object) -> builtins.list[str]:
    """A custom forgetting policy's answer, checked: fact ids."""
    if isinstance(got, (str, bytes, Mapping)) or not isinstance(got, Iterable):
        raise InvalidError(f"the forgetting policy returned {type(got).__name__}, not a "
                           "list of fact ids")
    ids = builtins.list(got)
    for item in ids:
        if not isinstance(item, str):
            raise InvalidError(f"the forgetting policy returned {item!r} among its ids, "
                               "not a fact id (a string)")
    return ids


def _policy_groups(got: object) -> builtins.list[consolidation.Group]:
    """A custom consolidation policy's answer, checked: (source ids, summary text) pairs."""
    if isinstance(got, (str, bytes, Mapping)) or not isinstance(got, Iterable):
        raise InvalidError(f"the consolidation policy returned {type(got).__name__}, not a "
                           "list of (source ids, summary text) pairs")
    groups = []
    for item in got:
        if not (isinstance(item, (tuple, builtins.list)) and len(item) == 2
                and isinstance(item[0], (tuple, builtins.list))
                and all(isinstance(x, str) for x in item[0]) and isinstance(item[1], str)):
            raise InvalidError(f"the consolidation policy returned {item!r} as a group, not "
                               "a (source ids, summary text) pair")
        groups.append((builtins.list(item[0]), item[1]))
    return groups
