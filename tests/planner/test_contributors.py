"""Ladder helpers: ids, source ids, filling token counts, sources sent."""

from __future__ import annotations

from planner import (
    InputBudget,
    context,
    contributor_id,
    droppable,
    offloadable,
    plan,
    prefer,
    source_ids,
    summarizable,
    with_source_tokens,
)
from tests.planner.helpers import request


def test_ids_and_source_ids() -> None:
    ladder = droppable(
        offloadable(summarizable(prefer(context("a", tokens=0), context("a2", tokens=0))))
    )
    assert contributor_id(ladder) == "a"
    assert source_ids(ladder) == ("a", "a2")
    unit = summarizable(context("x", tokens=0), context("y", tokens=0), id="xy")
    assert (contributor_id(unit), source_ids(unit)) == ("xy", ("x", "y"))


def test_counts_are_filled_in_by_source_id_without_touching_the_definition() -> None:
    ladder = droppable(prefer(context("a", tokens=0), context("a2", tokens=0)))
    filled = with_source_tokens(ladder, {"a": 3_000, "a2": 200, "other": 5})
    assert ladder.target.primary.tokens == 0  # type: ignore[union-attr]
    sealed = plan(request(contributors=(filled,), input_budget=InputBudget(max=1_000)))
    assert sealed.input_tokens == 200
    unit = with_source_tokens(
        summarizable(context("x", tokens=0), context("y", tokens=0), id="xy", summary_tokens=10),
        {"x": 7, "y": 8},
    )
    assert plan(request(contributors=(unit,))).input_tokens == 15
    assert with_source_tokens(context("s", tokens=1), {"s": 9}).tokens == 9


def test_choices_name_the_sources_sent() -> None:
    ladder = prefer(context("a", tokens=3_000), context("a2", tokens=200))
    unit = summarizable(context("x", tokens=10), context("y", tokens=10), id="xy")
    plain = context("p", tokens=5)
    sealed = plan(request(contributors=(ladder, unit, plain), input_budget=InputBudget(max=1_000)))
    sent = {choice.contributor: choice.sources for choice in sealed.choices}
    assert sent == {"a": ("a2",), "xy": ("x", "y"), "p": ("p",)}
    assert [choice.contributor for choice in sealed.choices] == ["a", "xy", "p"]
