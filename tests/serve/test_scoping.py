"""A door's namespace (holomem.api.doors.scoping): no request reaches past it.

The MCP server's ``--namespace`` and the Hermes provider's per-user namespace run
every call through one ``Scope``. Hypothesis sends every op of the contract through
Alice's scope with arbitrary namespace-bearing fields (relative, empty, wrong types,
names that look like paths, too deep) and arbitrary ids, Bob's included: every
answer is a response or a caller error, no answer holds anything of Bob's, and after
it all Bob's facts are exactly as they were.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from holomem import HolomemError, Memory, MemoryConfig, Store
from holomem.api.doors.scoping import HANDLED, Scope
from holomem.api.memory import ops
from holomem.api.memory.config import ConsolidationConfig, Duplicates, ForgettingConfig
from holomem.errors import InvalidError, LimitError, NotFoundError

ALICE = ["users", "alice"]
BOB = ["users", "bob"]
CONFIG = MemoryConfig(supersession="latest-by-subject",
                      forgetting=ForgettingConfig(superseded_for_longer_than_ms=0),
                      consolidation=ConsolidationConfig(duplicates=Duplicates()))
BOB_IDS = [f"bobfact-{i}" for i in range(6)]
ALICE_IDS = [f"alicefact-{i}" for i in range(6)]


def fill(memory: Memory) -> None:
    memory.save_working_context(BOB, "bobs-session", {"goal": "zqxbob plans"})
    for who, ns, ids in (("zqxbob", BOB, BOB_IDS), ("alice", ALICE, ALICE_IDS)):
        memory.remember(id=ids[0], text=f"Lisa lives in Paris {who}", subject="city",
                        entities=["Lisa"], namespace=ns, valid_from=1000,
                        metadata={"kind": "city"})
        memory.remember(id=ids[1], text=f"Lisa lives in Berlin {who}", subject="city",
                        entities=["Lisa"], namespace=ns, valid_from=2000,
                        metadata={"kind": "city"})
        memory.remember(id=ids[2], text=f"Tom works at Acme {who}", entities=["Tom"],
                        namespace=ns)
        memory.remember(id=ids[3], text=f"Tom works at Initech {who}", entities=["Tom"],
                        namespace=ns)
        memory.remember(id=ids[4], text=f"twice the same {who}", namespace=ns)
        memory.remember(id=ids[5], text=f"twice the same {who}", namespace=[*ns, "deeper"])
        memory.relate(ids[2], ids[3], "cites")


def bobs(memory: Memory) -> bytes:
    """Everything of Bob's, as stored: records, statuses, links, votes, typed links."""
    facts = memory.list(namespace=BOB, limit=1000, history="all").facts
    return msgspec.json.encode([facts, [memory.links(f.id, direction="both") for f in facts]])


def test_every_contract_op_is_confined_by_a_scope_or_refused_through_one(
        tmp_path: Path) -> None:
    # info, export and import are whole-store ops (the Python client's): a door
    # confined to a namespace does not offer them, rather than pass them through.
    whole_store = set(ops.OPS) - HANDLED
    assert set(ops.OPS) >= HANDLED and whole_store == {"info", "export", "import"}
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, CONFIG)
        fill(memory)
        for op in sorted(whole_store):
            with pytest.raises(InvalidError, match="not offered by a door confined"):
                Scope(ALICE).call(memory, op, {})


def test_a_root_scope_changes_nothing(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, CONFIG)
        fill(memory)
        for op, request in (("recall", {"query": "Lisa", "namespace": BOB}),
                            ("get", {"id": BOB_IDS[1]}),
                            ("listNamespaces", {})):
            assert Scope().call(memory, op, request) == memory.call(op, request)


def test_the_base_is_checked_like_a_namespace() -> None:
    for bad in ("users//a", [""], ["a\nb"], [1]):
        with pytest.raises(InvalidError):
            Scope(bad)  # type: ignore[arg-type]
    with pytest.raises(LimitError):
        Scope(["x"] * 9)
    assert Scope(("users", "alice")).base == ("users", "alice")


def test_namespaces_are_relative_and_answers_speak_relative_names(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, CONFIG)
        fill(memory)
        alice = Scope(ALICE)
        made = alice.call(memory, "remember", {"text": "a note", "namespace": ["notes"]})
        fid = made["remembered"][0]["id"]
        got = memory.get(fid)
        assert got is not None and got.namespace == [*ALICE, "notes"]
        assert alice.call(memory, "get", {"id": fid})["fact"]["namespace"] == ["notes"]
        assert [n["namespace"] for n in alice.call(memory, "listNamespaces", {})["namespaces"]] \
            == [[], ["deeper"], ["notes"]]
        found = alice.call(memory, "recall", {"query": "note", "namespace": ["notes"]})
        assert [r["fact"]["namespace"] for r in found["results"]] == [["notes"]]
        # Path-like strings are plain strings: ".." is a namespace named "..".
        up = alice.call(memory, "remember", {"text": "up?", "namespace": ["..", "bob"]})
        placed = memory.get(up["remembered"][0]["id"])
        assert placed is not None and placed.namespace == [*ALICE, "..", "bob"]
        with pytest.raises(LimitError, match="at most 6"):
            alice.call(memory, "recall", {"query": "x", "namespace": ["n"] * 7})
        # A fact outside answers exactly as one that does not exist.
        assert alice.call(memory, "get", {"id": BOB_IDS[0]}) == \
            alice.call(memory, "get", {"id": "no-such-fact"}) == {"fact": None}
        for op, request in (("history", {"id": BOB_IDS[0]}),
                            ("explain", {"query": "Lisa", "id": BOB_IDS[0]}),
                            ("feedback", {"id": BOB_IDS[0], "helpful": False}),
                            ("setConfidence", {"id": BOB_IDS[0], "confidence": 0.0})):
            with pytest.raises(NotFoundError) as outside:
                alice.call(memory, op, request)
            with pytest.raises(NotFoundError) as missing:
                alice.call(memory, op, {**request, "id": "no-such-fact"})
            assert outside.value.message == missing.value.message.replace(
                "no-such-fact", BOB_IDS[0])


def test_every_namespace_an_answer_through_a_scope_holds_is_relative(tmp_path: Path) -> None:
    # Every op that answers with facts, sessions or namespaces, on a store with
    # conversations and subjects under the scope: no namespace field holds the base.
    reads: dict[str, dict[str, Any]] = {
        "recall": {"query": "Lisa Tom twice alice", "k": 50, "history": "all",
                   "explain": True},
        "explain": {"query": "Lisa", "id": ALICE_IDS[0]},
        "why": {"query": "Lisa alice"}, "probe": {"entity": "Lisa"},
        "related": {"entity": "Lisa"}, "reason": {"entities": ["Lisa"]},
        "contradict": {}, "consolidate": {"dryRun": True},
        "applyForgetting": {"dryRun": True},
        "compileContext": {"query": "Lisa Tom", "budgetTokens": 400, "history": "all"},
        "explainContext": {"query": "Lisa Tom", "budgetTokens": 400, "id": ALICE_IDS[0]},
        "links": {"id": ALICE_IDS[2], "direction": "both"},
        "list": {"limit": 100, "history": "all"}, "entityProfile": {"name": "Lisa"},
        "history": {"id": ALICE_IDS[1]}, "get": {"id": ALICE_IDS[1]},
        "listNamespaces": {}, "listWorkingContexts": {},
        "loadWorkingContext": {"session": "plan"},
    }

    def absolute(value: object) -> list[Any]:
        if isinstance(value, dict):
            return [v for key, v in value.items()
                    if key == "namespace" and isinstance(v, list) and v[:2] == ALICE
                    ] + [a for v in value.values() for a in absolute(v)]
        if isinstance(value, list):
            return [a for v in value for a in absolute(v)]
        return []

    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, CONFIG)
        fill(memory)
        alice = Scope(ALICE)
        alice.call(memory, "saveWorkingContext", {"session": "plan", "state": {"goal": "g"}})
        alice.call(memory, "rememberConversation", {
            "session": "chat", "namespace": ["notes"], "extractor": "rules",
            "messages": [{"speaker": "Lisa", "text": "I live in Paris"},
                         {"speaker": "Tom", "text": "Lisa is great"}]})
        alice.call(memory, "remember", {"text": "Lisa knows Tom", "entities": ["Lisa"],
                                        "speaker": "Tom", "session": "chat2",
                                        "position": 0})
        for op, request in reads.items():
            answer = alice.call(memory, op, request)
            assert absolute(answer) == [], op
        summary = alice.call(memory, "entityProfile", {"name": "Lisa"})["summary"]
        assert sorted((s["session"], s["namespace"]) for s in summary["sessions"]) == [
            ("chat", ["notes"]), ("chat2", [])]
        assert ("lisa/city", ["notes"]) in [(s["subject"], s["namespace"])
                                            for s in summary["subjects"]]


NAMESPACE_PARTS = st.sampled_from(["", "..", ".", "/", "users", "bob", "alice", "deeper",
                                   "x", " ", "a\nb", "*"])
NAMESPACES = st.one_of(st.none(), st.lists(NAMESPACE_PARTS, max_size=9),
                       st.sampled_from(["users", 7, {"a": 1}, [1], [None]]))
IDS = st.sampled_from([*BOB_IDS, *ALICE_IDS, "no-such-fact"])


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    op = draw(st.sampled_from(sorted(HANDLED)))
    ns = draw(NAMESPACES)
    flags = {"dryRun": draw(st.booleans())}
    request: dict[str, Any]
    if op == "remember":
        fact = {"text": "alice remembers this", "namespace": ns,
                "supersedes": draw(st.lists(IDS, max_size=1))}
        request = {"facts": [fact]} if draw(st.booleans()) else fact
    elif op in ("recall", "explain"):
        request = {"query": "zqxbob Lisa Tom twice alice", "k": 50, "history": "all",
                   "namespace": ns, "explain": draw(st.booleans())}
        if op == "explain":
            request = {**request, "id": draw(IDS)}
            del request["explain"]
    elif op == "forget":
        scope = draw(st.sampled_from([{"ids": draw(st.lists(IDS, max_size=4))},
                                      {"namespace": draw(NAMESPACES)}, {"subject": "city"},
                                      {"entity": "Lisa"}, {"metadata": {"kind": "city"}}]))
        request = {"scope": scope, "within": ns, "includeChain": draw(st.booleans()), **flags}
    elif op in ("probe", "related"):
        request = {"entity": draw(st.sampled_from(["Lisa", "Tom"])), "namespace": ns}
    elif op == "reason":
        request = {"entities": ["Lisa"], "namespace": ns}
    elif op == "list":
        request = {"namespace": ns, "limit": 1000}
    elif op == "listNamespaces":
        request = {"prefix": ns, "maxDepth": draw(st.one_of(st.none(), st.integers(1, 8)))}
    elif op == "contradict":
        request = {"namespace": ns}
    elif op in ("applyForgetting", "consolidate"):
        request = {"namespace": ns, **flags}
    elif op == "feedback":
        request = {"id": draw(IDS), "helpful": draw(st.booleans())}
    elif op == "setConfidence":
        request = {"id": draw(IDS), "confidence": 0.5}
    elif op in ("relate", "unrelate"):
        ends = draw(st.sampled_from([(ALICE_IDS[2], ALICE_IDS[3]), (ALICE_IDS[3], BOB_IDS[2]),
                                     (draw(IDS), draw(IDS))]))
        request = {"fromId": ends[0], "toId": ends[1], "relation": "cites",
                   "namespace": draw(st.sampled_from([None, [], ns]))}
    elif op == "relateMany":
        ends = draw(st.sampled_from([(ALICE_IDS[2], ALICE_IDS[3]), (ALICE_IDS[3], BOB_IDS[2]),
                                     (draw(IDS), draw(IDS))]))
        request = {"links": [{"fromId": ends[0], "toId": ends[1], "relation": "cites"}],
                   "namespace": draw(st.sampled_from([None, [], ns]))}
    elif op == "links":
        request = {"id": draw(IDS), "direction": "both", "namespace": ns}
    elif op in ("compileContext", "explainContext"):
        request = {"query": "zqxbob Lisa Tom twice alice", "budgetTokens": 400,
                   "namespace": ns, "history": "all",
                   "fragments": [{"id": "frag", "text": "a note of the caller's"}]}
        if op == "explainContext":
            request["id"] = draw(st.sampled_from([*BOB_IDS, *ALICE_IDS, "frag", "nope"]))
    elif op in ("saveWorkingContext", "loadWorkingContext"):
        request = {"session": draw(st.sampled_from(["bobs-session", "s1"])), "namespace": ns}
        if op == "saveWorkingContext":
            request["state"] = {"goal": "alice plans"}
    elif op == "listWorkingContexts":
        request = {"namespace": ns}
    elif op == "capabilities":
        request = {}
    elif op == "why":
        request = {"query": draw(st.sampled_from([*BOB_IDS[:2], *ALICE_IDS[:2],
                                                   "zqxbob Lisa alice"])),
                   "namespace": ns}
    else:
        request = {"id": draw(IDS)}
    if ns is None and draw(st.booleans()):  # also left out, not only null
        for key in ("namespace", "within", "prefix"):
            request.pop(key, None)
    return op, request


def test_no_request_through_a_scope_reaches_anything_outside_it(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s", sync="none")
    memory = Memory(store, CONFIG)
    fill(memory)
    before = bobs(memory)
    alice = Scope(ALICE)
    answered = []

    @settings(max_examples=300, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(requests())
    # Each op answers at least once whatever the draws (a forget drawn early removes
    # Alice's facts): the draws are what probe the scope.
    @example(("explain", {"query": "Lisa lives", "id": ALICE_IDS[1]}))
    @example(("relate", {"fromId": ALICE_IDS[2], "toId": ALICE_IDS[3], "relation": "x"}))
    @example(("unrelate", {"fromId": ALICE_IDS[2], "toId": ALICE_IDS[3], "relation": "x"}))
    @example(("relateMany", {"links": [{"fromId": ALICE_IDS[2], "toId": ALICE_IDS[3],
                                        "relation": "y"}]}))
    @example(("links", {"id": ALICE_IDS[2], "direction": "both"}))
    @example(("why", {"query": ALICE_IDS[2]}))
    @example(("feedback", {"id": ALICE_IDS[2], "helpful": True}))
    @example(("contradict", {}))
    @example(("probe", {"entity": "Lisa"}))
    @example(("get", {"id": ALICE_IDS[2]}))
    @example(("history", {"id": ALICE_IDS[1]}))
    @example(("list", {}))
    @example(("listNamespaces", {}))
    @example(("capabilities", {}))
    @example(("related", {"entity": "Lisa"}))
    @example(("entityProfile", {"name": "Lisa"}))
    @example(("rememberConversation", {"messages": [{"role": "user", "content": "hi"}],
                                       "session": "alice-chat"}))
    @example(("reason", {"entities": ["Lisa"]}))
    @example(("recall", {"query": "Lisa"}))
    @example(("remember", {"text": "alice remembers this"}))
    @example(("forget", {"scope": {"ids": [ALICE_IDS[4]]}, "dryRun": True}))
    @example(("applyForgetting", {"dryRun": True}))
    @example(("consolidate", {"dryRun": True}))
    @example(("setConfidence", {"id": ALICE_IDS[2], "confidence": 0.5}))
    @example(("compileContext", {"query": "Lisa", "budgetTokens": 300}))
    @example(("explainContext", {"query": "Lisa", "budgetTokens": 300, "id": ALICE_IDS[1]}))
    @example(("saveWorkingContext", {"session": "s1", "state": {"goal": "g"}}))
    @example(("loadWorkingContext", {"session": "s1"}))
    @example(("listWorkingContexts", {}))
    def run(call: tuple[str, dict[str, Any]]) -> None:
        op, request = call
        try:
            response = alice.call(memory, op, request)
        except HolomemError as exc:
            assert exc.status < 500, (op, request, exc)  # a caller error, never a fault
            return
        if op == "why":  # the query is echoed as the caller sent it (a Bob id, maybe)
            response = {**response, "query": None}
        text = msgspec.json.encode(response).decode()
        assert "zqxbob" not in text and "bobfact" not in text, (op, request, text)
        answered.append(op)


    try:
        run()
        assert bobs(memory) == before  # nothing of Bob's changed, whatever Alice sent
        assert set(answered) == HANDLED  # and every op did answer some of it
    finally:
        store.close()


def test_max_depth_counts_from_the_scopes_own_root(tmp_path: Path) -> None:
    from holomem import Memory, Store
    from holomem.api.doors.scoping import Scope

    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store)
        for ns in (["users", "alice", "notes", "a"], ["users", "alice", "todo"],
                   ["users", "bob", "notes"]):
            memory.remember(text="x", namespace=ns)
        scope = Scope(["users", "alice"])
        answer = scope.call(memory, "listNamespaces", {"maxDepth": 1})
        assert [n["namespace"] for n in answer["namespaces"]] == [["notes"], ["todo"]]


def test_the_context_ops_are_confined_to_the_scope(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, CONFIG)
        fill(memory)
        alice = Scope(ALICE)
        # Absent namespace: the scope itself; a namespace: under it.
        saved = alice.call(memory, "saveWorkingContext",
                           {"session": "plan", "state": {"goal": "tea"}})["workingContext"]
        assert saved["namespace"] == []
        assert memory.load_working_context(ALICE, "plan").state == {"goal": "tea"}
        alice.call(memory, "saveWorkingContext",
                   {"session": "deep", "state": [1], "namespace": ["deeper"]})
        assert memory.load_working_context([*ALICE, "deeper"], "deep").state == [1]
        loaded = alice.call(memory, "loadWorkingContext", {"session": "plan"})
        assert loaded["workingContext"]["state"] == {"goal": "tea"}
        listed = alice.call(memory, "listWorkingContexts", {"namespace": ["deeper"]})
        assert listed["namespace"] == ["deeper"]
        assert [x["session"] for x in listed["sessions"]] == ["deep"]
        # Bob's session is out of reach, and the error names the namespace as Alice does.
        with pytest.raises(NotFoundError) as missing:
            alice.call(memory, "loadWorkingContext", {"session": "bobs-session"})
        assert "in namespace []" in missing.value.message
        assert "users" not in missing.value.message
        with pytest.raises(NotFoundError):
            alice.call(memory, "loadWorkingContext",
                       {"session": "bobs-session", "namespace": ["..", "bob"]})
        # compileContext: only Alice's facts are candidates.
        compiled = alice.call(memory, "compileContext",
                              {"query": "Lisa lives Tom works", "budgetTokens": 2000,
                               "history": "all"})
        ids = {d["id"] for d in compiled["decisions"] if d["source"] == "fact"}
        assert ids and ids <= set(ALICE_IDS) | {f for f in ids if f.startswith("wc-")}
        assert "zqxbob" not in compiled["text"]
        # explainContext of Bob's fact answers as for a fact that does not exist.
        request = {"query": "Lisa", "budgetTokens": 2000}
        with pytest.raises(NotFoundError) as outside:
            alice.call(memory, "explainContext", {**request, "id": BOB_IDS[0]})
        with pytest.raises(NotFoundError) as nowhere:
            alice.call(memory, "explainContext", {**request, "id": "no-such-fact"})
        assert outside.value.message == nowhere.value.message.replace(
            "no-such-fact", BOB_IDS[0])
        assert alice.call(memory, "explainContext",
                          {**request, "id": ALICE_IDS[1]})["decision"]["id"] == ALICE_IDS[1]
