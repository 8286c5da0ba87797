"""How `crux demo` shows a conversation: readable tables of each turn's receipts.

Receipts are content-free (ids, sizes, decisions); the only text printed is the demo's own
question and the model's answer, which is what a demo is for.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from contracts.generation import StepRecord
from vocabulary.commits import ThreadCommit


def demo_console() -> Console:
    """A console on stdout; plain text (no colours) when stdout is not a terminal."""
    return Console(highlight=False)


_STYLE: dict[str, Any] = {
    "box": box.SIMPLE_HEAD,
    "title_justify": "left",
    "show_edge": False,
    "pad_edge": False,
}


def _tail(identifier: str | None) -> str:
    """The part of a message id after the Thread's prefix (`turn-1:user`)."""
    if identifier is None:
        return "-"
    parts = identifier.split(":")
    return ":".join(parts[-2:]) if len(parts) > 2 else identifier


def commit_table(commit: ThreadCommit | None) -> Table:
    """The commit receipt: where the turn landed in the Thread."""
    table = Table(title="commit receipt", **_STYLE)
    for column in ("status", "messages", "parent", "replayed"):
        table.add_column(column, overflow="fold")
    if commit is None:
        table.add_row("not committed", "-", "-", "-")
        return table
    table.add_row(
        commit.status,
        f"{len(commit.message_ids)}: " + ", ".join(_tail(m) for m in commit.message_ids),
        _tail(commit.parent_id),
        str(commit.replayed),
    )
    return table


def steps_table(steps: tuple[StepRecord, ...] | list[StepRecord]) -> Table:
    """One row per provider call: the request receipt and what the provider reported."""
    table = Table(title="request receipts", **_STYLE)
    for column in ("#", "request", "input tokens", "counted", "out", "finish", "adaptations"):
        table.add_column(column, overflow="fold")
    for step in steps:
        receipt = step.request
        adaptations = [
            f"{item.contributor} -> {item.representation} "
            f"({item.contributor_full_tokens}->{item.contributor_selected_tokens})"
            for item in receipt.adaptations
        ]
        notes = [f"after {receipt.previous_reason}"] if receipt.previous_reason else []
        notes += [f"summary: {receipt.summary_path}"] if receipt.summary_path else []
        notes += [f"warning: {warning.code}" for warning in receipt.warnings]
        table.add_row(
            str(step.attempt),
            "..." + receipt.id[-8:],
            f"{receipt.input_tokens} / {receipt.max_input_tokens}",
            str(receipt.measurement),
            str(step.usage.output_tokens),
            step.finish_reason,
            "\n".join(adaptations + notes) or "exact",
        )
    return table


def print_turn(
    console: Console,
    title: str,
    *,
    question: str | None,
    answer: str,
    commit: ThreadCommit | None,
    steps: tuple[StepRecord, ...] | list[StepRecord],
) -> None:
    """Print one turn: a rule, the exchange, and its receipts as tables."""
    console.rule(title, align="left")
    if question is not None:
        console.print(f"[bold]user[/bold]      : {question}", markup=True)
    console.print("[bold]assistant[/bold] : ", end="", markup=True)
    console.print(answer, markup=False, soft_wrap=True)
    console.print(commit_table(commit))
    console.print(steps_table(steps))
    console.print()
