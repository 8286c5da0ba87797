"""Context contributors with their text (`context`, `prefer`, `droppable`, ...).

These mirror the planner's pure builders, but carry the source text, which the runtime
stages in PostgreSQL; only ids, placements and token counts reach the workflow. Illegal
nesting raises `RequestCompositionError("INVALID_COMPOSITION")` here, at definition time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import planner
from planner import Contributor, Prefer, Source, Summarizable
from planner.ladder import Placement, invalid_ladder
from vocabulary.errors import ConfigurationError

MAX_ID_LENGTH = 256
"""Longest contributor or prompt id accepted (ids travel in receipts and workflow input)."""


def check_id(value: object, what: str) -> str:
    """Return `value` if it is a usable id, else raise.

    An id is a non-empty string of at most 256 characters, without outer whitespace or
    control characters and encodable as UTF-8 (PostgreSQL stores it).

    Raises:
        ConfigurationError: The id is unusable (the message names `what`, not the value).
    """
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} must be a string")
    if not value or len(value) > MAX_ID_LENGTH or value != value.strip():
        raise ConfigurationError(
            f"{what} must be 1-{MAX_ID_LENGTH} characters without outer whitespace"
        )
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value) or not _encodable(value):
        raise ConfigurationError(f"{what} must not contain control characters or surrogates")
    return value


def check_text(value: object, what: str) -> str:
    """Return `value` if it is text PostgreSQL can store, else raise.

    Raises:
        ConfigurationError: Not a string, or it holds NUL or a lone surrogate.
    """
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} must be a string")
    if "\x00" in value or not _encodable(value):
        raise ConfigurationError(f"{what} holds a NUL byte or a lone surrogate")
    return value


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _contributor(value: object, what: str) -> ContextContributor:
    if not isinstance(value, ContextContributor):
        raise ConfigurationError(f"{what} accepts contributors made by crux.context(...)")
    return value


@dataclass(frozen=True)
class ContextContributor:
    """A contributor ready for `prompt(use=[...])`.

    Attributes:
        spec: The planner's contributor, with token counts still zero (the worker counts
            the staged texts with the model's tokenizer).
        texts: Source id to text, for every source in the ladder.
    """

    spec: Contributor
    texts: Mapping[str, str] = field(default_factory=dict[str, str])

    @property
    def id(self) -> str:
        """The contributor id."""
        return planner.contributor_id(self.spec)


def context(
    id: str,
    content: str,
    *,
    placement: Placement = "system",
    contract: bool = False,
    priority: int = 0,
) -> ContextContributor:
    """An exact, required context source.

    Args:
        id: Content-free id, unique within the request.
        content: The text.
        placement: `system` (a block of the system message) or `message` (its own message).
        contract: An exact contract (instructions, constraints): never summarised.
        priority: Higher priority keeps fidelity longer under pressure.

    Raises:
        ConfigurationError: An argument is invalid.
    """
    check_id(id, "context id")
    # Text PostgreSQL cannot store is refused when the request is staged (a typed
    # `ThreadError("invalid_message")`, like every other text); here only its type matters.
    if not isinstance(content, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("context content must be a string")
    if placement not in ("system", "message"):
        raise ConfigurationError("placement must be 'system' or 'message'")
    if not isinstance(contract, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("contract must be a boolean")
    if isinstance(priority, bool) or not isinstance(priority, int):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("priority must be an integer")
    source = planner.context(
        id, tokens=0, placement=placement, contract=contract, priority=priority
    )
    return ContextContributor(spec=source, texts={id: content})


def prefer(primary: ContextContributor, *alternatives: ContextContributor) -> ContextContributor:
    """Prefer `primary`; under pressure use the reviewed alternatives in order.

    Raises:
        ConfigurationError: An argument is not a contributor.
        RequestCompositionError: `INVALID_COMPOSITION` for illegal nesting.
    """
    _contributor(primary, "prefer")
    for alternative in alternatives:
        _contributor(alternative, "prefer")
    spec = planner.prefer(_source(primary), *(_source(a) for a in alternatives))
    return ContextContributor(spec=spec, texts=_merge(primary, *alternatives))


def summarizable(*targets: ContextContributor, id: str | None = None) -> ContextContributor:
    """Authorise a derived summary (available once a summary artifact is prepared).

    Raises:
        ConfigurationError: An argument is not a contributor, or `id` is invalid.
        RequestCompositionError: `INVALID_COMPOSITION` for illegal nesting.
    """
    if id is not None:
        check_id(id, "summarizable id")
    inner: list[Source | Prefer] = []
    for target in targets:
        _contributor(target, "summarizable")
        if not isinstance(target.spec, Source | Prefer):
            raise invalid_ladder("summarizable accepts a source, prefer(...) or sources")
        inner.append(target.spec)
    spec = planner.summarizable(*inner, id=id)
    return ContextContributor(spec=spec, texts=_merge(*targets))


def offloadable(
    target: ContextContributor, *, above_tokens: int | None = None
) -> ContextContributor:
    """Authorise an exact reference plus retrieval (available once the value is published).

    Raises:
        ConfigurationError: `target` is not a contributor or `above_tokens` is invalid.
        RequestCompositionError: `INVALID_COMPOSITION` for illegal nesting.
    """
    _contributor(target, "offloadable")
    if not isinstance(target.spec, Source | Prefer | Summarizable):
        raise invalid_ladder("offloadable accepts a source, prefer(...) or summarizable(...)")
    spec = planner.offloadable(target.spec, above_tokens=above_tokens)
    return ContextContributor(spec=spec, texts=dict(target.texts))


def droppable(target: ContextContributor) -> ContextContributor:
    """Authorise omitting the contributor (and its capabilities) under pressure.

    Raises:
        ConfigurationError: `target` is not a contributor.
        RequestCompositionError: `INVALID_COMPOSITION` for illegal nesting.
    """
    _contributor(target, "droppable")
    if isinstance(target.spec, planner.Droppable):
        raise invalid_ladder("droppable cannot wrap droppable", target.id)
    spec = planner.droppable(target.spec)
    return ContextContributor(spec=spec, texts=dict(target.texts))


def _source(value: ContextContributor) -> Source:
    if not isinstance(value.spec, Source):
        raise invalid_ladder("prefer accepts exact sources only", value.id)
    return value.spec


def _merge(*values: ContextContributor) -> dict[str, str]:
    merged: dict[str, str] = {}
    for value in values:
        for source_id, text in value.texts.items():
            if source_id in merged and merged[source_id] != text:
                raise invalid_ladder("two sources share one id", source_id)
            merged[source_id] = text
    return merged
