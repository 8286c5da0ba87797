"""Human approval of tool calls: the workflow's updates, query and the denial result.

A tool that requires approval is named in `GenerationInput.approval_tools`. Before one of
its calls runs, the generation waits in the `awaiting_approval` stage for an `approve` or
`deny` update naming the call id. Only names and ids cross Temporal: never the arguments.
"""

from __future__ import annotations

import json
import re

from vocabulary.commits import WireModel
from vocabulary.errors import ApprovalError

UPDATE_APPROVE = "approve"
"""Update that lets a pending tool call run (argument: the call id)."""

UPDATE_DENY = "deny"
"""Update that refuses a pending tool call (arguments: the call id, a reason code or
`None`)."""

QUERY_PENDING_APPROVALS = "pending_approvals"
"""Query listing the tool calls that wait for a decision (`list[PendingApproval]`)."""

TIMEOUT_REASON = "timeout"
"""Reason code of the denial a call gets when no decision arrived in time."""

MAX_REASON_CODE_LENGTH = 64
"""The longest reason code a denial may carry."""

MAX_CALL_ID_LENGTH = 256
"""The longest call id an update may name."""

_REASON_CODE = re.compile(r"[a-z][a-z0-9_.-]*")


class PendingApproval(WireModel):
    """A tool call waiting for its decision (names and ids only).

    Attributes:
        call_id: The provider's id of the call (what `approve` / `deny` name).
        tool_name: The tool called.
        tool_round: The tool round of the call (1-based).
    """

    call_id: str
    tool_name: str
    tool_round: int = 1


def check_reason_code(code: str | None) -> str | None:
    """Validate a denial's reason code: a bounded identifier, never free text.

    Raises:
        ApprovalError: `invalid_reason` when it is not one.
    """
    if code is None:
        return None
    if (
        not isinstance(code, str)  # pyright: ignore[reportUnnecessaryIsInstance]
        or len(code) > MAX_REASON_CODE_LENGTH
        or _REASON_CODE.fullmatch(code) is None
    ):
        raise ApprovalError(
            "invalid_reason",
            f"a reason code is a lower-case identifier of at most {MAX_REASON_CODE_LENGTH}",
        )
    return code


def denial_text(reason_code: str | None) -> str:
    """The fixed, content-free tool result the model sees for a denied call."""
    result = {"error": "denied"}
    if reason_code is not None:
        result["reason"] = reason_code
    return json.dumps(result, separators=(",", ":"))


__all__ = [
    "MAX_CALL_ID_LENGTH",
    "MAX_REASON_CODE_LENGTH",
    "QUERY_PENDING_APPROVALS",
    "TIMEOUT_REASON",
    "UPDATE_APPROVE",
    "UPDATE_DENY",
    "PendingApproval",
    "check_reason_code",
    "denial_text",
]
