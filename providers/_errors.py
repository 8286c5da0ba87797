"""One error classification shared by every adapter.

Statuses 408, 409, 429, 5xx (Anthropic's 529 included) and network failures are retryable;
other 4xx are not. `x-should-retry` overrides the status when present. `retry-after-ms`, then
`retry-after` (seconds or an HTTP date, measured against the response's `Date`) give the delay.

A context-overflow rejection becomes `ContextOverflowError` so the workflow can plan one linked
recovery request. Provider error messages are read only to classify; they are never copied into
our errors or logs, since providers quote prompt text in them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from providers._json import as_object
from vocabulary.errors import (
    ContextOverflowError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
    ProviderTimeoutError,
    http_error,
)

MAX_RETRY_AFTER_SECONDS = 24 * 3600.0
"""Longer hints are treated as bogus and ignored."""

_OVERFLOW_CODES = frozenset(
    {
        "context_length_exceeded",
        "context_window_exceeded",
        "exceed_context_size_error",
        "string_above_max_length",
    }
)
_OVERFLOW_PATTERNS = re.compile(
    r"maximum context length|context length|context window|context limit|context_length_exceeded"
    r"|prompt is too long|input is too long|too many tokens|exceeds? the (?:available )?context"
    r"|reduce the length of the (?:messages|prompt)|exceed_context_size",
    re.IGNORECASE,
)
# "prompt is too long: 208000 tokens > 200000 maximum" (Anthropic) and
# "maximum context length is 8192 tokens. However, you requested 9000 tokens" (OpenAI, vLLM).
_ANTHROPIC_NUMBERS = re.compile(r"(\d+)\s*tokens?\s*>\s*(\d+)")
# "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000" (Anthropic).
_ANTHROPIC_SUM = re.compile(r"(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)")
_OPENAI_NUMBERS = re.compile(
    r"maximum context length is (\d+).*?(?:requested|resulted in) (\d+)", re.S
)


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait before retrying, else `None`.

    `retry-after-ms` wins, then `retry-after`; without either, OpenAI's reset headers for an
    exhausted limit (`x-ratelimit-remaining-requests: 0` with `x-ratelimit-reset-requests: 6s`,
    and the same for tokens) give the wait.
    """
    value: float | None = None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = None
    if value is None:
        raw = headers.get("retry-after")
        if raw is not None:
            value = _parse_retry_after_value(raw.strip(), headers.get("date"))
    if value is None:
        value = _rate_limit_reset(headers)
    if value is None or value != value or value < 0 or value > MAX_RETRY_AFTER_SECONDS:
        return None
    return value


_DURATION = re.compile(
    r"(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m(?!s))?"
    r"(?:(?P<s>\d+(?:\.\d+)?)s)?(?:(?P<ms>\d+(?:\.\d+)?)ms)?"
)


def _parse_duration(raw: str) -> float | None:
    """Seconds in a Go-style duration such as `6m0s`, `1.5s` or `20ms`."""
    match = _DURATION.fullmatch(raw.strip())
    if match is None or not any(match.groupdict().values()):
        return None
    parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
    return (
        parts.get("h", 0.0) * 3600
        + parts.get("m", 0.0) * 60
        + parts.get("s", 0.0)
        + parts.get("ms", 0.0) / 1000
    )


def _rate_limit_reset(headers: httpx.Headers) -> float | None:
    waits: list[float] = []
    for kind in ("requests", "tokens"):
        if headers.get(f"x-ratelimit-remaining-{kind}", "").strip() != "0":
            continue
        reset = headers.get(f"x-ratelimit-reset-{kind}")
        wait = _parse_duration(reset) if reset is not None else None
        if wait is not None:
            waits.append(wait)
    return max(waits) if waits else None


def _parse_retry_after_value(raw: str, date: str | None) -> float | None:
    try:
        return float(raw)
    except ValueError:
        pass
    # An HTTP date is only meaningful against a clock; the response's own `Date` is the
    # provider's clock, which avoids depending on ours.
    if date is None:
        return None
    try:
        return max(0.0, (parsedate_to_datetime(raw) - parsedate_to_datetime(date)).total_seconds())
    except (TypeError, ValueError):
        return None


def parse_should_retry(headers: httpx.Headers) -> bool | None:
    """The `x-should-retry` header as a boolean, or `None` when absent or unreadable."""
    raw = headers.get("x-should-retry")
    if raw is None:
        return None
    lowered = raw.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


@dataclass(frozen=True)
class _ErrorFields:
    kind: str | None = None
    code: str | None = None
    message: str = ""
    requested: int | None = None
    limit: int | None = None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


_IDENTIFIER = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def _identifier(value: Any) -> str | None:
    # Error types and codes end up in our error messages; accept only identifier-like values
    # so a server that puts prose (possibly quoting the prompt) there cannot leak it.
    return value if isinstance(value, str) and _IDENTIFIER.fullmatch(value) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _error_fields(body: bytes) -> _ErrorFields:
    """Fields of an error body in OpenAI, Anthropic, vLLM or llama.cpp shape."""
    try:
        data: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return _ErrorFields(message=body[:2000].decode("utf-8", "replace"))
    top = as_object(data) or {}
    nested: Any = top.get("error")
    if isinstance(nested, str):
        return _ErrorFields(message=nested)
    # OpenAI and llama.cpp nest the error; Anthropic nests it under a `type: error` envelope;
    # vLLM puts the fields at the top level.
    error = as_object(nested) or top
    code: Any = error.get("code")
    return _ErrorFields(
        kind=_identifier(error.get("type")),
        code=_identifier(code) if not isinstance(code, str) or not code.isdigit() else None,
        message=_str(error.get("message")) or _str(top.get("detail")) or "",
        requested=_int(error.get("n_prompt_tokens")),
        limit=_int(error.get("n_ctx")),
    )


def _overflow_numbers(fields: _ErrorFields) -> tuple[int | None, int | None]:
    """`(requested, limit)` token numbers when the body states them."""
    if fields.requested is not None or fields.limit is not None:
        return fields.requested, fields.limit
    match = _ANTHROPIC_SUM.search(fields.message)
    if match:
        # Input plus the output reserve overflowed: report the input against the room the
        # reserve left for it.
        output, limit = int(match.group(2)), int(match.group(3))
        return int(match.group(1)), max(0, limit - output)
    match = _ANTHROPIC_NUMBERS.search(fields.message)
    if match:
        return int(match.group(1)), int(match.group(2))
    match = _OPENAI_NUMBERS.search(fields.message)
    if match:
        return int(match.group(2)), int(match.group(1))
    return None, None


def is_context_overflow(
    status_code: int, error_type: str | None, code: str | None, message: str
) -> bool:
    """Whether a rejection means the input is larger than the model's context."""
    if status_code not in (400, 413, 422):
        return False
    if code in _OVERFLOW_CODES or error_type in _OVERFLOW_CODES:
        return True
    return bool(_OVERFLOW_PATTERNS.search(message))


def error_from_response(
    provider: str, status_code: int, headers: httpx.Headers, body: bytes
) -> ProviderHTTPError:
    """Classify a non-success response; the provider's message text is not kept."""
    fields = _error_fields(body)
    error_type = fields.code or fields.kind
    if is_context_overflow(status_code, fields.kind, fields.code, fields.message):
        requested, limit = _overflow_numbers(fields)
        return ContextOverflowError(
            provider,
            status_code,
            error_type=error_type or "context_length_exceeded",
            requested_tokens=requested,
            limit_tokens=limit,
        )
    return http_error(
        provider,
        status_code,
        retry_after=parse_retry_after(headers),
        error_type=error_type,
        should_retry=parse_should_retry(headers),
    )


def error_from_exception(provider: str, exc: httpx.HTTPError) -> ProviderError:
    """Map an httpx transport failure (timeouts, refused or dropped connections)."""
    name = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return ProviderTimeoutError(provider, f"request timed out ({name})")
    if isinstance(exc, httpx.TransportError):
        return ProviderConnectionError(provider, f"connection failed ({name})")
    return ProviderResponseError(provider, f"unusable response ({name})")


def malformed(provider: str, what: str) -> ProviderResponseError:
    """A response that parsed as HTTP but not as the provider's format."""
    return ProviderResponseError(provider, f"malformed response: {what}")
