"""What a custom policy returns, and what every compiled policy reports to the gate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from contracts.gate import GateDecision


@dataclass(frozen=True, slots=True)
class Allow:
    """A custom policy's verdict: the text passes unchanged."""


@dataclass(frozen=True, slots=True)
class Transform:
    """A custom policy's verdict: the text passes as `text` (the next policy sees it).

    Attributes:
        text: The replacement text.
        reason_code: Why, as a short identifier for the report.
    """

    text: str
    reason_code: str = "custom.transform"


@dataclass(frozen=True, slots=True)
class Block:
    """A custom policy's verdict: the text is refused.

    Attributes:
        reason_code: Why, as a short identifier (`a-z`, digits, `_.-`, from a letter).
    """

    reason_code: str


@dataclass(frozen=True, slots=True)
class Retry:
    """A custom output policy's verdict: ask the model for another reply.

    Attributes:
        reason_code: Why, as a short identifier (`a-z`, digits, `_.-`, from a letter).
    """

    reason_code: str


Verdict = Allow | Transform | Block | Retry
"""Any custom policy verdict."""

CustomPolicy = Callable[[str], Verdict]
"""A custom policy: a plain function of the text (pure, fast, no I/O)."""

TokenCount = Callable[[str], int]
"""Counts a text's tokens the way the model does (the activities pass tiktoken's)."""


@dataclass(frozen=True, slots=True)
class Applied:
    """One policy's result inside the gate: the report fields and the resulting text."""

    decision: GateDecision
    text: str
    reason_code: str | None = None
    counts: dict[str, int] = field(default_factory=dict[str, int])
    entries: tuple[int, ...] = ()


class CompiledPolicy(Protocol):
    """A policy built from its spec, ready to run on any number of texts."""

    def apply(self, text: str, count_tokens: TokenCount | None) -> Applied:
        """Decide on `text`."""
        ...
