"""Outcomes of `asyncio.gather(..., return_exceptions=True)`, taken one at a time.

Independent reads run at once to save round trips, and their outcomes are then taken in the
order the checks need them, so that a failure reports as it would one read after another.
"""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T")


def settled(outcome: _T | BaseException) -> _T:
    """The value of one gathered outcome, or its error raised.

    Args:
        outcome: One item of what `asyncio.gather(..., return_exceptions=True)` returned.

    Raises:
        BaseException: The error the awaitable raised.
    """
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome
