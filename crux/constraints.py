"""Constraints: `constraints=` on a prompt, an agent or a call.

```python
constraints = crux.constraints(
    crux.constraints.length(maximum=600),
    crux.constraints.require("Ticket:"),
    crux.constraints.forbid("as an AI"),
    max_retries=2,
)
```

Declarative checks on the final reply, run on the worker before the commit (after
terminal safety). A reply that violates one is withdrawn, never committed, and a corrective
attempt is planned (linked with reason `constraint-retry`); past `max_retries` the
generation fails with `ConstraintError`, naming each violated constraint by position and
code, never the reply. A plain list (`constraints=[...]`) takes the default retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from activities.gate import check_pattern
from contracts.gate import (
    DEFAULT_GATE_RETRIES,
    ConstraintSpec,
    ConstraintsSpec,
    ForbiddenConstraint,
    LengthConstraint,
    PatternConstraint,
    RequiredConstraint,
)
from crux._specs import built_spec
from vocabulary.errors import ConfigurationError

__all__ = ["as_constraints", "constraints"]

_KINDS = (LengthConstraint, PatternConstraint, RequiredConstraint, ForbiddenConstraint)


def _strings(values: Sequence[str], what: str) -> tuple[str, ...]:
    if not values or any(not isinstance(value, str) for value in values):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError(f"{what} takes one or more strings")
    return tuple(values)


class _Constraints:
    """Constraint builders: `crux.constraints(...)`, `crux.constraints.length(...)`, ... ."""

    def __call__(
        self, *checks: ConstraintSpec, max_retries: int = DEFAULT_GATE_RETRIES
    ) -> ConstraintsSpec:
        """Combine constraints into one `constraints=` value.

        Args:
            *checks: The constraints (every one is evaluated on each reply).
            max_retries: Corrective attempts after a reply that violates one (0-10).

        Raises:
            ConfigurationError: Something that is not a constraint, more than 64, or
                `max_retries` out of range.
        """
        if any(not isinstance(check, _KINDS) for check in checks):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError(
                "a constraint is crux.constraints.length(), .pattern(), .require() or .forbid()"
            )
        return built_spec(
            "constraints", lambda: ConstraintsSpec(checks=checks, max_retries=max_retries)
        )

    def length(
        self,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
        unit: Literal["chars", "tokens"] = "chars",
    ) -> LengthConstraint:
        """The reply's length lies within bounds, in characters or the model's tokens.

        Raises:
            ConfigurationError: Neither bound, a negative one, or `minimum > maximum`.
        """
        return built_spec(
            "length constraint",
            lambda: LengthConstraint(unit=unit, minimum=minimum, maximum=maximum),
        )

    def pattern(
        self, pattern: str, *, full_match: bool = False, ignore_case: bool = False
    ) -> PatternConstraint:
        """A regular expression matches the reply (anywhere, or all of it).

        Patterns that could take exponential time (`(a+)+`) are refused here.

        Raises:
            ConfigurationError: An invalid or refused pattern.
        """
        spec = built_spec(
            "pattern constraint",
            lambda: PatternConstraint(
                pattern=pattern, full_match=full_match, ignore_case=ignore_case
            ),
        )
        check_pattern(spec.pattern)
        return spec

    def require(self, *substrings: str, ignore_case: bool = False) -> RequiredConstraint:
        """Every listed substring occurs in the reply.

        Raises:
            ConfigurationError: No substring, or one that is empty or too long.
        """
        values = _strings(substrings, "require")
        return built_spec(
            "required constraint",
            lambda: RequiredConstraint(substrings=values, ignore_case=ignore_case),
        )

    def forbid(self, *substrings: str, ignore_case: bool = False) -> ForbiddenConstraint:
        """No listed substring occurs in the reply.

        Raises:
            ConfigurationError: No substring, or one that is empty or too long.
        """
        values = _strings(substrings, "forbid")
        return built_spec(
            "forbidden constraint",
            lambda: ForbiddenConstraint(substrings=values, ignore_case=ignore_case),
        )


constraints = _Constraints()
"""Constraints on the final reply (`crux.constraints(crux.constraints.length(...), ...)`)."""


def as_constraints(value: Any) -> ConstraintsSpec | None:
    """`value` as a `ConstraintsSpec` (`None` stays `None`; a list takes default retries).

    Raises:
        ConfigurationError: Not a `crux.constraints(...)` value or a list of constraints.
    """
    if value is None or isinstance(value, ConstraintsSpec):
        return value
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(
            "constraints must be crux.constraints(...) or a list of crux.constraints.* checks"
        )
    return constraints(*value)  # pyright: ignore[reportUnknownArgumentType]
