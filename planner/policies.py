"""History policies and the builders that make them (`history.recent(...)`, `history(...)`).

Exactly one policy applies to a request. The default is `ExactHistory`: complete, exact,
required history.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from planner._base import FrozenModel
from planner.receipt import SupportRequestRecord
from vocabulary.errors import ConfigurationError

DEFAULT_RECENT_MESSAGES = 20
"""Message cap of `history.recent()` called without arguments."""

MANAGED_RECENT_TOKEN_PERCENT = 40
"""Without an explicit recent cap, managed history keeps this share of the strict max exact."""

OnMiss = Literal["inline", "recent-only", "fail"]


def check_cap(name: str, value: object) -> None:
    """Raise `ConfigurationError` unless `value` is `None` or a positive integer."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigurationError(f"{name} must be a positive integer")


class ExactHistory(FrozenModel):
    """Complete exact history; every message is required (the default policy).

    Attributes:
        kind: Always `"exact"`.
    """

    kind: Literal["exact"] = "exact"


class RecentHistory(FrozenModel):
    """The newest exact suffix at causal-group boundaries.

    Caps are soft at group boundaries: a group is never split, and the newest group is kept
    whole even when it alone exceeds a cap (`HISTORY_CAP_OVERFLOW`). A contiguous leading
    system-only prefix stays outside the caps.

    Attributes:
        kind: Always `"recent"`.
        messages: Message cap, or `None`.
        tokens: Content-token cap, or `None`.
    """

    kind: Literal["recent"] = "recent"
    messages: int | None = None
    tokens: int | None = None

    def __init__(
        self, *, messages: int | None = None, tokens: int | None = None, **extra: Any
    ) -> None:
        # Python callers get `ConfigurationError` (a `TypeError`), not a `ValidationError`.
        check_cap("messages", messages)
        check_cap("tokens", tokens)
        if messages is None and tokens is None:
            raise ConfigurationError("history.recent needs a messages or tokens cap")
        # pydantic validates wire data through this constructor too (`kind` arrives here).
        super().__init__(**{"messages": messages, "tokens": tokens, **extra})

    @model_validator(mode="after")
    def _caps(self) -> RecentHistory:
        if self.messages is None and self.tokens is None:
            raise ValueError("history.recent needs a messages or tokens cap")
        for value in (self.messages, self.tokens):
            if value is not None and value <= 0:
                raise ValueError("caps must be positive integers")
        return self


class HistorySummary(FrozenModel):
    """An existing summary artifact of older history, content-free.

    Attributes:
        artifact_id: Identity of the stored artifact.
        tokens: Tokens of the rendered summary message (header included).
        covers: Number of conversational messages (after the leading system prefix, counted
            from the start of the transcript) the summary replaces.
        stale: `True` when the artifact covers an older prefix than the current one.
        origin: `stored` (found ready), `inline` (prepared before this dispatch) or
            `joined` (an identical preparation already in flight was awaited); the last
            two are receipted as `HISTORY_SUMMARY_INLINE` / `HISTORY_SUMMARY_JOINED`.
        support_request_ids: Ids of the support calls that produced it (empty as a worker
            sends the summary through workflow payloads: the stored artifact names them,
            and they are linked to an inspection when the plan sending it is recorded).
        support_requests: Their content-free receipts (listed in the inspection of a
            request that sends the summary; empty through payloads, like the ids).
        path: `portable` (core-managed support calls, the only path today: the adapters
            offer no native compaction) or `provider-native`.
    """

    artifact_id: str = Field(min_length=1)
    tokens: int = Field(ge=0)
    covers: int = Field(ge=0)
    stale: bool = False
    origin: Literal["stored", "inline", "joined"] = "stored"
    support_request_ids: tuple[str, ...] = ()
    support_requests: tuple[SupportRequestRecord, ...] = ()
    path: Literal["portable", "provider-native"] = "portable"


class ManagedHistory(FrozenModel):
    """Older turns may become a derived summary; recent turns stay exact.

    Attributes:
        kind: Always `"managed"`.
        recent_messages: Message cap of the exact suffix, or `None`.
        recent_tokens: Token cap of the exact suffix; without either cap,
            40 % of the strict max.
        on_miss: What to do when the summary is needed but not prepared: `inline` (prepare
            before dispatch), `recent-only` (degrade to the exact suffix), `fail`.
        summary: The best existing artifact, or `None` when unprepared.
        expected_summary_tokens: Size assumed for an unprepared summary in `preview()`.
    """

    kind: Literal["managed"] = "managed"
    recent_messages: int | None = None
    recent_tokens: int | None = None
    on_miss: OnMiss = "inline"
    summary: HistorySummary | None = None
    expected_summary_tokens: int = Field(default=500, ge=0)

    def __init__(
        self,
        *,
        recent_messages: int | None = None,
        recent_tokens: int | None = None,
        on_miss: OnMiss = "inline",
        summary: HistorySummary | None = None,
        expected_summary_tokens: int = 500,
        **extra: Any,
    ) -> None:
        # Python callers get `ConfigurationError` (a `TypeError`), not a `ValidationError`.
        check_cap("recent_messages", recent_messages)
        check_cap("recent_tokens", recent_tokens)
        if on_miss not in ("inline", "recent-only", "fail"):
            raise ConfigurationError("on_miss must be 'inline', 'recent-only' or 'fail'")
        super().__init__(
            **{
                "recent_messages": recent_messages,
                "recent_tokens": recent_tokens,
                "on_miss": on_miss,
                "summary": summary,
                "expected_summary_tokens": expected_summary_tokens,
                **extra,
            }
        )


HistoryPolicy = Annotated[
    ExactHistory | RecentHistory | ManagedHistory, Field(discriminator="kind")
]
"""One history policy, discriminated by `kind`."""


class _HistoryBuilder:
    """Builds history policies: `history.exact()`, `history.recent(...)`, `history(...)`."""

    def __call__(
        self,
        *,
        recent: int | dict[str, int] | None = None,
        on_miss: OnMiss = "inline",
        summary: HistorySummary | None = None,
    ) -> ManagedHistory:
        """Return a managed history policy (summary prefix plus exact recent suffix).

        Args:
            recent: A message cap, or `{"messages": ..., "tokens": ...}`; `None` derives the
                suffix from the strict max at each request.
            on_miss: `inline`, `recent-only` or `fail`.
            summary: The existing artifact, filled in at request time by the reader.

        Raises:
            ConfigurationError: For invalid caps or miss policy.
        """
        messages, tokens = _caps(recent) if recent is not None else (None, None)
        return ManagedHistory(
            recent_messages=messages, recent_tokens=tokens, on_miss=on_miss, summary=summary
        )

    @staticmethod
    def exact() -> ExactHistory:
        """Return the exact (complete, required) history policy."""
        return ExactHistory()

    @staticmethod
    def recent(
        limit: int | None = None, *, messages: int | None = None, tokens: int | None = None
    ) -> RecentHistory:
        """Return a recent-suffix policy.

        Args:
            limit: A bare message cap (`history.recent(12)`).
            messages: Message cap.
            tokens: Content-token cap.

        Returns:
            The policy; with no argument at all, a 20-message cap.

        Raises:
            ConfigurationError: For zero, negative or non-integer caps, or both `limit` and
                `messages`.
        """
        if limit is not None:
            if messages is not None:
                raise ConfigurationError("give the message cap once")
            messages = limit
        if messages is None and tokens is None:
            messages = DEFAULT_RECENT_MESSAGES
        return RecentHistory(messages=messages, tokens=tokens)


def _caps(recent: int | dict[str, int]) -> tuple[int | None, int | None]:
    if isinstance(recent, dict):
        unknown = set(recent) - {"messages", "tokens"}
        if unknown or not recent:
            raise ConfigurationError("recent accepts 'messages' and/or 'tokens'")
        messages, tokens = recent.get("messages"), recent.get("tokens")
    else:
        messages, tokens = recent, None
    check_cap("messages", messages)
    check_cap("tokens", tokens)
    return messages, tokens


history = _HistoryBuilder()
"""Policy builder: `history.exact()`, `history.recent(messages=12, tokens=8_000)`, `history()`."""
