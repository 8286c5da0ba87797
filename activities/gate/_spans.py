"""Findings as character spans: blanking them out of later scans and replacing them.

Detectors run on a scan copy of the text in which everything already found (and every
mask token already present) is overwritten by `BLANK`, a character that no detector
accepts. Offsets stay those of the original text, a later detector cannot find a number
inside an earlier finding, and digits on either side of a mask are never joined into one
number. That is what makes masking idempotent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BLANK = "\x00"
"""Overwrites found text in scan copies; no detector accepts it."""


@dataclass(frozen=True, slots=True)
class Span:
    """One finding: `text[start:end]` is of `kind`.

    Attributes:
        start: First character's offset.
        end: Offset after the last character.
        kind: What was found (`email`, `phone`, `card`, `iban`; `token` for a mask
            already in the text).
        last4: The last four digits of a card, for masks that keep them.
    """

    start: int
    end: int
    kind: str
    last4: str = ""


def blank(scan: str, spans: Iterable[Span]) -> str:
    """`scan` with every span overwritten by `BLANK`, offsets unchanged."""
    pieces: list[str] = []
    position = 0
    for span in sorted(spans, key=lambda s: s.start):
        if span.start < position:  # pragma: no cover - detectors never overlap
            continue
        pieces += [scan[position : span.start], BLANK * (span.end - span.start)]
        position = span.end
    if not pieces:
        return scan
    pieces.append(scan[position:])
    return "".join(pieces)


def token_spans(text: str, tokens: re.Pattern[str]) -> list[Span]:
    """The mask tokens already present in `text` (they are never masked again)."""
    return [Span(m.start(), m.end(), "token") for m in tokens.finditer(text)]


def tokens_pattern(tokens: Iterable[str]) -> re.Pattern[str]:
    """A pattern for the given mask tokens, with or without kept card digits."""
    bodies = sorted({re.escape(token[:-1]) for token in tokens}, key=len, reverse=True)
    return re.compile(f"(?:{'|'.join(bodies)})(?: \\*{{4}}\\d{{4}})?\\]")


def replace(text: str, spans: Sequence[Span], masks: dict[str, str]) -> str:
    """`text` with each span replaced by its kind's mask (spans sorted, disjoint)."""
    pieces: list[str] = []
    position = 0
    for span in spans:
        mask = masks[span.kind]
        if span.last4:
            mask = f"{mask[:-1]} ****{span.last4}]"
        pieces += [text[position : span.start], mask]
        position = span.end
    pieces.append(text[position:])
    return "".join(pieces)
