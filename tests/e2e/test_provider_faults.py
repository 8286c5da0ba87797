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
for the SSE-cut rows, that text of the cut attempt reached the caller and a `StreamReset`
followed before the committed result (other streamed rows: the deltas are the answer
alone). A plain Temporal client (any language) reads the same failure as an
`ApplicationError` whose type is the class name and whose keyed details carry the code,
provider and model (checked for a 529 and an attempt timeout).

"xN": the fault is scripted N times, then a success; "exhausts": on every attempt. "reset
mid-body": the connection is reset (TCP RST) part-way through the JSON body; "SSE cut
mid-event": part-way through a stream event. "after tools": the first call asks for a tool,
which runs exactly once; the fault hits the call after the tool round (attempts count both
calls). "1 group": one causal group committed (user and answer; after tools: user, tool
call, tool result, answer); "none": no message, no group. Every 429 carries
`retry-after: 1`. The context overflow (the provider's real 400 body) makes the workflow
plan one linked recovery request under a stricter ceiling: a one-message request cannot
shrink, so the caller gets `REQUEST_TOO_LARGE` without a second call; with a droppable
context ("+ctx") the recovery call goes out without it, and a second overflow is final. The
table is rendered from `tests.faults.ROWS`, which the test is parametrised over; a test
checks that this docstring shows it unchanged.

| fault | wire | attempts | committed | caller sees: class, code, retryable |
| --- | --- | --- | --- | --- |
| 429 x1 | openai | 2 | 1 group | the turn |
| 429, exhausts | openai | 2 | none | ProviderHTTPError 429 rate_limit_exceeded, retryable |
| 500 x2 | openai | 3 | 1 group | the turn |
| 500, exhausts | openai | 3 | none | ProviderHTTPError 500 server_error, retryable |
| 500 x-should-retry: false | openai | 1 | none | ProviderHTTPError 500 server_error, final |
| 502 x1 | openai | 2 | 1 group | the turn |
| 502, exhausts | openai | 2 | none | ProviderHTTPError 502 server_error, retryable |
| 503 x1 | openai | 2 | 1 group | the turn |
| 503, exhausts | openai | 2 | none | ProviderHTTPError 503 server_error, retryable |
| 529 x1 | openai | 2 | 1 group | the turn |
| 529, exhausts | openai | 2 | none | ProviderHTTPError 529 server_error, retryable |
| 502 proxy HTML, exhausts | openai | 2 | none | ProviderHTTPError 502 None, retryable |
| 500 after tools x1 | openai | 3 | 1 group | the turn |
| 500 after tools, exhausts | openai | 3 | none | ProviderHTTPError 500 server_error, retryable |
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
| 500 x-should-retry: false | anthropic | 1 | none | ProviderHTTPError 500 api_error, final |
| 502 x1 | anthropic | 2 | 1 group | the turn |
| 502, exhausts | anthropic | 2 | none | ProviderHTTPError 502 api_error, retryable |
| 503 x1 | anthropic | 2 | 1 group | the turn |
| 503, exhausts | anthropic | 2 | none | ProviderHTTPError 503 api_error, retryable |
| 529 x1 | anthropic | 2 | 1 group | the turn |
| 529, exhausts | anthropic | 2 | none | ProviderHTTPError 529 overloaded_error, retryable |
| 502 proxy HTML, exhausts | anthropic | 2 | none | ProviderHTTPError 502 None, retryable |
| 500 after tools x1 | anthropic | 3 | 1 group | the turn |
| 500 after tools, exhausts | anthropic | 3 | none | ProviderHTTPError 500 api_error, retryable |
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
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment

import crux
from crux.errors import CruxError, ProviderError
from crux.logs import configure_logging
from crux.models import workflow_id_for
from providers.loopback import (
    HangReply,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    RecordedRequest,
    ResetReply,
    TextReply,
)
from tests.faults import (
    ANSWER,
    CANARY,
    FAQ,
    GENERATION_PATHS,
    LOOKUP,
    LOOKUPS,
    MODELS,
    QUESTION,
    RETRY_AFTER_SECONDS,
    ROWS,
    SSE_CUT_BYTES,
    STREAMED_ANSWER,
    Row,
    Stack,
    Wire,
    code_of,
    error_reply,
    fault_stack,
    retryable_of,
    table,
)
from tests.helpers import closed_run
from vocabulary.details import decode_details

pytestmark = pytest.mark.durability


@pytest_asyncio.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, postgres_url: str, template_database: str
) -> AsyncIterator[Stack]:
    async with fault_stack(
        temporal_env.client, postgres_url, template_database, tools=[LOOKUP]
    ) as running:
        yield running


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
    if row.tool_round:
        prompt = crux.prompt(id="with-lookup", use=[LOOKUP])
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

    lookups = len(LOOKUPS)
    outcome, updates = await _run(stack, row, thread_id)
    # The tool ran once, however often the call after it failed.
    assert len(LOOKUPS) - lookups == (1 if row.tool_round else 0)

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
        turn = (
            ["user", "assistant", "tool", "assistant"] if row.tool_round else ["user", "assistant"]
        )
        assert [m["role"] for m in messages] == turn
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
        assert code_of(error) == row.code
        assert retryable_of(error) is row.retryable
        assert messages == [] and groups == 0
        assert [s["kind"] for s in staged] == ["identity"]
        assert CANARY not in str(error) and CANARY not in repr(error.args)
        if isinstance(error, ProviderError):
            assert error.provider == row.wire and error.model == MODELS[row.wire]

    history = await (
        await closed_run(stack.client, workflow_id_for("g1", thread_id))
    ).fetch_history()
    assert CANARY not in history.to_json()
    logs = capfd.readouterr()
    assert thread_id in logs.out + logs.err  # the worker's log lines were captured
    assert CANARY not in logs.out + logs.err


@pytest.mark.parametrize(
    ("wire", "fault", "error_type", "code"),
    [
        ("anthropic", "529", "ProviderHTTPError", "overloaded_error"),
        ("openai", "hang", "ProviderTimeoutError", None),
    ],
)
async def test_a_plain_client_sees_the_typed_failure_in_its_details(
    stack: Stack, wire: Wire, fault: str, error_type: str, code: str | None
) -> None:
    """What a caller in another language reads: the type and the keyed details, no text."""
    server = stack.servers[wire]
    server.clear()
    server.enqueue(HangReply() if fault == "hang" else error_reply(529))
    thread_id = f"faults:plain-{wire}:{uuid.uuid4().hex[:6]}"
    with pytest.raises(WorkflowFailureError) as raised:
        await stack.client.execute_workflow(
            "ManagedGenerationWorkflow",
            {
                "generation_id": "p1",
                "thread_id": thread_id,
                "model": MODELS[wire],
                "input": QUESTION,
                "attempt_policy": {"max_attempts": 1, "timeout_seconds": 3},
            },
            id=workflow_id_for("p1", thread_id),
            task_queue=stack.worker.task_queue,
        )
    cause = raised.value.cause
    if isinstance(cause, ActivityError):
        cause = cause.cause
    assert isinstance(cause, ApplicationError)
    details = decode_details(cause.details, cause.type)
    assert (cause.type, details.code, details.provider, details.model) == (
        error_type,
        code,
        wire,
        MODELS[wire],
    )
    assert not cause.non_retryable  # the fault is transient; the attempts ran out
    assert CANARY not in cause.message
    assert len(server.requests) == 1
