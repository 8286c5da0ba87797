"""A follower completes the streamed text from the committed one, never beyond it."""

from __future__ import annotations

import pytest

from crux._streaming import missing_tail


@pytest.mark.parametrize(
    ("streamed", "final", "tail"),
    [
        ("Strea", "Streamed reply", "med reply"),  # the commit removed the last deltas
        ("Streamed reply", "Streamed reply", ""),  # everything arrived
        ("", "Streamed reply", "Streamed reply"),  # nothing arrived: the whole text
        ("Other", "Streamed reply", ""),  # a replaced attempt is never patched up
    ],
)
def test_missing_tail(streamed: str, final: str, tail: str) -> None:
    assert missing_tail(streamed, final) == tail
