"""Random provider fault sequences, many generations at once, over both wire formats.

Each generation draws its own sequence of 0 to 3 transient faults (429 with a short
`retry-after`, 500, 502, 503, 529, a reset mid-body, and for streamed calls an SSE cut
mid-event) and runs with 3 attempts; several run at once on one worker, streamed or not.
The loopback servers answer every generation from its own script, found by the key in its
question, so the interleaving of concurrent calls cannot shift a fault to another run.

Afterwards, per generation: fewer faults than attempts means exactly one committed
user+assistant group holding its own answer after `faults + 1` calls; three faults mean
three calls, nothing committed and the typed error of the last fault (retryable). Nothing
staged stays but identity fingerprints, and neither an error nor a log line names the canary
carried by every question and every scripted provider body.

CI runs 12 generations; `make soak` (CRUX_SOAK=1) runs 300, and also a stream that stays
silent longer than the 30 s heartbeat timeout before its first event (a reasoning model):
it commits after one call instead of being cut off and paid for again.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

import crux
from crux.errors import CruxError, ProviderConnectionError, ProviderHTTPError
from crux.logs import configure_logging
from providers.loopback import (
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    RecordedRequest,
    Reply,
    Responder,
    TextReply,
)
from tests.faults import (
    CANARY,
    FAST,
    GENERATION_PATHS,
    MODELS,
    Stack,
    Wire,
    error_reply,
    fault_stack,
    reset_mid_body,
    sse_cut,
)

pytestmark = pytest.mark.durability

SOAK = os.environ.get("CRUX_SOAK", "").strip() in ("1", "true", "yes")
GENERATIONS = 300 if SOAK else 12
IN_FLIGHT = 6
SEED = int(os.environ.get("CRUX_CHAOS_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)
KEY = re.compile(r"Question (q-[a-z]+-\d+)\?")
WIRES: tuple[Wire, ...] = ("openai", "anthropic")


def _fault(kind: str, wire: Wire) -> tuple[Reply, type[CruxError]]:
    if kind == "reset":
        return reset_mid_body(), ProviderConnectionError
    if kind == "cut":
        return sse_cut(wire), ProviderConnectionError
    if kind == "429":
        return error_reply(429, headers={"retry-after": "0.2"}), ProviderHTTPError
    return error_reply(int(kind)), ProviderHTTPError


@dataclass
class Plan:
    """One generation's draw and what came of it."""

    key: str
    wire: Wire
    stream: bool
    faults: list[str]
    calls: int = 0
    outcome: object = None


class Scripts:
    """Per-generation scripts for the servers' responders, and their call counts."""

    def __init__(self) -> None:
        self.plans: dict[str, Plan] = {}
        self.queues: dict[str, deque[Reply]] = {}

    def add(self, plan: Plan) -> None:
        self.plans[plan.key] = plan
        self.queues[plan.key] = deque(_fault(kind, plan.wire)[0] for kind in plan.faults)

    def responder(self, wire: Wire) -> Responder:
        fallback = LoopbackOpenAIServer() if wire == "openai" else LoopbackAnthropicServer()

        def respond(request: RecordedRequest) -> Reply:
            match = KEY.search(request.raw_body.decode("utf-8", "replace"))
            if request.path.split("?")[0] != GENERATION_PATHS[wire] or match is None:
                return fallback.default_reply(request)
            key = match.group(1)
            self.plans[key].calls += 1
            queue = self.queues[key]
            return queue.popleft() if queue else TextReply(text=f"answer for {key}")

        return respond


def _draw(rng: random.Random, index: int) -> Plan:
    wire = WIRES[index % 2]
    stream = rng.random() < 0.5
    kinds = ["429", "500", "502", "503", "529", "reset"] + (["cut"] if stream else [])
    count = rng.choice([0, 1, 1, 2, 2, 3])
    return Plan(f"q-{wire}-{index}", wire, stream, [rng.choice(kinds) for _ in range(count)])


SCRIPTS = Scripts()


@pytest_asyncio.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, postgres_url: str, template_database: str
) -> AsyncIterator[Stack]:
    responders = [SCRIPTS.responder(wire) for wire in WIRES]
    async with fault_stack(
        temporal_env.client,
        postgres_url,
        template_database,
        responders=responders,
        pool_size=16,
    ) as running:
        yield running


async def _generate(stack: Stack, plan: Plan, thread_id: str) -> None:
    runtime = stack.worker.runtime
    options = {
        "thread": thread_id,
        "model": MODELS[plan.wire],
        "generation_id": plan.key,
        "attempt_policy": FAST,
    }
    question = f"Question {plan.key}? {CANARY}"
    try:
        if plan.stream:
            updates = [update async for update in runtime.stream(question, **options)]
            final = updates[-1]
            assert isinstance(final, crux.StreamCommitted)
            plan.outcome = final.generation
        else:
            plan.outcome = await runtime.generate(question, **options)
    except CruxError as error:
        plan.outcome = error


@pytest.mark.timeout(1_800 if SOAK else 180)
async def test_random_fault_sequences_commit_each_accepted_turn_exactly_once(
    stack: Stack, capfd: pytest.CaptureFixture[str]
) -> None:
    configure_logging(log_format="json", level="info")
    rng = random.Random(SEED)
    plans = [_draw(rng, index) for index in range(GENERATIONS)]
    for plan in plans:
        SCRIPTS.add(plan)
    threads = {plan.key: f"sequences:{plan.key}:{uuid.uuid4().hex[:6]}" for plan in plans}
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def run(plan: Plan) -> None:
        async with gate:
            await _generate(stack, plan, threads[plan.key])

    await asyncio.gather(*(run(plan) for plan in plans))

    tally: Counter[str] = Counter()
    for plan in plans:
        where = f"seed {SEED}, {plan}"
        thread_id = threads[plan.key]
        roles = [
            row["role"]
            for row in await stack.pool.fetch(
                "SELECT role FROM crux_thread_messages WHERE thread_id = $1"
                " ORDER BY published_version, seq",
                thread_id,
            )
        ]
        staged = await stack.pool.fetch(
            "SELECT kind FROM crux_generation_staging WHERE thread_id = $1", thread_id
        )
        assert [row["kind"] for row in staged] == ["identity"], where
        if len(plan.faults) < FAST.max_attempts:
            assert isinstance(plan.outcome, crux.Generation), where
            assert plan.outcome.text == f"answer for {plan.key}", where
            assert plan.calls == len(plan.faults) + 1, where
            assert roles == ["user", "assistant"], where
            tally["committed"] += 1
        else:
            expected = _fault(plan.faults[-1], plan.wire)[1]
            assert type(plan.outcome) is expected, where
            assert isinstance(plan.outcome, CruxError)
            assert getattr(plan.outcome, "retryable", False), where
            assert CANARY not in str(plan.outcome), where
            assert plan.calls == FAST.max_attempts, where
            assert roles == [], where
            tally["failed"] += 1
        tally["faults"] += len(plan.faults)
    logs = capfd.readouterr()
    assert "thread.turn.committed" in logs.err + logs.out
    assert CANARY not in logs.err + logs.out
    print(f"fault sequences (seed {SEED}): {dict(tally)} over {GENERATIONS} generations")


@pytest.mark.skipif(not SOAK, reason="about 40 s; runs under CRUX_SOAK=1 (make soak)")
@pytest.mark.timeout(180)
async def test_a_stream_silent_longer_than_the_heartbeat_timeout_commits_once(
    stack: Stack,
) -> None:
    key = "q-silent-1"
    SCRIPTS.add(Plan(key, "openai", True, []))
    SCRIPTS.queues[key].append(TextReply(text=f"answer for {key}", delay_seconds=40))
    updates = [
        update
        async for update in stack.worker.runtime.stream(
            f"Question {key}?",
            thread=f"sequences:{key}:{uuid.uuid4().hex[:6]}",
            model=MODELS["openai"],
            generation_id=key,
            attempt_policy={"max_attempts": 2, "timeout_seconds": 120},
        )
    ]
    final = updates[-1]
    assert isinstance(final, crux.StreamCommitted)
    assert final.generation.text == f"answer for {key}"
    assert SCRIPTS.plans[key].calls == 1
