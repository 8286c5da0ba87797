"""The provider fault matrix's data: scripted faults, rows, and the stack they run on.

Shared by `tests/e2e/test_provider_faults.py` (one row per fault and wire format) and
`tests/e2e/test_provider_fault_sequences.py` (random fault sequences, concurrently).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from temporalio.client import Client

import crux
from crux.errors import (
    ContextOverflowError,
    CruxError,
    GenerationFailedError,
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderNotFoundError,
    ProviderResponseError,
    ProviderTimeoutError,
    RequestCompositionError,
)
from providers.loopback import (
    ErrorReply,
    HangReply,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    LoopbackServer,
    RawReply,
    Reply,
    ResetReply,
    Responder,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from storage import create_pool
from tests.helpers import RunningWorker, new_worker, settings_for

Wire = Literal["openai", "anthropic"]

CANARY = "CANARY-7f3a9c-provider-body"
"""Placed in every provider body; must never surface outside PostgreSQL's Thread text."""

ANSWER = "The answer is forty-two."
QUESTION = "What is the answer?"
FAQ = "Frequently asked question. " * 200
"""A context the overflow recovery may drop."""
MODELS: dict[Wire, str] = {
    "openai": "openai:gpt-4o-mini",
    "anthropic": "anthropic:claude-sonnet-4-5",
}
GENERATION_PATHS: dict[Wire, str] = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}

FAST = crux.AttemptPolicySpec(
    max_attempts=3,
    initial_interval_seconds=0.1,
    backoff_coefficient=1.0,
    max_interval_seconds=0.1,
    timeout_seconds=30,
)
TWO = FAST.model_copy(update={"max_attempts": 2})
SHORT_TIMEOUT = TWO.model_copy(update={"timeout_seconds": 3})
RETRY_AFTER_SECONDS = 1.0

# A streamed answer long enough that the cut below falls after some text deltas and in the
# middle of an event (the servers send one event per piece of five characters).
STREAMED_ANSWER = f"Streamed words arrive in small pieces before the cut {CANARY}."
SSE_CUT_BYTES: dict[Wire, int] = {"openai": 700, "anthropic": 900}
JSON_CUT_BYTES = 40


def overflow_reply(wire: Wire) -> ErrorReply:
    """A context-overflow rejection in the provider's real shape."""
    if wire == "openai":
        return ErrorReply(
            status=400,
            error_type="invalid_request_error",
            code="context_length_exceeded",
            message=(
                "This model's maximum context length is 128000 tokens. However, your messages"
                f" resulted in 131000 tokens ({CANARY}). Please reduce the length of the"
                " messages."
            ),
        )
    return ErrorReply(
        status=400,
        error_type="invalid_request_error",
        message=f"prompt is too long: 208000 tokens > 200000 maximum ({CANARY})",
    )


def error_reply(status: int, **options: Any) -> ErrorReply:
    return ErrorReply(status=status, message=f"scripted failure quoting {CANARY}", **options)


LOOKUPS: list[str] = []
"""Every run of the `lookup` tool, in order."""


async def _lookup(arguments: dict[str, Any]) -> str:
    LOOKUPS.append(str(arguments.get("key")))
    return f"found {CANARY}"


LOOKUP = crux.tool(
    "lookup",
    _lookup,
    description="Look a key up",
    parameters={"type": "object", "properties": {"key": {"type": "string"}}},
)


def asks_for_lookup() -> TextReply:
    """The model's first reply in a tool-round row: one call of `lookup`."""
    return tool_call_reply(ScriptedToolCall(name="lookup", arguments={"key": "k"}))


def gateway_page() -> ErrorReply:
    """A proxy's HTML error page instead of the provider's JSON."""
    page = f"<html><body><h1>502 Bad Gateway</h1><p>{CANARY}</p></body></html>"
    return ErrorReply(status=502, body=page.encode(), headers={"content-type": "text/html"})


def rate_limited() -> ErrorReply:
    return error_reply(429, headers={"retry-after": f"{RETRY_AFTER_SECONDS:g}"})


def malformed_body() -> RawReply:
    return RawReply(status=200, body=f'{{"id": "x", "choices": [{{"{CANARY}'.encode())


def malformed_event(wire: Wire) -> RawReply:
    event = "event: message_start\n" if wire == "anthropic" else ""
    body = f'{event}data: {{"type": "message_start", "{CANARY}\n\n'
    return RawReply(status=200, body=body.encode(), headers={"content-type": "text/event-stream"})


def reset_mid_body() -> ResetReply:
    return ResetReply(reply=TextReply(text=f"{ANSWER} {CANARY}"), after_bytes=JSON_CUT_BYTES)


def sse_cut(wire: Wire) -> ResetReply:
    # Paced like a real stream, so the worker stages some text before the cut.
    return ResetReply(
        reply=TextReply(text=STREAMED_ANSWER),
        after_bytes=SSE_CUT_BYTES[wire],
        piece_delay_seconds=0.03,
    )


@dataclass(frozen=True)
class Row:
    """One fault of one wire format and everything the test expects of it.

    Attributes:
        fault: What the loopback server does (the table's first column).
        wire: The wire format.
        faults: The scripted fault replies, in order.
        recovers: A success is scripted after the faults.
        attempts: Provider calls the server must receive.
        error: The exact class of the caller's error (`None`: the turn is committed).
        code: `status error_type` of a provider error, or the error's code.
        retryable: The caller's error's retryable flag.
        stream: Run through `Runtime.stream`.
        policy: The call's attempt policy.
        waits_retry_after: The second attempt must come `retry-after` after the first.
        droppable: The prompt carries a droppable context the overflow recovery can drop.
        tool_round: The prompt offers `LOOKUP`; the first call asks for it (its reply is the
            first of `faults`), the faults hit the call after the tool round.
    """

    fault: str
    wire: Wire
    faults: tuple[Reply, ...]
    recovers: bool
    attempts: int
    error: type[CruxError] | None = None
    code: str = "-"
    retryable: bool | None = None
    stream: bool = False
    policy: crux.AttemptPolicySpec = FAST
    waits_retry_after: bool = False
    droppable: bool = False
    tool_round: bool = False

    @property
    def id(self) -> str:
        slug = "".join(c if c.isalnum() else "-" for c in self.fault.lower()).strip("-")
        while "--" in slug:
            slug = slug.replace("--", "-")
        return f"{self.wire}-{slug}"

    def line(self) -> str:
        """The row as it appears in the module docstring's table."""
        committed = "1 group" if self.error is None else "none"
        if self.error is None:
            seen = "the turn"
        else:
            flag = "retryable" if self.retryable else "final"
            seen = f"{self.error.__name__} {self.code}, {flag}"
        return f"| {self.fault} | {self.wire} | {self.attempts} | {committed} | {seen} |"


def _ok(fault: str, wire: Wire, faults: list[Reply], **options: Any) -> Row:
    """A row that recovers: the faults, then a success."""
    return Row(fault, wire, tuple(faults), True, len(faults) + 1, **options)


def _fails(
    fault: str,
    wire: Wire,
    faults: list[Reply],
    expected: tuple[type[CruxError], str, bool],
    **options: Any,
) -> Row:
    """A row that fails: one fault per attempt, then the caller's error."""
    error, code, retryable = expected
    return Row(fault, wire, tuple(faults), False, len(faults), error, code, retryable, **options)


def rows_of(wire: Wire) -> list[Row]:
    """The matrix for one wire format."""
    ours = {"openai": "server_error", "anthropic": "api_error"}[wire]
    rate = {"openai": "rate_limit_exceeded", "anthropic": "rate_limit_error"}[wire]
    overloaded = {"openai": "server_error", "anthropic": "overloaded_error"}[wire]
    auth = {"openai": "invalid_request_error", "anthropic": "authentication_error"}[wire]
    denied = {"openai": "invalid_request_error", "anthropic": "permission_error"}[wire]
    missing = {"openai": "invalid_request_error", "anthropic": "not_found_error"}[wire]
    overflow = {"openai": "context_length_exceeded", "anthropic": "invalid_request_error"}[wire]
    http, unreachable, garbled = ProviderHTTPError, ProviderConnectionError, ProviderResponseError
    rows = [
        _ok("429 x1", wire, [rate_limited()], waits_retry_after=True),
        _fails(
            "429, exhausts",
            wire,
            [rate_limited()] * 2,
            (http, f"429 {rate}", True),
            policy=TWO,
            waits_retry_after=True,
        ),
        _ok("500 x2", wire, [error_reply(500)] * 2),
        _fails("500, exhausts", wire, [error_reply(500)] * 3, (http, f"500 {ours}", True)),
        _fails(
            "500 x-should-retry: false",
            wire,
            [error_reply(500, headers={"x-should-retry": "false"})],
            (http, f"500 {ours}", False),
        ),
    ]
    for status, kind in ((502, ours), (503, ours), (529, overloaded)):
        expected = (http, f"{status} {kind}", True)
        rows.append(_ok(f"{status} x1", wire, [error_reply(status)]))
        rows.append(
            _fails(f"{status}, exhausts", wire, [error_reply(status)] * 2, expected, policy=TWO)
        )
    rows.append(
        _fails(
            "502 proxy HTML, exhausts",
            wire,
            [gateway_page()] * 2,
            (http, "502 None", True),
            policy=TWO,
        )
    )
    rows += [
        _ok(
            "500 after tools x1",
            wire,
            [asks_for_lookup(), error_reply(500)],
            tool_round=True,
        ),
        _fails(
            "500 after tools, exhausts",
            wire,
            [asks_for_lookup(), error_reply(500), error_reply(500)],
            (http, f"500 {ours}", True),
            policy=TWO,
            tool_round=True,
        ),
    ]
    timed_out = (ProviderTimeoutError, "-", True)
    rows += [
        _ok("read timeout x1", wire, [HangReply()], policy=SHORT_TIMEOUT),
        _fails("read timeout, exhausts", wire, [HangReply()] * 2, timed_out, policy=SHORT_TIMEOUT),
        _ok("reset mid-body x1", wire, [reset_mid_body()]),
        _fails(
            "reset mid-body, exhausts",
            wire,
            [reset_mid_body()] * 2,
            (unreachable, "-", True),
            policy=TWO,
        ),
        _ok("SSE cut mid-event x1", wire, [sse_cut(wire)], stream=True),
        _fails(
            "SSE cut mid-event, exhausts",
            wire,
            [sse_cut(wire)] * 2,
            (unreachable, "-", True),
            stream=True,
            policy=TWO,
        ),
        _ok("503 x1, streamed", wire, [error_reply(503)], stream=True),
        _fails(
            "malformed SSE event", wire, [malformed_event(wire)], (garbled, "-", False), stream=True
        ),
        _fails("malformed JSON body", wire, [malformed_body()], (garbled, "-", False)),
        _fails(
            "400 overflow",
            wire,
            [overflow_reply(wire)],
            (RequestCompositionError, "REQUEST_TOO_LARGE", False),
        ),
        _ok("overflow x1, +ctx", wire, [overflow_reply(wire)], droppable=True),
        _fails(
            "overflow x2, +ctx",
            wire,
            [overflow_reply(wire)] * 2,
            (ContextOverflowError, f"400 {overflow}", False),
            droppable=True,
        ),
        _fails("401", wire, [error_reply(401)], (ProviderAuthError, f"401 {auth}", False)),
        _fails("403", wire, [error_reply(403)], (ProviderAuthError, f"403 {denied}", False)),
        _fails("404", wire, [error_reply(404)], (ProviderNotFoundError, f"404 {missing}", False)),
    ]
    return rows


ROWS = rows_of("openai") + rows_of("anthropic")


def table() -> str:
    """The docstring table of `ROWS`."""
    return "\n".join(row.line() for row in ROWS)


def code_of(error: CruxError) -> str:
    """The code column of an error: `status error_type` for HTTP errors, else its code."""
    if isinstance(error, ProviderHTTPError):
        return f"{error.status_code} {error.error_type}"
    code = getattr(error, "code", None)
    return code if isinstance(code, str) else "-"


def retryable_of(error: CruxError) -> bool:
    """Whether the caller's error says a later call may succeed."""
    if isinstance(error, ProviderError):
        return error.retryable
    return isinstance(error, GenerationFailedError) and error.reason == "timed_out"


@dataclass
class Stack:
    """A worker serving both wire formats, its pool and the loopback servers."""

    worker: RunningWorker
    pool: asyncpg.Pool
    client: Client
    servers: dict[Wire, LoopbackServer]


@asynccontextmanager
async def fault_stack(
    client: Client,
    postgres_url: str,
    template_database: str,
    responders: Sequence[Responder | None] = (None, None),
    pool_size: int = 8,
    tools: Sequence[crux.Tool] = (),
) -> AsyncGenerator[Stack]:
    """A fresh database, both loopback servers and one worker, for a whole module."""
    name = f"crux_test_faults_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    finally:
        await admin.close()
    parts = urlsplit(postgres_url)
    database_url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    try:
        async with (
            LoopbackOpenAIServer(responder=responders[0]) as openai,
            LoopbackAnthropicServer(responder=responders[1]) as anthropic,
        ):
            settings = settings_for(
                database_url, openai_base_url=openai.base_url, anthropic_base_url=anthropic.base_url
            )
            pool = await create_pool(database_url, min_size=1, max_size=pool_size)
            try:
                async with new_worker(client, pool, settings, tools=tools) as worker:
                    yield Stack(worker, pool, client, {"openai": openai, "anthropic": anthropic})
            finally:
                await pool.close()
    finally:
        logging.getLogger().setLevel(logging.WARNING)
        admin = await asyncpg.connect(postgres_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()
