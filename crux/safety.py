"""Safety policies: `safety=` on a prompt, an agent or a call.

```python
safety = crux.safety(
    input=[crux.safety.pii(), crux.safety.max_length(chars=8_000)],
    output=[crux.safety.deny(["internal-only"], mode="retry")],
    max_retries=2,
)
reply = await runtime.generate(support, input=..., safety=safety)
```

Input policies run on the rendered user turn before anything is planned: the text they let
through (masked, when one transforms it) is what is measured, sent and committed; a block
fails the generation with `SafetyError` before any provider call, and the staged text is
removed. Output policies (terminal safety) run on the final reply before the commit: a
`retry` asks for a corrective attempt, a block fails with `SafetyError`; a refused reply is
never committed. A plain list (`safety=[crux.safety.pii()]`) is a list of input policies.

Built-in policies are specs that run on the worker; a custom policy is a plain function of
the text registered on the worker under a name (`crux.safety.policy(...)`, passed to the
worker's `policies=`), and generations name it, so a plain Temporal client can too.
Reports are content-free: policy names, decisions, reason codes and counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from activities.gate import Allow, Block, CustomPolicy, Retry, Transform, Verdict
from contracts.gate import (
    DEFAULT_GATE_RETRIES,
    CustomPolicySpec,
    DenyListPolicySpec,
    LengthPolicySpec,
    PhoneLeniency,
    PiiKind,
    PiiPolicySpec,
    PiiRule,
    PolicySpec,
    SafetySpec,
)
from crux._specs import built_spec
from vocabulary.errors import ConfigurationError

__all__ = [
    "Allow",
    "Block",
    "PolicyRegistry",
    "Retry",
    "SafetyPolicy",
    "Transform",
    "Verdict",
    "as_safety",
    "safety",
]

ALL_PII: tuple[PiiKind, ...] = ("email", "phone", "card", "iban")


@dataclass(frozen=True)
class SafetyPolicy:
    """A custom policy: a function of the text, registered on the worker by `name`.

    The function returns a verdict: `Allow()`, `Transform(text)` (input only: the text
    goes on masked), `Block(reason_code)` or `Retry(reason_code)` (output only). It must
    be pure and fast: it runs on the worker's activity for every text it judges. If it
    raises, the generation fails with `GatePolicyError` (naming only the exception's
    class), never passing the text.

    Attributes:
        name: The name generations refer to it by (lowercase letters, digits, `_.-`).
        function: The policy function.
    """

    name: str
    function: CustomPolicy

    @property
    def spec(self) -> CustomPolicySpec:
        """The policy as a generation names it."""
        return CustomPolicySpec(name=self.name)


def _as_policy(value: object) -> PolicySpec:
    if isinstance(value, PiiPolicySpec | LengthPolicySpec | DenyListPolicySpec | CustomPolicySpec):
        return value
    if isinstance(value, SafetyPolicy):
        return value.spec
    if isinstance(value, str):
        return built_spec("custom policy", lambda: CustomPolicySpec(name=value))
    if callable(value):
        raise ConfigurationError(
            "a custom policy needs a name the worker knows it by: define it with"
            " crux.safety.policy(name, function) and pass it to the worker's policies=[...]"
        )
    raise ConfigurationError(
        "a safety policy is crux.safety.pii(), .max_length(), .deny(), a"
        " crux.safety.policy(...) or a registered policy's name"
    )


def _policies(values: Iterable[object] | None, stage: str) -> tuple[PolicySpec, ...]:
    if values is None:
        return ()
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError(f"{stage} policies must be a list")
    return tuple(_as_policy(value) for value in values)


class _Safety:
    """Safety policy builders: `crux.safety(...)`, `crux.safety.pii()`, ... ."""

    def __call__(
        self,
        input: Sequence[object] = (),
        output: Sequence[object] = (),
        *,
        max_retries: int = DEFAULT_GATE_RETRIES,
    ) -> SafetySpec:
        """Combine input and output policies into one `safety=` value.

        Args:
            input: Policies run, in order, on the rendered user turn before planning.
            output: Policies run, in order, on the final reply before the commit.
            max_retries: Corrective attempts after output policies asked for one.

        Raises:
            ConfigurationError: A policy is not one, a stage refuses a policy's mode
                (input policies cannot retry, output policies cannot mask), names repeat,
                or `max_retries` is out of range (0-10).
        """
        return built_spec(
            "safety",
            lambda: SafetySpec(
                input=_policies(input, "input"),
                output=_policies(output, "output"),
                max_retries=max_retries,
            ),
        )

    def pii(
        self,
        kinds: Sequence[PiiKind] = ALL_PII,
        *,
        mode: Literal["mask", "block", "retry"] = "mask",
        keep_last4: bool = False,
        phone_region: str | None = None,
        phone_leniency: PhoneLeniency = "valid",
        name: str = "pii",
    ) -> PiiPolicySpec:
        """Find e-mail addresses, phone numbers, payment cards (Luhn) and IBANs (mod 97).

        What each detector catches and misses is listed in `activities/gate/_pii.py`.

        Args:
            kinds: What to look for (`email`, `phone`, `card`, `iban`; all by default).
            mode: `mask` (input only: replace each finding by `[<kind>]`), `block`, or
                `retry` (output only).
            keep_last4: Cards keep their last four digits (`[card ****1111]`).
            phone_region: ISO 3166 region for numbers without a country code (`US`).
            phone_leniency: How plausible a phone number must be (`valid` by default).
            name: The policy's name in reports.

        Raises:
            ConfigurationError: An unknown kind, mode or region shape.
        """
        if isinstance(kinds, str) or not isinstance(kinds, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("pii kinds must be a list of 'email', 'phone', 'card', 'iban'")
        return built_spec(
            "pii policy",
            lambda: PiiPolicySpec(
                name=name,
                rules=tuple(
                    PiiRule(kind=kind, mode=mode, keep_last4=keep_last4 and kind == "card")
                    for kind in kinds
                ),
                phone_region=phone_region,
                phone_leniency=phone_leniency,
            ),
        )

    def max_length(
        self,
        chars: int | None = None,
        *,
        tokens: int | None = None,
        on_exceed: Literal["block", "retry"] = "block",
        name: str = "length",
    ) -> LengthPolicySpec:
        """Refuse a text longer than `chars` characters and/or `tokens` tokens.

        Never truncates: a longer user turn is blocked, a longer reply blocked or retried.

        Args:
            chars: Most characters.
            tokens: Most tokens, as the generation's model counts them.
            on_exceed: `block`, or `retry` (output only).
            name: The policy's name in reports.

        Raises:
            ConfigurationError: Neither limit, or a negative one.
        """
        return built_spec(
            "length policy",
            lambda: LengthPolicySpec(
                name=name, max_chars=chars, max_tokens=tokens, on_exceed=on_exceed
            ),
        )

    def deny(
        self,
        words: Sequence[str] = (),
        *,
        patterns: Sequence[str] = (),
        mode: Literal["block", "mask", "retry"] = "block",
        whole_word: bool = True,
        ignore_case: bool = True,
        token: str = "[redacted]",
        name: str = "deny_list",
    ) -> DenyListPolicySpec:
        """Find listed words, phrases or regular expressions; block, mask or retry.

        Args:
            words: Words and phrases (a space matches any run of whitespace).
            patterns: Regular expressions (flags scoped, like `(?i:...)`).
            mode: `block`, `mask` (input only: replace each match by `token`) or `retry`
                (output only).
            whole_word: Match only where no letter, digit or `_` adjoins the match.
            ignore_case: Match regardless of case.
            token: The mask in `mask` mode.
            name: The policy's name in reports (matches are reported by entry number).

        Raises:
            ConfigurationError: No entry, a blank word, an invalid pattern or token.
        """
        if isinstance(words, str) or isinstance(patterns, str):
            raise ConfigurationError("deny words and patterns must be lists of strings")
        return built_spec(
            "deny policy",
            lambda: DenyListPolicySpec(
                name=name,
                words=tuple(words),
                patterns=tuple(patterns),
                mode=mode,
                whole_word=whole_word,
                ignore_case=ignore_case,
                token=token,
            ),
        )

    @overload
    def policy(self, name: str, function: CustomPolicy) -> SafetyPolicy: ...

    @overload
    def policy(
        self, name: str, function: None = None
    ) -> Callable[[CustomPolicy], SafetyPolicy]: ...

    def policy(
        self, name: str, function: CustomPolicy | None = None
    ) -> SafetyPolicy | Callable[[CustomPolicy], SafetyPolicy]:
        """Define a custom policy, directly or as a decorator; register it on the worker.

        ```python
        @crux.safety.policy("no-ticket-ids")
        def no_ticket_ids(text: str) -> crux.SafetyVerdict:
            return crux.safety.Block("ticket_id") if "TCK-" in text else crux.safety.Allow()
        ```

        Args:
            name: The name generations refer to it by.
            function: A function of the text returning a verdict.

        Raises:
            ConfigurationError: The name is invalid or the function is not callable.
        """
        spec = built_spec("custom policy", lambda: CustomPolicySpec(name=name))

        def define(fn: CustomPolicy) -> SafetyPolicy:
            if not callable(fn):
                raise ConfigurationError("a custom policy needs a callable")
            return SafetyPolicy(name=spec.name, function=fn)

        return define if function is None else define(function)

    def custom(self, name: str) -> CustomPolicySpec:
        """Name a custom policy registered on the worker (by another process, say)."""
        return built_spec("custom policy", lambda: CustomPolicySpec(name=name))

    Allow = Allow
    Transform = Transform
    Block = Block
    Retry = Retry


safety = _Safety()
"""Safety policies (`crux.safety(input=[...], output=[...])`, `crux.safety.pii()`, ...)."""


def as_safety(value: Any) -> SafetySpec | None:
    """`value` as a `SafetySpec` (`None` stays `None`; a list is a list of input policies).

    Raises:
        ConfigurationError: Not a `crux.safety(...)` value or a list of policies.
    """
    if value is None or isinstance(value, SafetySpec):
        return value
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(
            "safety must be crux.safety(input=[...], output=[...]) or a list of input policies"
        )
    return safety(input=list(value))  # pyright: ignore[reportUnknownArgumentType]


class PolicyRegistry:
    """The custom policies a worker can run, by name."""

    def __init__(self, policies: Iterable[SafetyPolicy] = ()) -> None:
        self._policies: dict[str, CustomPolicy] = {}
        for entry in policies:
            if not isinstance(entry, SafetyPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ConfigurationError("policies must be crux.safety.policy(...) definitions")
            if entry.name in self._policies:
                raise ConfigurationError("two policies share one name")
            self._policies[entry.name] = entry.function

    def functions(self) -> dict[str, CustomPolicy]:
        """The policy functions by name (what the worker's gate runs)."""
        return dict(self._policies)
