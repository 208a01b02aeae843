"""The HTTP door's shapes and its OpenAPI 3.1 document (``GET /openapi.json``).

Owns: the request and response Structs of the routes that are not ``Memory.call``
(documents, search, health, errors), the engine's result types in their camelCase
form as the door serves them, which contract op takes and answers which Struct
(:data:`OPS`), and the OpenAPI document generated from all of them with
``msgspec.json.schema_components`` — so a field added to a contract type appears in
the document without anyone writing it. Imports the contract, the memory API's and
the engine's types, and msgspec; nothing of HTTP.

The document is a pure function of the code: the same bytes in every process, whatever
the host, port, data or configuration (its keys are sorted), so it can be cached,
diffed and pinned by clients. Requests may give a time as milliseconds or as an
ISO 8601 string (:func:`holomem.api.engine.validate.to_ms`); the contract's Structs declare
milliseconds, so the document widens the time fields of request shapes to say both.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import msgspec

from holomem.api.engine import Document, DocumentInput, Hit
from holomem.api.memory import ops
from holomem.api.memory.about import holomem_version
from holomem.api.memory.shapes import Request, Response
from holomem.api.memory.transfer.records import FactExport

API_PREFIX = "/api/v1"


def camel(cls: type[msgspec.Struct]) -> type[msgspec.Struct]:
    """``cls`` with the same fields, encoded camelCase: how the door serves an engine type
    (the engine's Structs keep their Python names; every route speaks camelCase)."""
    info = msgspec.structs.fields(cls)
    fields = [(f.name, f.type) if f.required else
              (f.name, f.type, f.default if f.default is not msgspec.NODEFAULT
               else msgspec.field(default_factory=f.default_factory))
              for f in info]
    return msgspec.defstruct(cls.__name__, fields, kw_only=True, frozen=True, rename="camel",
                             module=__name__)


#: The engine's result types as served: ``lexicalScore``, not ``lexical_score``. (Any
#: other engine type a route serves goes through :func:`camel` too.)
HitOut = camel(Hit)
DocumentOut = camel(Document)


def served(value: msgspec.Struct, as_: type[msgspec.Struct]) -> Any:
    """An engine result in its served (camelCase) form, as JSON-ready builtins."""
    return msgspec.to_builtins(as_(**msgspec.structs.asdict(value)))


# -- the routes that are not Memory.call ---------------------------------------------------
class DocumentsRequest(Request, frozen=True, kw_only=True):
    """Several documents in one transaction (or one document: a DocumentInput itself)."""

    documents: list[DocumentInput]


class SearchRequest(Request, frozen=True, kw_only=True):
    """A document search: BM25, fused with cosine when ``embedding`` is given; ``ids``
    restricts it to those documents."""

    query: str
    k: int = 10
    embedding: list[float] | None = None
    ids: list[str] | None = None


class Revision(Response, frozen=True):
    revision: int


class Deleted(Response, frozen=True):
    deleted: bool


class Health(Response, frozen=True):
    """``openTenants`` only for a caller with the API key (or when there is none)."""

    status: str
    open_tenants: int | None = None


class ExportPage(Response, frozen=True):
    """One page of an export, in write order; the next begins at ``nextCursor``."""

    records: list[FactExport]
    next_cursor: str | None


class ErrorDetail(Response, frozen=True):
    """``holder`` and ``writer`` only on a write sent to a server that is not the
    tenant's writer (307, or 423 when no other URL is known): who holds the lease, and
    the URL it advertised."""

    code: str
    message: str
    holder: str | None = None
    writer: str | None = None


class ErrorBody(Response, frozen=True):
    """Every error, on every route (the codes: docs/contract.md §5c)."""

    error: ErrorDetail


def _wrapped(name: str, key: str, inner: Any) -> type[msgspec.Struct]:
    # Some answers hold their result under one key ({"results": [...]}).
    return msgspec.defstruct(name, [(key, inner)], kw_only=True, frozen=True, module=__name__)


DocumentResponse = _wrapped("DocumentResponse", "document", DocumentOut)
SearchResponse = _wrapped("SearchResponse", "hits", list[HitOut])  # type: ignore[valid-type]


# -- the contract's ops --------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One contract op over HTTP: what its body may be and what it answers."""

    requests: tuple[type[Any], ...]
    response: type[Any]
    summary: str


def _op(row: ops.Op) -> Op:
    requests = (row.request, ops.REMEMBER_MANY.request) if row.name == "remember" else \
        (row.request,)
    response = row.result if row.key is None else \
        _wrapped(f"{row.name[0].upper()}{row.name[1:]}Response", row.key, row.result)
    return Op(requests, response, row.summary)


#: Every op of the op table (:data:`holomem.api.memory.ops.OPS`): the Struct(s) its
#: request decodes into and the Struct of its response (``Memory.call``'s result, exactly).
OPS: dict[str, Op] = {name: _op(row) for name, row in ops.OPS.items()}

#: Fields of request shapes that hold a time (JSON names): milliseconds or ISO 8601.
TIME_FIELDS = frozenset({"eventTime", "validFrom", "validTo", "asOf", "knownAt",
                         "ingestedAfter", "ingestedBefore", "eventAfter", "eventBefore", "time"})
_TIME = {"anyOf": [
    {"type": "integer", "description": "milliseconds since the Unix epoch"},
    {"type": "string", "description": "an ISO 8601 date or date-time, e.g. "
     "2024-05-01T12:00:00Z (without an offset: UTC)"}]}


# -- the document --------------------------------------------------------------------------
_REF = "#/components/schemas/{name}"
_ERROR = {"$ref": "#/components/schemas/ErrorBody"}
_TENANT = {"name": "X-Tenant-ID", "in": "header", "required": False,
           "description": "The tenant (one store each): 1-64 letters, digits, '.', '_' or "
                          "'-', starting with a letter or digit; default 'default'. A read "
                          "of a tenant with no store answers as an empty store would and "
                          "creates nothing.",
           "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}}
_ERRORS = {
    "307": "a write for a tenant another server writes (--journal): the same route on "
           "that server (Location), the error body naming holder and writer",
    "401": "no valid API key",
    "403": "the Host does not name this server, or the Origin is not allowed",
    "404": "not_found: an unknown route, document or fact",
    "409": "conflict",
    "413": "limit: the body is over the size bound",
    "415": "the body is not sent as application/json",
    "422": "invalid_request or limit",
    "423": "locked: another process is the tenant store's writer",
    "431": "limit: the request head is too large",
    "503": "unavailable: the server is shutting down",
    "507": "limit: a new tenant store would pass --max-tenant-stores",
}


def _widen_times(schema: dict[str, Any]) -> None:
    """Let each time property of a request shape be milliseconds or ISO 8601."""
    for name, prop in schema.get("properties", {}).items():
        if name not in TIME_FIELDS:
            continue
        options = prop.get("anyOf", [prop])
        assert {"type": "integer"} in options, (name, prop)  # a time is an int in the Struct
        widened = _TIME["anyOf"] + [o for o in options if o != {"type": "integer"}]
        rest = {k: v for k, v in prop.items() if k not in ("anyOf", "type")}
        prop.clear()
        prop.update(rest, anyOf=widened)


def _reachable(schemas: list[Any], components: dict[str, Any]) -> set[str]:
    """The names of the components ``schemas`` refer to, directly or through others."""
    found: set[str] = set()
    todo = list(schemas)
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, dict):
            target = node.get("$ref")
            if isinstance(target, str):
                name = target.rsplit("/", 1)[1]
                if name not in found:
                    found.add(name)
                    todo.append(components[name])
            todo.extend(v for k, v in node.items() if k != "$ref")
    return found


def _body(types: tuple[type[Any], ...], ref: dict[int, Any]) -> dict[str, Any]:
    schemas = [ref[id(t)] for t in types]
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    # An empty body counts as {}: a body is needed only when a field is required.
    needed = all(any(f.required for f in msgspec.structs.fields(t)) for t in types)
    return {"required": needed, "content": {"application/json": {"schema": schema}}}


def _answer(schema: Any, description: str = "the answer") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _operation(op_id: str, summary: str, ok: Any, *, body: dict[str, Any] | None = None,
               params: list[dict[str, Any]] | None = None, tags: str = "memory",
               errors: tuple[str, ...] = tuple(_ERRORS)) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": op_id, "summary": summary, "tags": [tags],
                           "parameters": [*(params or []), _TENANT]}
    if body is not None:
        out["requestBody"] = body
    out["responses"] = {"200": _answer(ok),
                        **{code: _answer(_ERROR, _ERRORS[code]) for code in errors}}
    return out


#: The MCP transport's headers (docs/http.md "MCP over HTTP").
_MCP_HEADERS = [
    {"name": "Mcp-Session-Id", "in": "header", "required": False,
     "description": "The session the server gave in its answer to initialize; every "
                    "later request of the session sends it.",
     "schema": {"type": "string"}},
    {"name": "MCP-Protocol-Version", "in": "header", "required": False,
     "description": "The MCP protocol version the session agreed on, e.g. 2025-06-18.",
     "schema": {"type": "string"}},
    {"name": "X-Holomem-Namespace", "in": "header", "required": False,
     "description": "Confine every tool call to this namespace: a JSON array of "
                    "strings, e.g. [\"users\", \"u-42\"] (a tool's namespace is taken "
                    "under it).",
     "schema": {"type": "string"}}]
#: A JSON-RPC 2.0 message (or a batch of them): what MCP sends over HTTP.
_JSON_RPC = {"description": "A JSON-RPC 2.0 message of the Model Context Protocol "
             "(initialize, tools/list, tools/call, ...), or a batch of them",
             "anyOf": [{"$ref": "#/$defs/message"},
                       {"type": "array", "items": {"$ref": "#/$defs/message"}}],
             "$defs": {"message": {"type": "object", "required": ["jsonrpc"],
                                   "properties": {"jsonrpc": {"const": "2.0"},
                                                  "id": {"type": ["string", "integer"]},
                                                  "method": {"type": "string"},
                                                  "params": {"type": "object"},
                                                  "result": {}, "error": {"type": "object"}}}}}


def _mcp_path() -> dict[str, Any]:
    """``/mcp``: the streamable-HTTP MCP transport (its body is MCP's, not the contract's)."""
    params = [*_MCP_HEADERS, _TENANT]
    errors = {code: _answer(_ERROR, _ERRORS[code]) for code in ("401", "403", "413")}
    stream = {"description": "the server's messages as server-sent events",
              "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    return {
        "post": {"operationId": "mcpMessage", "tags": ["mcp"], "parameters": params,
                 "summary": "Send MCP messages (JSON-RPC 2.0): one writer for every MCP "
                            "client; the tools are the stdio server's",
                 "requestBody": {"required": True, "content": {
                     "application/json": {"schema": _JSON_RPC}}},
                 "responses": {"200": {"description": "the answer (JSON-RPC 2.0)",
                                       "content": {"application/json": {
                                           "schema": _JSON_RPC}}},
                               "202": {"description": "accepted: notifications and "
                                                      "answers, which have no answer"},
                               "400": {"description": "not a valid MCP message, or no "
                                                      "session id"},
                               "404": {"description": "an unknown or ended session"},
                               "406": {"description": "Accept does not take "
                                                      "application/json and "
                                                      "text/event-stream"},
                               **errors}},
        "get": {"operationId": "mcpStream", "tags": ["mcp"], "parameters": params,
                "summary": "Open the session's stream of server messages (server-sent "
                           "events)",
                "responses": {"200": stream, **errors}},
        "delete": {"operationId": "mcpEnd", "tags": ["mcp"], "parameters": params,
                   "summary": "End the session",
                   "responses": {"200": {"description": "the session ended"}, **errors}},
    }


def build() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route (a new dict each call)."""
    types: list[Any] = []
    for op in OPS.values():
        types.extend(op.requests)
        types.append(op.response)
    extra = [DocumentInput, DocumentsRequest, SearchRequest, Revision, DocumentResponse,
             Deleted, SearchResponse, Health, ErrorBody]
    refs, components = msgspec.json.schema_components(types + extra, ref_template=_REF)
    ref = dict(zip(map(id, types + extra), refs, strict=True))
    # The shapes a request body can hold (not those only answers hold, where a time is
    # always milliseconds).
    bodies = [ref[id(t)] for op in OPS.values() for t in op.requests]
    bodies += [ref[id(t)] for t in (DocumentInput, DocumentsRequest, SearchRequest)]
    for name in _reachable(bodies, components):
        _widen_times(components[name])

    paths: dict[str, Any] = {}
    for name, op in OPS.items():
        paths[f"{API_PREFIX}/memory/{name}"] = {"post": _operation(
            name, op.summary, ref[id(op.response)], body=_body(op.requests, ref))}
    doc_id = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    purge = {"name": "purge", "in": "query", "required": False,
             "description": "true (or 1, yes): compact afterwards, so no file keeps the text",
             "schema": {"type": "string", "enum": ["true", "false", "1", "0", "yes", "no"]}}
    paths[f"{API_PREFIX}/documents"] = {"post": _operation(
        "addDocuments", "Add one document, or several in one transaction", ref[id(Revision)],
        body=_body((DocumentInput, DocumentsRequest), ref), tags="documents")}
    paths[f"{API_PREFIX}/documents/search"] = {"post": _operation(
        "searchDocuments", "The best documents for a query", ref[id(SearchResponse)],
        body=_body((SearchRequest,), ref), tags="documents")}
    paths[f"{API_PREFIX}/documents/{{id}}"] = {
        "get": _operation("getDocument", "One document (404 when there is none)",
                          ref[id(DocumentResponse)], params=[doc_id], tags="documents"),
        "delete": _operation("deleteDocument", "Remove a document (deleted: false when "
                             "there was none)", ref[id(Deleted)], params=[doc_id, purge],
                             tags="documents")}
    paths["/mcp"] = _mcp_path()
    paths["/healthz"] = {"get": {
        "operationId": "health", "summary": "Liveness (openTenants with the API key)",
        "tags": ["server"], "security": [], "responses": {"200": _answer(ref[id(Health)])}}}
    paths["/metrics"] = {"get": {
        "operationId": "metrics", "tags": ["server"],
        "summary": "The operator's metrics in the Prometheus text format (OpenMetrics "
                   "when the Accept header asks for it); behind the API key when one is set",
        "responses": {
            "200": {"description": "every holomem_* metric (docs/http.md \"Metrics and "
                                   "traces\")",
                    "content": {"text/plain": {"schema": {"type": "string"}}}},
            **{code: _answer(_ERROR, _ERRORS[code]) for code in ("401", "403")}}}}
    paths["/openapi.json"] = {"get": {
        "operationId": "openapi", "summary": "This document", "tags": ["server"],
        "security": [], "responses": {"200": {"description": "the OpenAPI document",
                                              "content": {"application/json": {}}}}}}
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {"title": "holomem", "version": holomem_version(),
                 "description": "The memory contract (docs/contract.md §5) over HTTP: every "
                 "op at POST /api/v1/memory/{op}, answering exactly as Memory.call; the "
                 "document engine's routes; MCP over streamable HTTP at /mcp; every error "
                 "as {\"error\": {\"code\", \"message\"}}. Names are camelCase; unknown "
                 "fields are refused."},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "the key of --api-key-file"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key",
                           "description": "the same key, in another header"}}},
        "security": [{"bearer": []}, {"apiKey": []}],
    }


@functools.cache
def document_bytes() -> bytes:
    """The document as served: JSON with sorted keys, so every process serves the same
    bytes. Built once per process, when first asked for (a seventh of a second: not
    every server start needs it)."""
    return msgspec.json.encode(build(), order="sorted")
