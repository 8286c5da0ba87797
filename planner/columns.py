"""Columnar history: a transcript packed into a few strings, per causal group.

A request skeleton crosses Temporal history and the workflow's payload codec once per
generation, so a long Thread must not cost one object (or one id) per message there. The
planner only ever cuts history at causal-group boundaries, so it needs nothing per message:
per group, its message count, content tokens and tool calls, plus where the leading system
prefix ends. `HistoryColumns` carries exactly that, each column a little-endian integer
array in base64, deflated when that is shorter (a column of two-message turns deflates to a
few bytes, and token counts to about one byte per group). Validating it is a handful of
string fields; decoding it is a few C-level calls; message ids are not carried at all
(whoever sends the plan maps the plan's positions back to ids at the pinned revision).

The reader checks the transcript (tool lifecycle, contiguous groups) once, when it packs
it, and records what it found as `defect`; the planner raises that defect exactly as it
would have raised it for listed items, so a malformed transcript fails the same way on
either input.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from array import array
from collections.abc import Sequence
from itertools import accumulate

from pydantic import Field

from planner._base import FrozenModel
from planner.history import (
    HistoryAggregate,
    HistoryScan,
    TranscriptDefect,
    TranscriptDefectError,
    TranscriptEntry,
    invalid_transcript,
    scan_transcript,
)

# Typecode by the widest value it holds: one, two or four bytes per entry.
_WIDTHS: tuple[tuple[str, int], ...] = (("B", 0xFF), ("H", 0xFFFF), ("I", 0xFFFFFFFF))
_BIG_ENDIAN = array("H", [1]).tobytes()[0] == 0
# The wire width of "I" is four bytes; CPython uses that on every supported platform.
assert array("I").itemsize == 4

MAX_PACKED = 0xFFFFFFFF
"""The largest value a packed column can hold (an unsigned 32-bit integer)."""

MAX_INFLATED = 64 * 1024 * 1024
"""The most bytes a deflated column may inflate to (16 million four-byte values): a
malformed column fails as malformed instead of exhausting the workflow worker's memory."""


def pack_ints(values: Sequence[int]) -> str:
    """Pack non-negative integers as `<typecode><base64 of little-endian values>`.

    The narrowest of one, two or four bytes per value that holds the largest one is used
    (typecode `B`, `H` or `I`), so typical token counts cost under three base64 characters
    each. When it is shorter, the bytes are deflated instead, byte plane by byte plane
    (every value's low byte, then every value's next byte, ...), and the typecode is lower
    case (`b`, `h`, `i`): high bytes are mostly zero, so a column of token counts under a
    few hundred deflates to about a byte per value, and one of two-message turns to a few
    bytes in all. An empty sequence packs to `""`.

    Raises:
        ValueError: For a negative value or one above `MAX_PACKED`.
    """
    if not values:
        return ""
    low, high = min(values), max(values)
    if low < 0 or high > MAX_PACKED:
        raise ValueError("packed values must be unsigned 32-bit integers")
    code = next(code for code, limit in _WIDTHS if high <= limit)
    packed = array(code, values)
    if _BIG_ENDIAN:  # pragma: no cover - every supported platform is little-endian
        packed.byteswap()
    raw = packed.tobytes()
    width = packed.itemsize
    planes = b"".join(raw[plane::width] for plane in range(width))
    deflated = zlib.compress(planes, 9)
    if len(deflated) < len(raw):
        code, raw = code.lower(), deflated
    return code + base64.b64encode(raw).decode("ascii")


def unpack_ints(text: str) -> array[int]:
    """Decode `pack_ints` output.

    Raises:
        ValueError: For a malformed column.
    """
    if not text:
        return array("B")
    code, body = text[0], text[1:]
    if code not in ("B", "H", "I", "b", "h", "i"):
        raise ValueError("unknown column width")
    try:
        raw = base64.b64decode(body, validate=True)
    except binascii.Error:
        raise ValueError("malformed column encoding") from None
    values = array("B" if code in "Bb" else "H" if code in "Hh" else "I")
    width = values.itemsize
    if code.islower():
        raw = _interleave(_inflate(raw), width)
    if len(raw) % width:
        raise ValueError("truncated column")
    values.frombytes(raw)
    if _BIG_ENDIAN:  # pragma: no cover - every supported platform is little-endian
        values.byteswap()
    return values


def _interleave(planes: bytes, width: int) -> bytes:
    """Byte planes (see `pack_ints`) back to little-endian values."""
    if width == 1:
        return planes
    count, rest = divmod(len(planes), width)
    if rest:
        raise ValueError("truncated column")
    raw = bytearray(len(planes))
    for plane in range(width):
        raw[plane::width] = planes[plane * count : (plane + 1) * count]
    return bytes(raw)


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, MAX_INFLATED)
    except zlib.error:
        raise ValueError("malformed column encoding") from None
    if not inflater.eof or inflater.unconsumed_tail or inflater.unused_data:
        raise ValueError("malformed column encoding")
    return raw


class HistoryColumns(FrozenModel):
    """Listed history, packed per causal group (oldest first), content- and id-free.

    Positions: listed message `i` is message `i` of the history source when it lies in the
    leading system prefix, else `i + older.count` (the aggregate of older messages sits
    between the prefix and the remaining listed groups). A sealed plan reports the messages
    it sends as ranges of these positions (`SealedPlan.message_ranges`).

    Attributes:
        groups: Messages per causal group (`pack_ints`).
        tokens: Content tokens per causal group (`pack_ints`).
        calls: Tool calls made per causal group (`pack_ints`); `""` when there are none.
        prefix_groups: Leading groups that form the system prefix (kept outside every cap).
        defect: What the reader found wrong with the transcript, if anything; planning
            then fails with `INVALID_COMPOSITION` (`INVALID_HISTORY_TRANSCRIPT`).
    """

    groups: str = ""
    tokens: str = ""
    calls: str = ""
    prefix_groups: int = Field(default=0, ge=0)
    defect: TranscriptDefect | None = None

    @classmethod
    def pack(
        cls,
        items: Sequence[TranscriptEntry],
        *,
        has_older: bool = False,
        prefix_items: int = 0,
    ) -> HistoryColumns:
        """Validate and pack a transcript (the reader's side; one pass over the messages).

        Args:
            items: The listed messages, oldest first.
            has_older: Whether an aggregate of older messages follows the first
                `prefix_items` of them.
            prefix_items: With older history, the listed leading system prefix.

        Returns:
            The columns; `defect` is set (and the columns empty) for a malformed transcript.
        """
        try:
            scan = scan_transcript(items, has_older=has_older, prefix_items=prefix_items)
        except TranscriptDefectError as error:
            return cls(defect=error.defect)
        return cls.from_scan(scan)

    @classmethod
    def from_scan(cls, scan: HistoryScan) -> HistoryColumns:
        """Pack the group sums of a validated scan."""
        starts, before, calls = scan.group_starts, scan.tokens_before, scan.calls_before
        count = len(starts) - 1
        made = [calls[g + 1] - calls[g] for g in range(count)]
        return cls(
            groups=pack_ints([starts[g + 1] - starts[g] for g in range(count)]),
            tokens=pack_ints([before[g + 1] - before[g] for g in range(count)]),
            calls=pack_ints(made) if any(made) else "",
            prefix_groups=scan.prefix_groups,
        )

    def folded(
        self, older: HistoryAggregate, first_group: int
    ) -> tuple[HistoryColumns, HistoryAggregate]:
        """Fold the listed groups between the system prefix and `first_group` into `older`.

        What a history policy cannot use is carried as one aggregate: positions, sizes and
        group counts stay what they were, so every plan over the result is the plan over
        `self` (see `planner.history_needs`). Columns with a defect are returned as they are.

        Args:
            older: The aggregate of the groups before the listed ones (after the prefix).
            first_group: The first listed group to keep listed; groups before it (after the
                leading system prefix) join the aggregate.
        """
        prefix = self.prefix_groups
        if self.defect is not None or first_group <= prefix:
            return self, older
        sizes = unpack_ints(self.groups)
        tokens = unpack_ints(self.tokens)
        calls = unpack_ints(self.calls) if self.calls else array("B", bytes(len(sizes)))
        end = min(first_group, len(sizes))
        head, tail = slice(0, prefix), slice(end, len(sizes))
        made = [*calls[head], *calls[tail]]
        columns = HistoryColumns(
            groups=pack_ints([*sizes[head], *sizes[tail]]),
            tokens=pack_ints([*tokens[head], *tokens[tail]]),
            calls=pack_ints(made) if any(made) else "",
            prefix_groups=prefix,
        )
        moved = slice(prefix, end)
        aggregate = HistoryAggregate(
            count=older.count + sum(sizes[moved]),
            tokens=older.tokens + sum(tokens[moved]),
            groups=(older.groups or (1 if older.count else 0)) + end - prefix,
            calls=older.calls + sum(calls[moved]),
            first_id=older.first_id,
            prefix_items=older.prefix_items if older.count else sum(sizes[head]),
        )
        return columns, aggregate

    @property
    def message_count(self) -> int:
        """Listed messages (positions `0..message_count` when nothing is aggregated)."""
        return sum(unpack_ints(self.groups))

    def scan(self, request_id: str | None, *, has_older: bool, prefix_items: int) -> HistoryScan:
        """Decode into the boundary sums the planner works on (C-level work only).

        Raises:
            RequestCompositionError: `INVALID_COMPOSITION` for a defect the reader found or
                for columns that do not describe whole groups.
        """
        if self.defect is not None:
            raise invalid_transcript(self.defect, request_id)
        try:
            sizes = unpack_ints(self.groups)
            tokens = unpack_ints(self.tokens)
            calls = unpack_ints(self.calls) if self.calls else None
        except ValueError:
            raise invalid_transcript("the history columns are malformed", request_id) from None
        count = len(sizes)
        if (
            len(tokens) != count
            or (calls is not None and len(calls) != count)
            or (count and min(sizes) < 1)
            or self.prefix_groups > count
        ):
            raise invalid_transcript("the history columns are malformed", request_id)
        starts = tuple(accumulate(sizes, initial=0))
        if has_older and starts[self.prefix_groups] != prefix_items:
            raise invalid_transcript("the listed system prefix is not a system prefix", request_id)
        return HistoryScan(
            group_starts=starts,
            tokens_before=tuple(accumulate(tokens, initial=0)),
            calls_before=tuple(accumulate(calls, initial=0)) if calls else (0,) * (count + 1),
            prefix_groups=self.prefix_groups,
        )
