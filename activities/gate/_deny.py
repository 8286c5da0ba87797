r"""The deny-list policy: listed words, phrases and patterns, as one compiled pattern.

Entries become the branches of one alternation, each in a named group, so the text is
scanned once whatever the list's length and the match names the entry that matched.
Words and phrases are escaped; a space in a phrase matches any run of whitespace
(`credit card` matches `credit\ncard`). `whole_word` puts lookarounds around each branch
(no letter, digit or `_` may adjoin), so entries that start or end with punctuation
(`c++`, `#tag`) still work. `ignore_case` uses `re.IGNORECASE` (simple case folding:
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


def _branch(index: int, body: str, whole_word: bool) -> str:
    if whole_word:
        body = rf"(?<!\w)(?:{body})(?!\w)"
    return f"(?P<{_GROUP}{index}>{body})"


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
        words: list[tuple[int, str]] = []
        patterns: list[tuple[int, str]] = []
        for index, entry in enumerate(spec.entries):
            if entry.regex:
                check_pattern(entry.pattern, backreferences=False)
                patterns.append((index, entry.pattern))
            else:
                body = r"\s+".join(re.escape(word) for word in entry.pattern.split())
                words.append((index, body))
        # Longer words first, so `new york city` wins over `new york` at one position.
        words.sort(key=lambda item: len(spec.entries[item[0]].pattern), reverse=True)
        branches = [_branch(i, body, spec.whole_word) for i, body in [*words, *patterns]]
        flags = re.IGNORECASE if spec.ignore_case else 0
        try:
            self._pattern = compile_pattern("|".join(branches), flags)
        except (re.error, OverflowError, RecursionError):
            # An entry's own group named like ours, or inline global flags mid-pattern.
            raise ConfigurationError(f"policy {spec.name}: the entries do not combine") from None
        self._bounded = bool(patterns)  # caller-written regexes see a bounded text
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
