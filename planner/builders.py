"""Builders for context contributors and their representation ladders.

`context(...)` declares an exact, required source. `prefer`, `summarizable`, `offloadable`
and `droppable` authorise smaller representations in the fixed order
full -> authored -> summary -> offload -> omitted; illegal nesting raises
`RequestCompositionError("INVALID_COMPOSITION")` here, at definition time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError

from planner.ladder import (
    Droppable,
    Offloadable,
    Placement,
    Prefer,
    Source,
    SourceGroup,
    Summarizable,
    Tool,
    invalid_ladder,
)
from vocabulary.errors import ConfigurationError

_M = TypeVar("_M")


def _build(what: str, make: Callable[[], _M]) -> _M:
    """Run a model constructor, turning pydantic's error into a content-free one.

    pydantic's message echoes the offending value; callers get `ConfigurationError`
    naming the builder instead.
    """
    try:
        return make()
    except ValidationError:
        raise ConfigurationError(f"invalid {what} arguments") from None


def context(
    id: str,
    *,
    tokens: int,
    placement: Placement = "system",
    contract: bool = False,
    tools: tuple[Tool, ...] = (),
    priority: int = 0,
) -> Source:
    """Declare an exact, required context source (see `Source`).

    Raises:
        ConfigurationError: An argument is invalid.
        RequestCompositionError: `INVALID_COMPOSITION` when a tool is declared twice.
    """
    if not isinstance(id, str) or not id:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("context id must be a non-empty string")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("tokens must be a non-negative integer")
    if isinstance(priority, bool) or not isinstance(priority, int):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("priority must be an integer")
    return _build(
        "context",
        lambda: Source(
            id=id,
            tokens=tokens,
            placement=placement,
            contract=contract,
            tools=tools,
            priority=priority,
        ),
    )


def prefer(primary: Source, *alternatives: Source) -> Prefer:
    """Prefer `primary`; under pressure use the alternatives in order.

    Raises:
        RequestCompositionError: `INVALID_COMPOSITION` when an argument is not a plain
            source, there is no alternative, or capabilities differ.
    """
    for node in (primary, *alternatives):
        if not isinstance(node, Source):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise invalid_ladder("prefer accepts exact sources only")
    if not alternatives:
        raise invalid_ladder("prefer needs at least one alternative", primary.id)
    return _build("prefer", lambda: Prefer(primary=primary, alternatives=alternatives))


def summarizable(
    *targets: Source | Prefer,
    id: str | None = None,
    summary_tokens: int | None = None,
    artifact_id: str | None = None,
    support_request_ids: tuple[str, ...] = (),
    expected_tokens: int = 500,
) -> Summarizable:
    """Authorise a derived summary of one source or preference, or of several sources.

    Args:
        *targets: One `Source` or `Prefer`, or several `Source`s summarised as one unit.
        id: Contributor id of a multi-source unit (defaults to the first member's id).
        summary_tokens: Size of the prepared summary; `None` while unprepared.
        artifact_id: Identity of the prepared artifact.
        support_request_ids: Support calls that produced it.
        expected_tokens: Size assumed for an unprepared summary in preview.

    Raises:
        RequestCompositionError: `INVALID_COMPOSITION` for illegal nesting or contracts.
    """
    if not targets:
        raise invalid_ladder("summarizable needs a source")
    if len(targets) == 1:
        target = targets[0]
        if not isinstance(target, Source | Prefer):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise invalid_ladder("summarizable accepts a source, prefer(...) or sources")
        unit: Source | Prefer | SourceGroup = target
    else:
        members: list[Source] = []
        for target in targets:
            if not isinstance(target, Source):
                raise invalid_ladder("summarizable accepts a source, prefer(...) or sources")
            members.append(target)
        group_id = id or members[0].id
        unit = _build("summarizable", lambda: SourceGroup(id=group_id, members=tuple(members)))
    return _build(
        "summarizable",
        lambda: Summarizable(
            target=unit,
            summary_tokens=summary_tokens,
            artifact_id=artifact_id,
            support_request_ids=support_request_ids,
            expected_tokens=expected_tokens,
        ),
    )


def offloadable(
    target: Source | Prefer | Summarizable,
    *,
    above_tokens: int | None = None,
    reference_tokens: int | None = None,
    handle_id: str | None = None,
) -> Offloadable:
    """Authorise an exact reference of `target` (see `Offloadable`).

    Raises:
        RequestCompositionError: `INVALID_COMPOSITION` for illegal nesting.
        ConfigurationError: If `above_tokens` is not a positive integer.
    """
    if not isinstance(target, Source | Prefer | Summarizable):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise invalid_ladder("offloadable accepts a source, prefer(...) or summarizable(...)")
    if above_tokens is not None and (
        isinstance(above_tokens, bool) or not isinstance(above_tokens, int) or above_tokens <= 0  # pyright: ignore[reportUnnecessaryIsInstance]
    ):
        raise ConfigurationError("above_tokens must be a positive integer")
    return _build(
        "offloadable",
        lambda: Offloadable(
            target=target,
            above_tokens=above_tokens,
            reference_tokens=reference_tokens,
            handle_id=handle_id,
        ),
    )


def droppable(target: Source | Prefer | Summarizable | Offloadable) -> Droppable:
    """Authorise omitting `target` and its owned tools under pressure.

    Raises:
        RequestCompositionError: `INVALID_COMPOSITION` for illegal nesting.
    """
    if not isinstance(target, Source | Prefer | Summarizable | Offloadable):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise invalid_ladder("droppable accepts a source or a ladder that is not droppable")
    return _build("droppable", lambda: Droppable(target=target))
