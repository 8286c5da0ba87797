r"""The deny-list policy: listed words, phrases and patterns, as one compiled pattern.

Entries become the branches of one alternation, each in a named group, so the text is
scanned once whatever the list's length and the match names the entry that matched.
Words and phrases are escaped; a space in a phrase matches any run of whitespace
(`credit card` matches `credit\ncard`). `whole_word` asks that no letter, digit or `_`
adjoin an edge of a word that is itself a letter, digit or `_`: `class` does not match in
`subclass`, `c++` matches in `c++class` and `#tag` in `a#tag`. These boundaries depend
only on the entry's own edges, so masking a match never turns a neighbour into a whole
word. Patterns get both lookarounds. `ignore_case` uses `re.IGNORECASE` (simple case folding:
`STRASSE` does not match `straße`). At one position the longest word or phrase wins;
regular expressions keep their listed order after the words.
"""

from __future__ import annotations

import re

from activities.gate._patterns import MAX_REGEX_TEXT_CHARS, check_pattern, compile_pattern
from activities.gate._verdicts import Applied, TokenCount
from contracts.gate import DenyListPolicySpec
from vocabulary.errors import ConfigurationError

_GROUP = "entry"
_WORD = re.compile(r"\w")


def _named(index: int, body: str) -> str:
    return f"(?P<{_GROUP}{index}>{body})"


def _combined(spec: DenyListPolicySpec) -> str:
    """One alternation of every entry, each in a group named after its index."""
    leading: list[tuple[int, str]] = []  # words that start with a word character
    others: list[tuple[int, str]] = []
    for index, word in enumerate(spec.words):
        parts = word.split()
        body = r"\s+".join(re.escape(part) for part in parts)
        if spec.whole_word and _WORD.match(parts[-1][-1]):
            body += r"(?!\w)"
        bucket = leading if spec.whole_word and _WORD.match(parts[0][0]) else others
        bucket.append((index, body))
    # Longer words first, so `new york city` wins over `new york` at one position.
    for bucket in (leading, others):
        bucket.sort(key=lambda item: len(spec.words[item[0]]), reverse=True)
    for offset, pattern in enumerate(spec.patterns):
        body = rf"(?<!\w)(?:{pattern})(?!\w)" if spec.whole_word else pattern
        others.append((len(spec.words) + offset, body))
    branches = [_named(index, body) for index, body in others]
    if leading:
        # One lookbehind for the words that need it fails fast inside words (seven times
        # faster than one per branch on 20 words).
        branches.insert(0, rf"(?<!\w)(?:{'|'.join(_named(i, b) for i, b in leading)})")
    return "|".join(branches)


class DenyListPolicy:
    """A deny-list policy built from its spec.

    Args:
        spec: The policy's spec.

    Raises:
        ConfigurationError: An entry's pattern has a refused shape (see `_patterns`) or
            uses backreferences, or the mask token itself matches an entry.
    """

    def __init__(self, spec: DenyListPolicySpec) -> None:
        self._spec = spec
        for pattern in spec.patterns:
            check_pattern(pattern, backreferences=False)
        flags = re.IGNORECASE if spec.ignore_case else 0
        try:
            self._pattern = compile_pattern(_combined(spec), flags)
        except (re.error, OverflowError, RecursionError):
            # An entry's own group named like ours, or inline global flags mid-pattern.
            raise ConfigurationError(f"policy {spec.name}: the entries do not combine") from None
        self._bounded = bool(spec.patterns)  # caller-written regexes see a bounded text
        if spec.mode == "mask" and self._pattern.search(f" {spec.token} ") is not None:
            raise ConfigurationError(f"policy {spec.name}: the mask token matches an entry")

    def apply(self, text: str, count_tokens: TokenCount | None) -> Applied:
        """Block, retry or mask when any entry matches; report the entries' indices."""
        del count_tokens  # the deny list does not count tokens
        if self._bounded and len(text) > MAX_REGEX_TEXT_CHARS:
            counts = {"chars": len(text), "max_chars": MAX_REGEX_TEXT_CHARS}
            return Applied("block", text, "deny_list.text_too_long", counts)
        matches = [m for m in self._pattern.finditer(text) if m.end() > m.start()]
        if not matches:
            return Applied("allow", text)
        entries = tuple(sorted({int((m.lastgroup or "")[len(_GROUP) :]) for m in matches}))
        counts = {"matches": len(matches)}
        if self._spec.mode != "mask":
            return Applied(self._spec.mode, text, "deny_list.match", counts, entries)
        pieces: list[str] = []
        position = 0
        for match in matches:
            pieces += [text[position : match.start()], self._spec.token]
            position = match.end()
        pieces.append(text[position:])
        return Applied("transform", "".join(pieces), "deny_list.match", counts, entries)
