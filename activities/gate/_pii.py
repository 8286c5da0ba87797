"""The PII policy: e-mail addresses, phone numbers, card numbers and IBANs.

Detectors run in a fixed order, e-mail, IBAN, card, phone, each on a copy of the text
with everything found before blanked out, so a finding belongs to one kind only (an
IBAN's digits are never also a phone number). Mask tokens already in the text are
blanked first and never found again, and masking repeats until nothing is left to find
(`MAX_MASK_ROUNDS`), so masking masked text changes nothing.

What each detector catches and misses:

- **E-mail** (a regular expression around each `@`). Catches `name@example.com`,
  subdomains (`a.b@mail.example.co.uk`), plus addressing (`name+tag@example.com`),
  Unicode local parts and domains (`jürgen@bücher.de`, `用户@例子.广告`) and punycode
  top-level domains (`xn--p1ai`). The local part is up to 64 characters (RFC 5321) of
  RFC 5322 atext and dots before the `@`; a longer run keeps its first characters
  unmasked. The domain needs one to eight labels and a top-level domain of two or more letters, so
  `user@localhost`, `pkg@1.2.3` and a one-letter top-level domain are not addresses.
  Misses obfuscated addresses (`name at example dot com`, `name [at] example.com`),
  quoted local parts (`"john doe"@example.com`), IP-literal domains (`user@[10.0.0.1]`)
  and addresses split by spaces. Text glued to either side may be masked with it
  (`mail=john@example.com` masks `mail=john@...`; `john@example.com2024` leaves `2024`).
- **IBAN** (ISO 13616; checksum by `stdnum.iban`). Catches IBANs of every registered
  country, upper or lower case, compact or in groups separated by single spaces
  (`DE89 3704 0044 0532 0130 00`), when the mod-97 check digits are right and the
  length and structure match the country's format. An IBAN is recognised by its own
  characters, so one glued to other letters or digits is caught too (and a long code
  that happens to contain a valid IBAN is masked). Misses IBANs with other separators
  (hyphens, dots, two spaces), ones of countries not in python-stdnum's registry, and
  ones with a mistyped character (the checksum fails: that is the point). National check
  digits inside the BBAN are not checked, so a mod-97-valid number of the right shape
  counts.
- **Card** (payment card numbers; checksum by `stdnum.luhn`). Catches 12-19 digits
  starting with 1-9 that pass the Luhn check, written unbroken or in groups of three or
  more digits separated by single spaces or hyphens (`4111 1111 1111 1111`,
  `3782-822463-10005`). A random 16-digit number fails Luhn nine times in ten and is
  left alone, but one in ten passes and is masked as a card: Luhn is a typo check, not
  proof. The whole run of groups must be the card: a card followed by another group of
  three or more digits after one space (`4111 1111 1111 1111 123`), two cards in one run
  and a card inside a longer unbroken digit string are missed, as are numbers with other
  separators (dots, slashes, two spaces, line breaks), groups of one or two digits
  (`4111 1111 1111 11 11`) and non-ASCII digits.
- **Phone** (libphonenumber's `PhoneNumberMatcher`). Catches numbers written with `+`
  and a country code in any region's format (`+1 650-253-0000`, `+44 20 7946 0958`), and
  with `phone_region` set, national numbers of that region (`(650) 253-0000` for `US`,
  `030 901820` for `DE`). Without `phone_region`, national numbers are missed; with one,
  other regions' national numbers are missed. The leniency decides how plausible a
  number must be: `valid` (the default) needs a number that is assigned in the region's
  numbering plan; `possible` only needs a possible length (more false positives: order
  numbers, amounts); the grouping levels also need the digits grouped as the region
  writes them. Dates, times and page ranges the matcher recognises are not numbers.
  Vanity numbers (`1-800-FLOWERS`) are missed, and so, at `valid` and stricter, are
  numbers glued to letters (`call6502530000`).

Cost: every detector is linear in the text. Phone matching dominates: libphonenumber
parses each numeric candidate in Python, about 0.3 s per 100 KB of chat text with a
number every few dozen characters (region set), and up to 2 s per 100 KB of text made
only of digits and separators (`bench/bench_gate.py`). A length policy placed before
the PII policy bounds it.
"""

from __future__ import annotations

import dataclasses

from activities.gate._email import find_emails
from activities.gate._numbers import find_cards, find_ibans
from activities.gate._phones import check_region, find_phones
from activities.gate._spans import Span, blank, replace, token_spans, tokens_pattern
from activities.gate._verdicts import Applied, TokenCount
from contracts.gate import PII_DETECTION_ORDER, PiiKind, PiiPolicySpec

_SEVERITY = {"block": 2, "retry": 1, "mask": 0}

MAX_MASK_ROUNDS = 4
"""Most masking passes over one text. A pass finds something new only where the previous
pass's masks changed what surrounds a candidate, so more than two are needed only for
chains of findings glued to one another."""


class PiiPolicy:
    """A PII policy built from its spec.

    Args:
        spec: The policy's spec.

    Raises:
        ConfigurationError: The phone region is not one libphonenumber supports.
    """

    def __init__(self, spec: PiiPolicySpec) -> None:
        check_region(spec.phone_region)
        self._spec = spec
        self._rules = {rule.kind: rule for rule in spec.rules}
        self._order: list[PiiKind] = [kind for kind in PII_DETECTION_ORDER if kind in self._rules]
        self._masks: dict[str, str] = {rule.kind: rule.mask_token for rule in spec.rules}
        defaults = [f"[{kind}]" for kind in PII_DETECTION_ORDER]
        self._tokens = tokens_pattern([*defaults, *self._masks.values()])

    def find(self, text: str) -> list[Span]:
        """Every finding in `text`, in text order (disjoint, none inside a mask token)."""
        scan = blank(text, token_spans(text, self._tokens))
        found: list[Span] = []
        for kind in self._order:
            spans = self._detect(kind, scan)
            scan = blank(scan, spans)
            found += spans
        found.sort(key=lambda span: span.start)
        return found

    def _detect(self, kind: PiiKind, scan: str) -> list[Span]:
        if kind == "email":
            return find_emails(scan)
        if kind == "iban":
            return find_ibans(scan)
        if kind == "card":
            return find_cards(scan)
        return find_phones(scan, self._spec.phone_region, self._spec.phone_leniency)

    def apply(self, text: str, count_tokens: TokenCount | None) -> Applied:
        """Find, then block, retry or mask according to the rules of the kinds found.

        Masking repeats on the masked text until nothing more is found (at most
        `MAX_MASK_ROUNDS` times): a detector's verdict can depend on what surrounds a
        candidate (libphonenumber's checks, digits glued to a card number), and a mask
        can change that, so the result is a text in which nothing is left to find.
        """
        del count_tokens  # PII detection does not count tokens
        counts: dict[str, int] = {}
        reason: str | None = None
        masked = text
        for _ in range(MAX_MASK_ROUNDS):
            spans = self.find(masked)
            if not spans:
                break
            for span in spans:
                counts[span.kind] = counts.get(span.kind, 0) + 1
            found = [self._rules[kind] for kind in self._order if kind in counts]
            worst = max(found, key=lambda rule: _SEVERITY[rule.mode])
            if worst.mode != "mask":
                return Applied(worst.mode, text, f"pii.{worst.kind}", counts)
            reason = reason or f"pii.{worst.kind}"
            kept = [
                span if self._rules[span.kind].keep_last4 else dataclasses.replace(span, last4="")
                for span in spans
            ]
            masked = replace(masked, kept, self._masks)
        if reason is None:
            return Applied("allow", text)
        return Applied("transform", masked, reason, counts)
