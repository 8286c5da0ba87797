"""The kinds of rows a generation stages, and where a request's history comes from.

Staging rows are keyed by generation, attempt and kind; the kinds are spelled here once and
used by the facade (which stages a request's inputs), the activities (which stage outputs and
tool rounds) and storage (which publishes the final answer).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

SummarySource = Literal["thread", "transcript"]
"""What a history summary summarises: a Thread's selected path or a caller's transcript."""

HistorySource = Literal["thread", "caller-messages", "none"]
"""Where a request's history came from: the Thread's selected path, messages passed by the
caller (call-site or prompt-level), or nowhere."""


class StagingKind(StrEnum):
    """The fixed staging kinds (parameterised kinds are built by the functions below)."""

    USER = "user"
    """The rendered user turn."""
    SYSTEM = "system"
    """The prompt's system instructions."""
    CALLER_MESSAGES = "caller-messages"
    """Call-site messages (first in the history-source precedence)."""
    PROMPT_MESSAGES = "prompt-messages"
    """Prompt-level messages (second, after call-site messages)."""
    OUTPUT = "output"
    """An attempt's assistant output."""
    FINAL = "final"
    """The accepted answer of an ad-hoc generation."""
    IDENTITY = "identity"
    """The row that claims a generation key for one request fingerprint."""
    CACHE_PENDING = "cache-pending"
    """What a cache miss leaves for the write after the commit (keys, scope, embedding;
    no text). Kept by the commit, removed by the write, swept when left behind."""
    SUMMARY_SOURCE = "summary-source"
    """The transcript prefix a summary preparation reads (under `summary_source_key`)."""


MESSAGE_KINDS = (StagingKind.CALLER_MESSAGES, StagingKind.PROMPT_MESSAGES)
"""Staging kinds of a message-array history source, in precedence order."""


CONTEXT_PREFIX = "context:"
TURN_PREFIX = "turn:"
DELTA_PREFIX = "delta:"


def context_kind(source_id: str) -> str:
    """The staging kind of one context source's text."""
    return f"{CONTEXT_PREFIX}{source_id}"


def turn_kind(index: int) -> str:
    """The staging kind of the `index`-th tool-round message of a turn (sortable)."""
    return f"{TURN_PREFIX}{index:03d}"


def delta_kind(kind: str) -> str:
    """The staging kind of the streamed deltas of `kind`."""
    return f"{DELTA_PREFIX}{kind}"


def summary_source_key(artifact_id: str) -> str:
    """The staging key of the transcript prefix a summary preparation reads.

    Keyed by the artifact, so only identical preparations (which join one run) share it;
    no generation completes under this key, so the retention sweep removes a copy whose
    preparation never ran.
    """
    return f"summary-source:{artifact_id}"
