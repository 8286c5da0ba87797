"""The acceptance gate across Temporal: policy and constraint specs, content-free reports.

A gate runs named policies in order over a text: on the way in (`input`: the user's
message before it is planned) or on the way out (`output`: the final reply before it is
accepted). Each policy decides `allow`, `transform` (the text was masked; the next policy
sees the masked text), `block` or, on the way out only, `retry` (ask the model again). The
first `block` or `retry` stops the run. Constraints are declarative checks on accepted
text; all are evaluated and their violations listed.

Specs are configuration (like an output schema), so they may name words, patterns and
tokens. Reports never carry text: decisions, policy names, reason codes, counts and entry
indices only (they are defined in `vocabulary.gate`, where receipts can name them, and
re-exported here). The policies themselves run on the worker (`activities.gate`).
A generation carries its policies as a `SafetySpec` and its constraints as a
`ConstraintsSpec`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from vocabulary.commits import WireModel
from vocabulary.errors import ConfigurationError
from vocabulary.gate import (
    ConstraintKind,
    ConstraintReport,
    ConstraintViolation,
    GateDecision,
    GateReport,
    PolicyKind,
    PolicyOutcome,
    PolicyStage,
)

PiiKind = Literal["email", "phone", "card", "iban"]
"""What the PII policy detects: e-mail addresses, phone numbers, payment cards, IBANs."""
PII_DETECTION_ORDER: tuple[PiiKind, ...] = ("email", "iban", "card", "phone")
"""The order the PII detectors run in; a span found earlier is not searched again."""
PhoneLeniency = Literal["possible", "valid", "strict_grouping", "exact_grouping"]
"""libphonenumber's leniency: how plausible a number must be to count as one."""

MAX_POLICIES = 32
"""Policies in one gate."""
MAX_DENY_ENTRIES = 1_000
"""Entries in one deny list."""
MAX_PATTERN_CHARS = 1_000
"""Length of one deny-list entry, regular expression or required/forbidden substring."""
MAX_CONSTRAINTS = 64
"""Constraints checked on one text."""

_IDENTIFIER = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
# A mask token is bracketed and holds no digit or `@`, so no detector finds anything in it
# and masking masked text changes nothing.
_TOKEN = re.compile(r"\[[^\W\d](?:[^\W\d]|[ .:*#-]){0,62}\]")


def _identifier(value: str, what: str) -> str:
    if _IDENTIFIER.fullmatch(value) is None:
        raise ConfigurationError(
            f"a {what} is 1-64 lowercase letters, digits, '_', '.' or '-', from a letter"
        )
    return value


def _token(value: str) -> str:
    if _TOKEN.fullmatch(value) is None:
        raise ConfigurationError(
            "a mask token is '[' and ']' around 1-63 letters, spaces or '_.:*#-', "
            "starting with a letter (no digits, no '@')"
        )
    return value


def _pattern(value: str) -> str:
    try:
        re.compile(value)
    except (re.error, OverflowError, RecursionError):
        raise ConfigurationError("a pattern is not a valid regular expression") from None
    return value


class PiiRule(WireModel):
    """What the PII policy does with one kind of finding.

    Attributes:
        kind: `email`, `phone`, `card` or `iban`.
        mode: `mask` (replace each finding by the token), `block` or `retry` (output).
        token: The mask, `[<kind>]` when unset.
        keep_last4: For cards: keep the last four digits (`[card ****1234]`).
    """

    kind: PiiKind
    mode: Literal["mask", "block", "retry"] = "mask"
    token: str | None = None
    keep_last4: bool = False

    @field_validator("token")
    @classmethod
    def _token_shape(cls, value: str | None) -> str | None:
        return None if value is None else _token(value)

    @model_validator(mode="after")
    def _last4_on_cards(self) -> PiiRule:
        if self.keep_last4 and self.kind != "card":
            raise ConfigurationError("keep_last4 applies to card numbers only")
        return self

    @property
    def mask_token(self) -> str:
        """The token that replaces a finding (without the kept digits)."""
        return self.token or f"[{self.kind}]"


class PiiPolicySpec(WireModel):
    """Detect e-mail addresses, phone numbers, card numbers and IBANs.

    Attributes:
        name: The policy's name in reports.
        rules: One rule per kind to detect (all four, masked, by default).
        phone_region: ISO 3166 region for numbers written without a country code (`US`,
            `DE`); unset, only numbers with a leading `+` and country code are found.
        phone_leniency: How plausible a phone number must be (`valid` by default).
    """

    kind: Literal["pii"] = "pii"
    name: str = "pii"
    rules: tuple[PiiRule, ...] = (
        PiiRule(kind="email"),
        PiiRule(kind="phone"),
        PiiRule(kind="card"),
        PiiRule(kind="iban"),
    )
    phone_region: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    phone_leniency: PhoneLeniency = "valid"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _identifier(value, "policy name")

    @field_validator("rules")
    @classmethod
    def _one_rule_per_kind(cls, value: tuple[PiiRule, ...]) -> tuple[PiiRule, ...]:
        kinds = [rule.kind for rule in value]
        if not kinds or len(set(kinds)) != len(kinds):
            raise ConfigurationError("a PII policy has one rule per kind, at least one")
        return value


class LengthPolicySpec(WireModel):
    """Block a text longer than a number of characters and/or tokens (never truncate).

    Attributes:
        name: The policy's name in reports.
        max_chars: Most characters (code points).
        max_tokens: Most tokens, as the model's token counter counts them.
        on_exceed: `block`, or `retry` on output.
    """

    kind: Literal["length"] = "length"
    name: str = "length"
    max_chars: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    on_exceed: Literal["block", "retry"] = "block"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _identifier(value, "policy name")

    @model_validator(mode="after")
    def _a_limit(self) -> LengthPolicySpec:
        if self.max_chars is None and self.max_tokens is None:
            raise ConfigurationError("a length policy needs max_chars or max_tokens")
        return self


Phrase = Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_CHARS)]


class DenyListPolicySpec(WireModel):
    """Find listed words, phrases or patterns; block, retry or mask them.

    Entries are numbered across both lists, words first: with three words, the first
    pattern is entry 3. Reports name matched entries by these numbers only. A mask token
    that an entry matches is refused; masking masked text then changes nothing, unless an
    entry can match a mask's edge together with the text beside it (`] x`).

    Attributes:
        name: The policy's name in reports.
        words: Words and phrases (a space matches any run of whitespace).
        patterns: Regular expressions (flags scoped, like `(?i:...)`, not global).
        mode: `block`, `mask` (replace each match by `token`) or `retry` (output).
        whole_word: Match only where no letter, digit or `_` adjoins the match.
        ignore_case: Match regardless of case.
        token: The mask in `mask` mode.
    """

    kind: Literal["deny_list"] = "deny_list"
    name: str = "deny_list"
    words: tuple[Phrase, ...] = ()
    patterns: tuple[Phrase, ...] = ()
    mode: Literal["block", "mask", "retry"] = "block"
    whole_word: bool = True
    ignore_case: bool = True
    token: str = "[redacted]"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _identifier(value, "policy name")

    @field_validator("words")
    @classmethod
    def _not_blank(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not word.strip() for word in value):
            raise ConfigurationError("a deny-list word or phrase must not be blank")
        return value

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            # Entries are combined into one alternation, where global inline flags such
            # as a leading `(?i)` are invalid; scoped ones (`(?i:...)`) work.
            _pattern(f"(?:{pattern})")
        return value

    @field_validator("token")
    @classmethod
    def _token_shape(cls, value: str) -> str:
        return _token(value)

    @model_validator(mode="after")
    def _entries(self) -> DenyListPolicySpec:
        if not 0 < len(self.words) + len(self.patterns) <= MAX_DENY_ENTRIES:
            raise ConfigurationError(f"a deny list has 1 to {MAX_DENY_ENTRIES} entries")
        return self


class CustomPolicySpec(WireModel):
    """A policy function registered on the worker under `name`.

    Attributes:
        name: The registered function's name, and the policy's name in reports.
    """

    kind: Literal["custom"] = "custom"
    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _identifier(value, "policy name")


PolicySpec = Annotated[
    PiiPolicySpec | LengthPolicySpec | DenyListPolicySpec | CustomPolicySpec,
    Field(discriminator="kind"),
]
"""Any policy, tagged by `kind`."""


def check_policies(specs: Iterable[PolicySpec], stage: PolicyStage) -> tuple[PolicySpec, ...]:
    """Return the policies if they form a legal gate for `stage`, else raise.

    Input policies may not `retry` (there is no reply to ask for again); output policies
    may not `mask`: a reply is accepted, retried or refused as the model wrote it, never
    rewritten silently.

    Raises:
        ConfigurationError: Too many policies, a name used twice, or a mode the stage
            does not allow.
    """
    policies = tuple(specs)
    if len(policies) > MAX_POLICIES:
        raise ConfigurationError(f"a gate runs at most {MAX_POLICIES} policies")
    names = [policy.name for policy in policies]
    if len(set(names)) != len(names):
        raise ConfigurationError("policy names in a gate must be unique")
    for policy in policies:
        modes: set[str] = set()
        if isinstance(policy, PiiPolicySpec):
            modes = {rule.mode for rule in policy.rules}
        elif isinstance(policy, DenyListPolicySpec):
            modes = {policy.mode}
        elif isinstance(policy, LengthPolicySpec):
            modes = {policy.on_exceed}
        refused = "retry" if stage == "input" else "mask"
        if refused in modes:
            raise ConfigurationError(f"policy {policy.name}: {stage} policies cannot {refused}")
    return policies


class LengthConstraint(WireModel):
    """The text's length in characters or tokens lies within bounds.

    Attributes:
        unit: `chars` (code points) or `tokens` (the model's token counter).
        minimum: Fewest allowed, if any.
        maximum: Most allowed, if any.
    """

    kind: Literal["length"] = "length"
    unit: Literal["chars", "tokens"] = "chars"
    minimum: int | None = Field(default=None, ge=0)
    maximum: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> LengthConstraint:
        if self.minimum is None and self.maximum is None:
            raise ConfigurationError("a length constraint needs a minimum or a maximum")
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ConfigurationError("a length constraint's minimum exceeds its maximum")
        return self


class PatternConstraint(WireModel):
    """A regular expression matches the text (anywhere, or the whole text).

    Attributes:
        pattern: The regular expression.
        full_match: Whether it must match the whole text rather than some part.
        ignore_case: Match regardless of case.
    """

    kind: Literal["pattern"] = "pattern"
    pattern: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)
    full_match: bool = False
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return _pattern(value)


class RequiredConstraint(WireModel):
    """Every listed substring occurs in the text.

    Attributes:
        substrings: The substrings.
        ignore_case: Compare case-folded.
    """

    kind: Literal["required"] = "required"
    substrings: tuple[Phrase, ...] = Field(min_length=1, max_length=MAX_DENY_ENTRIES)
    ignore_case: bool = False


class ForbiddenConstraint(WireModel):
    """No listed substring occurs in the text.

    Attributes:
        substrings: The substrings.
        ignore_case: Compare case-folded.
    """

    kind: Literal["forbidden"] = "forbidden"
    substrings: tuple[Phrase, ...] = Field(min_length=1, max_length=MAX_DENY_ENTRIES)
    ignore_case: bool = False


ConstraintSpec = Annotated[
    LengthConstraint | PatternConstraint | RequiredConstraint | ForbiddenConstraint,
    Field(discriminator="kind"),
]
"""Any constraint, tagged by `kind`."""

DEFAULT_GATE_RETRIES = 2
"""Corrective attempts after a reply that output safety or the constraints refused."""
MAX_GATE_RETRIES = 10
"""The most corrective attempts a generation may ask for."""


class SafetySpec(WireModel):
    """The safety policies of a generation, by stage.

    Attributes:
        input: Policies run on the rendered user turn before anything is planned: the
            text they let through (masked, when one transforms it) is what is measured,
            sent and committed; a `block` fails the generation with `SafetyError`.
        output: Policies run on the final reply before the commit (terminal safety): a
            `retry` asks for a corrective attempt, a `block` fails with `SafetyError`.
        max_retries: Corrective attempts after output policies asked for one; past them
            the generation fails with `SafetyError`.
    """

    input: tuple[PolicySpec, ...] = ()
    output: tuple[PolicySpec, ...] = ()
    max_retries: int = Field(default=DEFAULT_GATE_RETRIES, ge=0, le=MAX_GATE_RETRIES, strict=True)

    @field_validator("input")
    @classmethod
    def _input(cls, value: tuple[PolicySpec, ...]) -> tuple[PolicySpec, ...]:
        return check_policies(value, "input")

    @field_validator("output")
    @classmethod
    def _output(cls, value: tuple[PolicySpec, ...]) -> tuple[PolicySpec, ...]:
        return check_policies(value, "output")

    def custom_names(self) -> tuple[str, ...]:
        """The names of the custom policies (registered on the worker), both stages."""
        return tuple(
            spec.name for spec in (*self.input, *self.output) if isinstance(spec, CustomPolicySpec)
        )


class ConstraintsSpec(WireModel):
    """Declarative checks on the final reply, with corrective attempts.

    Attributes:
        checks: The constraints; every one is evaluated and its violations reported.
        max_retries: Corrective attempts after a reply that violates one; past them the
            generation fails with `ConstraintError`.
    """

    checks: tuple[ConstraintSpec, ...] = Field(default=(), max_length=MAX_CONSTRAINTS)
    max_retries: int = Field(default=DEFAULT_GATE_RETRIES, ge=0, le=MAX_GATE_RETRIES, strict=True)


__all__ = [
    "DEFAULT_GATE_RETRIES",
    "MAX_CONSTRAINTS",
    "MAX_DENY_ENTRIES",
    "MAX_GATE_RETRIES",
    "MAX_PATTERN_CHARS",
    "MAX_POLICIES",
    "PII_DETECTION_ORDER",
    "ConstraintKind",
    "ConstraintReport",
    "ConstraintSpec",
    "ConstraintViolation",
    "ConstraintsSpec",
    "CustomPolicySpec",
    "DenyListPolicySpec",
    "ForbiddenConstraint",
    "GateDecision",
    "GateReport",
    "LengthConstraint",
    "LengthPolicySpec",
    "PatternConstraint",
    "PhoneLeniency",
    "PiiKind",
    "PiiPolicySpec",
    "PiiRule",
    "PolicyKind",
    "PolicyOutcome",
    "PolicySpec",
    "PolicyStage",
    "RequiredConstraint",
    "SafetySpec",
    "check_policies",
]
