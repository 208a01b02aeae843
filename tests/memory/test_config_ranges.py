"""A MemoryConfig is checked whole, every number's range too, the same way on every path.

``config_from_json`` (the CLI's and the server's ``--memory-config``),
``checks.memory_config`` and ``Memory(store, config)`` accept and refuse exactly
the same configurations, and a refusal is an ``InvalidError`` that names the field.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem import InvalidError, Memory, MemoryConfig, Store
from holomem.api.memory import checks
from holomem.api.memory.config import MAX_CONTEXT_WINDOW, MAX_MS, config_from_json

#: (JSON path of a number, the config around it, the valid range as (low, high, low
#: inclusive), the camelCase name an error must mention).
NUMBERS: list[tuple[str, Any, tuple[float, float, bool], str]] = [
    ("halfLifeMs", lambda v: {"recency": {"exponential": {"halfLifeMs": v}}},
     (0, MAX_MS, False), "halfLifeMs"),
    ("expiredForLongerThanMs", lambda v: {"forgetting": {"expiredForLongerThanMs": v}},
     (0, MAX_MS, True), "expiredForLongerThanMs"),
    ("supersededForLongerThanMs", lambda v: {"forgetting": {"supersededForLongerThanMs": v}},
     (0, MAX_MS, True), "supersededForLongerThanMs"),
    ("nearThreshold", lambda v: {"consolidation": {"duplicates": {"nearThreshold": v}}},
     (0.0, 1.0, True), "nearThreshold"),
    ("feedback weight", lambda v: {"feedback": {"weight": v}}, (0.0, 1.0, True), "weight"),
    ("context weight", lambda v: {"context": {"neighbors": {"weight": v}}},
     (0.0, 1.0, True), "weight"),
    ("context window", lambda v: {"context": {"neighbors": {"window": v}}},
     (1, MAX_CONTEXT_WINDOW, True), "window"),
    ("historicalWeight", lambda v: {"historicalWeight": v}, (0.0, 1.0, True),
     "historicalWeight"),
]
INTEGER = {"halfLifeMs", "expiredForLongerThanMs", "supersededForLongerThanMs",
           "context window"}


def _outcomes(data: dict[str, Any], store: Store) -> list[str]:
    """What each path makes of one config: "ok" or the InvalidError's message."""
    out = []
    raw = json.dumps(data)
    for attempt in (lambda: config_from_json(raw), lambda: checks.memory_config(data),
                    lambda: checks.memory_config(_build(data)),
                    lambda: Memory(store, _build(data), persist=True)):
        try:
            attempt()
            out.append("ok")
        except InvalidError as exc:
            out.append(exc.message)
    return out


def _build(data: dict[str, Any]) -> MemoryConfig:
    """The same config as a Struct built in Python (its constructor checks nothing)."""
    from holomem.api.memory import config as t

    def make(cls: type[Any], fields: dict[str, Any], nested: dict[str, type[Any]]) -> Any:
        names = dict(zip(cls.__struct_encode_fields__, cls.__struct_fields__, strict=True))
        kwargs = {}
        for key, value in fields.items():
            kwargs[names[key]] = (make(nested[key], value, NESTED.get(nested[key], {}))
                                  if key in nested else value)
        return cls(**kwargs)

    NESTED: dict[type[Any], dict[str, type[Any]]] = {
        t.MemoryConfig: {"recency": t.RecencyConfig, "forgetting": t.ForgettingConfig,
                         "consolidation": t.ConsolidationConfig,
                         "feedback": t.FeedbackConfig, "context": t.ContextConfig},
        t.RecencyConfig: {"exponential": t.Exponential},
        t.ConsolidationConfig: {"duplicates": t.Duplicates},
        t.ContextConfig: {"neighbors": t.Neighbors},
    }
    fixed = json.loads(json.dumps(data))
    if "consolidation" in fixed:
        fixed["consolidation"].setdefault("duplicates", {})
    out: MemoryConfig = make(t.MemoryConfig, fixed, NESTED[t.MemoryConfig])
    return out


def _inside(value: float, low: float, high: float, low_inclusive: bool) -> bool:
    return (low <= value if low_inclusive else low < value) and value <= high


@pytest.mark.parametrize(("label", "shape", "bounds", "name"), NUMBERS,
                         ids=[n[0] for n in NUMBERS])
def test_every_number_is_checked_at_and_just_past_its_bounds(
        tmp_path: Any, label: str, shape: Any, bounds: tuple[float, float, bool],
        name: str) -> None:
    low, high, low_inclusive = bounds
    step = 1 if label in INTEGER else 1e-9
    with Store.open(tmp_path / "s", sync="none") as store:
        for value in (low, high, low - step, high + step, (low + high) / 2):
            if label in INTEGER:
                value = int(value)
            data = shape(value)
            if "consolidation" in data:
                data["consolidation"].setdefault("duplicates", {})
            want_ok = _inside(value, low, high, low_inclusive)
            outcomes = _outcomes(data, store)
            if want_ok:
                assert outcomes == ["ok"] * 4, (label, value, outcomes)
            else:
                assert "ok" not in outcomes, (label, value, outcomes)
                assert all(name in o for o in outcomes), (label, value, outcomes)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_weights_are_refused(tmp_path: Any, value: float) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        for shape in ({"historicalWeight": value}, {"feedback": {"weight": value}},
                      {"context": {"neighbors": {"weight": value}}}):
            with pytest.raises(InvalidError):
                checks.memory_config(shape)
            with pytest.raises(InvalidError):
                Memory(store, _build(shape), persist=True)


def test_a_negative_half_life_is_refused_before_any_request(tmp_path: Any) -> None:
    """Regression (issue 11, item 4): a negative half-life was accepted at start."""
    with pytest.raises(InvalidError, match="halfLifeMs"):
        config_from_json('{"recency": {"exponential": {"halfLifeMs": -5}}}')
    with Store.open(tmp_path / "s", sync="none") as store, \
            pytest.raises(InvalidError, match="halfLifeMs"):
        Memory(store, _build({"recency": {"exponential": {"halfLifeMs": -5}}}))


#: A valid name of each field that takes one (any other spelling is refused).
NAMES = [("supersession", "latest-by-subject"), ("supersession", "custom:mine"),
         ("forgetting", "expired-ttl"), ("forgetting", "none"), ("recency", "none"),
         ("consolidation", "custom:merge"), ("entityExtractor", "regex"),
         ("embedder", "minilm")]


@pytest.mark.parametrize(("field", "name"), NAMES, ids=[f"{f}={n}" for f, n in NAMES])
def test_a_name_is_valid_only_whole_never_with_a_line_break_after_it(
        tmp_path: Any, field: str, name: str) -> None:
    """Python's ``$`` also matches before a final line break: "expired-ttl\n" passed
    every check, then named no policy (Memory raised KeyError; config_from_json took it
    and forgetting silently selected nothing)."""
    attribute = {"entityExtractor": "entity_extractor"}.get(field, field)
    with Store.open(tmp_path / "s", sync="none") as store:
        for spelled in (name + "\n", name + "\n\n", name + "\r\n", "\n" + name):
            built = MemoryConfig(**{attribute: spelled})
            with pytest.raises(InvalidError, match=field):
                config_from_json(json.dumps({field: spelled}))
            with pytest.raises(InvalidError, match=field):
                checks.memory_config({field: spelled})
            with pytest.raises(InvalidError, match=field):
                checks.memory_config(built)
            with pytest.raises(InvalidError, match=field):
                Memory(store, built, persist=True)


def test_memory_config_refuses_what_is_not_a_config() -> None:
    for value in (None, 3, "none", ["recency"], {"recency": "daily"}, {"colour": 1}):
        with pytest.raises(InvalidError):
            checks.memory_config(value)
    assert checks.memory_config(MemoryConfig()) == MemoryConfig()
    assert checks.memory_config({}) == MemoryConfig()


@settings(max_examples=200, deadline=None)
@given(data=st.fixed_dictionaries({}, optional={
    "historicalWeight": st.floats(-2, 3) | st.integers(-3, 3),
    "feedback": st.fixed_dictionaries({}, optional={"weight": st.floats(-2, 3)}),
    "context": st.fixed_dictionaries({"neighbors": st.fixed_dictionaries({}, optional={
        "weight": st.floats(-2, 3), "window": st.integers(-3, 2 * MAX_CONTEXT_WINDOW)})}),
    "recency": st.fixed_dictionaries({"exponential": st.fixed_dictionaries({
        "halfLifeMs": st.integers(-10, 10) | st.integers(MAX_MS - 2, MAX_MS + 2)})}),
    "forgetting": st.fixed_dictionaries({}, optional={
        "expiredForLongerThanMs": st.integers(-10, 10),
        "supersededForLongerThanMs": st.integers(-10, 10)}),
}))
def test_json_and_python_paths_agree_on_any_config(data: dict[str, Any]) -> None:
    try:
        config_from_json(json.dumps(data))
        from_json = True
    except InvalidError:
        from_json = False
    try:
        checks.memory_config(_build(data))
        from_struct = True
    except InvalidError:
        from_struct = False
    assert from_json == from_struct, data
