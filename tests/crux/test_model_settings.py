"""Model settings and retry/timeout policies: validation, merging, wire encoding, options."""

from __future__ import annotations

import asyncio
import json
import math
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crux
from contracts.decoding import decode_input
from contracts.generation import GenerationInput, request_fingerprint
from contracts.settings import (
    AttemptPolicySpec,
    ModelSettingsSpec,
    ToolPolicySpec,
    merge_attempt_policy,
    merge_settings,
)
from crux._request import CallBuilder
from providers import ChatRequest
from providers._anthropic_wire import encode_request as anthropic_body
from providers._openai_wire import encode_request as openai_body
from vocabulary.messages import Message
from workflows import _options


def test_model_settings_accepts_valid_values_and_records_them_without_content() -> None:
    spec = crux.model_settings(
        temperature=0.3, top_p=0.9, stop=["END", "###"], seed=7, extra={"openai": {"user": "u"}}
    )
    record = spec.record("openai:gpt-4o")
    assert (record.temperature, record.top_p, record.seed) == (0.3, 0.9, 7)
    assert record.stop_count == 2
    assert record.extra_fields == ("user",)
    assert record.ignored == ()
    assert "END" not in record.model_dump_json()
    anthropic = spec.record("anthropic:claude-sonnet-4-5")
    assert anthropic.ignored == ("seed",)
    assert anthropic.extra_fields == ()


@pytest.mark.parametrize(
    "fields",
    [
        {"temperature": -0.1},
        {"temperature": 2.5},
        {"temperature": math.nan},
        {"temperature": math.inf},
        {"temperature": True},
        {"top_p": 0},
        {"top_p": 1.5},
        {"stop": ["a", "b", "c", "d", "e"]},
        {"stop": [""]},
        {"stop": ["x" * 129]},
        {"stop": "END"},
        {"seed": -1},
        {"seed": 2**63},
        {"seed": 1.5},
        {"extra": {"openai": {"model": "other"}}},
        {"extra": {"OpenAI": {"a": 1}}},
        {"extra": {"openai": {"blob": "x" * 5000}}},
        {"extra": {"openai": {"f": math.nan}}},
        {"extra": {"openai": 3}},
        {"unknown": 1},
    ],
)
def test_invalid_settings_are_refused_typed_at_the_facade(fields: dict[str, Any]) -> None:
    with pytest.raises(crux.ConfigurationError) as raised:
        crux.prompt(id="p", settings=fields)
    # Content-free: a caller's value never appears in the message.
    assert "5000" not in str(raised.value) and "xxxx" not in str(raised.value)


def test_anthropic_refuses_temperatures_above_one() -> None:
    with pytest.raises(crux.ConfigurationError):
        CallBuilder("offline:echo").build(
            "hi", {"model": "anthropic:claude-sonnet-4-5", "settings": {"temperature": 1.5}}
        )
    with pytest.raises(crux.ConfigurationError):
        decode_input(
            {"generation_id": "g", "model": "anthropic:x", "settings": {"temperature": 1.5}},
            GenerationInput,
            what="generation input",
        )
    GenerationInput(generation_id="g", model="openai:gpt-4o", settings={"temperature": 1.5})  # pyright: ignore[reportArgumentType]


def test_settings_merge_field_by_field_with_later_layers_winning() -> None:
    prompt_layer = ModelSettingsSpec(temperature=0.2, stop=("A",), extra={"openai": {"a": 1}})
    agent_layer = ModelSettingsSpec(top_p=0.5, extra={"openai": {"b": 2}})
    call_layer = ModelSettingsSpec(temperature=0.9, extra={"openai": {"a": 3}})
    merged = merge_settings(prompt_layer, agent_layer, call_layer)
    assert merged == ModelSettingsSpec(
        temperature=0.9, top_p=0.5, stop=("A",), extra={"openai": {"a": 3, "b": 2}}
    )
    assert merge_settings(None, None) is None


def test_call_settings_merge_over_prompt_settings_into_the_input() -> None:
    prompt = crux.prompt(id="p", settings={"temperature": 0.1, "seed": 4})
    built = CallBuilder("openai:gpt-4o").build(
        prompt, {"input": "hi", "settings": {"temperature": 0.7}}
    )
    assert built.request.settings == ModelSettingsSpec(temperature=0.7, seed=4)
    payload = built.request.start_payload()
    assert payload["settings"] == {
        "temperature": 0.7,
        "top_p": None,
        "stop": None,
        "seed": 4,
        "extra": None,
    }
    plain = CallBuilder("offline:echo").build("hi", {}).request
    assert "settings" not in plain.start_payload()
    assert "attempt_policy" not in plain.start_payload()
    assert "tool_policies" not in plain.start_payload()


def test_fingerprint_without_settings_is_unchanged_by_the_new_fields() -> None:
    request = GenerationInput(generation_id="g")
    dumped = request.model_dump(mode="json")
    assert "settings" in dumped
    with_settings = request.model_copy(update={"settings": ModelSettingsSpec(seed=1)})
    assert request_fingerprint(request, []) != request_fingerprint(with_settings, [])
    # Run policies are not what is asked for.
    with_policy = request.model_copy(update={"attempt_policy": AttemptPolicySpec(max_attempts=2)})
    assert request_fingerprint(request, []) == request_fingerprint(with_policy, [])


def test_attempt_policies_merge_only_explicit_fields() -> None:
    runtime = AttemptPolicySpec(max_attempts=3, timeout_seconds=20)
    call = AttemptPolicySpec(max_attempts=7)
    merged = merge_attempt_policy(runtime, None, call)
    assert merged == AttemptPolicySpec(max_attempts=7, timeout_seconds=20)
    assert merge_attempt_policy(None, None) is None
    with pytest.raises(crux.ConfigurationError):
        crux.attempt_policy(max_attempts=0)
    with pytest.raises(crux.ConfigurationError):
        crux.attempt_policy(initial_interval_seconds=10, max_interval_seconds=1)


def test_activity_options_keep_todays_values_without_a_policy() -> None:
    assert _options.invoke_model(None) is _options.INVOKE_MODEL
    assert _options.run_tool(None) is _options.RUN_TOOL
    config = _options.invoke_model(AttemptPolicySpec(max_attempts=2, initial_interval_seconds=0.1))
    retry = config.get("retry_policy")
    assert retry is not None and retry.maximum_attempts == 2
    assert retry.initial_interval == timedelta(milliseconds=100)
    assert config.get("heartbeat_timeout") == timedelta(seconds=30)
    tool = _options.run_tool(ToolPolicySpec(timeout_seconds=2, max_attempts=9))
    assert tool.get("start_to_close_timeout") == timedelta(seconds=32)
    tool_retry = tool.get("retry_policy")
    assert tool_retry is not None and tool_retry.maximum_attempts == 9


def _chat(**fields: Any) -> ChatRequest:
    return ChatRequest(model="m", messages=[Message(id="u", role="user", content="hi")], **fields)


def test_wire_adapters_send_settings_and_never_let_extras_replace_a_field() -> None:
    request = _chat(
        temperature=0.4, top_p=0.8, stop=["END"], seed=9, extra={"logprobs": True, "n": 1}
    )
    body = openai_body(request)
    assert (body["temperature"], body["top_p"], body["stop"], body["seed"]) == (
        0.4,
        0.8,
        ["END"],
        9,
    )
    assert body["logprobs"] is True
    anthropic = anthropic_body(request, default_max_tokens=100)
    assert anthropic["stop_sequences"] == ["END"]
    assert "seed" not in anthropic and "stop" not in anthropic
    assert anthropic["top_p"] == 0.8
    # A field the adapter set stays (the spec refuses such extras; the adapter holds anyway).
    sneaky = openai_body(_chat(extra={"model": "other"}))
    assert sneaky["model"] == "m"
    assert "temperature" not in openai_body(_chat())


_NUMBERS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
)
_SETTINGS = st.fixed_dictionaries(
    {},
    optional={
        "temperature": _NUMBERS,
        "top_p": _NUMBERS,
        "seed": _NUMBERS,
        "stop": st.one_of(
            st.none(), st.text(max_size=4), st.lists(st.text(max_size=140), max_size=6)
        ),
        "extra": st.one_of(
            st.none(),
            st.dictionaries(
                st.text(max_size=6),
                st.one_of(
                    st.integers(),
                    st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text())),
                ),
                max_size=3,
            ),
        ),
        "bogus": st.integers(),
    },
)


def _facade_outcome(fields: dict[str, Any]) -> ModelSettingsSpec | None:
    try:
        return crux.prompt(id="p", settings=fields).settings
    except crux.ConfigurationError:
        return None


@settings(max_examples=300, deadline=None)
@given(fields=_SETTINGS)
def test_facade_and_workflow_validation_agree_and_fail_typed(fields: dict[str, Any]) -> None:
    """Whatever a caller sends, both gates refuse it typed or accept the same settings."""
    accepted = _facade_outcome(fields)
    try:
        payload = json.loads(
            json.dumps({"generation_id": "g", "model": "openai:gpt-4o", "settings": fields})
        )
    except ValueError:
        return  # NaN in JSON: a client cannot send it as JSON either
    try:
        decoded = decode_input(payload, GenerationInput, what="generation input")
    except crux.ConfigurationError:
        assert accepted is None or fields != payload["settings"]
        return
    assert decoded.settings == accepted


def test_agent_layers_sit_between_the_prompt_or_runtime_and_the_call() -> None:
    prompt = crux.prompt(id="p", settings={"temperature": 0.1, "top_p": 0.5})
    agent = crux.agent(
        id="a",
        prompt=prompt,
        settings=ModelSettingsSpec(temperature=0.4, top_p=0.6, seed=1),
        attempt_policy=AttemptPolicySpec(max_attempts=3),
    )
    runtime_policy = AttemptPolicySpec(max_attempts=2, timeout_seconds=5)
    built = CallBuilder("openai:gpt-4o", attempt_policy=runtime_policy).build(
        agent,
        {"input": "hi", "settings": {"top_p": 0.7}, "attempt_policy": {"timeout_seconds": 9}},
    )
    assert built.request.settings == ModelSettingsSpec(temperature=0.4, top_p=0.7, seed=1)
    assert built.request.attempt_policy == AttemptPolicySpec(max_attempts=3, timeout_seconds=9)


def test_a_sync_handler_past_its_timeout_ends_as_an_error_result() -> None:
    import time

    from activities._tools import _run_handler

    @crux.tool(timeout=0.1)
    def blocking(seconds: float) -> str:
        time.sleep(seconds)
        return "slept"

    text, failed = asyncio.run(_run_handler(blocking, {"seconds": 0.5}, blocking.policy))
    assert (text, failed) == ("error: the tool timed out after 0.1 seconds", True)
    assert asyncio.run(_run_handler(blocking, {"seconds": 0}, blocking.policy)) == ("slept", False)
