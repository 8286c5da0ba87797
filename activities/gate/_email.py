"""E-mail addresses, found around each `@` in linear time.

The text is scanned for `@`; the local part is the longest run of local-part characters
(at most 64, the RFC 5321 limit) right before it, without leading dots, and the domain is
matched right after it. Each `@` is looked at once and every pattern is bounded, so a
hostile text of `@`s and dots costs no more than a plain one.
"""

from __future__ import annotations

import re

from activities.gate._spans import Span

MAX_LOCAL_CHARS = 64
"""Longest local part considered (RFC 5321); a longer run keeps only its last 64."""

# RFC 5322 atext and dots, with any Unicode letter or digit (RFC 6531 addresses).
_LOCAL_RUN = re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]{1,64}")
# Labels of Unicode letters, digits and hyphens, then a top-level domain of two or more
# letters or a punycode one. Every repetition is bounded, and a label cannot contain the
# dot that ends it, so the match is decided without deep backtracking.
_DOMAIN = re.compile(r"(?:[^\W_][\w-]{0,62}\.){1,8}(?:[xX][nN]--[a-zA-Z0-9-]{1,59}|[^\W\d_]{2,63})")


def find_emails(scan: str) -> list[Span]:
    """Spans of the e-mail addresses in `scan` (a scan copy, see `_spans`)."""
    spans: list[Span] = []
    floor = 0  # no local part reaches back into the previous address
    at = scan.find("@")
    while at != -1:
        window = scan[max(floor, at - MAX_LOCAL_CHARS) : at]
        run = _LOCAL_RUN.match(window[::-1])
        domain = _DOMAIN.match(scan, at + 1)
        if run is not None and domain is not None:
            start = at - run.end()
            while start < at and scan[start] == ".":
                start += 1
            if start < at:
                spans.append(Span(start, domain.end(), "email"))
                floor = domain.end()
                at = scan.find("@", floor)
                continue
        at = scan.find("@", at + 1)
    return spans
