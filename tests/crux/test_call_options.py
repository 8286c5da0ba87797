"""The call options are spelled once (`crux.options`) and every public call takes them.

`generate`, `stream`, `preview` and `parallel` declare their options as `**options:
Unpack[...]` of the typed dicts, so there is no second spelling to drift. What these tests
pin is what the typed dicts promise a caller: which method takes which option, that a left
out option behaves as its documented default, and that an unknown keyword is refused at run
time as a spelled-out signature would refuse it.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest

import crux
from contracts.generation import DEFAULT_MAX_TOOL_ROUNDS, DEFAULT_STORAGE_WAIT_SECONDS
from crux._request import CallBuilder, check_keywords
from crux.options import CallOptions, PlanOptions, PreviewOptions, RunOptions
from crux.runtime import Runtime

# What each option means when it is left out, as the typed dicts document it.
DOCUMENTED_DEFAULTS: dict[str, Any] = {
    "input": None,
    "thread": None,
    "model": None,
    "messages": None,
    "generation_id": None,
    "history": None,
    "input_budget": None,
    "max_output_tokens": None,
    "owner": "main",
    "tool_choice": None,
    "max_tool_rounds": DEFAULT_MAX_TOOL_ROUNDS,
    "on_revision_moved": "replan",
    "storage_wait_seconds": DEFAULT_STORAGE_WAIT_SECONDS,
    "settings": None,
    "attempt_policy": None,
    "approval_timeout_seconds": None,
    "timeout": None,
    "output": None,
    "cache": None,
    "safety": None,
    "constraints": None,
    "on_success": None,
    "time_budget_seconds": None,
}


def _options_type(method: Any) -> object:
    hints = typing.get_type_hints(method)
    unpacked = hints["options"]
    assert typing.get_origin(unpacked) is typing.Unpack, unpacked
    return typing.get_args(unpacked)[0]


@pytest.mark.parametrize(
    ("method", "options"),
    [
        (Runtime.generate, CallOptions),
        (Runtime.stream, CallOptions),
        (Runtime.preview, PreviewOptions),
        (Runtime.parallel, RunOptions),
    ],
)
def test_each_call_takes_its_options_as_one_typed_dict(method: Any, options: type) -> None:
    assert _options_type(method) is options
    spelled = set(typing.get_type_hints(method)) - {"options", "return"}
    # Besides the options, only the target (and parallel's own member arguments).
    assert spelled <= {"prompt", "id", "agents", "context", "threads"}
    assert not spelled & set(CallOptions.__optional_keys__)


def test_the_option_sets_nest_as_documented() -> None:
    plan = PlanOptions.__optional_keys__
    preview = PreviewOptions.__optional_keys__
    run = RunOptions.__optional_keys__
    call = CallOptions.__optional_keys__
    assert plan < preview < call and plan < run < call
    assert call == preview | run | {"generation_id", "approval_timeout_seconds"}
    assert set(call) == set(DOCUMENTED_DEFAULTS)
    # Every option is optional: leaving it out is always allowed.
    for options in (PlanOptions, PreviewOptions, RunOptions, CallOptions):
        assert not options.__required_keys__


def test_an_option_left_out_behaves_as_its_documented_default() -> None:
    builder = CallBuilder("offline:echo")
    prompt = "a plain string prompt renders without input"
    omitted = builder.build(prompt, {"generation_id": "g"})
    explicit: dict[str, Any] = {**DOCUMENTED_DEFAULTS, "generation_id": "g"}
    spelled = builder.build(prompt, typing.cast(CallOptions, explicit))
    assert omitted.request == spelled.request
    assert omitted.fingerprint() == spelled.fingerprint()
    request = omitted.request
    assert (request.owner, request.max_tool_rounds) == ("main", DEFAULT_MAX_TOOL_ROUNDS)
    assert request.on_revision_moved == "replan"
    assert request.storage_wait_seconds == DEFAULT_STORAGE_WAIT_SECONDS


def test_a_given_option_reaches_the_request() -> None:
    built = CallBuilder("offline:echo").build(
        "hi", {"owner": "editor", "max_tool_rounds": 2, "on_revision_moved": "fail"}
    )
    assert (built.request.owner, built.request.max_tool_rounds) == ("editor", 2)
    assert built.request.on_revision_moved == "fail"


def test_the_gate_options_reach_the_request() -> None:
    built = CallBuilder("offline:echo").build(
        "hi",
        {
            "safety": [crux.safety.pii()],
            "constraints": [crux.constraints.require("ok")],
            "on_success": ["notify"],
            "time_budget_seconds": 12.5,
        },
    )
    request = built.request
    assert request.safety is not None and [p.name for p in request.safety.input] == ["pii"]
    assert request.constraints is not None and len(request.constraints.checks) == 1
    assert (request.on_success, request.time_budget_seconds) == (["notify"], 12.5)


def test_an_unknown_keyword_is_refused_like_a_type_error() -> None:
    accepted = PreviewOptions.__optional_keys__
    check_keywords({"model": "offline:echo"}, accepted, "Runtime.preview")
    with pytest.raises(TypeError, match="unexpected keyword argument 'generation_id'"):
        check_keywords({"generation_id": "g"}, accepted, "Runtime.preview")
    with pytest.raises(crux.ConfigurationError) as raised:
        check_keywords({"secret words here": 1}, accepted, "Runtime.preview")
    assert "secret" not in str(raised.value)


def test_the_typed_dicts_are_public() -> None:
    for name in ("CallOptions", "PlanOptions", "PreviewOptions", "RunOptions"):
        assert name in crux.__all__
    assert crux.CallOptions is CallOptions
