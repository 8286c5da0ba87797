"""Request bodies are the bytes token counting measured: `dumps_bytes` is `dumps`, encoded."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers._json import dumps, dumps_bytes

_TEXT = st.text(st.characters(exclude_categories=("Cs",)))  # no lone surrogates
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_TEXT, inner, max_size=5)),
    max_leaves=30,
)


@given(_VALUES)
def test_a_body_is_the_counted_text_encoded_as_utf8(value: Any) -> None:
    assert dumps_bytes(value) == dumps(value).encode("utf-8")


def test_compact_json_as_the_standard_library_writes_it() -> None:
    value = {"b": [1, 2.5, None, True], "a": 'é\u2028\x1f"\\', "n": 10**30}
    assert dumps(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_text_utf8_cannot_encode_is_refused() -> None:
    with pytest.raises(ValueError):
        dumps_bytes({"content": "\ud800"})
    with pytest.raises(ValueError):
        dumps({"content": "\ud800"})
