"""Payment card numbers (Luhn) and IBANs (mod 97), found in linear time.

Both start from a bounded, unambiguous pattern (a run of digit groups; a country code and
up to 30 alphanumerics) and then run the checksum, so a text of random digits costs a
constant per character and only checksum-valid numbers are reported.
"""

from __future__ import annotations

import functools
import re

from stdnum import iban, luhn, numdb

from activities.gate._spans import Span

CARD_DIGITS = range(12, 20)
"""Card numbers have 12 (some Maestro) to 19 digits."""

# Groups of three or more digits joined by one space or hyphen ("4111 1111 1111 1111",
# "3782-822463-10005"); a shorter group ends the run, so "4111 1111 1111 1111 12/26"
# still yields the card.
_DIGIT_RUN = re.compile(r"(?<![0-9])[0-9]{3,}(?:[ -][0-9]{3,})*(?![0-9])")
_SEPARATORS = re.compile(r"[ -]")
# A country code, two check digits, then alphanumerics with single spaces between them.
# No boundary on either side: an IBAN is recognised by its own characters alone, so what
# surrounds it (and masks put there) cannot change the verdict.
_IBAN_RUN = re.compile(r"[A-Za-z]{2}[0-9]{2}(?: ?[A-Za-z0-9]){11,30}")
_IBAN_REGISTRY = numdb.get("iban")
_LETTER_VALUES = str.maketrans({chr(ord("A") + n): str(10 + n) for n in range(26)})


def find_cards(scan: str) -> list[Span]:
    """Spans of the Luhn-valid card numbers in `scan` (a scan copy, see `_spans`).

    A card is a whole run of digit groups (each of three or more digits, joined by single
    spaces or hyphens) holding 12-19 digits, starting with 1-9, that passes the Luhn
    check. Parts of a run are never tried: a Luhn-invalid 16-digit order number must not
    yield a 12-digit "card" from its last groups.
    """
    spans: list[Span] = []
    for run in _DIGIT_RUN.finditer(scan):
        digits = _SEPARATORS.sub("", run.group())
        if len(digits) in CARD_DIGITS and digits[0] != "0" and luhn.is_valid(digits):
            spans.append(Span(run.start(), run.end(), "card", digits[-4:]))
    return spans


def find_ibans(scan: str) -> list[Span]:
    """Spans of the valid IBANs in `scan` (a scan copy, see `_spans`).

    A valid IBAN is the prefix of a candidate run as long as its country's registered
    IBANs, whose mod-97 check digits are right and whose structure matches the format.
    """
    spans: list[Span] = []
    position = 0
    while (run := _IBAN_RUN.search(scan, position)) is not None:
        end = _iban_end(run.group())
        if end is None:
            position = run.start() + 1
            continue
        spans.append(Span(run.start(), run.start() + end, "iban"))
        position = run.start() + end
    return spans


def _iban_end(candidate: str) -> int | None:
    """Offset after the valid IBAN that starts `candidate`, if one does."""
    length = _iban_length(candidate[:2].upper())
    compact = candidate.replace(" ", "")
    if length is None or len(compact) < length:
        return None
    number = compact[:length].upper()
    # The check digits first (mod 97 of the number rearranged as BBAN + country + check
    # digits, letters counting 10-35): cheap, and it rejects 96 candidates in 97 before
    # stdnum confirms the country's structure.
    if int((number[4:] + number[:4]).translate(_LETTER_VALUES)) % 97 != 1:
        return None
    if not iban.is_valid(number, check_country=False):
        return None
    seen = 0
    for offset, ch in enumerate(candidate):
        seen += ch != " "
        if seen == length:
            return offset + 1
    return None  # pragma: no cover - `compact` has `length` characters


@functools.cache
def _iban_length(country: str) -> int | None:
    """The IBAN length of a country in python-stdnum's registry (`DE`: 22), if listed."""
    found = _IBAN_REGISTRY.info(country)[0][1].get("bban")
    if not found:
        return None
    return 4 + sum(int(size) for size in re.findall(r"(\d+)!", found))
