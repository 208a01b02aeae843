"""The op table: every op of the JSON contract, described once (docs/contract.md §5a).

Owns: :class:`Op` and :data:`OPS`. A row names the op, the request Struct its body
decodes into, the ``Memory`` method it runs and how the request becomes that method's
arguments, the type of the result and the response key it is wrapped in, whether it
can change the store, how a door confined to a namespace confines it, and a one-line
summary. Everything that speaks the contract is derived from this table or checked
against it by one test (tests/contract/test_op_table.py): the contract's decoding
(:mod:`.contract`), the HTTP door's read and write sets and its OpenAPI document, the
scoping of a confined door, the MCP tools' shapes, the Python client, and the
``capabilities`` op. A client turns a call's arguments back into its request with
:func:`asked`, the inverse of a row's ``args``. Imports the request shapes and the
result types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

from holomem.api.memory import requests as rq
from holomem.api.memory.conversation.types import RememberedConversation
from holomem.api.memory.entities.types import EntityProfile
from holomem.api.memory.graph.types import (
    LinkList,
    RelateManyResult,
    RelateResult,
    UnrelateResult,
    WhyResult,
)
from holomem.api.memory.transfer.pages import ExportPage
from holomem.api.memory.transfer.records import ImportReport
from holomem.api.memory.types import (
    Capabilities,
    ConsolidateOptions,
    ConsolidationReport,
    ContradictResult,
    Explanation,
    FactRecord,
    FeedbackReport,
    ForgetReport,
    ListPage,
    MaintenanceOptions,
    MemoryInfo,
    NamespacePage,
    ProbeResult,
    ReasonResult,
    Recalled,
    RelatedResult,
    Remembered,
    RememberInput,
)
from holomem.api.memory.window.budget import CompiledContext, ContextDecision
from holomem.api.memory.window.working import WorkingContext, WorkingContextList
from holomem.errors import InvalidError

#: How a door confined to one namespace confines an op (:mod:`holomem.api.doors.scoping`):
#: ``place`` — the namespace a fact is written in; ``prefix`` — ``namespace`` is a prefix
#: everything the op touches is under; ``forget`` — the scope and ``within``;
#: ``namespaces`` — listNamespaces' ``prefix``; ``id`` — a fact named by id, answered as
#: missing when outside; ``id-write`` — a fact named by id, checked before the change;
#: ``free`` — the op names no fact and no namespace, and passes as it is; ``none`` — the
#: op reaches the whole store and is refused through a confined door.
Scoping = Literal["place", "prefix", "forget", "namespaces", "id", "id-write", "free", "none"]

#: A request Struct -> the method's positional and keyword arguments.
Args = Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]
#: The method's arguments, by parameter name -> the request's fields (see :func:`asked`).
Inverse = Callable[[dict[str, Any]], dict[str, Any]]


class Op(NamedTuple):
    """One op of the contract (see the module doc)."""

    name: str
    method: str
    request: type[Any]
    result: Any
    key: str | None
    writes: bool
    scope: Scoping
    summary: str
    #: The method's arguments from the decoded request; None: every field, by name.
    args: Args | None = None
    #: Its inverse where renaming is needed: a call's arguments -> the request's fields
    #: (what a client sends; :func:`asked`).
    inverse: Inverse | None = None
    #: The method answers one item of ``result`` (a list), which the response holds as
    #: a list of one: a remember of one fact answers as a batch of one does.
    single: bool = False
    #: The request's list field each of whose items is a fact written (remember's
    #: ``facts``, rememberConversation's ``messages``): what a server's bound of facts
    #: per request counts (None: the op writes no batch of facts).
    batch: str | None = None


def fields(request: Any) -> dict[str, Any]:
    """A decoded request's fields by name (what a method takes when ``args`` is None)."""
    return {f: getattr(request, f) for f in request.__struct_fields__}


def _recall_options(req: Any) -> dict[str, Any]:
    return {k: v for k, v in fields(req).items() if k not in ("query", "id")}


def _context(req: rq.CompileContextRequest) -> dict[str, Any]:
    recall = {"as_of": req.as_of, "known_at": req.known_at, "history": req.history,
              "filter": req.filter}
    return {"namespace": req.namespace, "fragments": req.fragments, "k": req.k,
            "recall": recall}


def _why(req: rq.WhyRequest) -> tuple[tuple[Any, ...], dict[str, Any]]:
    given = fields(req)
    return (given.pop("query"),), given


def _why_asked(given: dict[str, Any]) -> dict[str, Any]:
    return {"query" if k == "query_or_id" else k: v for k, v in given.items()}


_OPS = (
    Op("remember", "remember", RememberInput, list[Remembered], "remembered", True, "place",
       "Store one fact, or several ({\"facts\": [...]}) in one transaction",
       lambda req: ((req,), {}), single=True, batch="facts"),
    Op("rememberConversation", "remember_conversation", rq.RememberConversationRequest,
       RememberedConversation, None, True, "place",
       "Store a conversation: each message a turn (speaker, session, position), each "
       "linked to the turn it answers, in one transaction",
       lambda req: ((req.messages,), {k: v for k, v in fields(req).items()
                                      if k != "messages"}), batch="messages"),
    Op("recall", "recall", rq.RecallRequest, list[Recalled], "results", False, "prefix",
       "The facts most relevant to a query, best first",
       lambda req: ((req.query, _recall_options(req)), {})),
    Op("explain", "explain", rq.ExplainRequest, Explanation, "explanation", False, "prefix",
       "Why a fact does or does not come back for a query",
       lambda req: ((req.query, req.id, _recall_options(req)), {})),
    Op("forget", "forget", rq.ForgetRequest, ForgetReport, None, True, "forget",
       "Remove facts for good (dryRun to list them; purge to erase the bytes)",
       lambda req: ((req.scope, {k: v for k, v in fields(req).items() if k != "scope"}), {})),
    Op("get", "get", rq.FactRequest, FactRecord | None, "fact", False, "id",
       "One fact with its status now (null when there is none)"),
    Op("history", "history", rq.FactRequest, list[FactRecord], "history", False, "id",
       "Every version of a fact's supersession chain"),
    Op("applyForgetting", "apply_forgetting", MaintenanceOptions, ForgetReport, None, True,
       "prefix", "Run the forgetting policy (a dry run unless dryRun is false)",
       lambda req: ((req,), {})),
    Op("consolidate", "consolidate", ConsolidateOptions, ConsolidationReport, None, True,
       "prefix", "Run the consolidation policy (a dry run unless dryRun is false)",
       lambda req: ((req,), {})),
    Op("probe", "probe", rq.EntityRequest, ProbeResult, None, False, "prefix",
       "Facts that bind an entity"),
    Op("related", "related", rq.EntityRequest, RelatedResult, None, False, "prefix",
       "Entities that occur with an entity"),
    Op("entityProfile", "entity_profile", rq.EntityProfileRequest, EntityProfile, None,
       False, "prefix", "What is known about a name: the facts that mention it (current "
       "first), its subjects' current values, speakers, sessions and links; paged"),
    Op("reason", "reason", rq.ReasonRequest, ReasonResult, None, False, "prefix",
       "Facts that bind every one of several entities"),
    Op("contradict", "contradict", rq.ContradictRequest, ContradictResult, None, False,
       "prefix", "Pairs of facts that may contradict each other"),
    Op("feedback", "feedback", rq.FeedbackRequest, FeedbackReport, None, True, "id-write",
       "Record whether a recalled fact helped"),
    Op("setConfidence", "set_confidence", rq.ConfidenceRequest, FactRecord, "fact", True,
       "id-write", "Set what the agent believes of a fact, in [0, 1]"),
    Op("list", "list", rq.ListRequest, ListPage, None, False, "prefix",
       "Every stored fact, a page at a time"),
    Op("listNamespaces", "list_namespaces", rq.ListNamespacesRequest, NamespacePage, None,
       False, "namespaces", "The namespaces that hold facts, with their counts"),
    Op("info", "info", rq.InfoRequest, MemoryInfo, None, False, "none",
       "What the store holds: facts, namespaces, embedder, configuration"),
    Op("capabilities", "capabilities", rq.InfoRequest, Capabilities, None, False, "free",
       "What this build serves: its ops, embedders, extras and format versions"),
    Op("export", "export_page", rq.ExportRequest, ExportPage, None, False, "none",
       "Every fact with its whole history, a page at a time"),
    Op("import", "import_", rq.ImportRequest, ImportReport, None, True, "none",
       "Restore exported facts exactly, in atomic batches",
       lambda req: ((rq.import_records(req),), {"batch_size": req.batch_size,
                                                "drop_embeddings": req.drop_embeddings,
                                                "relations": req.relations})),
    Op("compileContext", "compile_context", rq.CompileContextRequest, CompiledContext, None,
       False, "prefix", "The most relevant facts and fragments that fit a token budget",
       lambda req: ((req.query, req.budget_tokens), _context(req))),
    Op("explainContext", "explain_context", rq.ExplainContextRequest, ContextDecision,
       "decision", False, "prefix", "Why one fact or fragment was kept, shortened or dropped",
       lambda req: ((req.query, req.budget_tokens, req.id), _context(req))),
    Op("saveWorkingContext", "save_working_context", rq.SaveWorkingContextRequest,
       WorkingContext, "workingContext", True, "prefix",
       "Save an agent's scratch state for a session (versioned)"),
    Op("loadWorkingContext", "load_working_context", rq.LoadWorkingContextRequest,
       WorkingContext, "workingContext", False, "prefix",
       "The latest (or a given) save of a session's working context"),
    Op("listWorkingContexts", "list_working_contexts", rq.ListWorkingContextsRequest,
       WorkingContextList, None, False, "prefix", "The saved working-context sessions"),
    Op("relate", "relate", rq.RelateRequest, RelateResult, None, True, "prefix",
       "Link two facts of one namespace with a typed, directed relation"),
    Op("relateMany", "relate_many", rq.RelateManyRequest, RelateManyResult, None, True,
       "prefix", "Make a batch of typed links in one transaction: all or nothing"),
    Op("unrelate", "unrelate", rq.UnrelateRequest, UnrelateResult, None, True, "prefix",
       "Remove a typed link"),
    Op("links", "links", rq.LinksRequest, LinkList, None, False, "prefix",
       "The typed links of a fact, out, in or both"),
    Op("why", "why", rq.WhyRequest, WhyResult, None, False, "prefix",
       "The evidence subgraph around a fact or a query's best match", _why, _why_asked),
)

#: The table, by op name.
OPS: dict[str, Op] = {op.name: op for op in _OPS}
#: ``remember`` also takes ``{"facts": [...]}``: several facts in one transaction.
REMEMBER_MANY = Op("remember", "remember_many", rq.RememberMany, list[Remembered],
                   "remembered", True, "place", OPS["remember"].summary,
                   lambda req: ((req.facts,), {}), lambda given: {"facts": given["inputs"]})
#: The ops that only read, and those that can write.
READS = frozenset(op.name for op in _OPS if not op.writes)
WRITES = frozenset(op.name for op in _OPS if op.writes)


def batch_size(name: str, request: object) -> tuple[str, int] | None:
    """How many facts ``request`` for op ``name`` writes as a batch, and the field that
    holds them (:attr:`Op.batch`); None when the op writes no batch or the field is not
    a list (the request's own checks refuse that)."""
    op = OPS.get(name)
    field = op.batch if op is not None else None
    items = request.get(field) if field is not None and isinstance(request, Mapping) \
        else None
    return (field, len(items)) if field is not None and isinstance(items, list) else None


def row(name: str, request: dict[str, Any]) -> Op:
    """The row that runs ``request`` for op ``name`` (``remember`` of ``facts``: the
    batch). The name must be in :data:`OPS`."""
    if name == "remember" and "facts" in request:
        return REMEMBER_MANY
    return OPS[name]


def asked(op: Op, given: dict[str, Any]) -> dict[str, Any]:
    """The inverse of ``op.args``: the request's fields (by their Python names) that a
    call of ``op.method`` with ``given`` (its arguments by parameter name) asks for.

    ``op.inverse`` first, if the row has one. Then each argument goes under its own
    name when the request has that field; any other is a Struct or a mapping whose
    fields are merged in — ``options``, a remember's input, ``**fields``,
    compile_context's ``recall`` — or None. Errors: ``invalid_request`` (any other
    value: a Python-only argument, say).
    """
    if op.inverse is not None:
        given = op.inverse(given)
    names = op.request.__struct_fields__
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name in names:
            out[name] = value
        elif hasattr(value, "__struct_fields__"):
            out.update(fields(value))
        elif isinstance(value, Mapping):
            out.update(value)
        elif value is not None:
            raise InvalidError(f"{op.method}: {name} must be a dict of {op.name}'s fields")
    return out
