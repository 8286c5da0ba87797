"""Payment card numbers (Luhn) and IBANs (mod 97), found in linear time.

Both start from a bounded, unambiguous pattern (a run of digit groups; a country code and
up to 30 alphanumerics) and then run the checksum, so a text of random digits costs a
constant per character and only checksum-valid numbers are reported.
"""

from __future__ import annotations

import re

from stdnum import iban, luhn

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
IBAN_CHARS = range(15, 35)
"""IBANs have 15 (Norway) to 34 characters."""


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

    A valid IBAN is a prefix of a candidate run, 15-34 characters, whose mod-97 check
    passes and whose length and structure match its country's registered format.
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
    chars = [(index, ch.upper()) for index, ch in enumerate(candidate) if ch != " "]
    # Check digits are verified on the number rearranged as BBAN + country + check
    # digits; letters count as 10-35. The BBAN's remainder grows one character at a time,
    # so each prefix length costs a constant, and stdnum confirms the country's format
    # only when the remainder says 1.
    head = "".join(str(int(ch, 36)) for _, ch in chars[:4])
    head_value, head_scale = int(head), 10 ** len(head)
    remainder = 0
    for count, (index, ch) in enumerate(chars[4:], start=5):
        remainder = (remainder * (100 if ch.isalpha() else 10) + int(ch, 36)) % 97
        if count not in IBAN_CHARS or (remainder * head_scale + head_value) % 97 != 1:
            continue
        if iban.is_valid("".join(c for _, c in chars[:count]), check_country=False):
            return index + 1
    return None
