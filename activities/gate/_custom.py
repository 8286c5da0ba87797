"""Custom policies: a registered function's verdict, checked and reported like the rest."""

from __future__ import annotations

from activities.gate._errors import GatePolicyError
from activities.gate._verdicts import (
    Allow,
    Applied,
    Block,
    CustomPolicy,
    Retry,
    TokenCount,
    Transform,
)
from contracts.approvals import check_reason_code
from contracts.gate import PolicyStage
from vocabulary.errors import ConfigurationError


class CustomPolicyRunner:
    """Runs one registered function as a policy of `stage`.

    Args:
        name: The policy's (and the function's registered) name.
        function: The function.
        stage: `Transform` is a valid verdict on input only, `Retry` on output only.
    """

    def __init__(self, name: str, function: CustomPolicy, stage: PolicyStage) -> None:
        self._name = name
        self._function = function
        self._stage = stage

    def apply(self, text: str, count_tokens: TokenCount | None) -> Applied:
        """Call the function and turn its verdict into the policy's result.

        A `Transform` that returns the same text is reported as `allow`: nothing changed.

        Raises:
            GatePolicyError: `raised` when the function raised (only the exception's type
                is kept), `invalid_result` when it returned something other than a
                verdict, a bad reason code, a non-string text, `Retry` on input or
                `Transform` on output (a reply is never rewritten).
        """
        del count_tokens  # a custom policy measures what it needs itself
        try:
            verdict = self._function(text)
        except Exception as error:  # user code: its message may quote the text
            raise GatePolicyError(self._name, "raised", error_type=type(error).__name__) from None
        try:
            return self._result(text, verdict)
        except ConfigurationError:
            raise GatePolicyError(self._name, "invalid_result") from None

    def _result(self, text: str, verdict: object) -> Applied:
        if isinstance(verdict, Allow):
            return Applied("allow", text)
        if (
            isinstance(verdict, Transform)
            and isinstance(verdict.text, str)  # pyright: ignore[reportUnnecessaryIsInstance]
            and self._stage == "input"
        ):
            reason = check_reason_code(verdict.reason_code)
            if verdict.text == text:
                return Applied("allow", text)
            return Applied("transform", verdict.text, reason)
        if isinstance(verdict, Block):
            return Applied("block", text, check_reason_code(verdict.reason_code))
        if isinstance(verdict, Retry) and self._stage == "output":
            return Applied("retry", text, check_reason_code(verdict.reason_code))
        raise ConfigurationError("not a verdict of this stage")
