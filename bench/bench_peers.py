"""Crux next to its peers: a conversation turn on Temporal at 10 to 5,000 prior messages.

The peers are what a Python team would pick instead to run LLM conversations durably on
Temporal: Pydantic AI's Temporal integration (its `TemporalDurability` capability) and the
OpenAI Agents SDK's (`temporalio.openai_agents`), each wired the way its documentation shows
(`bench/_peers.py`): the transcript passed into a workflow every turn, the agent run inside
the workflow calling the model through the integration's model activity. Crux runs the same
turn as a `Runtime.generate` call on a Thread holding the transcript, with exact history
(the default).

All three share one Temporal dev server, one embedded PostgreSQL (Crux's store) and one
loopback server speaking OpenAI chat completions, which gives every request the same reply
at once (no think time); every system names the same model and keeps its SDK's defaults
otherwise. Each worker runs in a process of its own (`crux worker`, `peer_worker.py`), so
nobody starts workflows eagerly, and the benchmark waits until each one polls.

Per cell (prior messages), warm-up turns then timed turns, interleaved system by system (the
order rotates every turn); every turn sees the same prior messages plus a new question (Crux
puts the last prior turn on a fresh branch of its Thread before each turn, untimed, with the
token counts a generation's commit stores beside the messages it publishes). Printed:
p50 and p99 latency per system, each peer's p50 over Crux's (above 1: Crux is faster), and
Temporal's `history_size_bytes` of each turn's workflow, averaged. A peer that fails a cell
(for example a transcript over Temporal's payload limit) is reported, not fatal.

Run in `.venv-bench` (`make bench` creates it from requirements-bench.lock):
`.venv-bench/bin/python bench/bench_peers.py [--quick] [--turns N] [--sizes 10,1000]`
with the project root on `PYTHONPATH`.
"""

# The peers are installed in `.venv-bench` only, not in the environment the type checker uses.
# pyright: reportMissingImports=false

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from temporalio.client import Client, WorkflowHandle

import crux
from activities.skeleton import content_tokens
from bench._figures import bench_database, p50, p99
from bench._peer_model import MODEL
from crux.stack import start_temporal
from planner import ModelCatalog
from providers import TokenCounter
from providers.loopback import LoopbackOpenAIServer, RecordedRequest, TextReply
from storage import ThreadStore

ROOT = Path(__file__).resolve().parent.parent
SIZES = (10, 100, 1_000, 5_000)
TURNS = 30
WARMUP = 3
QUICK_SIZES = (10, 1_000)
QUICK_TURNS = 5
TURN_TIMEOUT_SECONDS = 120.0
"""A turn still running after this long counts as a failure of its system for the cell."""

REPLY = "Pack a rain layer, a paper map and a spare pair of socks."
API_KEY = "sk-bench-not-a-secret"
CRUX = "Crux"
PYDANTIC_AI = "pydantic-ai"
AGENTS_SDK = "agents-sdk"
PEER_NAMES = {PYDANTIC_AI: "Pydantic AI", AGENTS_SDK: "Agents SDK"}

_WORDS = ("pack", "water", "map", "layer", "boots", "route", "ridge", "camp", "stove", "rain")


def transcript(messages: int) -> list[tuple[str, str]]:
    """`messages` alternating user and assistant texts of varied length (~45 tokens each)."""
    rng = random.Random(messages)

    def words(count: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(count))

    turns: list[tuple[str, str]] = []
    for turn in range(messages // 2):
        turns.append(("user", f"Question {turn}: {words(rng.randint(5, 50))}?"))
        turns.append(("assistant", f"{words(rng.randint(10, 80))}."))
    return turns


def question(turn: int) -> str:
    return f"Question number {turn}: what should I pack for day {turn}?"


async def history_bytes(handle: WorkflowHandle[Any, Any]) -> int:
    """What Temporal counts for the run (`history_size_bytes`, what its limits apply to)."""
    described = await handle.describe()
    return described.raw_description.workflow_execution_info.history_size_bytes


class System(Protocol):
    """One system under test, set up for one cell."""

    name: str

    async def turn(self, index: int) -> tuple[float, int]:
        """Run one turn; return its latency (s) and its workflow's history bytes."""
        ...


@dataclass
class CruxSystem:
    """Crux: a Thread seeded with the prior messages, a turn is `Runtime.generate`."""

    runtime: crux.Runtime
    prior: list[tuple[str, str]]
    name: str = CRUX
    thread_id: str = field(default_factory=lambda: f"bench-peers:{uuid.uuid4().hex[:8]}")
    fork: str | None = None

    async def seed(self) -> None:
        """Append all prior turns but the last as the generations would have."""
        thread = crux.thread(id=self.thread_id, storage=self.runtime.pool)
        for start in range(0, len(self.prior) - 2, 2):
            key = uuid.uuid4().hex
            (_, user), (_, assistant) = self.prior[start : start + 2]
            commit = await thread.append(
                [
                    crux.Message(id=f"gen:{key}:user", role="user", content=user),
                    crux.Message(id=f"gen:{key}:assistant", role="assistant", content=assistant),
                ]
            )
            self.fork = commit.message_ids[-1]

    async def _last_prior_turn_on_a_new_branch(self) -> None:
        """Put the last prior turn on a fresh branch and select it: the path is the prior again."""
        thread = crux.thread(id=self.thread_id, storage=self.runtime.pool)
        key = uuid.uuid4().hex
        (_, user), (_, assistant) = self.prior[-2:]
        commit = await thread.append(
            [
                crux.Message(id=f"gen:{key}:user", role="user", content=user),
                crux.Message(id=f"gen:{key}:assistant", role="assistant", content=assistant),
            ],
            after=self.fork,
        )
        if commit.status != "selected":
            await thread.select(commit.message_ids[0])
        # As the generation that committed this turn would have: its messages' token counts
        # are stored beside them (a turn committed by a generation always has them).
        store = ThreadStore(self.runtime.pool)
        [user_message, assistant_message] = await store.load_messages(
            self.thread_id, list(commit.message_ids)
        )
        encoding = ModelCatalog.default().resolve(f"openai:{MODEL}").encoding
        counter = TokenCounter.for_encoding(encoding)
        tokens = content_tokens(counter, [user_message, assistant_message])
        await store.store_token_counts(
            self.thread_id, encoding, dict(zip(commit.message_ids, tokens, strict=True))
        )

    async def turn(self, index: int) -> tuple[float, int]:
        await self._last_prior_turn_on_a_new_branch()
        generation_id = f"turn-{index}-{uuid.uuid4().hex[:6]}"
        started = time.perf_counter()
        # Default options, as the peers: a stuck turn only stops the benchmark from waiting.
        await asyncio.wait_for(
            self.runtime.generate(
                question(index), thread=self.thread_id, generation_id=generation_id
            ),
            TURN_TIMEOUT_SECONDS,
        )
        elapsed = time.perf_counter() - started
        handle = self.runtime.client.get_workflow_handle(
            crux.workflow_id_for(generation_id, self.thread_id)
        )
        # `generate` returns once the turn is committed; the run closes just after. Its
        # history is measured whole, and the next turn starts after it, as the peers' do.
        await handle.result()
        return elapsed, await history_bytes(handle)


@dataclass
class PeerSystem:
    """A peer: the transcript goes into its workflow as input every turn."""

    name: str
    client: Client
    task_queue: str
    start: Callable[[int, str], Awaitable[WorkflowHandle[Any, str]]]

    async def turn(self, index: int) -> tuple[float, int]:
        workflow_id = f"bench-peer-{uuid.uuid4().hex[:10]}"
        started = time.perf_counter()
        handle = await self.start(index, workflow_id)
        try:
            await asyncio.wait_for(handle.result(), TURN_TIMEOUT_SECONDS)
        except TimeoutError:
            await handle.terminate(reason="the benchmark gave up on this turn")
            raise
        elapsed = time.perf_counter() - started
        return elapsed, await history_bytes(handle)


@dataclass
class Cell:
    """The figures of one row: latencies, history bytes and failures per system."""

    messages: int
    seconds: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    history: dict[str, list[int]] = field(default_factory=dict[str, list[int]])
    failures: dict[str, str] = field(default_factory=dict[str, str])


def _short(error: BaseException) -> str:
    """A failure in one line: its type and the first line of its message (or its cause's)."""
    while error.__cause__ is not None and not str(error).strip():
        error = error.__cause__
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    cause = error.__cause__
    if cause is not None and str(cause).strip():
        message = f"{message}: {str(cause).strip().splitlines()[0]}" if message else str(cause)
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text if len(text) <= 90 else text[:87] + "..."


async def _timed_turn(system: System, index: int) -> tuple[float, int]:
    try:
        return await system.turn(index)
    except TimeoutError:
        raise TimeoutError(f"no result in {TURN_TIMEOUT_SECONDS:.0f} s") from None


async def run_cell(systems: list[System], messages: int, turns: int, warmup: int) -> Cell:
    cell = Cell(messages)
    for system in systems:
        cell.seconds[system.name] = []
        cell.history[system.name] = []
    for index in range(warmup + turns):
        rotation = index % len(systems)
        for system in systems[rotation:] + systems[:rotation]:
            if system.name in cell.failures:
                continue
            try:
                seconds, size = await _timed_turn(system, index)
            except Exception as error:  # a peer's failure is a result of the cell
                cell.failures[system.name] = _short(error)
                continue
            if index >= warmup:
                cell.seconds[system.name].append(seconds)
                cell.history[system.name].append(size)
    return cell


def _peer_systems(
    clients: dict[str, Client], queues: dict[str, str], prior: list[tuple[str, str]]
) -> list[System]:
    """The two peers' turns on `prior`, their transcript types built the documented way."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from bench._peer_agents_sdk import AgentsSdkConversation
    from bench._peer_pydantic_ai import PydanticAIConversation

    history: list[ModelRequest | ModelResponse] = [
        ModelRequest(parts=[UserPromptPart(content=text)])
        if role == "user"
        else ModelResponse(parts=[TextPart(content=text)])
        for role, text in prior
    ]
    items: list[dict[str, Any]] = [{"role": role, "content": text} for role, text in prior]

    async def pydantic_ai(index: int, workflow_id: str) -> WorkflowHandle[Any, str]:
        return await clients[PYDANTIC_AI].start_workflow(
            PydanticAIConversation.run,
            args=[question(index), history],
            id=workflow_id,
            task_queue=queues[PYDANTIC_AI],
        )

    async def agents_sdk(index: int, workflow_id: str) -> WorkflowHandle[Any, str]:
        return await clients[AGENTS_SDK].start_workflow(
            AgentsSdkConversation.run,
            [*items, {"role": "user", "content": question(index)}],
            id=workflow_id,
            task_queue=queues[AGENTS_SDK],
        )

    return [
        PeerSystem(PEER_NAMES[PYDANTIC_AI], clients[PYDANTIC_AI], queues[PYDANTIC_AI], pydantic_ai),
        PeerSystem(PEER_NAMES[AGENTS_SDK], clients[AGENTS_SDK], queues[AGENTS_SDK], agents_sdk),
    ]


async def workflow_pollers(
    client: Client, task_queue: str, process: subprocess.Popen[bytes], *, timeout: float = 120
) -> None:
    """Wait until the worker `process` polls `task_queue` for workflow tasks."""
    from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    deadline = time.monotonic() + timeout
    while not (await client.workflow_service.describe_task_queue(request)).pollers:
        if process.poll() is not None:
            raise RuntimeError(
                f"the worker of {task_queue} exited ({process.returncode}); see its log"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"no worker polled {task_queue} within {timeout:.0f} s")
        await asyncio.sleep(0.2)


def _request_shapes(requests: list[RecordedRequest]) -> dict[str, list[int]]:
    """The message counts the model saw, by user agent: each system sent the same transcript."""
    shapes: dict[str, set[int]] = {}
    for request in requests:
        body = request.body if isinstance(request.body, dict) else {}
        messages = body.get("messages")
        agent = request.headers.get("user-agent", "?").split(" ")[0]
        shapes.setdefault(agent, set()).add(len(messages) if isinstance(messages, list) else -1)
    return {agent: sorted(counts) for agent, counts in shapes.items()}


def _start_worker(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _p99(values: list[float]) -> float:
    return p99(values) if len(values) > 1 else p50(values)


def _ms(values: list[float]) -> str:
    return f"{p50(values):,.0f} ms"


def _size(values: list[int]) -> str:
    mean = sum(values) / len(values)
    if mean >= 1_000_000:
        return f"{mean / 1_000_000:.2f} MB"
    return f"{mean / 1000:.1f} KB"


def _peer_cell(cell: Cell, name: str) -> str:
    if name in cell.failures:
        return f"fails: {cell.failures[name]}"
    if CRUX in cell.failures:
        return _ms(cell.seconds[name])
    ratio = p50(cell.seconds[name]) / p50(cell.seconds[CRUX])
    return f"{_ms(cell.seconds[name])} ({ratio:.2f}x)"


def _fastest_peer_ratio(cell: Cell) -> float | None:
    """The fastest working peer's p50 over Crux's (above 1: Crux is faster), if any."""
    peers = [p50(cell.seconds[n]) for n in PEER_NAMES.values() if n not in cell.failures]
    if CRUX in cell.failures or not peers:
        return None
    return min(peers) / p50(cell.seconds[CRUX])


TARGETS = (
    (10, 1.0, "<= 1.0x the fastest peer"),
    (1_000, 5.0, ">= 5x faster"),
    (5_000, 10.0, ">= 10x faster"),
)
"""Crux p50 per size against the fastest peer's, as the fastest peer's p50 over Crux's."""


def print_report(cells: list[Cell], turns: int, warmup: int) -> None:
    peers = list(PEER_NAMES.values())
    print(
        f"a conversation turn on Temporal, Crux next to its peers: {turns} timed turns per row "
        f"({warmup} warm-up), interleaved; every worker in its own process; the same dev "
        "server, loopback model server (same reply, no think time) and model name"
    )
    print("ratio: the peer's p50 over Crux's (above 1: Crux is faster)")
    print()
    print(
        f"| prior messages | {CRUX} p50 | {peers[0]} p50 | {peers[1]} p50 "
        f"| {CRUX} history / turn | peers' history / turn |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for cell in cells:
        crux_p50 = (
            f"fails: {cell.failures[CRUX]}" if CRUX in cell.failures else _ms(cell.seconds[CRUX])
        )
        crux_history = "-" if CRUX in cell.failures else _size(cell.history[CRUX])
        peer_history = ", ".join(
            "-" if name in cell.failures else _size(cell.history[name]) for name in peers
        )
        peer_p50s = " | ".join(_peer_cell(cell, name) for name in peers)
        print(
            f"| {cell.messages:,d} | {crux_p50} | {peer_p50s} | {crux_history} | {peer_history} |"
        )
    print()
    print("| prior messages | " + " | ".join(f"{name} p99" for name in [CRUX, *peers]) + " |")
    print("| ---: | ---: | ---: | ---: |")
    for cell in cells:
        p99s = " | ".join(
            "-" if name in cell.failures else f"{_p99(cell.seconds[name]):,.0f} ms"
            for name in [CRUX, *peers]
        )
        print(f"| {cell.messages:,d} | {p99s} |")
    print()
    by_size = {cell.messages: cell for cell in cells}
    verdicts: list[str] = []
    for size, bound, wording in TARGETS:
        cell = by_size.get(size)
        ratio = _fastest_peer_ratio(cell) if cell is not None else None
        if ratio is None:
            verdicts.append(f"at {size:,d} {wording}: not measured")
            continue
        met = ratio >= bound
        crux_over_peer = 1 / ratio
        shown = (
            f"Crux at {crux_over_peer:.2f}x the fastest peer"
            if size == 10
            else f"{ratio:.2f}x faster"
        )
        verdicts.append(f"at {size:,d} {wording}: {shown} ({'met' if met else 'not met'})")
    print("targets (Crux p50 against the fastest peer's): " + "; ".join(verdicts))


async def main(sizes: tuple[int, ...], turns: int, warmup: int) -> None:
    logs = ROOT / "bench" / ".logs"
    logs.mkdir(exist_ok=True)
    database = await bench_database()
    url = database.url
    env = await start_temporal(ui=False)
    address = env.client.service_client.config.target_host
    workers: list[subprocess.Popen[bytes]] = []
    cells: list[Cell] = []

    def respond(request: RecordedRequest) -> TextReply:
        # Reported usage from the body's size: no tokenizer in the loop for anyone.
        return TextReply(text=REPLY, input_tokens=len(request.raw_body) // 4, output_tokens=14)

    try:
        async with LoopbackOpenAIServer(responder=respond) as loopback:
            model_env = {
                "OPENAI_BASE_URL": loopback.base_url,
                "OPENAI_API_KEY": API_KEY,
                # The Agents SDK exports traces to OpenAI by default: nothing leaves the machine.
                "OPENAI_AGENTS_DISABLE_TRACING": "1",
            }
            os.environ.update(model_env)
            root_path = os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            )
            worker_env = dict(
                os.environ,
                **model_env,
                TEMPORAL_ADDRESS=address,
                PYTHONPATH=root_path,
                PYTHONUNBUFFERED="1",
            )
            queues = {"crux": f"bench-peers-crux-{uuid.uuid4().hex[:6]}"}
            workers.append(
                _start_worker(
                    ["-m", "crux", "worker"],
                    dict(
                        worker_env,
                        CRUX_DATABASE_URL=url,
                        CRUX_TASK_QUEUE=queues["crux"],
                        CRUX_MIGRATE="true",
                        CRUX_LOG_LEVEL="error",
                        CRUX_MODEL=f"openai:{MODEL}",
                    ),
                    logs / "bench_peers.crux-worker.log",
                )
            )
            for peer in PEER_NAMES:
                queues[peer] = f"bench-peers-{peer}-{uuid.uuid4().hex[:6]}"
                workers.append(
                    _start_worker(
                        [str(ROOT / "bench" / "peer_worker.py"), peer, queues[peer]],
                        worker_env,
                        logs / f"bench_peers.{peer}-worker.log",
                    )
                )
            for queue, worker in zip(queues.values(), workers, strict=True):
                await workflow_pollers(env.client, queue, worker)

            from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
            from temporalio.openai_agents import OpenAIAgentsPlugin

            clients = {
                PYDANTIC_AI: await Client.connect(address, plugins=[PydanticAIPlugin()]),
                AGENTS_SDK: await Client.connect(address, plugins=[OpenAIAgentsPlugin()]),
            }
            runtime = await crux.connect(
                address,
                url,
                task_queue=queues["crux"],
                default_model=f"openai:{MODEL}",
            )
            try:
                for messages in sizes:
                    prior = transcript(messages)
                    crux_system = CruxSystem(runtime, prior)
                    started = time.perf_counter()
                    await crux_system.seed()
                    seeded = time.perf_counter() - started
                    systems: list[System] = [crux_system, *_peer_systems(clients, queues, prior)]
                    started = time.perf_counter()
                    cell = await run_cell(systems, messages, turns, warmup)
                    print(
                        f"{messages:,d} prior messages: seeded in {seeded:.1f} s, "
                        f"measured in {time.perf_counter() - started:.0f} s; messages per "
                        f"model request by client: {_request_shapes(loopback.requests)}",
                        file=sys.stderr,
                        flush=True,
                    )
                    loopback.requests.clear()
                    cells.append(cell)
            finally:
                await runtime.close()
    finally:
        for worker in workers:
            _stop(worker)
        await env.shutdown()
        database.stop()
    print_report(cells, turns, warmup)
    sys.stdout.flush()


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(part.replace("_", "")) for part in text.split(","))


def _require_peers() -> None:
    """Stop with the remedy when the peers are not installed in this environment."""
    try:
        import pydantic_ai.durable_exec.temporal  # noqa: F401
        import temporalio.openai_agents  # noqa: F401
    except ImportError:
        raise SystemExit(
            "the peers (the `bench` extra) are not installed here: run this with "
            ".venv-bench/bin/python (`make bench` creates .venv-bench from requirements-bench.lock)"
        ) from None


if __name__ == "__main__":
    _require_peers()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_TURNS} turns, sizes 10 and 1,000"
    )
    parser.add_argument("--turns", type=int, help=f"timed turns per cell (default {TURNS})")
    parser.add_argument("--warmup", type=int, default=WARMUP, help="untimed turns per cell")
    parser.add_argument("--sizes", type=_sizes, help="prior-message counts, e.g. 10,1000")
    arguments = parser.parse_args()
    chosen_sizes = arguments.sizes or (QUICK_SIZES if arguments.quick else SIZES)
    chosen_turns = arguments.turns or (QUICK_TURNS if arguments.quick else TURNS)
    asyncio.run(main(chosen_sizes, chosen_turns, arguments.warmup))
