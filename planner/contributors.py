"""Pure helpers over contributor ladders: ids, source ids, filling in token counts.

Definitions are built with unknown sizes (the facade declares them before anything is
counted); the runtime counts each source's text once and fills the counts in by source id
before planning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar, cast

from planner.ladder import (
    Contributor,
    Droppable,
    Offloadable,
    Prefer,
    Source,
    SourceGroup,
    Summarizable,
)

C = TypeVar("C", bound=Source | Prefer | Summarizable | Offloadable | Droppable)


def _base(contributor: Contributor) -> Source | Prefer | SourceGroup:
    node: Contributor | SourceGroup = contributor
    while isinstance(node, Summarizable | Offloadable | Droppable):
        node = node.target
    return node


def contributor_id(contributor: Contributor) -> str:
    """Return a contributor's id: its primary source's (or its source group's) id."""
    base = _base(contributor)
    return base.primary.id if isinstance(base, Prefer) else base.id


def source_ids(contributor: Contributor) -> tuple[str, ...]:
    """Return every source id of a ladder in declaration order (primary, then alternatives)."""
    base = _base(contributor)
    if isinstance(base, Source):
        return (base.id,)
    if isinstance(base, Prefer):
        return (base.primary.id, *(alternative.id for alternative in base.alternatives))
    return tuple(member.id for member in base.members)


def _fill(source: Source, tokens: Mapping[str, int]) -> Source:
    return source.model_copy(update={"tokens": tokens.get(source.id, source.tokens)})


def _fill_base(
    base: Source | Prefer | SourceGroup, tokens: Mapping[str, int]
) -> Source | Prefer | SourceGroup:
    if isinstance(base, Source):
        return _fill(base, tokens)
    if isinstance(base, Prefer):
        return base.model_copy(
            update={
                "primary": _fill(base.primary, tokens),
                "alternatives": tuple(_fill(a, tokens) for a in base.alternatives),
            }
        )
    return base.model_copy(update={"members": tuple(_fill(m, tokens) for m in base.members)})


def _fill_any(
    node: Contributor | SourceGroup, tokens: Mapping[str, int]
) -> Contributor | SourceGroup:
    if isinstance(node, Summarizable | Offloadable | Droppable):
        return node.model_copy(update={"target": _fill_any(node.target, tokens)})
    return _fill_base(node, tokens)


def with_source_tokens(contributor: C, tokens: Mapping[str, int]) -> C:
    """Return the contributor with each source's token count taken from `tokens`.

    Args:
        contributor: A contributor as defined.
        tokens: Token counts by source id; sources not listed keep their count.

    Returns:
        A new contributor of the same shape and type; the input is unchanged.
    """
    return cast(C, _fill_any(contributor, tokens))


def sources(contributor: Contributor) -> tuple[Source, ...]:
    """Return every exact source of a ladder in declaration order.

    The primary, then its alternatives (or every member of a source group); rungs that are
    derived (summaries, offloads) have no source of their own.
    """
    base = _base(contributor)
    if isinstance(base, Source):
        return (base,)
    if isinstance(base, Prefer):
        return (base.primary, *base.alternatives)
    return base.members


def full_sources(contributor: Contributor) -> tuple[Source, ...]:
    """Return the sources a ladder sends at its full rung (what an exact count measures)."""
    base = _base(contributor)
    if isinstance(base, Source):
        return (base,)
    if isinstance(base, Prefer):
        return (base.primary,)
    return base.members
