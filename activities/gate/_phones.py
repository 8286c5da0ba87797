"""Phone numbers, found by libphonenumber's matcher (the `phonenumbers` port)."""

from __future__ import annotations

import re

from phonenumbers import SUPPORTED_REGIONS, Leniency, PhoneNumberMatcher

from activities.gate._spans import Span
from contracts.gate import PhoneLeniency
from vocabulary.errors import ConfigurationError

_DIGIT = re.compile(r"\d")
_LENIENCY: dict[PhoneLeniency, int] = {
    "possible": Leniency.POSSIBLE,
    "valid": Leniency.VALID,
    "strict_grouping": Leniency.STRICT_GROUPING,
    "exact_grouping": Leniency.EXACT_GROUPING,
}


def check_region(region: str | None) -> None:
    """Refuse a default region libphonenumber does not know.

    Raises:
        ConfigurationError: The region is not one of `phonenumbers.SUPPORTED_REGIONS`.
    """
    if region is not None and region not in SUPPORTED_REGIONS:
        raise ConfigurationError("the phone region is not a region libphonenumber supports")


def find_phones(scan: str, region: str | None, leniency: PhoneLeniency) -> list[Span]:
    """Spans of the phone numbers in `scan` (a scan copy, see `_spans`).

    Args:
        scan: The text to scan.
        region: Region for numbers without a country code; `None` finds only numbers
            written with `+` and a country code.
        leniency: How plausible a candidate must be.
    """
    if _DIGIT.search(scan) is None:
        return []  # the matcher parses every candidate in Python: skip texts without any
    # The matcher gives up after `max_tries` rejected candidates; every candidate spans
    # at least one character, so the text's length means it never gives up early.
    matcher = PhoneNumberMatcher(
        scan, region, leniency=_LENIENCY[leniency], max_tries=len(scan) + 1
    )
    return [Span(match.start, match.end, "phone") for match in matcher]
