"""Implementations of the CLI commands (printing is their job; logs stay content-free)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from crux._checks import StartupCheckError, check_database, check_providers, describe_database
from crux._demo_render import demo_console, print_turn
from crux._devserver import lock_stack_dir
from crux._embedded import STACK_DATABASE, embedded_stack
from crux.context import context, droppable, prefer
from crux.prompts import history, prompt, summarize
from crux.runtime import Runtime
from crux.stack import start_postgres
from crux.tools import Tool, tool
from planner import ModelCatalog, derive_budget
from storage import GenerationStore, ThreadStore, create_pool, migrate_url
from vocabulary.errors import ConfigurationError, CruxError
from vocabulary.settings import Settings

DEMO_MAX_OUTPUT_TOKENS = 400
"""Output cap of each demo turn (answers are asked to be short; real models still ramble)."""
DEMO_INPUT_CEILING = 6_000
"""Upper bound of the demo's strict input maximum, to keep a paid demo cheap."""
DEMO_SOFT_WATERMARK_PERCENT = 75
HOUSE_RULES = "Answer in at most three sentences. Never invent opening hours."
CITY_GUIDE = (
    "Lisbon guide: Alfama is the oldest district, with the castle and fado houses; Belem has "
    "the tower, the monastery and the custard tarts; Baixa and Chiado are the grid of shops "
    "and cafes; LX Factory is a converted industrial site; tram 28 crosses the old town; "
    "the miradouros give the best views at sunset; Sintra is a day trip by train."
)
CITY_SHORT = "Lisbon: Alfama (castle, fado), Belem (tower, tarts), Baixa/Chiado, Sintra trip."
TRAVEL_NOTES = (
    "Travel notes: the airport metro red line reaches the centre in twenty-five minutes; a "
    "Viva Viagem card works on metro, trams and ferries; many museums close on Mondays; "
    "restaurants open for dinner around half past seven; tipping is modest; pavements of "
    "polished limestone get slippery in the rain, so pack shoes with grip."
)

DEMO_QUESTIONS = (
    "Hello! I would like to plan a three-day trip to Lisbon.",
    "What should I see on the first day?",
    "And where could I eat in the evening?",
    "Thanks. Can you summarise the plan in one line?",
    "One more: what is the best way to get there from the airport?",
)


def crux_command() -> str:
    """How to run `crux` from here: `crux` when it is on the PATH, else its path."""
    return _venv_command("crux")


def _venv_command(name: str) -> str:
    """`name` when the PATH finds this environment's binary, else its (relative) path."""
    installed = Path(sys.executable).parent / name
    on_path = shutil.which(name)
    if on_path and Path(on_path).resolve() == installed.resolve():
        return name
    try:
        return str(installed.relative_to(Path.cwd()))
    except ValueError:
        return str(installed)


def _banner(stack_ui: str | None, settings: Settings, stack_dir: Path) -> None:
    print("Crux embedded stack")
    print(f"  Temporal address : {settings.temporal_address}")
    print(f"  Temporal UI      : {stack_ui or 'disabled'}")
    print(f"  Namespace        : {settings.temporal_namespace}")
    print(f"  Task queue       : {settings.task_queue}")
    print(f"  Database URL     : {settings.database_url}")
    print(f"  Model            : {settings.default_model}")
    print(f"  Server logs      : {stack_dir / 'temporal.log'}, {stack_dir / 'postgres.log'}")


async def dev(
    settings: Settings,
    *,
    stack_dir: Path,
    stop: asyncio.Event,
    port: int | None = None,
    ui_port: int | None = None,
) -> int:
    """Run the embedded stack with a worker until interrupted."""
    async with embedded_stack(settings, stack_dir=stack_dir, port=port, ui_port=ui_port) as stack:
        _banner(stack.ui_url, stack.settings, stack_dir)
        print("\nExport these to point other processes at this stack:")
        print(f"  export TEMPORAL_ADDRESS={stack.settings.temporal_address}")
        print(f"  export CRUX_DATABASE_URL='{stack.settings.database_url}'")
        print(
            f"Then, e.g.: {_venv_command('temporal')} workflow list"
            f" --address {stack.settings.temporal_address}"
        )
        print("Press Ctrl-C to stop.", flush=True)
        await stop.wait()
    return 0


@dataclass(frozen=True)
class DemoBudget:
    """The demo's limits, derived from the model's profile.

    Attributes:
        max_output_tokens: Output cap of each turn.
        optimize_at: Soft input watermark (managed history starts summarising above it).
        max: Strict input maximum.
    """

    max_output_tokens: int
    optimize_at: int
    max: int


def demo_budget(model: str, catalog: ModelCatalog | None = None) -> DemoBudget:
    """Budgets that suit `model`: its window less the output cap and counting margin.

    A fixed budget only suits one model (a small one made real models fail as soon as the
    conversation grew); derived from the profile it fits any model, known or not.
    """
    profile = (catalog or ModelCatalog.default()).resolve(model)
    output = min(DEMO_MAX_OUTPUT_TOKENS, profile.default_output_reserve)
    capacity = derive_budget(profile, output_reserve=output).capacity_max
    strict = max(1, min(capacity, DEMO_INPUT_CEILING))
    soft = max(1, strict * DEMO_SOFT_WATERMARK_PERCENT // 100)
    return DemoBudget(max_output_tokens=output, optimize_at=soft, max=strict)


def demo_weather_tool() -> Tool:
    """The demo's tool: a stand-in forecast, so the tool round needs no network."""
    return tool(
        "get_weather",
        _demo_weather,
        description="Tomorrow's forecast for a city",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )


async def demo(
    settings: Settings,
    *,
    stack_dir: Path,
    turns: int,
    keep: bool,
    stop: asyncio.Event,
    port: int | None = None,
    ui_port: int | None = None,
) -> int:
    """Run a multi-turn managed conversation on the embedded stack and print receipts."""
    check_providers(settings)
    weather = demo_weather_tool()
    async with embedded_stack(
        settings, stack_dir=stack_dir, tools=[weather], port=port, ui_port=ui_port
    ) as stack:
        _banner(stack.ui_url, stack.settings, stack_dir)
        runtime = Runtime.from_settings(stack.client, stack.pool, stack.settings)
        conversation = asyncio.create_task(
            converse(runtime, model=stack.settings.default_model, turns=turns, weather=weather)
        )
        interrupted = asyncio.create_task(stop.wait())
        await asyncio.wait({conversation, interrupted}, return_when=asyncio.FIRST_COMPLETED)
        if not conversation.done():
            # Ctrl-C mid-conversation: stop the turn in flight, then the stack, in order.
            conversation.cancel()
            with contextlib.suppress(asyncio.CancelledError, CruxError):
                await conversation
            print("Interrupted; the stack is stopping.", flush=True)
            return 130
        interrupted.cancel()
        thread_id = conversation.result()
        print(f"Temporal UI: {stack.ui_url}  (workflow ids start with crux/gen/{thread_id}/)")
        print(f"Show the Thread later: {crux_command()} thread show {thread_id}")
        if keep:
            print("Stack kept running; press Ctrl-C to stop.", flush=True)
            await stop.wait()
    return 0


async def converse(runtime: Runtime, *, model: str, turns: int, weather: Tool) -> str:
    """The demo conversation on any runtime: managed turns, a tool round, a replay.

    Args:
        runtime: A runtime whose worker has `weather` registered.
        model: The model to talk to (`provider:model`); budgets derive from its profile.
        turns: How many of the demo questions to ask (1-5).
        weather: The demo's tool.

    Returns:
        The Thread id of the conversation.
    """
    turns = max(1, min(turns, len(DEMO_QUESTIONS)))
    budget = demo_budget(model)
    thread_id = f"demo:{uuid.uuid4().hex[:8]}"
    # Managed history keeps the conversation inside the model's window however long it
    # runs: older turns are summarised above the soft watermark, the recent ones stay exact.
    # The context ladder (a short guide, droppable notes) gives way first under pressure.
    support = prompt(
        id="demo-trip-planner",
        system="You are a concise travel assistant.",
        use=[
            context("house-rules", HOUSE_RULES, contract=True, priority=10),
            prefer(context("city-guide", CITY_GUIDE), context("city-guide-short", CITY_SHORT)),
            droppable(context("travel-notes", TRAVEL_NOTES, placement="message")),
            history(summary={"strategy": summarize.adaptive()}, on_miss="inline"),
        ],
        input_budget={"optimize_at": budget.optimize_at, "max": budget.max},
        prompt=lambda value: str(value["message"]),
    )
    console = demo_console()
    console.print(f"\nThread {thread_id} (model {model})", markup=False)
    console.print(
        f"Budget from the model profile: optimize_at={budget.optimize_at} max={budget.max} "
        f"input tokens, {budget.max_output_tokens} output tokens per turn\n",
        markup=False,
        soft_wrap=True,
    )
    generation_ids: list[str] = []
    for number, question in enumerate(DEMO_QUESTIONS[:turns], start=1):
        generation_id = f"{thread_id}:turn-{number}"
        generation_ids.append(generation_id)
        result = await runtime.generate(
            support,
            input={"message": question},
            thread=thread_id,
            model=model,
            generation_id=generation_id,
            max_output_tokens=budget.max_output_tokens,
        )
        print_turn(
            console,
            f"turn {number}",
            question=question,
            answer=result.text,
            commit=result.thread_commit,
            steps=result.steps,
        )

    weather_question = "Will it rain in Lisbon tomorrow?"
    forecast = await runtime.generate(
        prompt(
            id="demo-weather",
            use=[weather, history(summary={"strategy": summarize.adaptive()})],
            input_budget={"optimize_at": budget.optimize_at, "max": budget.max},
            prompt=lambda value: str(value),
        ),
        input=weather_question,
        thread=thread_id,
        model=model,
        generation_id=f"{thread_id}:weather",
        tool_choice="required",
        max_output_tokens=budget.max_output_tokens,
    )
    print_turn(
        console,
        "tool round (get_weather runs on the worker)",
        question=weather_question,
        answer=forecast.text,
        commit=forecast.thread_commit,
        steps=forecast.steps,
    )

    again = await runtime.generate(
        support,
        input={"message": DEMO_QUESTIONS[0]},
        thread=thread_id,
        model=model,
        generation_id=generation_ids[0],
        max_output_tokens=budget.max_output_tokens,
    )
    commit = again.thread_commit
    console.rule("idempotency", align="left")
    console.print(
        "Starting turn 1 again with the same generation_id returns the stored turn:\n"
        f"  replayed={again.result.replayed} "
        f"message_ids={list(commit.message_ids) if commit else None}\n",
        markup=False,
        soft_wrap=True,
    )
    return thread_id


async def thread_show(settings: Settings, thread_id: str, stack_dir: Path) -> int:
    """Print a Thread's selected path with its branch points."""
    if settings.database_url:
        return await _print_thread(settings.database_url, thread_id)
    if not (stack_dir / "pgdata").exists():
        print("crux: set CRUX_DATABASE_URL (or run `crux demo`/`crux dev` first)", file=sys.stderr)
        return 1
    try:
        lock = await asyncio.to_thread(lock_stack_dir, stack_dir)
    except ConfigurationError:
        lock = None  # a running `crux dev`/`crux demo` holds it: read, and leave it running
    try:
        postgres = await start_postgres(stack_dir / "pgdata", log_path=stack_dir / "postgres.log")
        try:
            return await _print_thread(postgres.database_url(STACK_DATABASE), thread_id)
        finally:
            if lock is not None:
                await asyncio.to_thread(postgres.stop)
    finally:
        if lock is not None:
            lock.close()


async def _print_thread(database_url: str, thread_id: str) -> int:
    await check_database(database_url)
    pool = await create_pool(database_url, min_size=1, max_size=1)
    try:
        known = await pool.fetchval("SELECT 1 FROM crux_threads WHERE thread_id = $1", thread_id)
        snapshot = await ThreadStore(pool).read(thread_id) if known else None
    finally:
        await pool.close()
    if snapshot is None:
        # Only the id the caller typed is echoed: the message stays content-free.
        print(
            f"crux: no Thread {thread_id!r} in {describe_database(database_url)}", file=sys.stderr
        )
        return 1
    print(f"thread {thread_id}  revision {snapshot.revision[:16]}  head {snapshot.head}")
    for entry in snapshot.entries:
        data: dict[str, Any] = entry.model_dump(mode="json")
        variant = data.get("variant")
        branch = ""
        if variant:
            branch = f"  [variant {variant['index'] + 1}/{variant['count']}]"
        if data.get("kind") == "message":
            content = data.get("content")
            text = content if isinstance(content, str) else json.dumps(content)[:200]
            print(f"  {data['id']:<40} {data.get('role', ''):<9} {text[:100]}{branch}")
        else:
            print(f"  {data['id']:<40} ({data.get('kind')}){branch}")
    return 0


async def db_migrate(settings: Settings) -> int:
    """Apply pending migrations to `CRUX_DATABASE_URL`."""
    url = settings.require_database_url()
    try:
        applied = await migrate_url(url)
    except (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError) as error:
        raise StartupCheckError(
            f"cannot connect to PostgreSQL at {describe_database(url)} (CRUX_DATABASE_URL): "
            f"{type(error).__name__}"
        ) from None
    print(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none'}")
    return 0


async def db_sweep(settings: Settings, *, older_than: float | None) -> int:
    """Delete staged text older than the retention: unfinished runs', unread ad-hoc replies."""
    url = settings.require_database_url()
    await check_database(url)
    age = settings.staging_retention_seconds if older_than is None else older_than
    if age < 0:
        raise StartupCheckError("--older-than must be zero or more seconds")
    pool = await create_pool(url, min_size=1, max_size=1)
    try:
        deleted = await GenerationStore(pool).sweep_orphans(age)
    finally:
        await pool.close()
    print(f"swept {deleted} staged row(s) older than {age:g} s")
    return 0


def _demo_weather(arguments: dict[str, Any]) -> dict[str, Any]:
    """A stand-in forecast so the demo runs offline."""
    return {"city": arguments.get("city") or "Lisbon", "rain_probability": 0.1, "high_c": 23}
