"""Provider fault matrix: every fault of both wire formats, through real managed generations.

Each row runs one generation (`Runtime.generate`, or `Runtime.stream` for the streamed rows)
on a real worker, Temporal dev server and PostgreSQL, against the loopback HTTP server of its
wire format (OpenAI chat completions or Anthropic Messages) scripted with the fault. The
call's `AttemptPolicySpec` keeps it short: 2 or 3 attempts, 0.1 s backoff (the dev server
starts retries about 1 s apart anyway), a 3 s attempt timeout for the read-timeout rows.
Every scripted provider body (error bodies, the malformed body, the cut replies) carries a
canary string.

Asserted per row: the provider calls the loopback server received (`attempts`); what
PostgreSQL holds afterwards (`committed`: exactly one user+assistant causal group on
success, no message and no group on failure; in both cases no staged row but the
content-free identity fingerprint of the used generation id); the typed error the caller
sees (exact class, code as `status error_type` for HTTP errors, retryable flag); that the
canary is in none of the error's text, the worker's log lines or the workflow history; for
the 429 rows, that the retry waited for `retry-after` (1 s) rather than the policy's 0.1 s;
for the streamed rows, that text of the cut attempt reached the caller and a `StreamReset`
followed before the committed result.

"xN": the fault is scripted N times, then a success; "exhausts": on every attempt. "reset
mid-body": the connection is reset (TCP RST) part-way through the JSON body; "SSE cut
mid-event": part-way through a stream event. "1 group": one user+assistant causal group
committed; "none": no message, no group. Every 429 carries `retry-after: 1`. The context
overflow (the provider's real 400 body) makes the workflow plan one linked recovery
request under a stricter ceiling: a one-message request cannot shrink, so the caller gets
`REQUEST_TOO_LARGE` without a second call; with a droppable context ("+ctx") the recovery
call goes out without it, and a second overflow is final. The table is rendered from `ROWS`,
which the test is parametrised over; a test checks that this docstring shows it unchanged.

| fault | wire | attempts | committed | caller sees: class, code, retryable |
| --- | --- | --- | --- | --- |
| 429 x1 | openai | 2 | 1 group | the turn |
| 429, exhausts | openai | 2 | none | ProviderHTTPError 429 rate_limit_exceeded, retryable |
| 500 x2 | openai | 3 | 1 group | the turn |
| 500, exhausts | openai | 3 | none | ProviderHTTPError 500 server_error, retryable |
| 502 x1 | openai | 2 | 1 group | the turn |
| 502, exhausts | openai | 2 | none | ProviderHTTPError 502 server_error, retryable |
| 503 x1 | openai | 2 | 1 group | the turn |
| 503, exhausts | openai | 2 | none | ProviderHTTPError 503 server_error, retryable |
| 529 x1 | openai | 2 | 1 group | the turn |
| 529, exhausts | openai | 2 | none | ProviderHTTPError 529 server_error, retryable |
| read timeout x1 | openai | 2 | 1 group | the turn |
| read timeout, exhausts | openai | 2 | none | ProviderTimeoutError -, retryable |
| reset mid-body x1 | openai | 2 | 1 group | the turn |
| reset mid-body, exhausts | openai | 2 | none | ProviderConnectionError -, retryable |
| SSE cut mid-event x1 | openai | 2 | 1 group | the turn |
| SSE cut mid-event, exhausts | openai | 2 | none | ProviderConnectionError -, retryable |
| 503 x1, streamed | openai | 2 | 1 group | the turn |
| malformed SSE event | openai | 1 | none | ProviderResponseError -, final |
| malformed JSON body | openai | 1 | none | ProviderResponseError -, final |
| 400 overflow | openai | 1 | none | RequestCompositionError REQUEST_TOO_LARGE, final |
| overflow x1, +ctx | openai | 2 | 1 group | the turn |
| overflow x2, +ctx | openai | 2 | none | ContextOverflowError 400 context_length_exceeded, final |
| 401 | openai | 1 | none | ProviderAuthError 401 invalid_request_error, final |
| 403 | openai | 1 | none | ProviderAuthError 403 invalid_request_error, final |
| 404 | openai | 1 | none | ProviderNotFoundError 404 invalid_request_error, final |
| 429 x1 | anthropic | 2 | 1 group | the turn |
| 429, exhausts | anthropic | 2 | none | ProviderHTTPError 429 rate_limit_error, retryable |
| 500 x2 | anthropic | 3 | 1 group | the turn |
| 500, exhausts | anthropic | 3 | none | ProviderHTTPError 500 api_error, retryable |
| 502 x1 | anthropic | 2 | 1 group | the turn |
| 502, exhausts | anthropic | 2 | none | ProviderHTTPError 502 api_error, retryable |
| 503 x1 | anthropic | 2 | 1 group | the turn |
| 503, exhausts | anthropic | 2 | none | ProviderHTTPError 503 api_error, retryable |
| 529 x1 | anthropic | 2 | 1 group | the turn |
| 529, exhausts | anthropic | 2 | none | ProviderHTTPError 529 overloaded_error, retryable |
| read timeout x1 | anthropic | 2 | 1 group | the turn |
| read timeout, exhausts | anthropic | 2 | none | ProviderTimeoutError -, retryable |
| reset mid-body x1 | anthropic | 2 | 1 group | the turn |
| reset mid-body, exhausts | anthropic | 2 | none | ProviderConnectionError -, retryable |
| SSE cut mid-event x1 | anthropic | 2 | 1 group | the turn |
| SSE cut mid-event, exhausts | anthropic | 2 | none | ProviderConnectionError -, retryable |
| 503 x1, streamed | anthropic | 2 | 1 group | the turn |
| malformed SSE event | anthropic | 1 | none | ProviderResponseError -, final |
| malformed JSON body | anthropic | 1 | none | ProviderResponseError -, final |
| 400 overflow | anthropic | 1 | none | RequestCompositionError REQUEST_TOO_LARGE, final |
| overflow x1, +ctx | anthropic | 2 | 1 group | the turn |
| overflow x2, +ctx | anthropic | 2 | none | ContextOverflowError 400 invalid_request_error, final |
| 401 | anthropic | 1 | none | ProviderAuthError 401 authentication_error, final |
| 403 | anthropic | 1 | none | ProviderAuthError 403 permission_error, final |
| 404 | anthropic | 1 | none | ProviderNotFoundError 404 not_found_error, final |
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

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
from crux.logs import configure_logging
from crux.models import workflow_id_for
from providers.loopback import (
    ErrorReply,
    HangReply,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    LoopbackServer,
    RawReply,
    RecordedRequest,
    Reply,
    ResetReply,
    TextReply,
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


def _overflow(wire: Wire) -> ErrorReply:
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


def _error(status: int, **options: Any) -> ErrorReply:
    return ErrorReply(status=status, message=f"scripted failure quoting {CANARY}", **options)


def _rate_limited() -> ErrorReply:
    return _error(429, headers={"retry-after": f"{RETRY_AFTER_SECONDS:g}"})


def _malformed() -> RawReply:
    return RawReply(status=200, body=f'{{"id": "x", "choices": [{{"{CANARY}'.encode())


def _malformed_event(wire: Wire) -> RawReply:
    event = "event: message_start\n" if wire == "anthropic" else ""
    body = f'{event}data: {{"type": "message_start", "{CANARY}\n\n'
    return RawReply(status=200, body=body.encode(), headers={"content-type": "text/event-stream"})


def _reset_json() -> ResetReply:
    return ResetReply(reply=TextReply(text=f"{ANSWER} {CANARY}"), after_bytes=JSON_CUT_BYTES)


def _sse_cut(wire: Wire) -> ResetReply:
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


def _rows(wire: Wire) -> list[Row]:
    ours = {"openai": "server_error", "anthropic": "api_error"}[wire]
    rate = {"openai": "rate_limit_exceeded", "anthropic": "rate_limit_error"}[wire]
    overloaded = {"openai": "server_error", "anthropic": "overloaded_error"}[wire]
    auth = {"openai": "invalid_request_error", "anthropic": "authentication_error"}[wire]
    denied = {"openai": "invalid_request_error", "anthropic": "permission_error"}[wire]
    missing = {"openai": "invalid_request_error", "anthropic": "not_found_error"}[wire]
    overflow = {"openai": "context_length_exceeded", "anthropic": "invalid_request_error"}[wire]
    rows = [
        Row("429 x1", wire, (_rate_limited(),), True, 2, waits_retry_after=True),
        Row(
            "429, exhausts",
            wire,
            (_rate_limited(),) * 2,
            False,
            2,
            ProviderHTTPError,
            f"429 {rate}",
            True,
            policy=TWO,
            waits_retry_after=True,
        ),
        Row("500 x2", wire, (_error(500),) * 2, True, 3),
        Row(
            "500, exhausts",
            wire,
            (_error(500),) * 3,
            False,
            3,
            ProviderHTTPError,
            f"500 {ours}",
            True,
        ),
    ]
    for status, kind in ((502, ours), (503, ours), (529, overloaded)):
        rows.append(Row(f"{status} x1", wire, (_error(status),), True, 2))
        rows.append(
            Row(
                f"{status}, exhausts",
                wire,
                (_error(status),) * 2,
                False,
                2,
                ProviderHTTPError,
                f"{status} {kind}",
                True,
                policy=TWO,
            )
        )
    rows += [
        Row("read timeout x1", wire, (HangReply(),), True, 2, policy=SHORT_TIMEOUT),
        Row(
            "read timeout, exhausts",
            wire,
            (HangReply(),) * 2,
            False,
            2,
            ProviderTimeoutError,
            "-",
            True,
            policy=SHORT_TIMEOUT,
        ),
        Row("reset mid-body x1", wire, (_reset_json(),), True, 2),
        Row(
            "reset mid-body, exhausts",
            wire,
            (_reset_json(),) * 2,
            False,
            2,
            ProviderConnectionError,
            "-",
            True,
            policy=TWO,
        ),
        Row("SSE cut mid-event x1", wire, (_sse_cut(wire),), True, 2, stream=True),
        Row(
            "SSE cut mid-event, exhausts",
            wire,
            (_sse_cut(wire),) * 2,
            False,
            2,
            ProviderConnectionError,
            "-",
            True,
            stream=True,
            policy=TWO,
        ),
        Row("503 x1, streamed", wire, (_error(503),), True, 2, stream=True),
        Row(
            "malformed SSE event",
            wire,
            (_malformed_event(wire),),
            False,
            1,
            ProviderResponseError,
            "-",
            False,
            stream=True,
        ),
        Row(
            "malformed JSON body",
            wire,
            (_malformed(),),
            False,
            1,
            ProviderResponseError,
            "-",
            False,
        ),
        Row(
            "400 overflow",
            wire,
            (_overflow(wire),),
            False,
            1,
            RequestCompositionError,
            "REQUEST_TOO_LARGE",
            False,
        ),
        Row("overflow x1, +ctx", wire, (_overflow(wire),), True, 2, droppable=True),
        Row(
            "overflow x2, +ctx",
            wire,
            (_overflow(wire),) * 2,
            False,
            2,
            ContextOverflowError,
            f"400 {overflow}",
            False,
            droppable=True,
        ),
        Row("401", wire, (_error(401),), False, 1, ProviderAuthError, f"401 {auth}", False),
        Row("403", wire, (_error(403),), False, 1, ProviderAuthError, f"403 {denied}", False),
        Row("404", wire, (_error(404),), False, 1, ProviderNotFoundError, f"404 {missing}", False),
    ]
    return rows


ROWS = _rows("openai") + _rows("anthropic")


def table() -> str:
    """The docstring table of `ROWS`."""
    return "\n".join(row.line() for row in ROWS)


# --- fixtures: one database, one worker and both servers for the whole module -------------


@dataclass
class Stack:
    worker: RunningWorker
    pool: asyncpg.Pool
    client: Client
    servers: dict[Wire, LoopbackServer]


@pytest_asyncio.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, postgres_url: str, template_database: str
) -> AsyncIterator[Stack]:
    name = f"crux_test_faults_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    finally:
        await admin.close()
    parts = urlsplit(postgres_url)
    database_url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    try:
        async with LoopbackOpenAIServer() as openai, LoopbackAnthropicServer() as anthropic:
            settings = settings_for(
                database_url, openai_base_url=openai.base_url, anthropic_base_url=anthropic.base_url
            )
            pool = await create_pool(database_url, min_size=1, max_size=8)
            try:
                async with new_worker(temporal_env.client, pool, settings) as worker:
                    yield Stack(
                        worker,
                        pool,
                        temporal_env.client,
                        {"openai": openai, "anthropic": anthropic},
                    )
            finally:
                await pool.close()
    finally:
        logging.getLogger().setLevel(logging.WARNING)
        admin = await asyncpg.connect(postgres_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


# --- the matrix ------------------------------------------------------------------------------


def test_the_docstring_table_is_the_parametrised_rows() -> None:
    assert __doc__ is not None
    assert __doc__.rstrip().endswith(table())
    assert len({row.id for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_the_stream_cut_falls_inside_an_event_after_some_text(wire: Wire) -> None:
    server = LoopbackOpenAIServer() if wire == "openai" else LoopbackAnthropicServer()
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    request = RecordedRequest("POST", GENERATION_PATHS[wire], {}, b"", body)
    events = server.render(request, TextReply(text=STREAMED_ANSWER)).chunks
    assert events is not None
    ends = list(itertools.accumulate(len(event) for event in events))
    cut = SSE_CUT_BYTES[wire]
    assert cut < ends[-1] and cut not in ends
    assert STREAMED_ANSWER[:5].encode() in b"".join(events)[:cut]


async def _run(stack: Stack, row: Row, thread_id: str) -> tuple[Any, list[Any]]:
    """The generation's outcome (a `Generation` or the raised error) and its stream updates."""
    runtime = stack.worker.runtime
    options: dict[str, Any] = {
        "thread": thread_id,
        "model": MODELS[row.wire],
        "generation_id": "g1",
        "attempt_policy": row.policy,
    }
    prompt: crux.Prompt | str = QUESTION
    if row.droppable:
        prompt = crux.prompt(id="with-faq", use=[crux.droppable(crux.context("faq", FAQ))])
        options["input"] = QUESTION
    updates: list[Any] = []
    try:
        if not row.stream:
            return await runtime.generate(prompt, **options), updates
        async for update in runtime.stream(prompt, **options):
            updates.append(update)
        return updates[-1].generation, updates
    except CruxError as error:
        return error, updates


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
async def test_fault(row: Row, stack: Stack, capfd: pytest.CaptureFixture[str]) -> None:
    # Bound to this test's captured stderr (a handler kept from an earlier test would
    # write to that test's closed capture).
    configure_logging(log_format="json", level="debug")
    server = stack.servers[row.wire]
    server.clear()
    success = TextReply(text=STREAMED_ANSWER if row.stream else ANSWER)
    server.enqueue(*row.faults, *((success,) if row.recovers else ()))
    thread_id = f"faults:{row.id}:{uuid.uuid4().hex[:6]}"

    outcome, updates = await _run(stack, row, thread_id)

    calls = [r for r in server.requests if r.path.split("?")[0] == GENERATION_PATHS[row.wire]]
    assert len(calls) == row.attempts, [r.path for r in server.requests]
    assert server.pending == 0
    assert all(bool(call.body.get("stream")) is row.stream for call in calls)
    if row.droppable:
        # The recovery call went out without the context the first one overflowed with.
        assert b"Frequently asked" in calls[0].raw_body
        assert b"Frequently asked" not in calls[1].raw_body
    if row.waits_retry_after:
        gap = calls[1].received_at - calls[0].received_at
        assert gap >= RETRY_AFTER_SECONDS - 0.05, gap

    messages = await stack.pool.fetch(
        "SELECT role FROM crux_thread_messages WHERE thread_id = $1"
        " ORDER BY published_version, seq",
        thread_id,
    )
    groups = await stack.pool.fetchval(
        "SELECT count(*) FROM crux_thread_groups WHERE thread_id = $1", thread_id
    )
    staged = await stack.pool.fetch(
        "SELECT kind FROM crux_generation_staging WHERE thread_id = $1", thread_id
    )
    if row.error is None:
        assert isinstance(outcome, crux.Generation), outcome
        assert outcome.text == success.text
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert groups == 1
        # Only the content-free fingerprint of the used generation id stays staged.
        assert [s["kind"] for s in staged] == ["identity"]
        if row.stream:
            kinds = [type(u).__name__ for u in updates]
            assert kinds[-1] == "StreamCommitted"
            if any(isinstance(fault, ResetReply) for fault in row.faults):
                # Text of the cut attempt reached the caller before the reset was announced.
                assert kinds.index("StreamDelta") < kinds.index("StreamReset"), kinds
            else:
                # The failed attempt streamed nothing: the deltas are the answer alone.
                deltas = [u.text for u in updates if isinstance(u, crux.StreamDelta)]
                assert "StreamReset" not in kinds and "".join(deltas) == success.text
    else:
        assert type(outcome) is row.error, repr(outcome)
        error: CruxError = outcome
        assert _code(error) == row.code
        assert _retryable(error) is row.retryable
        assert messages == [] and groups == 0
        assert [s["kind"] for s in staged] == ["identity"]
        assert CANARY not in str(error) and CANARY not in repr(error.args)
        if isinstance(error, ProviderError):
            assert error.provider == row.wire and error.model == MODELS[row.wire]

    history = await stack.client.get_workflow_handle(
        workflow_id_for("g1", thread_id)
    ).fetch_history()
    assert CANARY not in history.to_json()
    logs = capfd.readouterr()
    assert thread_id in logs.out + logs.err  # the worker's log lines were captured
    assert CANARY not in logs.out + logs.err


def _code(error: CruxError) -> str:
    if isinstance(error, ProviderHTTPError):
        return f"{error.status_code} {error.error_type}"
    code = getattr(error, "code", None)
    return code if isinstance(code, str) else "-"


def _retryable(error: CruxError) -> bool:
    if isinstance(error, ProviderError):
        return error.retryable
    return isinstance(error, GenerationFailedError) and error.reason == "timed_out"
