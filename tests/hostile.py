"""Hostile values for fuzzing public entry points: huge, deep, malformed and out of range.

Every string carries `CANARY`, so a test can assert that no error message, failure detail or
log line repeats what the caller sent. Large and deep values are built once and sampled, so
an example costs the same whatever it holds.

`CRUX_FUZZ_EXAMPLES` sets the example counts; `CRUX_SOAK=1` (`make soak`) multiplies the
defaults by ten.
"""

from __future__ import annotations

import math
import os
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CANARY = "zq-hostile-canary"
"""Marker inside every hostile content string; it must never appear in an error."""

ID_MARK = "zq-hostile-id"
"""Marker inside hostile ids: an error may name a valid id, never an invalid one raw."""

MEGABYTE = 1024 * 1024
DEEP = 1200
"""Nesting depth of the deep values (deeper than Python's default recursion limit)."""


SOAK_FACTOR = 10
"""How many times more examples a `CRUX_SOAK=1` run (`make soak`) tries."""


def examples(default: int) -> int:
    """Number of examples per test: `CRUX_FUZZ_EXAMPLES`, else `default` (times ten in soak)."""
    if "CRUX_FUZZ_EXAMPLES" in os.environ:
        return int(os.environ["CRUX_FUZZ_EXAMPLES"])
    return default * SOAK_FACTOR if os.environ.get("CRUX_SOAK") == "1" else default


def deep_list(depth: int = DEEP) -> list[Any]:
    """A list nested `depth` levels deep, built without recursion."""
    value: list[Any] = [CANARY]
    for _ in range(depth):
        value = [value]
    return value


def deep_dict(depth: int = DEEP) -> dict[str, Any]:
    """A mapping nested `depth` levels deep, built without recursion."""
    value: dict[str, Any] = {"leaf": CANARY}
    for _ in range(depth):
        value = {"k": value}
    return value


def deep_json(depth: int = DEEP) -> bytes:
    """JSON text nested `depth` levels deep (no Python encoder recursion involved)."""
    return b'{"generation_id":"deep","input":' + b"[" * depth + b"1" + b"]" * depth + b"}"


HOSTILE_STRINGS: tuple[str, ...] = (
    f"{CANARY}\ud800",  # lone high surrogate
    f"\udfff{CANARY}",  # lone low surrogate
    f"{CANARY}\x00nul",
    f"{CANARY}\x07\x1b[31m\r\n\t",  # control characters and an ANSI escape
    f"{CANARY}'; DROP TABLE crux_threads; --",
    f'{CANARY}" OR 1=1 --',
    f"{CANARY}$1$$ E'\\x00' %s %(x)s {{}}",
    f"../../{CANARY}/../etc/passwd",
    f"{CANARY}/a/b\\c\\..",
    f"%2F{CANARY}%00%2e%2e",
    f" {CANARY} ",  # padded
    f"{CANARY}\u202e\u2028\u2029\ufeff",  # bidi override, line separators, BOM
    f"{CANARY}\x7f\x85",
    f"{CANARY}:",
    f":{CANARY}",
    f"{CANARY}{'x' * 300}",  # longer than every id limit
    f"{CANARY}{'é' * 400}",  # over the workflow-id byte limit once encoded
    CANARY + "y" * MEGABYTE,  # a megabyte
    CANARY + "😀" * 300_000,  # over a megabyte of 4-byte characters
)

HOSTILE_NUMBERS: tuple[Any, ...] = (
    -1,
    0,
    -(2**31),
    2**31,
    2**63,
    2**80,
    -(2**80),
    10**400,
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -0.0,
    0.5,
    True,
    False,
)

HOSTILE_STRUCTURES: tuple[Any, ...] = (
    deep_list(),
    deep_dict(),
    [0] * 100_000,
    [CANARY] * 100_000,
    {f"{CANARY}-{i}": i for i in range(20_000)},
    {CANARY: CANARY},
    {"__class__": CANARY, "__init__": [CANARY]},
    [],
    {},
    None,
    b"\xff\xfe" + CANARY.encode(),
    (CANARY,),
    {CANARY},
    object(),
)

HOSTILE_IDS: tuple[str, ...] = tuple(s.replace(CANARY, ID_MARK) for s in HOSTILE_STRINGS)

STORABLE_IDS: tuple[str, ...] = tuple(
    s[:200]
    for s in HOSTILE_IDS
    if s == s.strip()
    and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF for c in s)
)
"""Hostile ids that are still valid: SQL metacharacters, path separators, percent signs,
bidi and line-separator characters. They must be accepted and stored unchanged."""

ids = st.sampled_from(HOSTILE_IDS) | st.text(min_size=0, max_size=20).map(lambda t: ID_MARK + t)
"""Hostile ids: every hostile string with the id marker, plus arbitrary text after it."""

texts = st.sampled_from(HOSTILE_STRINGS) | st.text(max_size=20).map(lambda t: CANARY + t)
"""Hostile content strings."""

scalars = (
    st.sampled_from(HOSTILE_STRINGS)
    | st.sampled_from(HOSTILE_NUMBERS)
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.none()
    | st.booleans()
)

values = st.recursive(
    scalars | st.sampled_from(HOSTILE_STRUCTURES),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ids | st.text(), inner, max_size=3),
    max_leaves=5,
)
"""Any hostile value: scalars, huge and deep structures, and small mixtures of them."""


MAX_ERROR_TEXT = 4096
"""Longest error text accepted: an error names ids and sizes, never echoes a large value."""


def error_text(error: BaseException) -> str:
    """Everything an error shows: its message, arguments and typed attributes."""
    parts = [str(error), repr(error.args)]
    for name in ("code", "diagnostics", "details", "defects", "reason", "thread_id"):
        parts.append(repr(getattr(error, name, None)))
    # A chained cause is printed with the error's traceback (in logs), so it counts too.
    cause = error.__cause__
    if cause is None and not error.__suppress_context__:
        cause = error.__context__
    if cause is not None:
        parts.append(str(cause))
    return "\n".join(parts)


def assert_content_free(error: BaseException) -> None:
    """Fail unless `error` is bounded, printable and repeats no hostile content.

    Hostile content carries `CANARY`; hostile ids carry `ID_MARK` and may be named by an
    error only when they are short and printable (a valid id), never as raw control
    characters, NUL bytes, lone surrogates or megabytes.
    """
    text = error_text(error)
    assert CANARY not in text, f"{type(error).__name__} repeats hostile content"
    assert len(str(error)) <= MAX_ERROR_TEXT, f"{type(error).__name__} message is unbounded"
    bad = [ch for ch in str(error) if ord(ch) < 0x20 and ch != "\n" or 0xD800 <= ord(ch) <= 0xDFFF]
    assert not bad, f"{type(error).__name__} message holds control characters or surrogates"


async def table_digest(pool: Any) -> dict[str, str]:
    """A digest of every row of every table in the database's `public` schema.

    Refused input must leave it unchanged: no partial rows, no half-applied updates.
    """
    async with pool.acquire() as connection:
        tables = await connection.fetch(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name"
        )
        digest: dict[str, str] = {}
        for row in tables:
            name = row["table_name"]
            rows = "string_agg(t::text, ',' ORDER BY t::text)"
            digest[name] = await connection.fetchval(
                f"SELECT count(*) || ':' || coalesce(md5({rows}), '') FROM \"{name}\" t"
            )
        return digest


# Large and slow examples are the point; one fixture serves every example.
ALL_CHECKS = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.large_base_example,
    HealthCheck.function_scoped_fixture,
]

_json_scalars = (
    st.sampled_from(HOSTILE_STRINGS)
    | st.sampled_from(HOSTILE_IDS)
    | st.sampled_from(HOSTILE_NUMBERS)
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.none()
)
_json_big = st.sampled_from(
    [deep_list(), deep_dict(), [0] * 100_000, [CANARY] * 100_000, {CANARY: CANARY}, [], {}]
)
json_values = st.recursive(
    _json_scalars | _json_big,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(HOSTILE_STRINGS) | st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=4,
)
"""JSON-encodable hostile values (what a plain Temporal client can send)."""


def drawn(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """`count` examples of `strategy`, drawn up front so that one worker serves them all."""
    drawn: list[Any] = []

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        suppress_health_check=ALL_CHECKS,
    )
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn


async def ordinary_generation_still_completes(worker: Any) -> None:
    """The worker still serves: an ordinary generation on a fresh Thread completes."""
    generation = await worker.runtime.generate(
        "an ordinary question", thread=f"after-{uuid.uuid4().hex[:6]}", generation_id="after"
    )
    assert generation.text
