"""Columnar history: packed like listed items, planned like listed items, positions for ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import (
    HistoryAggregate,
    HistoryColumns,
    HistoryItem,
    HistorySummary,
    InputBudget,
    ManagedHistory,
    PlanRequest,
    RequestCompositionError,
    SealedPlan,
    history,
    plan,
)
from planner.columns import pack_ints, unpack_ints
from planner.history import leading_system_prefix
from planner.projection import Projector
from tests.planner.helpers import ZERO_FORMAT, request, tool_round, turns
from tests.planner.test_properties import FAST, transcripts


@given(st.lists(st.integers(0, 2**32 - 1), max_size=50))
def test_packed_integers_round_trip_at_the_narrowest_width(values: list[int]) -> None:
    packed = pack_ints(values)
    assert list(unpack_ints(packed)) == values
    if values:
        high = max(values)
        assert packed[0].upper() == ("B" if high < 256 else "H" if high < 65_536 else "I")


@pytest.mark.parametrize("high", [200, 60_000, 4_000_000_000])
def test_long_columns_deflate_by_byte_plane_and_round_trip(high: int) -> None:
    values = [(index * 7919) % high for index in range(2_000)]
    packed = pack_ints(values)
    assert packed[0].islower()
    assert list(unpack_ints(packed)) == values
    turns_only = pack_ints([2] * 2_000)
    assert len(turns_only) < 40
    assert list(unpack_ints(turns_only)) == [2] * 2_000


def test_packing_refuses_values_outside_unsigned_32_bits() -> None:
    with pytest.raises(ValueError):
        pack_ints([-1])
    with pytest.raises(ValueError):
        pack_ints([2**32])


@pytest.mark.parametrize(
    "column", ["X", "Habc", "B!!!!", "HAA==", "bAAAA", "h!!!!", "heJxjZGIGAAANAAc="]
)
def test_malformed_columns_fail_as_invalid_composition(column: str) -> None:
    columns = HistoryColumns(groups=column, tokens=column)
    with pytest.raises(RequestCompositionError) as raised:
        plan(request(history_columns=columns))
    assert raised.value.code == "INVALID_COMPOSITION"


def test_columns_that_disagree_fail_as_invalid_composition() -> None:
    good = HistoryColumns.pack(turns(3))
    for broken in (
        good.model_copy(update={"tokens": pack_ints([1, 2])}),
        good.model_copy(update={"calls": pack_ints([0])}),
        good.model_copy(update={"groups": pack_ints([2, 0, 2])}),
        good.model_copy(update={"prefix_groups": 4}),
    ):
        with pytest.raises(RequestCompositionError) as raised:
            plan(request(history_columns=broken))
        assert raised.value.code == "INVALID_COMPOSITION"


def test_items_and_columns_together_are_a_configuration_error() -> None:
    items = turns(2)
    with pytest.raises(TypeError):
        plan(request(history=items, history_columns=HistoryColumns.pack(items)))


def test_a_defect_found_by_the_reader_fails_planning_like_listed_items() -> None:
    broken = (*tool_round("g1", "c1")[:2], *turns(1))
    with pytest.raises(RequestCompositionError) as listed:
        plan(request(history=broken))
    columns = HistoryColumns.pack(broken)
    assert columns.defect == "a tool call is separated from its result"
    assert columns.groups == ""
    with pytest.raises(RequestCompositionError) as packed:
        plan(request(history_columns=columns))
    assert (packed.value.code, str(packed.value), packed.value.diagnostics) == (
        listed.value.code,
        str(listed.value),
        listed.value.diagnostics,
    )


def _split(
    items: tuple[HistoryItem, ...], older_groups: int
) -> tuple[tuple[HistoryItem, ...], HistoryAggregate]:
    """Aggregate `older_groups` groups after the system prefix, as a reader would."""
    prefix = leading_system_prefix(items)
    end = prefix
    for _ in range(older_groups):
        if end >= len(items):
            break
        group = items[end].group_id
        while end < len(items) and items[end].group_id == group:
            end += 1
    older = items[prefix:end]
    if not older:
        return items, HistoryAggregate()
    aggregate = HistoryAggregate(
        count=len(older),
        tokens=sum(item.tokens for item in older),
        first_id=older[0].id,
        last_id=older[-1].id,
        prefix_items=prefix,
    )
    return (*items[:prefix], *items[end:]), aggregate


def _policies() -> st.SearchStrategy[object]:
    return st.one_of(
        st.just(history.exact()),
        st.builds(
            lambda m, t: history.recent(messages=m, tokens=t),
            st.one_of(st.none(), st.integers(1, 30)),
            st.integers(1, 8_000),
        ),
        st.builds(
            lambda m, on_miss, covers: ManagedHistory(
                recent_messages=m,
                on_miss=on_miss,
                summary=None
                if covers is None
                else HistorySummary(artifact_id="hs", tokens=40, covers=covers),
            ),
            st.integers(1, 12),
            st.sampled_from(["inline", "recent-only", "fail"]),
            st.one_of(st.none(), st.integers(0, 40)),
        ),
    )


def _outcome(req: PlanRequest) -> SealedPlan | tuple[str, str, object]:
    try:
        return plan(req)
    except RequestCompositionError as error:
        return error.code, str(error), error.diagnostics


def _without_ids(value: object) -> object:
    """Drop what only a planner given ids can know: ids, and the aggregate's names."""
    if isinstance(value, dict):
        return {
            key: _without_ids(item)
            for key, item in value.items()
            if key not in ("message_ids", "through_id", "first_id", "last_id")
        }
    if isinstance(value, list | tuple):
        return [_without_ids(item) for item in value]
    return value


@FAST
@given(
    transcripts(),
    st.integers(0, 2),
    st.integers(0, 4),
    _policies(),
    st.integers(50, 9_000),
)
def test_columns_plan_exactly_like_listed_items_and_name_positions(
    conversation: tuple[HistoryItem, ...],
    system_messages: int,
    older_groups: int,
    policy: object,
    strict: int,
) -> None:
    system = tuple(
        HistoryItem(id=f"s{i}", role="system", group_id=f"sys{i}", tokens=11)
        for i in range(system_messages)
    )
    path = (*system, *conversation)
    listed, older = _split(path, older_groups)
    fields: dict[str, object] = {
        "history_policy": policy,
        "older_history": older,
        "input_budget": InputBudget(max=strict),
    }
    by_items = _outcome(request(history=listed, **fields))
    columns = HistoryColumns.pack(
        listed, has_older=older.count > 0, prefix_items=older.prefix_items
    )
    nameless = older.model_copy(update={"first_id": None, "last_id": None})
    by_columns = _outcome(request(history_columns=columns, **{**fields, "older_history": nameless}))
    if not isinstance(by_items, SealedPlan):
        assert isinstance(by_columns, tuple)
        assert by_columns[:2] == by_items[:2]
        assert _without_ids(by_columns[2]) == _without_ids(by_items[2])
        return
    assert isinstance(by_columns, SealedPlan)
    assert by_columns.message_ids == ()
    assert _without_ids(by_columns.model_dump()) == _without_ids(by_items.model_dump())
    # Positions name the same messages as the ids, the aggregate included when it is sent.
    ids = [path[p].id for start, end in by_columns.message_ranges for p in range(start, end)]
    sent_older = by_items.included_older is not None
    expected = list(by_items.message_ids)
    if sent_older:
        at = older.prefix_items
        expected[at:at] = [item.id for item in path[at : at + older.count]]
    assert ids == expected
    for need in by_items.preparations:
        assert need.through_position is not None
        assert path[need.through_position].id == need.through_id


def test_a_long_skeleton_validates_as_a_few_strings() -> None:
    items = turns(5_000)
    columns = HistoryColumns.pack(items)
    req = request(history_columns=columns, history_policy=history.recent(messages=100))
    payload = req.model_dump_json()
    assert len(payload) < len(request(history=items).model_dump_json()) // 20
    again = PlanRequest.model_validate_json(payload)
    sealed = plan(again)
    assert sealed.message_ranges == ((9_900, 10_000),)
    assert sealed.message_ids == ()


def _walk(
    projector: Projector, messages: int | None, tokens: int | None
) -> tuple[int, bool, tuple[str, ...]]:
    """The newest-first walk `Projector.recent` replaces with binary search (the oracle)."""
    codes: list[str] = []
    message_cap = messages if messages is not None else -1
    token_cap = tokens if tokens is not None else -1
    bounds, before = projector.bounds, projector.scan.tokens_before
    lowest = projector.scan.prefix_groups
    count = total = 0
    first = projector.group_count
    include_older = False
    g = projector.group_count - 1
    older_left = projector.older.count > 0
    selected = False
    while g >= lowest or (older_left and g == lowest - 1):
        if g >= lowest:
            size, unit = bounds[g + 1] - bounds[g], before[g + 1] - before[g]
        else:
            size, unit = projector.older.count, projector.older.tokens
        if (message_cap >= 0 and count + size > message_cap) or (
            token_cap >= 0 and total + unit > token_cap
        ):
            if selected:
                codes.append("HISTORY_CAUSAL_BOUNDARY")
                break
            codes.append("HISTORY_CAP_OVERFLOW")
        count += size
        total += unit
        selected = True
        if g >= lowest:
            first = g
        else:
            include_older = True
            older_left = False
        g -= 1
        if (message_cap >= 0 and count >= message_cap) or (token_cap >= 0 and total >= token_cap):
            break
    return (0 if include_older else first), include_older, tuple(codes)


@FAST
@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, 50)), max_size=12),
    st.integers(0, 3),
    st.tuples(st.integers(0, 6), st.integers(0, 80)),
    st.one_of(st.none(), st.integers(0, 20)),
    st.one_of(st.none(), st.integers(0, 200)),
)
def test_binary_search_stops_where_the_newest_first_walk_stops(
    groups: list[tuple[int, int]],
    prefix_groups: int,
    older: tuple[int, int],
    messages: int | None,
    tokens: int | None,
) -> None:
    columns = HistoryColumns(
        groups=pack_ints([size for size, _ in groups]),
        tokens=pack_ints([tokens for _, tokens in groups]),
        prefix_groups=min(prefix_groups, len(groups)),
    )
    has_older = older[0] > 0
    starts = [0]
    for size, _ in groups:
        starts.append(starts[-1] + size)
    prefix_items = starts[columns.prefix_groups] if has_older else 0
    aggregate = HistoryAggregate(count=older[0], tokens=older[1], prefix_items=prefix_items)
    scan = columns.scan(None, has_older=has_older, prefix_items=prefix_items)
    projector = Projector((), aggregate, scan, ZERO_FORMAT, has_ids=False)
    span, warnings = projector.recent(messages, tokens)
    first, include_older, codes = _walk(projector, messages, tokens)
    assert span == projector.span(first, include_older)
    assert tuple(w.code for w in warnings) == codes
