"""Flattening representation ladders into sized rungs (internal)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.ladder import (
    Contributor,
    Droppable,
    Offloadable,
    Prefer,
    RungKind,
    Source,
    SourceGroup,
    Summarizable,
)
from planner.measure import MessageFormat

RUNG_ORDER: dict[RungKind, int] = {
    "full": 0,
    "authored": 1,
    "summary": 2,
    "offload": 3,
    "omitted": 4,
}


@dataclass(frozen=True, slots=True)
class Rung:
    """One representation of a contributor, sized as it would be sent.

    `tokens` includes the owned tools' schemas (sticky on every rung but `omitted`) and, for
    message-placed sources, the per-message framing. `expected` is the size preview assumes
    for an unprepared rung.
    """

    kind: RungKind
    source: str | None
    tokens: int
    available: bool
    unprepared: bool = False
    expected: int = 0
    artifact_id: str | None = None
    support_request_ids: tuple[str, ...] = ()
    sent: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Ladder:
    """A contributor flattened into rungs, highest fidelity first (internal).

    `start` is the first rung the contributor may use without pressure: 0, or the offload
    rung when an `offloadable(above_tokens=...)` source exceeds its threshold.
    """

    id: str
    priority: int
    order: int
    sources: tuple[str, ...]
    tools: tuple[str, ...]
    kinds: tuple[RungKind, ...]
    rungs: tuple[Rung, ...]
    start: int = 0
    system: bool = False

    @property
    def elastic(self) -> bool:
        """Whether the contributor has any rung besides `full`."""
        return len(self.rungs) > 1


def _unit(target: Source | Prefer | SourceGroup) -> tuple[Source, ...]:
    if isinstance(target, Source):
        return (target,)
    if isinstance(target, Prefer):
        return (target.primary,)
    return target.members


def _size(sources: tuple[Source, ...], tool_tokens: int, fmt: MessageFormat) -> int:
    framing = sum(fmt.per_message for source in sources if source.placement == "message")
    return sum(source.tokens for source in sources) + tool_tokens + framing


def flatten(contributor: Contributor, order: int, fmt: MessageFormat) -> Ladder:
    """Flatten one contributor into its rungs, in the fixed order."""
    layers: list[Summarizable | Offloadable | Droppable] = []
    node: Contributor | SourceGroup = contributor
    while isinstance(node, Summarizable | Offloadable | Droppable):
        layers.append(node)
        node = node.target
    base: Source | Prefer | SourceGroup = node
    primary_sources = _unit(base)
    owned = tuple(tool for source in primary_sources for tool in source.tools)
    tool_tokens = sum(tool.tokens for tool in owned)
    full_tokens = _size(primary_sources, tool_tokens, fmt)
    contributor_id = base.primary.id if isinstance(base, Prefer) else base.id
    rungs: list[Rung] = [
        Rung("full", contributor_id, full_tokens, True, sent=tuple(s.id for s in primary_sources))
    ]
    sources = [source.id for source in primary_sources]
    if isinstance(base, Prefer):
        for alternative in base.alternatives:
            # An alternative keeps the primary's tools: capabilities are sticky.
            size = _size((alternative,), tool_tokens, fmt)
            rungs.append(Rung("authored", alternative.id, size, True, sent=(alternative.id,)))
            sources.append(alternative.id)
    # A summary or reference replaces the whole unit with one block: one message's framing
    # when the unit is placed as messages, none inside the system message.
    framing = fmt.per_message if any(s.placement == "message" for s in primary_sources) else 0
    start = 0
    priority = primary_sources[0].priority
    for layer in reversed(layers):
        if isinstance(layer, Summarizable):
            ready = layer.summary_tokens is not None
            size = (layer.summary_tokens or 0) + tool_tokens + framing
            rungs.append(
                Rung(
                    "summary",
                    layer.artifact_id,
                    size,
                    ready,
                    unprepared=not ready,
                    expected=layer.expected_tokens + tool_tokens + framing,
                    artifact_id=layer.artifact_id,
                    support_request_ids=layer.support_request_ids,
                )
            )
        elif isinstance(layer, Offloadable):
            ready = layer.reference_tokens is not None
            size = (layer.reference_tokens or 0) + tool_tokens + framing
            rungs.append(Rung("offload", layer.handle_id, size, ready, artifact_id=layer.handle_id))
            if ready and layer.above_tokens is not None and full_tokens > layer.above_tokens:
                start = len(rungs) - 1
        else:
            rungs.append(Rung("omitted", None, 0, True))
    return Ladder(
        id=contributor_id,
        priority=priority,
        order=order,
        sources=tuple(sources),
        tools=tuple(tool.name for tool in owned),
        kinds=tuple(rung.kind for rung in rungs),
        rungs=tuple(rungs),
        start=start,
        system=any(source.placement == "system" for source in primary_sources),
    )
