"""The length policy: characters and tokens against their limits, never truncating."""

from __future__ import annotations

from activities.gate._verdicts import Applied, TokenCount
from contracts.gate import LengthPolicySpec
from vocabulary.errors import ConfigurationError


class LengthPolicy:
    """A length policy built from its spec.

    Truncating is deliberately not offered: cutting a message or a reply changes its
    meaning without anyone noticing, so an over-long text is refused (or, on output,
    asked for again) instead.

    Args:
        spec: The policy's spec.
    """

    def __init__(self, spec: LengthPolicySpec) -> None:
        self._spec = spec

    def apply(self, text: str, count_tokens: TokenCount | None) -> Applied:
        """Measure the text; `block` (or `retry`) with `length.exceeded` over a limit.

        Characters are measured first; tokens only when the characters are within their
        limit (so `counts` has no `tokens` when the character limit was exceeded).

        Raises:
            ConfigurationError: The policy limits tokens and no token counter was given.
        """
        spec = self._spec
        counts: dict[str, int] = {}
        exceeded = False
        if spec.max_chars is not None:
            counts.update(chars=len(text), max_chars=spec.max_chars)
            exceeded = len(text) > spec.max_chars
        # A text already over the character limit is not tokenized: that limit is what
        # keeps a huge text from costing a tokenizer pass.
        if spec.max_tokens is not None and not exceeded:
            if count_tokens is None:
                raise ConfigurationError(f"policy {spec.name}: limiting tokens needs a counter")
            tokens = count_tokens(text)
            counts.update(tokens=tokens, max_tokens=spec.max_tokens)
            exceeded = exceeded or tokens > spec.max_tokens
        if exceeded:
            return Applied(spec.on_exceed, text, "length.exceeded", counts)
        return Applied("allow", text, None, counts)
