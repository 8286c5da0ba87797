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
    """
    source = planner.context(
        id, tokens=0, placement=placement, contract=contract, priority=priority
    )
    return ContextContributor(spec=source, texts={id: content})


def prefer(primary: ContextContributor, *alternatives: ContextContributor) -> ContextContributor:
    """Prefer `primary`; under pressure use the reviewed alternatives in order."""
    spec = planner.prefer(_source(primary), *(_source(a) for a in alternatives))
    return ContextContributor(spec=spec, texts=_merge(primary, *alternatives))


def summarizable(*targets: ContextContributor, id: str | None = None) -> ContextContributor:
    """Authorise a derived summary (available once a summary artifact is prepared)."""
    inner: list[Source | Prefer] = []
    for target in targets:
        if not isinstance(target.spec, Source | Prefer):
            raise invalid_ladder("summarizable accepts a source, prefer(...) or sources")
        inner.append(target.spec)
    spec = planner.summarizable(*inner, id=id)
    return ContextContributor(spec=spec, texts=_merge(*targets))


def offloadable(
    target: ContextContributor, *, above_tokens: int | None = None
) -> ContextContributor:
    """Authorise an exact reference plus retrieval (available once the value is published)."""
    if not isinstance(target.spec, Source | Prefer | Summarizable):
        raise invalid_ladder("offloadable accepts a source, prefer(...) or summarizable(...)")
    spec = planner.offloadable(target.spec, above_tokens=above_tokens)
    return ContextContributor(spec=spec, texts=dict(target.texts))


def droppable(target: ContextContributor) -> ContextContributor:
    """Authorise omitting the contributor (and its capabilities) under pressure."""
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
