"""Ids checked in bulk (`check_ids`) are refused exactly when one of them alone would be."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.threads._validate import MAX_ID_LENGTH, check_id, check_ids
from vocabulary.errors import ThreadError

_ID_TEXT = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=24),
    st.text(max_size=8),  # any code point: controls, NUL, surrogates, wide spaces
    st.just("x" * (MAX_ID_LENGTH + 1)),
    st.sampled_from([" x", "x ", "a\nb", "a\x00b", "a\x7fb", "\ud800", "x\u00a0", ""]),
)


def _alone(values: list[object]) -> bool:
    try:
        for value in values:
            check_id(value, "message")
    except ThreadError:
        return False
    return True


@given(st.lists(st.one_of(_ID_TEXT, st.integers(), st.none()), max_size=12))
def test_a_list_passes_in_bulk_exactly_when_each_id_passes_alone(values: list[object]) -> None:
    if _alone(values):
        assert check_ids(values, "message") == values
    else:
        with pytest.raises(ThreadError) as raised:
            check_ids(values, "message")
        assert raised.value.code == "invalid_message"


def test_thousands_of_generated_ids_pass_and_one_bad_one_anywhere_is_refused() -> None:
    ids = [f"gen:{index:032x}:user" for index in range(5_000)]
    assert check_ids(ids, "message") == ids
    for bad in ["", " pad", "pad ", "new\nline", "nul\x00", "del\x7f", "\udc00", "x" * 513]:
        for where in (0, 2_500, 4_999):
            broken = [*ids[:where], bad, *ids[where + 1 :]]
            with pytest.raises(ThreadError):
                check_ids(broken, "message")
