from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from providers._sse import SSEDecoder, SSEEvent

STREAM = (
    "event: message_start\r\n"
    'data: {"text": "héllo — 日本"}\r\n'
    "\r\n"
    ": keep-alive comment\n"
    "data: first line\n"
    "data: second line\n"
    "id: 7\n"
    "\n"
    "data:no-space\r"
    "\r"
    "data: [DONE]\n\n"
).encode()

EXPECTED = [
    SSEEvent(event="message_start", data='{"text": "héllo — 日本"}'),
    SSEEvent(data="first line\nsecond line", id="7"),
    SSEEvent(data="no-space", id="7"),
    SSEEvent(data="[DONE]", id="7"),
]


def _decode(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)]
    return events + decoder.flush()


def test_whole_stream_decodes() -> None:
    assert _decode([STREAM]) == EXPECTED


def test_one_byte_at_a_time_splits_utf8_and_crlf() -> None:
    assert _decode([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_points_give_the_same_events(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    chunks = [STREAM[a:b] for a, b in zip(points, points[1:], strict=False)]
    assert _decode(chunks) == EXPECTED


def test_a_final_event_without_trailing_newline_is_flushed() -> None:
    assert _decode([b"data: tail"]) == [SSEEvent(data="tail")]
