"""Every MCP tool offers exactly what its op uses, driven by the MCP SDK's own stdio client.

What the tests prove: the tools are remember, remember_conversation, recall, explain,
forget, history, get, list, list_namespaces, relate, entity_profile and why; each
schema's properties are the audited list below (a field the op does not use — the
explain tool's ``explain`` flag — is neither offered nor taken), and every property a
schema offers is taken by its tool (a walk over every property of every tool, each value
checked against the schema first); ``forget`` is a dry run unless ``dryRun`` is false,
and says so in its schema and description; ``remember`` takes a batch as ``facts``;
``list`` pages with a cursor and fences what it returns; ``list_namespaces`` counts the
facts of each namespace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from .test_mcp import Session, error_code, fenced, ok, serving

#: The audit: what each tool's op uses, and so what its schema offers. A field added to
#: a request Struct fails this test until it is looked at here.
OFFERED: dict[str, set[str]] = {
    "remember": {"text", "id", "subject", "entities", "metadata", "embedding", "eventTime",
                 "validFrom", "validTo", "supersedes", "confidence", "namespace", "facts",
                 "ttlMs", "speaker", "session", "position"},
    "remember_conversation": {"messages", "session", "time", "namespace", "start",
                              "extractor"},
    "recall": {"query", "k", "asOf", "knownAt", "history", "subject", "entities", "embedding",
               "explain", "candidateLimit", "namespace", "filter", "graph"},
    # explain ranks as recall does (k, candidateLimit, history ... say where the fact
    # stands), but its answer is the explanation: recall's `explain` flag means nothing.
    "explain": {"query", "id", "k", "asOf", "knownAt", "history", "subject", "entities",
                "embedding", "candidateLimit", "namespace", "filter", "graph"},
    "forget": {"scope", "includeChain", "dryRun", "purge", "within"},
    "history": {"id", "asOf", "knownAt"},
    "get": {"id", "asOf", "knownAt"},
    "list": {"cursor", "limit", "filter", "history", "namespace", "asOf", "knownAt"},
    "list_namespaces": {"prefix", "maxDepth", "limit", "cursor"},
    "compile_context": {"query", "budgetTokens", "namespace", "fragments", "k", "asOf",
                        "knownAt", "history", "filter"},
    "save_working_context": {"namespace", "session", "state"},
    "load_working_context": {"namespace", "session", "save"},
    "list_working_contexts": {"namespace"},
    "relate": {"fromId", "toId", "relation", "metadata", "namespace"},
    "entity_profile": {"name", "asOf", "knownAt", "namespace", "limit", "cursor"},
    "why": {"query", "maxHops", "relation", "filter", "asOf", "knownAt", "namespace"},
}
VECTOR = [0.1, 0.2, 0.3, 0.4]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with serving(tmp_path_factory.mktemp("tools") / "store") as s:
        s.remember(id="seed", text="Dora keeps bees", subject="dora/hobby",
                   entities=["Dora"], metadata={"kind": "hobby"}, embedding=VECTOR)
        s.remember(id="walk-1", text="Dora keeps bees in the walk garden", namespace=["walk"],
                   subject="dora/hobby", embedding=VECTOR)
        s.remember(id="walk-2", text="Dora sells honey", namespace=["walk", "deep"],
                   embedding=VECTOR)
        s.remember(id="seed-2", text="Bees make honey", embedding=VECTOR)
        s.remember(id="seed-3", text="Honey keeps for years", embedding=VECTOR)
        yield s


def schemas(session: Session) -> dict[str, dict[str, Any]]:
    return {t.name: t.input_schema for t in session.tools()}


def cursor(session: Session, tool: str, args: dict[str, Any]) -> str:
    (*_, body) = ok(session.call(tool, {**args, "limit": 1}))
    value: str = json.loads(body)["nextCursor"]
    assert value
    return value


def samples(session: Session) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Per tool: the least call it answers, and a value for every property it offers."""
    recall = {"k": 3, "asOf": 4_000_000_000_000, "knownAt": 4_000_000_000_000,
              "history": "all", "subject": "dora/hobby", "entities": ["Dora"],
              "embedding": VECTOR, "candidateLimit": 50, "namespace": [],
              "filter": {"metadata": {"kind": {"$eq": "hobby"}}},
              "graph": {"hops": 2, "weight": 0.3, "links": True, "entities": True,
                        "relation": "about"}}
    return {
        "remember": ({"text": "Dora paints"}, {
            "text": "Dora paints boats", "id": "walk-id", "subject": "dora/art",
            "entities": ["Dora"], "metadata": {"kind": "art"}, "embedding": VECTOR,
            "eventTime": 1000, "validFrom": 1000, "validTo": 4_000_000_000_000,
            "supersedes": ["seed"], "confidence": 0.5, "namespace": ["walk"],
            "ttlMs": 60_000, "speaker": "dora", "session": "walk-s", "position": 3,
            "facts": [{"text": "Dora rows"}, {"text": "Dora sails", "namespace": ["walk"]}],
        }),
        # (The least call's message has its own time: the call's time leaves it as it is.)
        "remember_conversation": (
            {"messages": [{"role": "user", "text": "hi", "time": 1000}], "session": "mcp-s"},
            {"messages": [{"speaker": "dora", "role": "user", "name": "d", "id": "conv-m1",
                           "content": [{"type": "text", "text": "hi there"}], "time": 5,
                           "tool_calls": [], "tool_call_id": "c", "function_call": None,
                           "refusal": None, "audio": None}],
             "session": "mcp-t", "time": 2000, "namespace": ["walk"], "start": 4,
             "extractor": "rules"}),
        "recall": ({"query": "bees"}, {**recall, "query": "Dora bees", "explain": True}),
        "explain": ({"query": "bees", "id": "seed"},
                    {**recall, "query": "Dora bees", "id": "seed"}),
        "forget": ({"scope": {"ids": ["nothing-here"]}}, {
            "scope": {"subject": "no/such"}, "includeChain": True, "dryRun": True,
            "purge": True, "within": ["walk"]}),
        "history": ({"id": "seed"}, {"id": "walk-1", "asOf": 4_000_000_000_000,
                                     "knownAt": 4_000_000_000_000}),
        "get": ({"id": "seed"}, {"id": "walk-1", "asOf": 4_000_000_000_000,
                                 "knownAt": 4_000_000_000_000}),
        "list": ({}, {"cursor": cursor(session, "list", {}), "limit": 2,
                      "filter": {"subject": "dora/hobby"}, "history": "current",
                      "namespace": ["walk"], "asOf": 4_000_000_000_000,
                      "knownAt": 4_000_000_000_000}),
        "list_namespaces": ({}, {"prefix": ["walk"], "maxDepth": 1, "limit": 5,
                                 "cursor": cursor(session, "list_namespaces", {})}),
        "compile_context": ({"query": "bees", "budgetTokens": 500}, {
            "query": "Dora bees", "budgetTokens": 500, "namespace": ["walk"], "k": 5,
            "fragments": [{"id": "g", "text": "the goal", "score": 0.5, "pinned": True,
                           "time": 1000}],
            "asOf": 4_000_000_000_000, "knownAt": 4_000_000_000_000, "history": "all",
            "filter": {"metadata": {"kind": {"$eq": "hobby"}}}}),
        "save_working_context": ({"session": "s", "state": {"goal": "bees"}},
                                 {"session": "s", "state": {"goal": "honey"},
                                  "namespace": ["walk"]}),
        "load_working_context": ({"session": "s"}, {"session": "s", "save": 1,
                                                     "namespace": []}),
        "list_working_contexts": ({}, {"namespace": ["walk"]}),
        "relate": ({"fromId": "seed", "toId": "seed-2", "relation": "about"}, {
            "fromId": "seed-3", "toId": "seed-3", "relation": "cites",
            "metadata": {"kind": "walk"}, "namespace": []}),
        "entity_profile": ({"name": "Dora"}, {
            "name": "Dora", "asOf": 4_000_000_000_000, "knownAt": 4_000_000_000_000,
            "namespace": [], "limit": 1,
            "cursor": profile_cursor(session)}),
        "why": ({"query": "seed"}, {
            "query": "Dora bees", "maxHops": 1, "relation": ["about"],
            "filter": {"metadata": {"kind": {"$eq": "hobby"}}}, "asOf": 4_000_000_000_000,
            "knownAt": 4_000_000_000_000, "namespace": []}),
    }


def profile_cursor(session: Session) -> str:
    """The cursor of a one-fact first page of the least entity profile call (a cursor
    goes with its name, namespace and times: the walk adds it to the least call)."""
    (_, body) = ok(session.call("entity_profile", {"name": "Dora", "limit": 1}))
    value: str = json.loads(body)["nextCursor"]
    assert value
    return value


def nested_objects(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        if schema.get("type") == "object" and "properties" in schema:
            yield schema
        for value in schema.values():
            yield from nested_objects(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from nested_objects(value)


def test_every_tool_offers_exactly_what_its_op_uses(session: Session) -> None:
    found = schemas(session)
    assert list(found) == list(OFFERED)
    for tool, schema in found.items():
        assert set(schema["properties"]) == OFFERED[tool], tool
        jsonschema.Draft202012Validator.check_schema(schema)
        assert "$ref" not in json.dumps(schema)
        for node in nested_objects(schema):  # the root, forget's scope, each batch fact
            assert node["additionalProperties"] is False, (tool, node)
    assert "explain" not in found["explain"]["properties"]


def test_every_property_a_schema_offers_is_taken_by_its_tool(session: Session) -> None:
    found = schemas(session)
    walked = samples(session)
    assert set(walked) == set(found)
    for tool, (least, values) in walked.items():
        assert set(values) == set(found[tool]["properties"]), tool  # every one walked
        validator = jsonschema.Draft202012Validator(found[tool])
        validator.validate(least)
        ok(session.call(tool, least))
        for name, value in values.items():
            args = {name: value} if name == "facts" else {**least, name: value}
            if (tool, name) == ("relate", "metadata"):
                # Other metadata on the least call's link is a conflict (docs/contract.md
                # §4f): metadata is walked on a link of its own.
                args["relation"] = "with-metadata"
            validator.validate(args)  # what the schema says the tool takes ...
            ok(session.call(tool, args))  # ... it does take


def test_a_field_the_op_does_not_use_is_refused(session: Session) -> None:
    result = session.call("explain", {"query": "bees", "id": "seed", "explain": True})
    assert error_code(result) == "invalid_request"
    assert "'explain'" in json.loads(result.content[0].text)["error"]["message"]
    schema = schemas(session)["explain"]
    assert not jsonschema.Draft202012Validator(schema).is_valid(
        {"query": "bees", "id": "seed", "explain": True})
    # recall's explain flag is meaningful: it adds the explanations.
    block, explained = ok(session.call("recall", {"query": "bees", "explain": True}))
    ids = [line[3:].split("]")[0] for line in fenced(block)]
    assert [e["id"] for e in json.loads(explained)["explanations"]] == ids != []


def test_forget_is_a_dry_run_unless_dry_run_is_false(tmp_path: Path) -> None:
    with serving(tmp_path / "store") as s:
        (forget,) = [t for t in s.tools() if t.name == "forget"]
        assert forget.input_schema["properties"]["dryRun"]["default"] is True
        assert "dry run unless `dryRun` is false" in (forget.description or "")
        s.remember(id="a", text="Ann likes tea")
        (body,) = ok(s.call("forget", {"scope": {"ids": ["a"]}}))
        assert json.loads(body) == {"removed": ["a"], "relinked": [], "dryRun": True,
                                    "purged": False, "unlinked": 0}
        assert fenced(ok(s.call("get", {"id": "a"}))[0])  # still there
        (body,) = ok(s.call("forget", {"scope": {"ids": ["a"]}, "dryRun": False}))
        assert json.loads(body)["dryRun"] is False and json.loads(body)["removed"] == ["a"]
        assert ok(s.call("get", {"id": "a"})) == ['{"fact": null}']


def test_remember_takes_a_batch_and_list_pages_it_fenced(tmp_path: Path) -> None:
    with serving(tmp_path / "store") as s:
        facts = [{"id": f"f{i}", "text": f"fact number {i}", "namespace": ["team", f"t{i % 2}"]}
                 for i in range(5)]
        (body,) = ok(s.call("remember", {"facts": facts}))
        assert [r["id"] for r in json.loads(body)["remembered"]] == [f["id"] for f in facts]
        mixed = s.call("remember", {"facts": facts[:1], "text": "and one more"})
        assert error_code(mixed) == "invalid_request"  # one fact, or a batch: not both

        seen: list[str] = []
        page: dict[str, Any] = {"limit": 2}
        while True:
            block, structure = ok(s.call("list", page))
            ids = [line[3:].split("]")[0] for line in fenced(block) if line != "(no facts)"]
            shown = json.loads(structure)
            assert [f["id"] for f in shown["facts"]] == ids
            assert all("text" not in f for f in shown["facts"])  # stored text: fenced only
            seen += ids
            if shown["nextCursor"] is None:
                break
            page = {"limit": 2, "cursor": shown["nextCursor"]}
        assert seen == [f["id"] for f in facts]  # every fact once, in write order

        (body,) = ok(s.call("list_namespaces", {}))
        assert json.loads(body)["namespaces"] == [
            {"namespace": ["team", "t0"], "facts": 3}, {"namespace": ["team", "t1"], "facts": 2}]
        (body,) = ok(s.call("list_namespaces", {"maxDepth": 1}))
        assert json.loads(body)["namespaces"] == [{"namespace": ["team"], "facts": 5}]


def test_relate_then_why_fences_the_walk_and_answers_its_structure(session: Session) -> None:
    (made,) = ok(session.call("relate", {"fromId": "seed", "toId": "seed-2",
                                         "relation": "explains"}))
    assert json.loads(made)["link"]["relation"] == "explains"
    (again,) = ok(session.call("relate", {"fromId": "seed", "toId": "seed-2",
                                          "relation": "explains"}))
    assert json.loads(again)["created"] is False
    block, structure = ok(session.call("why", {"query": "seed", "maxHops": 1,
                                               "relation": "explains"}))
    lines = fenced(block)
    # (seed's status depends on the walk above, which may supersede it)
    assert lines[0].startswith("- [seed] (hop 0; ") and lines[0].endswith("Dora keeps bees")
    assert lines[1] == "- [seed-2] (hop 1; current) Bees make honey"
    assert "- [seed] -[explains]-> [seed-2]" in lines
    walk = json.loads(structure)
    assert walk["start"] == "seed" and walk["truncated"] is False
    assert [(n["id"], n["hop"]) for n in walk["nodes"]] == [("seed", 0), ("seed-2", 1)]
    assert walk["edges"] == [{"fromId": "seed", "toId": "seed-2"}]  # no stored strings
    assert error_code(session.call("relate", {"fromId": "seed", "toId": "walk-1",
                                              "relation": "x"})) == "invalid_request"
    assert error_code(session.call("relate", {"fromId": "seed", "toId": "nope",
                                              "relation": "x"})) == "not_found"
