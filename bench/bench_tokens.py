"""Benchmark token counting: throughput against raw tiktoken, and tokenizations per turn.

Run: `.venv/bin/python bench/bench_tokens.py [--quick]`

1. Throughput. On one corpus of chat messages (prose in several scripts, code, JSON tool
   results, tool calls), it times raw `tiktoken.Encoding.encode` over exactly the texts our
   counter tokenizes (the anchor), then `TokenCounter.count_message` one message at a time
   and `TokenCounter.count_messages` on the whole batch, and prints the ratio of our
   throughput to the anchor's (target: at least 0.9x).
2. Tokenizations per managed turn. A thread grows by one turn at a time (user message, an
   assistant tool round on some turns, final assistant message). Each turn the activity
   layer needs every message's count; the naive path recounts the whole thread, the cached
   path calls `count_new_messages(thread, known)` with counts keyed by message id for the
   encoding (as stored with each message). It prints the texts tokenized per turn for both
   (target: the cached path tokenizes only the new messages).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from providers import TokenCounter
from providers import _json as wire_json
from providers._encodings import load_encoding
from vocabulary.messages import Message, TextPart, ToolCallPart

ENCODING = "o200k_base"
SNIPPETS = [
    "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly plan.",
    "def merge(a: list[int], b: list[int]) -> list[int]:\n    return sorted(a + b)\n",
    '{"order_id": 98123, "items": [{"sku": "A-17", "qty": 2}], "status": "shipped"}',
    "Der Vertrag verlängert sich automatisch um zwölf Monate, sofern er nicht gekündigt wird.",
    "東京の天気は明日晴れる予報です。気温は二十度前後になるでしょう。",
    "Le musée ouvre à 9 h 30 ; l'entrée est gratuite le premier dimanche du mois.",
    "Invoice #4471 — total due: $12,940.55 (net 30). Contact billing@example.test.",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days' ORDER BY id;",
]


def _text(rng: random.Random, paragraphs: int) -> str:
    return "\n\n".join(rng.choice(SNIPPETS) for _ in range(paragraphs))


def turn_messages(rng: random.Random, turn: int) -> list[Message]:
    """The messages one managed turn appends to a thread."""
    out = [Message(id=f"t{turn}-u", role="user", content=_text(rng, rng.randint(1, 6)))]
    if turn % 3 == 0:
        call = ToolCallPart(
            tool_call_id=f"t{turn}-c", tool_name="search_orders", input={"customer": f"c{turn}"}
        )
        out.append(
            Message(id=f"t{turn}-a", role="assistant", content=[TextPart(text="Checking."), call])
        )
        result = json.dumps({"orders": [json.loads(SNIPPETS[2])] * rng.randint(1, 6)})
        out.append(
            Message(id=f"t{turn}-r", role="tool", tool_call_id=call.tool_call_id, content=result)
        )
    out.append(Message(id=f"t{turn}-f", role="assistant", content=_text(rng, rng.randint(1, 4))))
    return out


def corpus(turns: int) -> list[Message]:
    rng = random.Random(11)
    return [m for turn in range(turns) for m in turn_messages(rng, turn)]


def texts_of(message: Message) -> list[str]:
    """Exactly the texts `TokenCounter` tokenizes for a message."""
    texts: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ToolCallPart):
            texts += [part.tool_name, wire_json.dumps(part.input)]
    return [t for t in texts if t]


def best_of(repeats: int, run: Callable[[], object]) -> float:
    timings: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return min(timings)


def throughput(messages: list[Message], repeats: int) -> None:
    encoding = load_encoding(ENCODING)
    counter = TokenCounter.for_encoding(ENCODING)
    texts = [t for m in messages for t in texts_of(m)]
    size = sum(len(t.encode()) for t in texts)
    tokens = sum(len(encoding.encode(t)) for t in texts)

    def anchor() -> None:
        for text in texts:
            encoding.encode(text)

    def anchor_ordinary() -> None:
        for text in texts:
            encoding.encode_ordinary(text)

    def per_message() -> None:
        for message in messages:
            counter.count_message(message)

    def batch() -> None:
        counter.count_messages(messages)

    anchor()  # warm up the regex and rank caches
    print(
        f"corpus: {len(messages)} messages, {len(texts)} texts, "
        f"{size / 1e6:.2f} MB, {tokens} tokens"
    )
    paths = (
        ("tiktoken Encoding.encode (anchor)", anchor),
        ("tiktoken Encoding.encode_ordinary", anchor_ordinary),
        ("TokenCounter.count_message", per_message),
        ("TokenCounter.count_messages", batch),
    )
    # Rounds interleave the paths so background load hits them alike; the best round counts.
    best = {name: float("inf") for name, _ in paths}
    for _ in range(repeats):
        for name, run in paths:
            best[name] = min(best[name], best_of(1, run))
    base = best[paths[0][0]]
    print(f"{'path':<40}{'seconds':>10}{'Mtok/s':>10}{'vs anchor':>12}")
    for name, _ in paths:
        seconds = best[name]
        rate = tokens / seconds / 1e6
        print(f"{name:<40}{seconds:>10.4f}{rate:>10.2f}{base / seconds:>11.2f}x")


def growth(turns: int, checkpoints: list[int]) -> None:
    counter = TokenCounter.for_encoding(ENCODING)
    rng = random.Random(5)
    thread: list[Message] = []
    known: dict[str, int] = {}
    rows: list[tuple[int, int, int, int, int, int, float, float]] = []
    cached_total = naive_total = 0
    for turn in range(1, turns + 1):
        added = turn_messages(rng, turn)
        thread += added
        before = counter.tokenizations
        start = time.perf_counter()
        counter.count_messages(thread)  # naive: recount everything
        naive_seconds = time.perf_counter() - start
        naive = counter.tokenizations - before
        before = counter.tokenizations
        start = time.perf_counter()
        fresh = counter.count_new_messages(thread, known)
        cached_seconds = time.perf_counter() - start
        cached = counter.tokenizations - before
        known.update(fresh)
        naive_total += naive
        cached_total += cached
        if turn in checkpoints:
            row = (turn, len(thread), len(added), len(fresh), naive, cached)
            rows.append((*row, naive_seconds, cached_seconds))
    header = (
        "turn",
        "thread msgs",
        "new msgs",
        "cached msgs counted",
        "naive texts",
        "cached texts",
        "naive ms",
        "cached ms",
    )
    widths = (6, 13, 10, 21, 13, 14, 10, 11)
    print("".join(f"{h:>{w}}" for h, w in zip(header, widths, strict=True)))
    for *counts, naive_s, cached_s in rows:
        cells = (*counts, f"{naive_s * 1e3:.2f}", f"{cached_s * 1e3:.3f}")
        print("".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)))
    print(
        f"total texts tokenized over {turns} turns: naive {naive_total}, cached {cached_total} "
        f"({naive_total / cached_total:.0f}x fewer); "
        f"cached keys {len(known)} = messages {len(thread)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmark token counting.")
    parser.add_argument("--quick", action="store_true", help="smaller corpus, fewer repeats")
    args = parser.parse_args()
    turns = 150 if args.quick else 1_500
    print("== throughput ==")
    throughput(corpus(turns), repeats=3 if args.quick else 9)
    print("\n== tokenizations per managed turn ==")
    growth(50 if args.quick else 200, [1, 2, 3, 10, 30, 50, 99, 100, 200])


if __name__ == "__main__":
    main()
