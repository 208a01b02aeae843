"""``GET /openapi.json`` describes every route from the contract's own Structs (issue 15,
item 4): every op is there, the README's example of every op validates against its
request schema and the server's answer against its response schema, the schemas refuse
what the contract refuses, a time field takes milliseconds or ISO 8601 exactly where the
contract does, and the document is the same bytes in every process."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from jsonschema import Draft202012Validator

from holomem.api.doors.http import openapi
from holomem.api.memory import contract, ops
from holomem.errors import InvalidError
from tests import web
from tests.test_doc_examples import requests

from .conftest import Server, headers, start

MEMORY = "/api/v1/memory/"


def readme_examples() -> list[tuple[str, dict[str, Any]]]:
    """(op, request) of every request the README shows (its "Every op, by example"), in
    order: each a ```json OP block (tests/test_doc_examples.py)."""
    found = requests("README.md")
    assert found and all(isinstance(body, dict) for _, body in found)
    return found


def fetch(srv: Server) -> httpx.Response:
    return web.get(srv.url + "/openapi.json", timeout=30)  # no API key: it is public


def validator(doc: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of ``schema``, its ``#/components/...`` references resolved in ``doc``."""
    return Draft202012Validator({**schema, "components": doc["components"]})


def request_schema(doc: dict[str, Any], path: str) -> dict[str, Any]:
    body = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    schema: dict[str, Any] = body["schema"]
    return schema


def response_schema(doc: dict[str, Any], path: str, method: str = "post",
                    status: str = "200") -> dict[str, Any]:
    answer = doc["paths"][path][method]["responses"][status]["content"]["application/json"]
    schema: dict[str, Any] = answer["schema"]
    return schema


def test_every_contract_op_has_its_route_in_the_document(server: Server) -> None:
    r = fetch(server)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    memory = {p[len(MEMORY):]: v for p, v in doc["paths"].items() if p.startswith(MEMORY)}
    # A new op of the contract needs its request and response Structs in httpschema.OPS.
    assert set(openapi.OPS) == set(ops.OPS)
    assert set(memory) == set(ops.OPS)
    for op, item in memory.items():
        assert set(item) == {"post"} and item["post"]["operationId"] == op
        assert {"200", "422"} <= set(item["post"]["responses"])
    ids = [o["operationId"] for item in doc["paths"].values() for o in item.values()]
    assert len(ids) == len(set(ids))
    for route in ("/api/v1/documents", "/api/v1/documents/search", "/api/v1/documents/{id}",
                  "/healthz", "/openapi.json", "/metrics", "/mcp"):
        assert route in doc["paths"]
    # Every schema in it is a valid JSON Schema (2020-12, the dialect OpenAPI 3.1 uses).
    for name, schema in doc["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema), name


def test_the_mcp_endpoint_is_described_with_its_headers_and_messages(server: Server) -> None:
    doc = fetch(server).json()
    item = doc["paths"]["/mcp"]
    assert set(item) == {"post", "get", "delete"}
    for operation in item.values():
        names = {p["name"] for p in operation["parameters"]}
        assert {"Mcp-Session-Id", "MCP-Protocol-Version", "X-Holomem-Namespace",
                "X-Tenant-ID"} <= names
        assert "401" in operation["responses"]
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}
    validator(doc, request_schema(doc, "/mcp")).validate(hello)
    assert not validator(doc, request_schema(doc, "/mcp")).is_valid({"method": "x"})
    r = web.post(server.url + "/mcp", json=hello, timeout=30, headers={
        **headers(), "accept": "application/json, text/event-stream"})
    assert r.status_code == 200, r.text
    validator(doc, response_schema(doc, "/mcp")).validate(r.json())


def test_the_readme_examples_validate_and_so_do_the_servers_answers(server: Server) -> None:
    doc = fetch(server).json()
    examples = readme_examples()
    # An example of every op (a new op needs one in the README).
    assert {op for op, _ in examples} == set(ops.OPS)
    with httpx.Client(base_url=server.url, headers=headers("readme"), timeout=30) as http:
        for op, body in examples:
            path = MEMORY + op
            errors = list(validator(doc, request_schema(doc, path)).iter_errors(body))
            assert errors == [], (op, [e.message for e in errors])
            r = http.post(path, json=body)
            assert r.status_code == 200, (op, r.text)
            answer = r.json()
            errors = list(validator(doc, response_schema(doc, path)).iter_errors(answer))
            assert errors == [], (op, [e.message for e in errors])
        # What the examples did, as the README says: Berlin supersedes Paris, then the
        # namespace forget removed every fact.
        assert http.post(MEMORY + "list", json={}).json()["facts"] == []


def test_the_schemas_refuse_what_the_contract_refuses(server: Server) -> None:
    doc = fetch(server).json()
    refused = [("recall", {"query": "x", "bogus": 1}), ("recall", {"query": 5}),
               ("recall", {}), ("remember", {}), ("remember", {"text": "x", "facts": []}),
               ("forget", {"scope": {"idz": ["a"]}}), ("list", {"filter": {"colour": "x"}}),
               ("get", {"id": None}), ("recall", {"query": "x", "k": "3"}),
               ("feedback", {"id": "a", "helpful": "yes"})]
    for op, body in refused:
        assert not validator(doc, request_schema(doc, MEMORY + op)).is_valid(body), (op, body)
        with pytest.raises(InvalidError):
            contract.decode(op, body)


def _component(doc: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = doc["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]
    return schema


def _refs(prop: dict[str, Any]) -> list[dict[str, Any]]:
    """The request shapes a property holds (itself, or as the items of a list)."""
    options = prop.get("anyOf", [prop])
    return ([o for o in options if "$ref" in o]
            + [o["items"] for o in options if "$ref" in o.get("items", {})])


def _at(body: Any, path: list[str | int]) -> Any:
    for key in path:
        body = body[key]
    return body


def test_a_time_field_takes_iso_8601_exactly_where_the_contract_does(server: Server) -> None:
    """For every integer field of every request shape (nested ones too: the facts of a
    batch, a forget scope, a list filter), set to an ISO 8601 string in the README's
    example: the contract accepts it iff the document says the field takes a string."""
    doc = fetch(server).json()
    checked: set[str] = set()

    def walk(op: str, base: dict[str, Any], path: list[str | int], ref: dict[str, Any]) -> None:
        here = _at(base, path)
        for name, prop in _component(doc, ref)["properties"].items():
            value = here.get(name)
            for inner in _refs(prop):
                if isinstance(value, dict):
                    walk(op, base, [*path, name], inner)
                elif isinstance(value, list) and value and isinstance(value[0], dict):
                    walk(op, base, [*path, name, 0], inner)
            types = [o.get("type") for o in prop.get("anyOf", [prop])]
            if "integer" not in types:
                continue
            body = json.loads(json.dumps(base))
            _at(body, path)[name] = "2024-05-01T12:00:00Z"
            try:
                contract.decode(op, body)
                accepted = True
            except InvalidError:
                accepted = False
            assert accepted == ("string" in types), (op, path, name)
            checked.add(name)

    for op, body in readme_examples():
        schema = request_schema(doc, MEMORY + op)
        # remember takes one of two shapes: the one this example is.
        ref = next(s for s in schema.get("anyOf", [schema])
                   if validator(doc, s).is_valid(body))
        walk(op, body, [], ref)
    assert checked >= openapi.TIME_FIELDS  # every time field was reached
    assert checked >= {"k", "limit", "maxDepth"}  # and integers that are no times


def test_the_document_is_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"supersession": "latest-by-subject"}')
    one = start(tmp_path / "one")
    two = start(tmp_path / "two", "--max-tenants", "3", api_key=None)
    try:
        a, b = fetch(one), fetch(two)
        assert a.content == b.content == fetch(one).content
    finally:
        one.stop()
        two.stop()
    assert a.content == openapi.document_bytes()
    # Sorted keys at every level: the bytes follow from the content alone.
    assert a.content == msgspec.json.encode(json.loads(a.content), order="sorted")
    assert openapi.build() == openapi.build()
    assert json.loads(a.content)["info"]["version"] == version("holomem-db")


def test_the_document_routes_answer_camel_case_as_documented(server: Server) -> None:
    doc = fetch(server).json()
    with httpx.Client(base_url=server.url, headers=headers(), timeout=30) as http:
        r = http.post("/api/v1/documents", json={"documents": [
            {"id": "d1", "text": "the quick brown fox", "entities": ["fox"]},
            {"id": "d2", "text": "a lazy dog", "embedding": [0.5, 1.0]}]})
        assert r.status_code == 200
        assert validator(doc, response_schema(doc, "/api/v1/documents")).is_valid(r.json())
        hits = http.post("/api/v1/documents/search", json={"query": "fox"}).json()
        assert hits["hits"][0].keys() == {"id", "score", "lexicalScore", "semanticScore"}
        assert validator(doc, response_schema(doc, "/api/v1/documents/search")).is_valid(hits)
        got = http.get("/api/v1/documents/d1").json()
        assert got["document"]["entities"] == ["fox"]
        schema = response_schema(doc, "/api/v1/documents/{id}", "get")
        assert validator(doc, schema).is_valid(got)
        gone = http.delete("/api/v1/documents/d2").json()
        assert validator(doc, response_schema(doc, "/api/v1/documents/{id}", "delete")
                         ).is_valid(gone)
        for body in ({"query": "fox", "lexical_score": 1}, {"k": 3}):
            r = http.post("/api/v1/documents/search", json=body)
            assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
            schema = request_schema(doc, "/api/v1/documents/search")
            assert not validator(doc, schema).is_valid(body)
        error = http.post("/api/v1/memory/get", json={"id": 5}).json()
        assert validator(doc, response_schema(doc, MEMORY + "get", status="422")
                         ).is_valid(error)
    health = web.get(server.url + "/healthz", headers=headers(), timeout=30).json()
    assert validator(doc, response_schema(doc, "/healthz", "get")).is_valid(health)
