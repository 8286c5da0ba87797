"""Output specs from caller values, their wire shapes, and validation of staged answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from contracts.generation import GenerationInput
from contracts.output import OutputSpec, output_spec_from
from providers.structured import (
    anthropic_forced_tool,
    check_schema,
    openai_response_format,
    validate_answer,
)
from vocabulary.errors import ConfigurationError


class Invoice(BaseModel):
    number: str
    total: float
    lines: list[int]


SCHEMA: dict[str, Any] = {
    "title": "Point",
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
    "required": ["x", "y"],
    "additionalProperties": False,
}


def test_a_pydantic_model_becomes_a_named_spec() -> None:
    spec = output_spec_from(Invoice)
    assert spec.name == "Invoice"
    assert spec.json_schema["required"] == ["number", "total", "lines"]
    assert spec.max_retries == 2 and spec.strict


def test_a_mapping_is_named_by_its_title_and_overrides_apply() -> None:
    spec = output_spec_from(SCHEMA, max_retries=0, strict=False)
    assert (spec.name, spec.max_retries, spec.strict) == ("Point", 0, False)


def test_the_spec_travels_in_the_generation_input_and_only_when_set() -> None:
    plain = GenerationInput(generation_id="g1")
    assert "output" not in plain.start_payload()
    carried = GenerationInput(generation_id="g1", output=output_spec_from(SCHEMA))
    payload = carried.start_payload()
    assert payload["output"]["name"] == "Point"
    assert GenerationInput.model_validate(json.loads(json.dumps(payload))) == carried


def test_native_wire_shapes() -> None:
    spec = output_spec_from(SCHEMA)
    assert openai_response_format(spec) == {
        "type": "json_schema",
        "json_schema": {"name": "Point", "schema": SCHEMA, "strict": True},
    }
    tool, choice = anthropic_forced_tool(spec)
    assert tool["name"] == "Point" and tool["input_schema"] == SCHEMA
    assert choice == {"type": "tool", "name": "Point"}


def test_validation_reports_paths_and_kinds_never_values() -> None:
    spec = output_spec_from(SCHEMA)
    assert validate_answer('{"x": 1, "y": 2}', spec) == ()
    failures = validate_answer('{"x": "CANARY-7731", "CANARY-KEY": 1}', spec)
    assert ("$.x", "type") in failures
    assert ("$", "required") in failures
    assert ("$", "additionalProperties") in failures
    assert "CANARY" not in repr(failures)
    assert validate_answer("CANARY not json", spec) == (("$", "json"),)


def test_invented_keys_are_not_echoed_in_paths() -> None:
    spec = output_spec_from(
        {"type": "object", "additionalProperties": {"type": "integer"}}, max_retries=1
    )
    failures = validate_answer('{"CANARY": "text"}', spec)
    assert failures == (("$.<key>", "type"),)


def test_a_schema_breaking_the_metaschema_is_refused_typed() -> None:
    spec = OutputSpec(name="bad", json_schema={"type": "object", "minProperties": "many"})
    with pytest.raises(ConfigurationError):
        check_schema(spec)


nonsense = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.binary(max_size=10),
    st.lists(st.integers(), max_size=3),
    st.sampled_from([int, str, object, dict, list]),
    st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=4),
    st.builds(lambda t: {"type": t}, st.text(max_size=8).filter(lambda t: t != "object")),
    st.builds(lambda p: {"type": "object", "properties": p}, st.integers() | st.text()),
    st.builds(
        lambda r: {"type": "object", "required": r},
        st.integers() | st.lists(st.integers(), min_size=1),
    ),
    st.builds(lambda n: {"type": "object", "x": float(n)}, st.sampled_from(["nan", "inf"])),
)


@settings(max_examples=200, deadline=None)
@given(nonsense)
def test_nonsense_output_values_are_refused_typed(value: object) -> None:
    with pytest.raises(ConfigurationError) as caught:
        output_spec_from(value)
    # The message never quotes the value.
    if isinstance(value, str) and len(value) > 3:
        assert value not in str(caught.value)


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=-5, max_value=100))
def test_retry_counts_out_of_range_are_refused_typed(retries: int) -> None:
    if 0 <= retries <= 8:
        assert output_spec_from(SCHEMA, max_retries=retries).max_retries == retries
    else:
        with pytest.raises(ConfigurationError):
            output_spec_from(SCHEMA, max_retries=retries)


def test_the_loopback_servers_refuse_malformed_structured_output_bodies() -> None:
    from providers.loopback._validate import anthropic_problem, openai_problem

    messages = [{"role": "user", "content": "hi"}]
    good = {"type": "json_schema", "json_schema": {"name": "P", "schema": SCHEMA}}
    assert openai_problem({"model": "m", "messages": messages, "response_format": good}) is None
    nameless = {"type": "json_schema", "json_schema": {"schema": SCHEMA}}
    assert openai_problem({"model": "m", "messages": messages, "response_format": nameless})
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 10,
        "messages": messages,
        "tools": [{"name": "P", "input_schema": SCHEMA}],
        "tool_choice": {"type": "tool", "name": "P"},
    }
    assert anthropic_problem(body) is None
    assert anthropic_problem({**body, "tool_choice": {"type": "tool", "name": "Q"}})
