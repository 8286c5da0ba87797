"""`crux demo`: a managed conversation on the embedded stack, with its receipts explained.

The conversation shows what Crux does per provider call: the turns are planned within a
budget derived from the model's profile, a tool runs on the worker and its result goes back
to the model, one turn runs under a budget too small for the full request (so the planner
adapts it, and the receipt says how), and a repeated start of a turn replays the stored one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from crux._checks import check_providers
from crux._demo_render import demo_console, print_turn
from crux._embedded import embedded_stack
from crux.context import context, droppable, prefer
from crux.prompts import Prompt, history, prompt, summarize
from crux.runtime import Generation, Runtime
from crux.tools import Tool, tool
from crux.workers import Worker
from planner import ModelCatalog, derive_budget
from storage import MessageEntry, ThreadStore
from vocabulary.errors import CruxError
from vocabulary.settings import Settings

DEMO_MAX_OUTPUT_TOKENS = 400
"""Output cap of each demo turn (answers are asked to be short; real models still ramble)."""
DEMO_INPUT_CEILING = 6_000
"""Upper bound of the demo's strict input maximum, to keep a paid demo cheap."""
DEMO_SOFT_WATERMARK_PERCENT = 75
PRESSURE_PERCENT = 80
"""The pressure turn's strict maximum, as a share of its full-fidelity size."""
MAX_TURNS = 50
"""The most questions `--turns` asks."""

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
FOLLOW_UPS = (
    "What about day {day}: which district should I explore?",
    "Is there a viewpoint worth the climb on day {day}?",
    "Where could I have lunch on day {day}?",
)
PRESSURE_QUESTION = "Last one: what should I pack?"

LEGEND = """\
How to read the receipts printed for each turn:
  commit receipt    where the turn landed in the Thread: `selected` when it extends the
                    path it read, `alternative` when another turn landed first; the ids
                    of the messages it added; `replayed` when the turn was stored before.
  request receipts  one row per provider call. `input tokens` is the planned request's
                    size against the strict maximum (`max`): the planner keeps every
                    request under it. Above `optimize_at` (the soft watermark) managed
                    history summarises older turns in the background. `counted` says how
                    far the count can be trusted: `exact` (counted by the provider),
                    `estimated` (the model's public tokenizer; a small margin is kept
                    free) or `conservative` (an unknown model: a larger margin).
                    `adaptations` lists what the planner changed to fit, as
                    `contributor -> representation (full -> sent tokens)`: a context
                    replaced by its short version, a note omitted, older history
                    summarised; `exact` means nothing was changed."""


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


def demo_questions(turns: int) -> list[str]:
    """The first `turns` questions: the scripted ones, then numbered follow-ups."""
    follow_ups: Iterator[str] = (
        template.format(day=day)
        for day, template in zip(itertools.count(2), itertools.cycle(FOLLOW_UPS), strict=False)
    )
    return list(itertools.islice(itertools.chain(DEMO_QUESTIONS, follow_ups), turns))


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


def _demo_weather(arguments: dict[str, Any]) -> dict[str, Any]:
    """A stand-in forecast so the demo runs offline."""
    return {"city": arguments.get("city") or "Lisbon", "rain_probability": 0.1, "high_c": 23}


async def demo(
    settings: Settings,
    *,
    stack_dir: Path,
    stack_dir_given: bool,
    turns: int,
    keep: bool,
    stop: asyncio.Event,
    command: str,
    port: int | None = None,
    ui_port: int | None = None,
) -> int:
    """Run the demo conversation on the embedded stack and print its receipts.

    Args:
        settings: Provider settings and the model (`CRUX_MODEL`).
        stack_dir: Where the stack keeps its data.
        stack_dir_given: The user chose `stack_dir` (the printed commands repeat it).
        turns: How many questions to ask.
        keep: Keep the stack running afterwards, until `stop`.
        stop: Set by Ctrl-C / SIGTERM.
        command: How to run `crux` from here (for the printed commands).
        port: Temporal frontend port (a free one by default).
        ui_port: Temporal UI port (a free one by default).

    Returns:
        The exit code: 0, or 130 when interrupted mid-conversation.
    """
    from crux._commands import banner

    check_providers(settings)
    weather = demo_weather_tool()
    async with embedded_stack(
        settings,
        stack_dir=stack_dir,
        worker=Worker(tools=[weather]),
        port=port,
        ui_port=ui_port,
    ) as stack:
        banner(stack.ui_url, stack.settings, stack_dir)
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
        where = f" --stack-dir {stack_dir}" if stack_dir_given else ""
        show = f"{command} thread show {thread_id}{where}"
        if keep:
            print(f"Temporal UI: {stack.ui_url}  (workflow ids start with crux/gen/{thread_id}/)")
            print(f"Show the Thread: {show}")
            print("The stack keeps running; press Ctrl-C to stop it.", flush=True)
            await stop.wait()
            return 0
    print("The stack has stopped; its data stays in the stack directory.")
    print(f"Show the Thread: {show}")
    print(
        f"Browse the runs in the Temporal UI: {command} demo --keep{where}, "
        f"or {command} dev{where} (the history is kept)",
        flush=True,
    )
    return 0


def _trip_planner(budget: DemoBudget) -> Prompt:
    # Managed history keeps the conversation inside the model's window however long it
    # runs: older turns are summarised above the soft watermark, the recent ones stay exact.
    # The context ladder (a short guide, droppable notes) gives way first under pressure.
    return prompt(
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


async def converse(runtime: Runtime, *, model: str, turns: int, weather: Tool) -> str:
    """The demo conversation on any runtime: turns, a tool round, pressure, a replay.

    Args:
        runtime: A runtime whose worker has `weather` registered.
        model: The model to talk to (`provider:model`); budgets derive from its profile.
        turns: How many questions to ask before the tool round.
        weather: The demo's tool.

    Returns:
        The Thread id of the conversation.
    """
    budget = demo_budget(model)
    thread_id = f"demo:{uuid.uuid4().hex[:8]}"
    planner = _trip_planner(budget)
    console = demo_console()
    console.print(f"\nThread {thread_id} (model {model})", markup=False)
    console.print(
        f"Budget from the model profile: optimize_at={budget.optimize_at} max={budget.max} "
        f"input tokens, {budget.max_output_tokens} output tokens per turn\n",
        markup=False,
        soft_wrap=True,
    )
    console.print(LEGEND + "\n", markup=False, soft_wrap=True)
    for number, question in enumerate(demo_questions(turns), start=1):
        result = await runtime.generate(
            planner,
            input={"message": question},
            thread=thread_id,
            model=model,
            generation_id=f"{thread_id}:turn-{number}",
            max_output_tokens=budget.max_output_tokens,
        )
        _print(console, f"turn {number}", question, result)

    await _tool_round(runtime, console, thread_id, model=model, budget=budget, weather=weather)
    await _pressure(runtime, console, planner, thread_id, model=model, budget=budget)

    again = await runtime.generate(
        planner,
        input={"message": DEMO_QUESTIONS[0]},
        thread=thread_id,
        model=model,
        generation_id=f"{thread_id}:turn-1",
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


async def _tool_round(
    runtime: Runtime,
    console: Console,
    thread_id: str,
    *,
    model: str,
    budget: DemoBudget,
    weather: Tool,
) -> None:
    question = "Will it rain in Lisbon tomorrow?"
    forecast = await runtime.generate(
        prompt(
            id="demo-weather",
            use=[weather, history(summary={"strategy": summarize.adaptive()})],
            input_budget={"optimize_at": budget.optimize_at, "max": budget.max},
            prompt=lambda value: str(value),
        ),
        input=question,
        thread=thread_id,
        model=model,
        generation_id=f"{thread_id}:weather",
        tool_choice="required",
        max_output_tokens=budget.max_output_tokens,
    )
    _print(console, "tool round (get_weather runs on the worker)", question, forecast)
    commit = forecast.thread_commit
    added = set(commit.message_ids) if commit else set[str]()
    snapshot = await ThreadStore(runtime.pool).read(thread_id)
    for entry in snapshot.entries:
        if isinstance(entry, MessageEntry) and entry.role == "tool" and entry.id in added:
            text = entry.content if isinstance(entry.content, str) else json.dumps(entry.content)
            console.print(
                f"  the tool's result, sent back to the model: {entry.tool_name} -> {text}\n",
                markup=False,
                soft_wrap=True,
            )


async def _pressure(
    runtime: Runtime,
    console: Console,
    planner: Prompt,
    thread_id: str,
    *,
    model: str,
    budget: DemoBudget,
) -> None:
    message = {"message": PRESSURE_QUESTION}
    full = await runtime.preview(planner, input=message, thread=thread_id, model=model)
    size = full.input_tokens or budget.max
    tight = max(1, size * PRESSURE_PERCENT // 100)
    result = await runtime.generate(
        planner,
        input=message,
        thread=thread_id,
        model=model,
        generation_id=f"{thread_id}:pressure",
        max_output_tokens=budget.max_output_tokens,
        input_budget={"optimize_at": tight, "max": tight},
    )
    console.rule("under pressure", align="left")
    console.print(
        f"The same conversation with a strict maximum of {tight} input tokens, "
        f"{PRESSURE_PERCENT} % of the {size} the full request needs: the planner gives up "
        "fidelity in the order the prompt allows (the short guide, the droppable notes, "
        "older history) and the receipt lists each change.",
        markup=False,
    )
    _print(console, "turn under pressure", PRESSURE_QUESTION, result)


def _print(console: Console, title: str, question: str, result: Generation) -> None:
    print_turn(
        console,
        title,
        question=question,
        answer=result.text,
        commit=result.thread_commit,
        steps=result.steps,
    )
