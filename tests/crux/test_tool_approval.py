"""`requires_approval` on tools and the approval fields of the generation input."""

from __future__ import annotations

import pytest

import crux
from contracts.approvals import ApprovalDecision, check_reason_code
from crux._request import CallBuilder
from crux.errors import ConfigurationError


def _echo(arguments: dict[str, object]) -> str:
    return "ok"


def test_every_form_of_tool_takes_requires_approval() -> None:
    assert crux.tool("pay", _echo, requires_approval=True).requires_approval
    assert not crux.tool("pay", _echo).requires_approval

    @crux.tool(requires_approval=True, timeout=5)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return order_id

    assert refund.requires_approval and refund.name == "refund"
    assert refund.policy is not None and refund.policy.timeout_seconds == 5
    with pytest.raises(ConfigurationError):
        crux.tool("pay", _echo, requires_approval="yes")  # pyright: ignore[reportArgumentType]


def test_the_input_names_only_tools_that_require_approval_with_the_timeout() -> None:
    pay = crux.tool("pay", _echo, requires_approval=True)
    look = crux.tool("look", _echo)
    prompt = crux.prompt(id="p", use=[pay, look])
    builder = CallBuilder("offline:echo")
    request = builder.build(prompt, {"input": "x"}).request
    assert request.approval_tools == ["pay"]
    assert request.approval_timeout_seconds == 24 * 3600
    assert request.start_payload()["approval_tools"] == ["pay"]
    own = builder.build(prompt, {"input": "x", "approval_timeout_seconds": 30})
    assert own.request.approval_timeout_seconds == 30
    unlimited = CallBuilder("offline:echo", approval_timeout=None).build(prompt, {"input": "x"})
    assert unlimited.request.approval_timeout_seconds is None
    plain = builder.build(crux.prompt(id="q", use=[look]), {"input": "x"})
    # Without such tools nothing changes: the start payload omits both fields.
    assert "approval_tools" not in plain.request.start_payload()
    assert "approval_timeout_seconds" not in plain.request.start_payload()


@pytest.mark.parametrize("code", ["", "Denied", "no spaces", "x" * 65, "1st", "a\n"])
def test_reason_codes_are_short_identifiers(code: str) -> None:
    with pytest.raises(ConfigurationError):
        check_reason_code(code)
    with pytest.raises(ValueError):
        ApprovalDecision(call_id="c", reason_code=code)


def test_valid_reason_codes_pass() -> None:
    for code in ("timeout", "over_limit", "policy.v2", "a-b"):
        assert check_reason_code(code) == code


def test_parallel_members_carry_the_approval_tools_and_the_runtime_timeout() -> None:
    from crux._members import build_members

    pay = crux.tool("pay", lambda _: "ok", requires_approval=True)
    calls = build_members(
        "batch-1",
        {"a": crux.prompt(id="a", use=[pay]), "b": crux.prompt(id="b")},
        {},
        context="hi",
        threads=None,
        calls=CallBuilder("offline:echo", approval_timeout=120),
    )
    assert calls["a"].request.approval_tools == ["pay"]
    assert calls["a"].request.approval_timeout_seconds == 120
    assert calls["b"].request.approval_tools == []
