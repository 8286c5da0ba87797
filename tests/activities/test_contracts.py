"""The compact skeleton round-trips and is much smaller than one object per message."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contracts.activities import CompactHistory
from crux.messages import Role
from planner import HistoryItem

ROLES: st.SearchStrategy[Role] = st.sampled_from(["system", "user", "assistant", "tool"])


@st.composite
def histories(draw: st.DrawFn) -> list[HistoryItem]:
    groups = draw(st.lists(st.integers(min_value=1, max_value=3), max_size=8))
    items: list[HistoryItem] = []
    for group_index, size in enumerate(groups):
        for position in range(size):
            role = draw(ROLES)
            items.append(
                HistoryItem(
                    id=f"m{group_index}-{position}",
                    role=role,
                    group_id=f"m{group_index}-0",
                    tokens=draw(st.integers(min_value=0, max_value=5000)),
                    tool_call_ids=tuple(draw(st.lists(st.text(min_size=1, max_size=5), max_size=2)))
                    if role == "assistant"
                    else (),
                    tool_call_id=draw(st.text(min_size=1, max_size=5)) if role == "tool" else None,
                )
            )
    return items


@given(histories())
def test_compact_history_round_trips_through_json(items: list[HistoryItem]) -> None:
    compact = CompactHistory.from_items(items)
    decoded = CompactHistory.model_validate_json(compact.model_dump_json())
    assert decoded.items() == tuple(items)


def test_compact_history_is_at_most_half_the_size_of_plain_items() -> None:
    items = [
        HistoryItem(
            id=f"gen:{n // 2}:{'user' if n % 2 == 0 else 'assistant'}",
            role="user",
            group_id=f"gen:{n // 2}:user",
            tokens=40 + n % 7,
        )
        for n in range(1000)
    ]
    plain = sum(len(i.model_dump_json()) for i in items)
    compact = len(CompactHistory.from_items(items).model_dump_json())
    assert compact * 2 < plain
