"""Implementations of the CLI commands (printing is their job; logs stay content-free)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from crux._embedded import embedded_stack
from crux.config import Settings
from crux.context import context, droppable, prefer
from crux.prompts import prompt
from crux.runtime import Runtime
from crux.tools import tool
from storage import ThreadStore, create_pool, migrate_url

DEMO_INPUT_BUDGET = 240
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


def _banner(stack_ui: str | None, settings: Settings) -> None:
    print("Crux embedded stack")
    print(f"  Temporal address : {settings.temporal_address}")
    print(f"  Temporal UI      : {stack_ui or 'disabled'}")
    print(f"  Namespace        : {settings.temporal_namespace}")
    print(f"  Task queue       : {settings.task_queue}")
    print(f"  Database URL     : {settings.database_url}")
    print(f"  Model            : {settings.default_model}")


async def dev(settings: Settings, *, stack_dir: Path, stop: asyncio.Event) -> int:
    """Run the embedded stack with a worker until interrupted."""
    async with embedded_stack(settings, stack_dir=stack_dir) as stack:
        _banner(stack.ui_url, stack.settings)
        print("\nExport these to point other processes at this stack:")
        print(f"  export TEMPORAL_ADDRESS={stack.settings.temporal_address}")
        print(f"  export CRUX_DATABASE_URL='{stack.settings.database_url}'")
        print("Press Ctrl-C to stop.", flush=True)
        await stop.wait()
    return 0


async def demo(
    settings: Settings, *, stack_dir: Path, turns: int, keep: bool, stop: asyncio.Event
) -> int:
    """Run a multi-turn managed conversation on the embedded stack and print receipts."""
    turns = max(1, min(turns, len(DEMO_QUESTIONS)))
    weather = tool(
        "get_weather",
        _demo_weather,
        description="Tomorrow's forecast for a city",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )
    async with embedded_stack(settings, stack_dir=stack_dir, tools=[weather]) as stack:
        _banner(stack.ui_url, stack.settings)
        runtime = Runtime.from_settings(stack.client, stack.pool, stack.settings)
        thread_id = f"demo:{uuid.uuid4().hex[:8]}"
        # A small strict input budget makes whole-request planning visible: once the
        # conversation grows, the droppable travel notes give way (see the adaptations).
        support = prompt(
            id="demo-trip-planner",
            system="You are a concise travel assistant.",
            use=[
                context("house-rules", HOUSE_RULES, contract=True, priority=10),
                prefer(context("city-guide", CITY_GUIDE), context("city-guide-short", CITY_SHORT)),
                droppable(context("travel-notes", TRAVEL_NOTES, placement="message")),
            ],
            input_budget={"max": DEMO_INPUT_BUDGET},
            prompt=lambda value: str(value["message"]),
        )
        print(f"\nThread {thread_id} (model {stack.settings.default_model})\n")
        generation_ids: list[str] = []
        for number, question in enumerate(DEMO_QUESTIONS[:turns], start=1):
            generation_id = f"{thread_id}:turn-{number}"
            generation_ids.append(generation_id)
            result = await runtime.generate(
                support,
                input={"message": question},
                thread=thread_id,
                generation_id=generation_id,
            )
            print(f"--- turn {number} " + "-" * 60)
            print(f"user      : {question}")
            print(f"assistant : {result.text}")
            print("commit receipt :", _json(result.thread_commit))
            for step in result.steps:
                print(f"request receipt (attempt {step.attempt}):", _json(step.request))
                for adaptation in step.request.adaptations:
                    print(
                        f"  adaptation: {adaptation.contributor} -> {adaptation.representation}"
                        f" ({adaptation.contributor_full_tokens} ->"
                        f" {adaptation.contributor_selected_tokens} tokens)"
                    )
            print()

        forecast = await runtime.generate(
            prompt(id="demo-weather", use=[weather], prompt=lambda value: str(value)),
            input="Will it rain in Lisbon tomorrow?",
            thread=thread_id,
            generation_id=f"{thread_id}:weather",
            tool_choice="required",
        )
        print("--- a tool round " + "-" * 60)
        print(f"assistant : {forecast.text}")
        print("commit receipt :", _json(forecast.thread_commit))
        for step in forecast.steps:
            print(
                f"request receipt (attempt {step.attempt}, finish {step.finish_reason}):",
                _json(step.request),
            )
        print()

        again = await runtime.generate(
            support,
            input={"message": DEMO_QUESTIONS[0]},
            thread=thread_id,
            generation_id=generation_ids[0],
        )
        commit = again.thread_commit
        print("Starting turn 1 again with the same generation_id returns the stored turn:")
        print(
            f"  replayed={again.result.replayed} "
            f"message_ids={commit.message_ids if commit else None}\n"
        )
        print(f"Temporal UI: {stack.ui_url}  (workflow ids start with crux/gen/{thread_id}/)")
        print(f"Show the thread later: crux thread show {thread_id}")
        if keep:
            print("Stack kept running; press Ctrl-C to stop.", flush=True)
            await stop.wait()
    return 0


async def thread_show(settings: Settings, thread_id: str, stack_dir: Path) -> int:
    """Print a Thread's selected path with its branch points."""
    if settings.database_url:
        return await _print_thread(settings.database_url, thread_id)
    if not (stack_dir / "pgdata").exists():
        print("crux: set CRUX_DATABASE_URL (or run `crux demo`/`crux dev` first)")
        return 1
    from crux._embedded import STACK_DATABASE
    from crux.stack import start_postgres

    postgres = await start_postgres(stack_dir / "pgdata")
    try:
        return await _print_thread(postgres.database_url(STACK_DATABASE), thread_id)
    finally:
        await asyncio.to_thread(postgres.stop)


async def _print_thread(database_url: str, thread_id: str) -> int:
    pool = await create_pool(database_url)
    try:
        snapshot = await ThreadStore(pool).read(thread_id)
    finally:
        await pool.close()
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
    applied = await migrate_url(settings.require_database_url())
    print(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none'}")
    return 0


def _demo_weather(arguments: dict[str, Any]) -> dict[str, Any]:
    """A stand-in forecast so the demo runs offline."""
    return {"city": arguments.get("city") or "Lisbon", "rain_probability": 0.1, "high_c": 23}


def _json(value: Any) -> str:
    if value is None:
        return "null"
    return json.dumps(value.model_dump(mode="json"), sort_keys=True)
