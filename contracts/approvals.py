"""Human approval of tool calls: the shapes of the updates and the query.

A tool offered with `requires_approval` pauses its calls in the `awaiting_approval` stage
until an operator approves or denies each one. Only the tool name and the call id are
shown; the arguments never leave PostgreSQL.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from vocabulary.commits import WireModel
from vocabulary.errors import ConfigurationError

UPDATE_APPROVE = "approve"
"""Update name: run a pending call."""
UPDATE_DENY = "deny"
"""Update name: deny a pending call (its result tells the model why, by reason code)."""
QUERY_PENDING_APPROVALS = "pending_approvals"
"""Query name: the calls that wait for a decision."""

DEFAULT_APPROVAL_TIMEOUT_SECONDS = 24 * 3600
"""How long a call waits for its decision unless the runtime or call says otherwise."""
DEFAULT_DENIAL_REASON = "denied"
"""The reason code of a denial that names none."""
TIMEOUT_REASON = "timeout"
"""The reason code of a call whose decision did not come in time."""

_REASON = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


def check_reason_code(reason: str) -> str:
    """Validate a denial reason code: a short identifier, never free text.

    Raises:
        ConfigurationError: It is not 1-64 of lowercase letters, digits, `_`, `.`, `-`
            starting with a letter.
    """
    if not isinstance(reason, str) or _REASON.fullmatch(reason) is None:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError(
            "a reason code is 1-64 lowercase letters, digits, '_', '.' or '-', from a letter"
        )
    return reason


class PendingApproval(WireModel):
    """One tool call waiting for a decision.

    Attributes:
        call_id: The tool call's id (what `approve` and `deny` name).
        tool: The offered tool's name.
    """

    call_id: str
    tool: str


class ApprovalDecision(WireModel):
    """An operator's decision on one call (the argument of `approve` and `deny`).

    Attributes:
        call_id: The call decided on.
        reason_code: With `deny`: why, as a short identifier (`denied` when omitted).
    """

    call_id: str = Field(min_length=1, max_length=256)
    reason_code: str | None = None

    @field_validator("reason_code")
    @classmethod
    def _reason(cls, value: str | None) -> str | None:
        return None if value is None else check_reason_code(value)
