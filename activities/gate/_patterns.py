r"""Caller-written regular expressions: compiled once, refused in the shapes that explode.

Python's `re` has no timeout and backtracks, so a pattern such as `(a+)+$` or
`(\w+\s?)*x` takes exponential time on a short text that almost matches. Two guards:

1. At compile time, a pattern with an unbounded quantifier nested inside another
   unbounded quantifier is refused (`(a+)+`, `(a*)*`, `(?:\w+\s?)*`), unless the inner
   or outer one is possessive (`a++`) or inside an atomic group (`(?>...)`), which cannot
   backtrack. Other exponential shapes (an alternation whose branches overlap under a
   quantifier, `(a|aa)+`) and polynomial ones (`\w+\w+x`, cost growing with the square
   of the text) are not recognised.
2. At run time, caller-written patterns see at most `MAX_REGEX_TEXT_CHARS` characters;
   a longer text is refused by the policy or constraint (`*.text_too_long`), never
   checked partially. This bounds the polynomial shapes; it cannot bound exponential
   ones, which is why (1) exists.

The built-in detectors use only patterns written to run in linear time.
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import Any

from vocabulary.errors import ConfigurationError

MAX_REGEX_TEXT_CHARS = 200_000
"""Longest text a caller-written regular expression is run on."""


def _load_parser() -> Any:
    # The standard library's own parser: private, so it is used only to refuse patterns,
    # and any surprise in its shape makes the check pass rather than fail.
    try:
        return importlib.import_module("re._parser")
    except ImportError:  # pragma: no cover - present on every supported Python
        return None


_parser: Any = _load_parser()

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT")
_UNBOUNDED = 1 << 16  # re's MAXREPEAT is far larger; explicit bounds this high count too


def _children(name: str, value: Any) -> list[Any]:
    """The parsed sub-patterns directly inside one parsed item."""
    if name in (*_REPEATS, "POSSESSIVE_REPEAT"):
        return [value[2]]
    if name in ("SUBPATTERN", "ASSERT", "ASSERT_NOT"):
        return [value[-1]]
    if name == "BRANCH":
        return list(value[1])
    if name == "ATOMIC_GROUP":
        return [value]
    if name == "GROUPREF_EXISTS":
        return [part for part in value[1:] if part is not None]
    return []


def _nested_unbounded(items: Any, inside: bool) -> bool:
    """Whether an unbounded quantifier sits inside another in the parsed `items`."""
    for op, value in items:
        name = str(op)
        if name in ("POSSESSIVE_REPEAT", "ATOMIC_GROUP"):
            continue  # cannot backtrack: nothing inside can explode
        unbounded = name in _REPEATS and int(value[1]) >= _UNBOUNDED
        if unbounded and inside:
            return True
        if any(_nested_unbounded(child, inside or unbounded) for child in _children(name, value)):
            return True
    return False


def _has_backreference(items: Any) -> bool:
    for op, value in items:
        name = str(op)
        if name in ("GROUPREF", "GROUPREF_EXISTS"):
            return True
        if any(_has_backreference(child) for child in _children(name, value)):
            return True
    return False


def check_pattern(pattern: str, *, backreferences: bool = True) -> None:
    r"""Refuse a pattern that does not compile or nests unbounded quantifiers.

    Args:
        pattern: The caller's regular expression.
        backreferences: Whether `\1` and `(?P=name)` are allowed (not inside a deny list,
            whose entries are combined into one pattern and renumbered).

    Raises:
        ConfigurationError: The pattern is invalid or has a refused shape (the message
            names the shape, never the pattern).
    """
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError):
        raise ConfigurationError("a pattern is not a valid regular expression") from None
    if _parser is None:  # pragma: no cover
        return
    try:
        parsed = _parser.parse(pattern).data
        nested = _nested_unbounded(parsed, False)
        refers = _has_backreference(parsed)
    except Exception:  # pragma: no cover - the private parser changed shape: do not refuse
        return
    if nested:
        raise ConfigurationError(
            "a pattern nests an unbounded quantifier inside another (like '(a+)+'), which "
            "can take exponential time; make one possessive ('a++') or atomic ('(?>...)')"
        )
    if refers and not backreferences:
        raise ConfigurationError("deny-list patterns cannot use backreferences")


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Compile once per process (gates are rebuilt per activity call; patterns repeat)."""
    return re.compile(pattern, flags)
