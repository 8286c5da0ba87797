"""Tool approval at the facade and on the wire: flags, reason codes, inputs, fingerprints."""

from __future__ import annotations

import json
from typing import Any

import pytest

import crux
from contracts.approvals import check_reason_code, denial_text
from contracts.generation import GenerationInput, request_fingerprint
from crux._parallel import build_members
from crux._request import CallOptions
from workflows._decode import decode_input


def _noop(arguments: dict[str, Any]) -> str:
    return "ok"


def test_requires_approval_is_kept_by_every_form_of_tool() -> None:
    assert crux.tool("pay", _noop, requires_approval=True).requires_approval
    assert not crux.tool("pay", _noop).requires_approval

    @crux.tool(requires_approval=True, timeout=5)
    def refund(order: str) -> str:
        """Refund an order."""
        return order

    assert refund.requires_approval
    assert refund.policy is not None and refund.policy.timeout_seconds == 5
    assert refund.name == "refund"
    with pytest.raises(crux.ConfigurationError):
        crux.tool("pay", _noop, requires_approval="yes")  # pyright: ignore[reportArgumentType]


def test_the_call_builder_names_the_tools_that_require_approval_and_the_timeout() -> None:
    pay = crux.tool("pay", _noop, requires_approval=True)
    look = crux.tool("look", _noop)
    prompt = crux.prompt(id="p", use=[pay, look])
    built = CallOptions(prompt=prompt, input="hi").build("offline:echo")
    assert built.request.approval_tools == ["pay"]
    assert built.request.approval_timeout_seconds is None
    by_runtime = CallOptions(prompt=prompt, input="hi").build(
        "offline:echo", default_approval_timeout_seconds=600
    )
    assert by_runtime.request.approval_timeout_seconds == 600
    by_call = CallOptions(prompt=prompt, input="hi", approval_timeout_seconds=30).build(
        "offline:echo", default_approval_timeout_seconds=600
    )
    assert by_call.request.approval_timeout_seconds == 30
    assert by_call.request.start_payload()["approval_tools"] == ["pay"]
    with pytest.raises(crux.ConfigurationError):
        CallOptions(prompt=prompt, input="hi", approval_timeout_seconds=0).build("offline:echo")


def test_inputs_without_approvals_are_unchanged_on_the_wire_and_in_fingerprints() -> None:
    plain = GenerationInput(generation_id="g", tools=["pay"])
    assert "approval_tools" not in plain.start_payload()
    assert "approval_timeout_seconds" not in plain.start_payload()
    # The fingerprint of a request without approvals is what it was before they existed.
    fingerprint = request_fingerprint(plain, ["hello"])
    assert fingerprint == request_fingerprint(
        GenerationInput(generation_id="g", tools=["pay"]), ["hello"]
    )
    approving = plain.model_copy(update={"approval_tools": ["pay"]})
    assert request_fingerprint(approving, ["hello"]) != fingerprint
    timed = approving.model_copy(update={"approval_timeout_seconds": 5})
    # How long to wait is a run policy, not part of what is asked for.
    assert request_fingerprint(timed, ["hello"]) == request_fingerprint(approving, ["hello"])


@pytest.mark.parametrize(
    "fields",
    [
        {"approval_tools": ["x" * 65]},
        {"approval_tools": ["bad\u0000name"]},
        {"approval_tools": ["pay"] * 129},
        {"approval_timeout_seconds": 0},
        {"approval_timeout_seconds": 10**9},
        {"approval_timeout_seconds": "60"},
    ],
)
def test_invalid_approval_fields_are_refused_typed(fields: dict[str, Any]) -> None:
    with pytest.raises(crux.ConfigurationError):
        decode_input({"generation_id": "g", **fields}, GenerationInput, what="generation input")


@pytest.mark.parametrize("code", ["timeout", "policy", "over_limit", "risk.high", "a-b"])
def test_reason_codes_are_short_identifiers(code: str) -> None:
    assert check_reason_code(code) == code
    assert json.loads(denial_text(code)) == {"error": "denied", "reason": code}


@pytest.mark.parametrize("code", ["", "Free text", "x" * 65, "ünï", "1abc", "a b", '"quoted"'])
def test_other_reason_codes_are_refused_typed(code: str) -> None:
    with pytest.raises(crux.ApprovalError) as refused:
        check_reason_code(code)
    assert refused.value.code == "invalid_reason"
    assert code not in str(refused.value) or code == ""


def test_a_denial_without_reason_says_only_denied() -> None:
    assert denial_text(None) == '{"error":"denied"}'


def test_parallel_members_carry_the_approval_tools_and_the_runtime_timeout() -> None:
    pay = crux.tool("pay", _noop, requires_approval=True)
    options = CallOptions(prompt="")
    calls = build_members(
        "batch-1",
        {"a": crux.prompt(id="a", use=[pay]), "b": crux.prompt(id="b")},
        options,
        context="hi",
        threads=None,
        default_model="offline:echo",
        default_approval_timeout_seconds=120,
    )
    assert calls["a"].request.approval_tools == ["pay"]
    assert calls["a"].request.approval_timeout_seconds == 120
    assert calls["b"].request.approval_tools == []
