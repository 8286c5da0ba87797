"""The canary's scenarios: every kind of generation, successful and failing, carrying it.

`run_generations` runs plain, cached (a miss, then an exact and a semantic hit), tool-round,
approval, parallel, shadowed, masked (input safety, a constraint retry), streaming,
structured-output and summarised generations;
`run_failures` the failing ones (provider error bodies of both wire formats, rejected
output, a blocked turn, a refused reply, violated constraints, unstorable text, a raising
hook). With
`run.registered` false (a `worker.py` process without the test's tools and hook), the
scenarios that need them are left out.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg

import crux
from crux.models import workflow_id_for
from providers.loopback import (
    ErrorReply,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    RawReply,
    ScriptedToolCall,
    StreamErrorReply,
    TextReply,
    tool_call_reply,
)
from tests.canary_carriers import (
    ANTHROPIC_MODEL,
    FAST_RETRY,
    MODEL,
    Carriers,
    Note,
    append_conversation,
    canary_hook,
    canary_tools,
    completion,
    drain,
    pending,
)
from tests.helpers import eventually
from tests.leaks import check_workflow, wait_closed, workflows_since


async def run_generations(
    run: Carriers,
    pool: asyncpg.Pool,
    openai: LoopbackOpenAIServer,
    anthropic: LoopbackAnthropicServer,
) -> None:
    canary = run.canary
    # Plain: Thread messages, the prompt input and two context contributors.
    plain = run.thread("plain")
    await append_conversation(pool, plain, canary, 1)
    conversation = crux.thread(id=plain, storage=pool)
    original = await conversation.append(
        {"role": "user", "content": f"Draft {canary}", "metadata": {"note": canary}}
    )
    [draft] = original.message_ids
    run.unselected[plain] = [draft]
    await conversation.edit(draft, content=f"Edited {canary}", metadata={"note": canary})
    policy = crux.prompt(
        id="canary-plain",
        system=f"You guard {canary}.",
        use=[
            crux.context("policy", f"Policy text {canary}", contract=True),
            crux.droppable(crux.context("faq", f"FAQ {canary}", placement="message")),
            crux.prefer(
                crux.context("guide", f"Guide {canary} " * 20),
                crux.context("guide-short", f"Guide {canary}"),
            ),
        ],
        prompt=lambda value: value["message"],
    )
    openai.enqueue(TextReply(text=f"Plain answer {canary}"))
    await run.generate(policy, input={"message": f"Question {canary}?"}, thread=plain)

    # The response cache: a turn that misses and is written after its commit, then served
    # from the entry as an exact hit and as a semantic hit on other Threads (each commits a
    # fresh pair). The entry holds the reply until the Thread it came from is erased.
    cache = crux.cache(semantic=True, similarity_threshold=0.9, namespace=uuid.uuid4().hex[:8])
    openai.enqueue(TextReply(text=f"Cached answer {canary}"))
    asked = f"What is the capital of France? {canary}"
    calls = _completions(openai)
    missed = await run.generate(asked, thread=run.thread("cached"), cache=cache)
    exact = await run.generate(asked, thread=run.thread("cached-exact"), cache=cache)
    similar = await run.generate(
        f"What is the capital city of France? {canary}",
        thread=run.thread("cached-semantic"),
        cache=cache,
    )
    assert _completions(openai) == calls + 1
    assert exact.text == similar.text == missed.text
    records = [
        (await run.runtime.receipt(result.steps[-1].request.id)).cache
        for result in (missed, exact, similar)
    ]
    assert [(r.status, r.match) if r else None for r in records] == [
        ("miss", None),
        ("hit", "exact"),
        ("hit", "semantic"),
    ]
    # A second entry, from a Thread that is deleted (the first one's is redacted).
    openai.enqueue(TextReply(text=f"Cached again {canary}"))
    gone = crux.cache(namespace=uuid.uuid4().hex[:8])
    await run.generate(f"Cache me {canary}", thread=run.thread("cached-deleted"), cache=gone)
    entries = await pool.fetchval(
        "SELECT count(*) FROM crux_cache_entries WHERE thread_id = ANY($1::text[])",
        [thread for role, thread in run.threads if role in ("cached", "cached-deleted")],
    )
    assert entries == 2

    if run.registered:
        # Tool round: canary arguments, canary results, invalid arguments, a raising tool and a
        # tool name the model invented.
        tools = run.thread("tools")
        openai.enqueue(
            tool_call_reply(
                ScriptedToolCall(name="lookup", arguments={"query": canary}),
                ScriptedToolCall(name="lookup", arguments={"query": 7, "limit": canary}),
                ScriptedToolCall(name="explode", arguments={"why": canary}),
                ScriptedToolCall(name=f"invented_{canary[-12:]}", arguments={"q": canary}),
                text=f"Calling tools for {canary}",
            ),
            TextReply(text=f"Tools said {canary}"),
        )
        await run.generate(
            crux.prompt(id="canary-tools", use=canary_tools(canary)),
            input=f"Find {canary}",
            thread=tools,
        )

        # Approval: the call waits with the canary in its arguments; checked while it waits.
        approval = run.thread("approval")
        openai.enqueue(
            tool_call_reply(ScriptedToolCall(name="refund", arguments={"order": canary})),
            TextReply(text=f"Refund of {canary} was denied"),
        )
        turn = asyncio.create_task(
            run.generate(
                crux.prompt(
                    id="canary-refund", use=[tool for tool in run.tools if tool.name == "refund"]
                ),
                input=f"Refund {canary}",
                thread=approval,
                generation_id="canary-approval",
            )
        )
        try:
            [call] = await eventually(
                lambda: pending(run.runtime, "canary-approval", approval),
                lambda calls: len(calls) == 1,
            )
            await check_workflow(run.scan, run.client, workflow_id_for("canary-approval", approval))
            # Decisions the run refuses (a free-text reason, a call it does not wait on)
            # are refused typed, without quoting what was sent.
            await run.expect_error(
                "free-text reason",
                run.runtime.deny(
                    call.call_id,
                    "canary-approval",
                    thread=approval,
                    reason_code=f"customer said {canary}",
                ),
                crux.ConfigurationError,
            )
            await run.expect_error(
                "unknown call",
                run.runtime.approve(f"call_{canary}", "canary-approval", thread=approval),
                crux.ConfigurationError,
            )
            await run.runtime.deny(
                call.call_id, "canary-approval", thread=approval, reason_code="over_limit"
            )
        finally:
            run.results.append(await turn)

    # Call-site messages shadow the Thread: staged for the call, never committed to it.
    shadowed = run.thread("shadowed")
    await append_conversation(pool, shadowed, canary, 1)
    await run.generate(
        f"Shadowed {canary}",
        thread=shadowed,
        messages=[
            {"role": "user", "content": f"Earlier {canary}"},
            {"role": "assistant", "content": f"Earlier reply {canary}"},
        ],
    )

    # A parallel run: the context every member renders holds the canary; one member's
    # provider refuses with it in the error body (that member's typed error is checked).
    def member(name: str) -> crux.Prompt:
        return crux.prompt(id=f"canary-{name}", prompt=lambda c: f"{name}: {c['message']}")

    members: dict[str, crux.Prompt | crux.Agent] = {
        "left": member("left"),
        "right": crux.agent(id="canary-right", prompt=member("right"), model=ANTHROPIC_MODEL),
    }
    anthropic.enqueue(ErrorReply(status=400, message=f"parallel {canary}"))
    parallel = await run.runtime.parallel(
        id=f"canary-parallel-{uuid.uuid4().hex[:8]}",
        context={"message": f"Shared {canary}"},
        agents=members,
        threads={name: run.thread(f"parallel-{name}") for name in members},
    )
    assert set(parallel.generations) == {"left"}
    assert set(parallel.errors) == {"right"}
    run.scan.check_error("error of a parallel member", parallel.errors["right"])
    run.results.extend(parallel.generations.values())
    assert anthropic.pending == 0

    # Input safety masks a card number in a turn carrying the canary; terminal safety lets
    # the reply through after a constraint asked once for a corrective attempt.
    masked = run.thread("masked")
    openai.enqueue(TextReply(text=f"No ticket {canary}"), TextReply(text=f"Ticket: {canary}"))
    await run.generate(
        f"Pay with 4111 1111 1111 1111 for {canary}",
        thread=masked,
        safety=crux.safety(
            input=[crux.safety.pii()], output=[crux.safety.deny(["forbidden"], mode="retry")]
        ),
        constraints=[crux.constraints.require("Ticket:")],
    )

    # Streaming, in small SSE pieces.
    streamed = run.thread("stream")
    openai.enqueue(TextReply(text=f"Streamed {canary} and {canary} again.", sse_chunk_size=5))
    updates = [
        update
        async for update in run.runtime.stream(f"Stream {canary}", thread=streamed, model=MODEL)
    ]
    assert isinstance(updates[-1], crux.StreamCommitted)
    run.results.append(updates[-1].generation)

    # Structured output: one rejected reply, then an accepted one.
    structured = run.thread("output")
    openai.enqueue(
        TextReply(text=f"Not JSON at all: {canary}"),
        TextReply(text=json.dumps({"note": canary, "rating": 5})),
    )
    result = await run.generate(f"Rate {canary}", thread=structured, output=Note)
    assert result.output == Note(note=canary, rating=5)

    # Summarised: managed history over canary turns; the summary model echoes the canary
    # (the server's responder answers every unscripted call with it).
    summarised = run.thread("summary")
    await append_conversation(pool, summarised, canary, 6)
    managed = crux.prompt(id="canary-managed", use=[crux.history(recent={"messages": 4})])
    result = await run.generate(
        managed,
        input=f"What was the code word? {canary}",
        thread=summarised,
        input_budget={"max": 250},
    )
    assert any(a.representation == "summary" for a in result.steps[0].request.adaptations)
    # A background refresh may follow; let it answer before replies are scripted again.
    await wait_closed(run.client, await workflows_since(run.client, run.task_queue, run.since))

    # A summary call the provider refuses, its error body holding the canary (the run may
    # still answer, from a retried call or without the summary: either way, nothing leaks).
    unsummarised = run.thread("summary-refused")
    await append_conversation(pool, unsummarised, canary, 6)
    openai.enqueue(ErrorReply(status=400, message=f"cannot summarise {canary}"))
    try:
        await run.generate(
            managed, input=f"Again {canary}", thread=unsummarised, input_budget={"max": 250}
        )
    except crux.CruxError as error:
        run.scan.check_error("error of a refused summary", error)
    assert openai.pending == 0
    await wait_closed(run.client, await workflows_since(run.client, run.task_queue, run.since))


def _completions(server: LoopbackOpenAIServer) -> int:
    return sum(1 for r in server.requests if r.path.split("?")[0].endswith("/chat/completions"))


async def run_failures(
    run: Carriers, openai: LoopbackOpenAIServer, anthropic: LoopbackAnthropicServer
) -> None:
    canary = run.canary
    failing = run.thread("failing")
    poisoned = next(tool for tool in run.tools if tool.name == "poison")
    body = json.dumps({"error": {"message": f"upstream {canary}", "type": "server_error"}})
    cases: list[tuple[str, list[Any], type[crux.CruxError], dict[str, Any]]] = [
        ("400", [ErrorReply(status=400, message=f"bad {canary}")], crux.ProviderError, {}),
        ("500", [ErrorReply(status=500, body=body.encode())] * 2, crux.ProviderError, {}),
        ("malformed", [RawReply(body=f"not json {canary}".encode())], crux.ProviderError, {}),
        (
            "stream-error",
            [StreamErrorReply(text=f"partial {canary}", message=f"cut {canary}")] * 2,
            crux.ProviderError,
            {"stream": True},
        ),
        (
            "rejected-output",
            [TextReply(text=f'{{"note": 1, "{canary}": 2}}'), TextReply(text=canary)],
            crux.OutputValidationError,
            {"output": crux.output(Note, max_retries=1)},
        ),
    ]
    cases += [
        # Input safety blocks the turn: nothing is sent.
        ("denied input", [], crux.SafetyError, {"safety": [crux.safety.deny(["denied"])]}),
        # Terminal safety refuses the reply, and a constraint is violated on every attempt.
        (
            "refused reply",
            [TextReply(text=f"refused {canary}")],
            crux.SafetyError,
            {"safety": crux.safety(output=[crux.safety.deny(["refused"])])},
        ),
        (
            "violated constraint",
            [TextReply(text=canary)] * 2,
            crux.ConstraintError,
            {"constraints": crux.constraints(crux.constraints.require("Ticket:"), max_retries=1)},
        ),
    ]
    overflow = ErrorReply(
        status=400,
        code="context_length_exceeded",
        message=(
            "This model's maximum context length is 8192 tokens. However, your messages "
            f"resulted in 9000 tokens. {canary}"
        ),
    )
    cases += [
        # A context overflow the provider reports, its message holding the canary.
        ("overflow", [overflow], crux.CruxError, {}),
        # Text PostgreSQL cannot store, from the provider or a tool: refused typed.
        ("NUL reply", [TextReply(text=f"{canary}\x00")], crux.ThreadError, {}),
        (
            "surrogate reply",
            [RawReply(body=completion(f"{canary}\\ud800"))],
            crux.ThreadError,
            {},
        ),
    ]
    if run.registered:
        cases.append(
            (
                "NUL tool result",
                [tool_call_reply(ScriptedToolCall(name="poison", arguments={"q": canary}))],
                crux.ThreadError,
                {"prompt": crux.prompt(id="canary-poison", use=[poisoned])},
            )
        )
    for name, replies, kind, options in cases:
        openai.enqueue(*replies)
        if options.pop("stream", False):
            call = drain(
                run.runtime.stream(
                    f"Fail {canary}", thread=failing, model=MODEL, attempt_policy=FAST_RETRY
                )
            )
        else:
            call = run.runtime.generate(
                options.pop("prompt", f"Fail {name} {canary}"),
                input=f"Fail {name} {canary}",
                thread=failing,
                model=MODEL,
                attempt_policy=FAST_RETRY,
                **options,
            )
        await run.expect_error(name, call, kind)
        assert openai.pending == 0, name
    for status, attempts in ((401, 1), (529, 2)):
        anthropic.enqueue(*[ErrorReply(status=status, message=f"anthropic {canary}")] * attempts)
        call = run.runtime.generate(
            f"Fail {status} {canary}",
            thread=failing,
            model=ANTHROPIC_MODEL,
            attempt_policy=FAST_RETRY,
        )
        await run.expect_error(f"anthropic {status}", call, crux.ProviderError)
        assert anthropic.pending == 0, status
    if run.registered:
        # A step hook that raises: only the exception's type is reported.
        hooked = crux.agent(
            id="canary-hooked",
            prompt=crux.prompt(id="canary-hooked"),
            prepare_step=canary_hook(canary),
        )
        await run.expect_error(
            "hook",
            run.runtime.generate(hooked, input=f"Hook {canary}", thread=failing, model=MODEL),
            crux.PreparationError,
        )
    # Text PostgreSQL cannot store is refused typed before anything runs.
    await run.expect_error(
        "NUL input",
        run.runtime.generate(f"{canary}\x00", thread=failing, model=MODEL),
        crux.ThreadError,
    )
    await run.expect_error(
        "NUL append",
        crux.thread(id=failing, storage=run.pool).append(
            {"role": "user", "content": f"{canary}\x00"}
        ),
        crux.ThreadError,
    )
    # Malformed messages and edits are refused typed, without quoting what they held (a
    # pydantic error would: an undeclared field shows its value).
    malformed = [{"kind": "text", "text": "x", "note": canary}]
    conversation = crux.thread(id=failing, storage=run.pool)
    await run.expect_error(
        "malformed append",
        conversation.append({"role": "user", "content": malformed}),
        crux.ThreadError,
    )
    commit = await conversation.append({"role": "user", "content": f"Edit me {canary}"})
    await run.expect_error(
        "malformed edit",
        conversation.edit(
            commit.message_ids[0],
            content=malformed,  # pyright: ignore[reportArgumentType]
        ),
        crux.ThreadError,
    )
    # Anthropic answers too, so both adapters carried the canary.
    anthropic.enqueue(TextReply(text=f"Anthropic says {canary}"))
    await run.generate(f"Hello {canary}", thread=failing, model=ANTHROPIC_MODEL)
