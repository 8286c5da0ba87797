"""A skeleton cut to what its history policy can use plans exactly like the whole one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.generation import GenerationInput
from planner import (
    MESSAGE_FORMATS,
    ExactHistory,
    HistoryAggregate,
    HistoryColumns,
    HistoryItem,
    HistorySummary,
    InputBudget,
    ManagedHistory,
    PlanRequest,
    RecentHistory,
    RequestCompositionError,
    SealedPlan,
    derive_budget,
    history,
    plan,
)
from planner.history import leading_system_prefix
from planner.history_needs import cut_to_needs, first_needed_group
from tests.planner.helpers import request, turns
from tests.planner.test_properties import FAST, transcripts
from workflows._inputs import read_input

OPENAI = MESSAGE_FORMATS["openai"]


def _reader_split(
    items: tuple[HistoryItem, ...], older_groups: int
) -> tuple[HistoryColumns, HistoryAggregate]:
    """Aggregate `older_groups` groups after the system prefix, as the reader does."""
    prefix = leading_system_prefix(items)
    end, groups = prefix, 0
    for _ in range(older_groups):
        if end >= len(items):
            break
        group = items[end].group_id
        groups += 1
        while end < len(items) and items[end].group_id == group:
            end += 1
    older = items[prefix:end]
    listed = (*items[:prefix], *items[end:])
    aggregate = HistoryAggregate(
        count=len(older),
        tokens=sum(item.tokens for item in older),
        groups=groups if older else 0,
        calls=sum(len(item.tool_call_ids) for item in older),
        prefix_items=prefix if older else 0,
    )
    columns = HistoryColumns.pack(listed, has_older=bool(older), prefix_items=prefix)
    return columns, aggregate


def _policies() -> st.SearchStrategy[object]:
    summary = st.one_of(
        st.none(),
        st.builds(
            lambda covers, tokens: HistorySummary(artifact_id="hs", tokens=tokens, covers=covers),
            st.integers(0, 40),
            st.integers(0, 300),
        ),
    )
    return st.one_of(
        st.just(history.exact()),
        st.builds(
            lambda m, t: history.recent(messages=m, tokens=t),
            st.one_of(st.none(), st.integers(1, 30)),
            st.one_of(st.none(), st.integers(1, 8_000)),
        ).filter(lambda policy: policy.messages is not None or policy.tokens is not None),
        st.builds(
            lambda m, t, on_miss, found: ManagedHistory(
                recent_messages=m, recent_tokens=t, on_miss=on_miss, summary=found
            ),
            st.one_of(st.none(), st.integers(1, 12)),
            st.one_of(st.none(), st.integers(1, 3_000)),
            st.sampled_from(["inline", "recent-only", "fail"]),
            summary,
        ),
    )


def _outcome(req: PlanRequest) -> SealedPlan | tuple[str, str, object]:
    try:
        return plan(req)
    except RequestCompositionError as error:
        return error.code, str(error), error.diagnostics


@FAST
@given(
    transcripts(),
    st.integers(0, 2),
    st.integers(0, 4),
    _policies(),
    st.integers(50, 9_000),
    st.integers(0, 400),
)
def test_the_cut_skeleton_seals_the_same_plan(
    conversation: tuple[HistoryItem, ...],
    system_messages: int,
    older_groups: int,
    policy: object,
    strict: int,
    turn_tokens: int,
) -> None:
    system = tuple(
        HistoryItem(id=f"s{i}", role="system", group_id=f"sys{i}", tokens=11)
        for i in range(system_messages)
    )
    columns, older = _reader_split((*system, *conversation), older_groups)
    fields: dict[str, object] = {
        "history_policy": policy,
        "input_budget": InputBudget(max=strict),
        "message_format": OPENAI,
        "current_turn_tokens": turn_tokens,
    }
    whole = request(history_columns=columns, older_history=older, **fields)
    ceiling = derive_budget(whole.model, whole.input_budget).max
    assert isinstance(policy, ExactHistory | RecentHistory | ManagedHistory)
    cut_columns, cut_older = cut_to_needs(policy, columns, older, strict_max=ceiling)
    cut = request(history_columns=cut_columns, older_history=cut_older, **fields)
    by_whole, by_cut = _outcome(whole), _outcome(cut)
    if isinstance(by_whole, SealedPlan):
        assert isinstance(by_cut, SealedPlan)
        # Positions, sizes, receipt and inspection (figures included) are the same; only
        # the aggregate a whole history sends with is another one (the folded groups).
        exclude = {"included_older"}
        assert by_cut.model_dump(exclude=exclude) == by_whole.model_dump(exclude=exclude)
    else:
        assert by_cut == by_whole
    assert cut_older.count + cut_columns.message_count == older.count + columns.message_count


def test_recent_history_lists_only_the_groups_its_caps_take() -> None:
    columns = HistoryColumns.pack(turns(5_000))
    policy = history.recent(messages=20)
    assert first_needed_group(policy, columns, HistoryAggregate(), strict_max=8_968) == 4_990
    cut, older = cut_to_needs(policy, columns, HistoryAggregate(), strict_max=8_968)
    assert cut.message_count == 20
    assert (older.count, older.tokens, older.groups) == (9_980, 99_800, 4_990)
    assert len(cut.model_dump_json()) < 120
    sealed = plan(request(history_columns=cut, older_history=older, history_policy=policy))
    assert sealed.message_ranges == ((9_980, 10_000),)


def test_exact_history_and_malformed_columns_are_never_cut() -> None:
    columns = HistoryColumns.pack(turns(50))
    older = HistoryAggregate()
    assert cut_to_needs(history.exact(), columns, older, strict_max=8_968) == (columns, older)
    broken = HistoryColumns(groups="X", tokens="X")
    policy = history.recent(messages=2)
    assert cut_to_needs(policy, broken, older, strict_max=8_968) == (broken, older)


def test_managed_history_keeps_the_raw_groups_after_a_stale_summary() -> None:
    columns = HistoryColumns.pack(turns(100))
    stale = HistorySummary(artifact_id="hs", tokens=40, covers=120)
    policy = ManagedHistory(recent_messages=10, summary=stale)
    # The suffix starts at group 95; the summary's raw groups at group 60.
    assert first_needed_group(policy, columns, HistoryAggregate(), strict_max=8_968) == 60
    without = ManagedHistory(recent_messages=10)
    assert first_needed_group(without, columns, HistoryAggregate(), strict_max=8_968) == 95


@pytest.mark.parametrize(
    ("changes", "uncut"),
    [
        ({}, False),
        ({"tools": ["lookup"]}, True),
        ({"prepare_step": "widen"}, True),
        ({"prepare_invocation": "widen"}, True),
    ],
)
def test_the_read_is_uncut_when_a_later_step_may_need_other_groups(
    changes: dict[str, object], uncut: bool
) -> None:
    # A tool round grows the turn of later steps, and a hook may widen a step's budget:
    # the plan of a later step may then use groups the first step's cut would drop.
    request = GenerationInput.model_validate(
        {
            "generation_id": "g1",
            "thread_id": "t1",
            "model": "openai:gpt-4o",
            "input": "hello",
            "history": {"kind": "managed"},
            **changes,
        }
    )
    assert read_input(request).keep_listing is uncut
