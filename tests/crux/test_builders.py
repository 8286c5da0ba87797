"""The public builders validate at definition: typed, content-free errors only."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import crux
import planner
from crux.errors import ConfigurationError, RequestCompositionError
from crux.models import HistorySpec
from crux.prompts import history, prompt, summarize
from crux.tools import tool

SECRET = "do-not-echo-this-value"


class _Handle:
    """A duck-typed Thread handle (an id and `append`)."""

    def __init__(self, id: str) -> None:
        self.id = id

    async def append(self) -> None: ...


@pytest.mark.parametrize(
    "build",
    [
        lambda: crux.context(id="", content="x"),
        lambda: crux.context(id=" padded", content="x"),
        lambda: crux.context(id="a\x00b", content="x"),
        lambda: crux.context(id="x" * 257, content="x"),
        lambda: crux.context(id=7, content="x"),  # type: ignore[arg-type]
        lambda: crux.context(id="ok", content=None),  # type: ignore[arg-type]
        lambda: crux.context(id="ok", content="x", placement="footer"),  # type: ignore[arg-type]
        lambda: crux.context(id="ok", content="x", priority=1.5),  # type: ignore[arg-type]
        lambda: crux.context(id="ok", content="x", contract="yes"),  # type: ignore[arg-type]
        lambda: crux.prefer("not a contributor", crux.context(id="b", content="b")),  # type: ignore[arg-type]
        lambda: crux.droppable(None),  # type: ignore[arg-type]
        lambda: crux.offloadable(crux.context(id="a", content="a"), above_tokens=0),
        lambda: crux.summarizable(crux.context(id="a", content="a"), id=""),
        lambda: prompt(id=""),
        lambda: prompt(id="p", use="history"),
        lambda: prompt(id="p", system=3),  # type: ignore[arg-type]
        lambda: prompt(id="p", input_budget={"optimize_at": 500, "max": 100}),
        lambda: prompt(id="p", input_budget={"max": 0}),
        lambda: prompt(id="p", input_budget={"max": -5}),
        lambda: prompt(id="p", input_budget={"max": "big"}),  # type: ignore[dict-item]
        lambda: prompt(id="p", input_budget=[("max", 5)]),  # type: ignore[arg-type]
        lambda: prompt(id="p", messages="hello"),  # type: ignore[arg-type]
        lambda: prompt(id="p", messages=[{"role": "robot", "content": "x"}]),
        lambda: prompt(id="p", messages=[3]),  # type: ignore[list-item]
        lambda: history(recent={"messages": -3}),
        lambda: history(recent={}),
        lambda: history(recent={"turns": 3}),
        lambda: history(on_miss="maybe"),
        lambda: history(on_miss=["inline"]),  # type: ignore[arg-type]
        lambda: history(provider_native="no"),  # type: ignore[arg-type]
        lambda: history(summary="openai:gpt-4o"),  # type: ignore[arg-type]
        lambda: history(summary={"strategy": {"kind": "adaptive"}}),
        lambda: history(summary={"model": "gpt-4o"}),
        lambda: history.recent(0),
        lambda: history.recent(1.5),  # type: ignore[arg-type]
        lambda: history.recent(messages=3, limit=3),
        lambda: history.recent(tokens=-1),
        lambda: tool("bad name", lambda a: a),
        lambda: tool("ok", "not callable"),  # type: ignore[arg-type]
        lambda: tool("ok", lambda a: a, parameters={"type": "array"}),
        lambda: tool("ok", lambda a: a, parameters={"type": "object", "x": object()}),
        lambda: tool("ok", lambda a: a, parameters=["type"]),  # type: ignore[arg-type]
        lambda: tool("ok", lambda a: a, description=5),  # type: ignore[arg-type]
        lambda: crux.thread(id="t", storage="postgresql://localhost/db"),  # type: ignore[arg-type]
        lambda: planner.context("", tokens=1),
        lambda: planner.context("a", tokens=-1),
        lambda: planner.context("a", tokens=1, placement="footer"),  # type: ignore[arg-type]
    ],
)
def test_invalid_builder_arguments_raise_configuration_error(build: Callable[[], object]) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build()
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, ValueError)
    assert not isinstance(raised.value, ValidationError)


def test_configuration_errors_do_not_echo_the_value() -> None:
    with pytest.raises(ConfigurationError) as raised:
        crux.context(id=f" {SECRET}", content=SECRET)
    assert SECRET not in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        prompt(id="p", messages=[{"role": "robot", "content": SECRET}])
    assert SECRET not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_two_history_projections_are_invalid_composition() -> None:
    with pytest.raises(RequestCompositionError) as raised:
        prompt(id="p", use=[history.recent(), history()])
    assert raised.value.code == "INVALID_COMPOSITION"
    items: Any = raised.value.diagnostics["items"]
    assert items[0]["code"] == "INVALID_HISTORY_COMPOSITION"


def test_two_threads_are_invalid_composition() -> None:
    with pytest.raises(RequestCompositionError) as raised:
        prompt(id="p", use=[_Handle("thread-a"), _Handle("thread-b")])
    assert raised.value.code == "INVALID_COMPOSITION"
    assert "thread-a" in str(raised.value) and "thread-b" in str(raised.value)


def test_recent_without_caps_has_the_seed_default() -> None:
    assert history.recent() == HistorySpec(kind="recent", messages=20)
    assert history.recent(tokens=800) == HistorySpec(kind="recent", tokens=800)


def test_managed_history_defaults_and_provider_native() -> None:
    managed = history()
    assert managed.kind == "managed" and managed.on_miss == "inline"
    assert managed.strategy == "adaptive" and managed.provider_native is True
    portable = history(
        summary={"strategy": summarize.hierarchical()}, provider_native=False, on_miss="fail"
    )
    assert portable.provider_native is False and portable.strategy == "hierarchical"
    assert HistorySpec.model_validate_json(portable.model_dump_json()) == portable


def test_prompt_level_messages_are_validated_and_frozen() -> None:
    defined = prompt(
        id="p", messages=[{"role": "user", "content": "q"}, crux.Message(role="assistant")]
    )
    assert isinstance(defined.messages, tuple) and len(defined.messages) == 2
    assert prompt(id="p").messages is None
    assert prompt(id="p", messages=[]).messages == ()


def test_input_budget_is_checked_at_definition() -> None:
    defined = prompt(id="p", input_budget={"optimize_at": 100, "max": 200})
    assert defined.input_budget is not None and defined.input_budget.max == 200


# Any value a caller could pass, including structures and text PostgreSQL cannot store.
_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    # Boundaries of PostgreSQL's integer and bigint, where wire caps stop.
    | st.sampled_from([0, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63])
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.sampled_from(
        ["", " ", "system", "message", "inline", "fail", "adaptive", "openai:x", "\x00", "\ud800"]
    ),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["messages", "tokens", "max", "optimize_at", "model", "strategy", "x"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=6,
)


def _call(builder: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    # Anything but the two typed errors propagates and fails the test.
    with contextlib.suppress(ConfigurationError, RequestCompositionError):
        builder(*args, **kwargs)


@settings(
    max_examples=int(os.environ.get("CRUX_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(a=_values, b=_values, c=_values, d=_values)
def test_fuzzed_builders_raise_only_typed_errors(a: Any, b: Any, c: Any, d: Any) -> None:
    _call(crux.context, a, b, placement=c, priority=d)
    _call(crux.context, "id", "text", contract=a)
    _call(history, recent=a, summary=b, on_miss=c, provider_native=d)
    _call(history.recent, a, tokens=b)
    _call(history.recent, messages=c, tokens=d)
    _call(prompt, id=a, system=b, input_budget=c, messages=d)
    _call(prompt, id="p", use=a)
    _call(prompt, id="p", use=[a, b])
    _call(tool, a, lambda arguments: arguments, description=b, parameters=c)
    _call(planner.context, a, tokens=b, placement=c, priority=d)
    source = crux.context(id="s", content="s")
    _call(crux.prefer, source, a)
    _call(crux.summarizable, source, a, id=b)
    _call(crux.offloadable, source, above_tokens=a)
    _call(crux.droppable, a)
