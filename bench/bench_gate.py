"""Benchmark the acceptance gate's text checks: cost per policy against `str.lower`.

Run: `.venv/bin/python bench/bench_gate.py [--quick]`

For 1 KB, 10 KB and 100 KB of chat text (prose in several scripts, code, JSON, with an
e-mail address, a phone number, a card number or an IBAN every few hundred characters),
it times each policy alone, a typical input gate (PII masking, deny list, length) and a
set of constraints, and prints the median wall time and its ratio to the anchor,
`str.lower` of the same text measured in the same run (a pass over the text that every
check must at least make). A second table runs the same checks on hostile texts of the
same sizes: digits and separators only, `@` and dots only, and letter-digit runs that
start an IBAN candidate at every position, to show that no input makes a detector
superlinear.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from activities.gate import Allow, Block, Constraints, Gate, Verdict
from contracts.gate import (
    CustomPolicySpec,
    DenyListPolicySpec,
    ForbiddenConstraint,
    LengthConstraint,
    LengthPolicySpec,
    PatternConstraint,
    PiiPolicySpec,
    PiiRule,
    PolicySpec,
    RequiredConstraint,
)

SNIPPETS = [
    "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly plan.",
    "def merge(a: list[int], b: list[int]) -> list[int]:\n    return sorted(a + b)\n",
    '{"order_id": 98123, "items": [{"sku": "A-17", "qty": 2}], "status": "shipped"}',
    "Der Vertrag verlängert sich automatisch um zwölf Monate, sofern er nicht gekündigt wird.",
    "東京の天気は明日晴れる予報です。気温は二十度前後になるでしょう。",
    "Invoice #4471 — total due: $12,940.55 (net 30), order 1234 5678 9012 3456.",
]
FINDINGS = [
    "Contact billing@example.test for details.",
    "Call me on +1 650-253-0000 or (650) 253-0001.",
    "My card is 4111 1111 1111 1111, expiry 12/26.",
    "Pay to DE89 3704 0044 0532 0130 00 by Friday.",
]
SIZES = {"1 KB": 1_000, "10 KB": 10_000, "100 KB": 100_000}
DENY_WORDS = [f"forbiddenword{n}" for n in range(18)] + ["credit card", "wire transfer"]


def chat_text(size: int, seed: int = 3) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        part = rng.choice(FINDINGS) if rng.random() < 0.25 else rng.choice(SNIPPETS)
        parts.append(part)
        length += len(part) + 1
    return " ".join(parts)[:size]


def hostile_texts(size: int) -> dict[str, str]:
    rng = random.Random(size)
    return {
        "digits and separators": "".join(rng.choice("0123456789 -") for _ in range(size)),
        "@ and dots": "".join(rng.choice("a.@") for _ in range(size)),
        "IBAN starts": ("DE89" * (size // 4 + 1))[:size],
    }


def shout_free(text: str) -> Verdict:
    return Block("custom.shouting") if text.isupper() else Allow()


POLICIES: dict[str, PolicySpec] = {
    "pii: all, international phones": PiiPolicySpec(),
    "pii: all, US phones": PiiPolicySpec(phone_region="US"),
    "pii: e-mail only": PiiPolicySpec(rules=(PiiRule(kind="email"),)),
    "pii: card only": PiiPolicySpec(rules=(PiiRule(kind="card"),)),
    "pii: IBAN only": PiiPolicySpec(rules=(PiiRule(kind="iban"),)),
    "pii: phone only (US)": PiiPolicySpec(rules=(PiiRule(kind="phone"),), phone_region="US"),
    "length: characters": LengthPolicySpec(max_chars=1_000_000),
    "deny list: 20 words": DenyListPolicySpec(words=tuple(DENY_WORDS)),
    "deny list: 20 words + 2 regexes": DenyListPolicySpec(
        words=tuple(DENY_WORDS), patterns=(r"acct-\d{6}", r"(?i:^ignore previous)")
    ),
    "custom: one function": CustomPolicySpec(name="shout_free"),
}
TYPICAL: list[PolicySpec] = [
    PiiPolicySpec(phone_region="US"),
    DenyListPolicySpec(words=tuple(DENY_WORDS)),
    LengthPolicySpec(max_chars=1_000_000),
]
CONSTRAINTS = Constraints(
    [
        LengthConstraint(minimum=10, maximum=1_000_000),
        PatternConstraint(pattern=r"order #?\d++"),
        RequiredConstraint(substrings=("order", "invoice"), ignore_case=True),
        ForbiddenConstraint(substrings=("lorem ipsum", "TODO")),
    ]
)


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    timings: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def checks() -> dict[str, Callable[[str], object]]:
    custom = {"shout_free": shout_free}
    out: dict[str, Callable[[str], object]] = {}
    for name, spec in POLICIES.items():
        out[name] = Gate([spec], stage="input", custom=custom).run
    out["typical input gate (3 policies)"] = Gate(TYPICAL, stage="input").run
    out["constraints (4)"] = CONSTRAINTS.check
    return out


def table(title: str, texts: dict[str, str], repeats: int) -> None:
    print(f"\n== {title} ==")
    print(f"{'check':<36}{'text':>24}{'median ms':>12}{'x str.lower':>13}")
    for check_name, check in checks().items():
        for text_name, text in texts.items():
            runs = max(3, repeats // max(1, len(text) // 10_000))
            anchor = median_seconds(lambda text=text: text.lower(), runs * 5)
            seconds = median_seconds(lambda text=text, check=check: check(text), runs)
            print(
                f"{check_name:<36}{text_name:>24}{seconds * 1e3:>12.3f}{seconds / anchor:>12.0f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmark the gate's text checks.")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no hostile table")
    args = parser.parse_args()
    repeats = 5 if args.quick else 21
    print(
        "median wall time per call; each ratio is the check's median over the median of "
        "str.lower on the same text, measured right before it"
    )
    table("chat text", {name: chat_text(size) for name, size in SIZES.items()}, repeats)
    if not args.quick:
        hostile: dict[str, str] = {}
        for name, size in SIZES.items():
            for kind, text in hostile_texts(size).items():
                hostile[f"{kind}, {name}"] = text
        table("hostile text", hostile, repeats)


if __name__ == "__main__":
    main()
