"""The gate's one error: a custom policy that could not decide."""

from __future__ import annotations

from typing import Literal

from vocabulary.errors import CruxError

GatePolicyErrorCode = Literal["not_registered", "raised", "invalid_result"]


class GatePolicyError(CruxError):
    """A custom policy is not registered on the worker, raised, or returned no verdict.

    A failing policy is an error rather than a `block`: a bug in a policy must not pass
    for a decision about the text, and the caller decides whether to fail closed. The
    message names the policy, the code and the exception's type, never its message (it
    may quote the text), and the exception is not chained for the same reason.

    Attributes:
        policy: The policy's name.
        code: `not_registered`, `raised` or `invalid_result`.
        error_type: The class name of the exception the policy raised, for `raised`.
    """

    def __init__(
        self, policy: str, code: GatePolicyErrorCode, *, error_type: str | None = None
    ) -> None:
        cause = f" ({error_type})" if error_type else ""
        super().__init__(f"{code}: gate policy {policy}{cause}")
        self.policy = policy
        self.code: GatePolicyErrorCode = code
        self.error_type = error_type
