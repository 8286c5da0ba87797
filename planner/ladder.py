"""Representation ladders: what a context contributor may become under pressure.

These models are pure data (`planner.builders` makes them). A plain `context(...)` source is
exact and required. Wrappers authorise smaller representations, always in the fixed order

    full -> authored -> summary -> offload -> omitted

- `prefer(primary, *alternatives)`: reviewed compact sources (`authored` rungs);
- `summarizable(x)`: a derived summary (`summary` rung), available once its artifact exists;
- `offloadable(x, above_tokens=...)`: an exact reference plus retrieval (`offload` rung);
- `droppable(x)`: the whole contributor and its capabilities may go (`omitted` rung).

Illegal nesting raises `RequestCompositionError("INVALID_COMPOSITION")` at definition time.
Capabilities (owned tools) stay on every rung except `omitted` ("sticky"); exact contracts
(instructions, schemas) can never be summarised, only replaced by a reviewed alternative.
The planner sees ids and token counts only, never text.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from planner._base import FrozenModel
from vocabulary.errors import RequestCompositionError

RungKind = Literal["full", "authored", "summary", "offload", "omitted"]
"""Representation kinds, highest fidelity first."""

Placement = Literal["system", "message"]


def invalid_ladder(message: str, contributor: str | None = None) -> RequestCompositionError:
    """Build the `INVALID_COMPOSITION` error for an illegal representation ladder."""
    return RequestCompositionError(
        "INVALID_COMPOSITION",
        message,
        diagnostics={
            "items": [
                {
                    "id": "definition:representation-ladder",
                    "code": "INVALID_REPRESENTATION_LADDER",
                    "contributor": contributor,
                    "tokens": None,
                    "message": message,
                }
            ]
        },
    )


class Tool(FrozenModel):
    """A tool (capability) owned by a contributor.

    Attributes:
        name: Tool name, unique within the request.
        tokens: Tokens of its schema as sent to the provider.
    """

    name: str = Field(min_length=1)
    tokens: int = Field(default=0, ge=0)


class Source(FrozenModel):
    """One exact context source (`context(...)`).

    Attributes:
        kind: Always `"source"`.
        id: Contributor id (content-free, unique within the request).
        tokens: Tokens of the source as rendered.
        placement: `system` (a block in the system message) or `message` (its own message,
            which adds per-message framing).
        contract: `True` for exact contracts (instructions, constraints, schemas), which are
            never summarised.
        tools: Tools this source owns; they leave the request only when it is omitted.
        priority: Higher priority keeps fidelity longer.
    """

    kind: Literal["source"] = "source"
    id: str = Field(min_length=1)
    tokens: int = Field(ge=0)
    placement: Placement = "system"
    contract: bool = False
    tools: tuple[Tool, ...] = ()
    priority: int = 0

    @model_validator(mode="after")
    def _unique_tools(self) -> Source:
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise invalid_ladder("a source declares the same tool twice", self.id)
        return self


class SourceGroup(FrozenModel):
    """Several sources summarised as one atomic unit (`summarizable(a, b, ...)`).

    Attributes:
        kind: Always `"group"`.
        id: Contributor id of the unit.
        members: The sources; their tools are unioned and must not collide.
    """

    kind: Literal["group"] = "group"
    id: str = Field(min_length=1)
    members: tuple[Source, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _disjoint(self) -> SourceGroup:
        ids = [member.id for member in self.members]
        names = [tool.name for member in self.members for tool in member.tools]
        if len(set(ids)) != len(ids) or len(set(names)) != len(names):
            raise invalid_ladder("group members collide on ids or tool names", self.id)
        if any(member.contract for member in self.members):
            raise invalid_ladder("exact contracts cannot be summarised", self.id)
        return self


class Prefer(FrozenModel):
    """A primary source with reviewed, shorter alternatives (`authored` rungs).

    Attributes:
        kind: Always `"prefer"`.
        primary: The full source.
        alternatives: Exact sources, in preference order; they must own the same tools.
    """

    kind: Literal["prefer"] = "prefer"
    primary: Source
    alternatives: tuple[Source, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _same_capabilities(self) -> Prefer:
        wanted = sorted(tool.name for tool in self.primary.tools)
        for alternative in self.alternatives:
            if sorted(tool.name for tool in alternative.tools) != wanted:
                raise invalid_ladder(
                    "an alternative must own the same tools as its primary", self.primary.id
                )
        return self


class Summarizable(FrozenModel):
    """Authorises a derived summary (`summary` rung) of a source, preference or group.

    Attributes:
        kind: Always `"summarizable"`.
        target: What may be summarised.
        summary_tokens: Tokens of the prepared summary; `None` while no artifact exists
            (the rung is then unavailable, and `unknown` in preview).
        artifact_id: Identity of the prepared artifact.
        support_request_ids: Support calls that produced it.
        expected_tokens: Size assumed for an unprepared summary in preview.
    """

    kind: Literal["summarizable"] = "summarizable"
    target: Annotated[Source | Prefer | SourceGroup, Field(discriminator="kind")]
    summary_tokens: int | None = Field(default=None, ge=0)
    artifact_id: str | None = None
    support_request_ids: tuple[str, ...] = ()
    expected_tokens: int = Field(default=500, ge=0)

    @model_validator(mode="after")
    def _no_contract(self) -> Summarizable:
        target = self.target
        primary = target.primary if isinstance(target, Prefer) else target
        if isinstance(primary, Source) and primary.contract:
            raise invalid_ladder("exact contracts cannot be summarised", primary.id)
        return self


class Offloadable(FrozenModel):
    """Authorises an exact reference plus retrieval (`offload` rung).

    Attributes:
        kind: Always `"offloadable"`.
        target: What may be offloaded.
        above_tokens: When the full source exceeds this size, the reference is preferred
            even without pressure; below it, offloading happens only under pressure.
        reference_tokens: Tokens of the bounded preview and handle; `None` when the value
            cannot be backed (the rung is then unavailable).
        handle_id: Opaque owner-scoped handle of the published value.
    """

    kind: Literal["offloadable"] = "offloadable"
    target: Annotated[Source | Prefer | Summarizable, Field(discriminator="kind")]
    above_tokens: int | None = Field(default=None, gt=0)
    reference_tokens: int | None = Field(default=None, ge=0)
    handle_id: str | None = None


class Droppable(FrozenModel):
    """Authorises omitting the whole contributor and its capabilities (`omitted` rung).

    Attributes:
        kind: Always `"droppable"`.
        target: What may be omitted.
    """

    kind: Literal["droppable"] = "droppable"
    target: Annotated[Source | Prefer | Summarizable | Offloadable, Field(discriminator="kind")]


Contributor = Annotated[
    Source | Prefer | Summarizable | Offloadable | Droppable, Field(discriminator="kind")
]
"""A context contributor: an exact source or a representation ladder over one."""
