"""Turning a `PlanRequest` into sized, ordered choices (internal; shared by plan and preview)."""

from __future__ import annotations

from dataclasses import dataclass

from planner._rungs import Ladder, flatten
from planner.budget import DerivedBudget, derive_budget
from planner.history import HistoryWarning, scan_history
from planner.measure import MessageFormat, message_format
from planner.policies import ManagedHistory, RecentHistory
from planner.projection import Projector, Span
from planner.request import PlanRequest, epoch_key
from planner.select import Option
from planner.summary_rung import HISTORY_ID, Managed, managed_ladder
from vocabulary.errors import ConfigurationError, RequestCompositionError


@dataclass(frozen=True, slots=True)
class Composition:
    """A request measured and ordered for selection (internal)."""

    request: PlanRequest
    budget: DerivedBudget
    fmt: MessageFormat
    fixed: tuple[tuple[str, int], ...]
    fixed_tokens: int
    required: tuple[Ladder, ...]
    ladders: tuple[Ladder, ...]
    options: tuple[tuple[Option, ...], ...]
    floors: tuple[int, ...]
    epoch_key: str
    projector: Projector
    policy: str
    history_span: Span | None
    managed: Managed | None
    history_warnings: tuple[HistoryWarning, ...]
    counted: int | None = None

    @property
    def full_tokens(self) -> int:
        """Size of the unadapted request: every elastic contributor at `full`."""
        return self.fixed_tokens + sum(ladder.rungs[0].tokens for ladder in self.ladders)

    def rung_size(self, position: int, index: int) -> int:
        """Size of one rung, using preview's expected size for an unprepared one."""
        rung = self.ladders[position].rungs[index]
        return rung.expected if rung.unprepared and not rung.available else rung.tokens


def _check_count(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{name} must be a non-negative integer")


def _duplicate(message: str, request_id: str, contributor: str) -> RequestCompositionError:
    return RequestCompositionError(
        "INVALID_COMPOSITION",
        message,
        request_id=request_id,
        diagnostics={
            "items": [
                {
                    "id": f"{request_id}:contributors",
                    "code": "INVALID_REPRESENTATION_LADDER",
                    "contributor": contributor,
                    "tokens": None,
                    "message": message,
                }
            ]
        },
    )


def compose(request: PlanRequest, *, assume_prepared: bool = False) -> Composition:
    """Measure a request and order its choices.

    Args:
        request: The request skeleton.
        assume_prepared: Treat unprepared summary rungs as available at their expected size
            (preview's second pass).

    Raises:
        ConfigurationError: For invalid configuration values.
        RequestCompositionError: `INVALID_COMPOSITION` for a malformed transcript or
            colliding contributor ids or tool names.
    """
    if request.model is None:  # pyright: ignore[reportUnnecessaryComparison]
        raise ConfigurationError("planning requires a model")
    _check_count("counted_input_tokens", request.counted_input_tokens)
    fmt = request.message_format or message_format(request.model.provider)
    flat = [
        flatten(contributor, order, fmt) for order, contributor in enumerate(request.contributors)
    ]
    policy = request.history_policy
    older = request.older_history
    columns = request.history_columns
    if columns is None:
        scan = scan_history(
            request.history,
            has_older=older.count > 0,
            request_id=request.request_id,
            prefix_items=older.prefix_items,
        )
    else:
        if request.history:
            raise ConfigurationError("pass history items or history columns, not both")
        scan = columns.scan(
            request.request_id, has_older=older.count > 0, prefix_items=older.prefix_items
        )
    projector = Projector(request.history, older, scan, fmt, has_ids=columns is None)
    history_span: Span | None = None
    managed: Managed | None = None
    warnings: tuple[HistoryWarning, ...] = ()
    ladders: list[Ladder] = []
    if isinstance(policy, RecentHistory):
        history_span, warnings = projector.recent(policy.messages, policy.tokens)
    elif not isinstance(policy, ManagedHistory):
        history_span = projector.full()

    measurement = request.measurement
    counted: int | None = None
    # An authoritative count is only meaningful for a request with nothing to choose, and
    # only when every message it must send is listed (a count cannot cover an aggregate).
    if (
        request.counted_input_tokens is not None
        and history_span is not None
        and not history_span.include_older
        and not any(ladder.elastic for ladder in flat)
    ):
        measurement = "exact"
        counted = request.counted_input_tokens
    budget = derive_budget(
        request.model,
        request.input_budget,
        output_reserve=request.output_reserve,
        measurement=measurement,
    )
    if isinstance(policy, ManagedHistory):
        built = managed_ladder(
            policy, projector, budget, (request.current_turn_messages, request.current_turn_tokens)
        )
        if built is None:
            history_span = projector.full()
        else:
            ladder, managed, warnings = built
            ladders.append(ladder)

    required: list[Ladder] = []
    seen: set[str] = {HISTORY_ID} if managed else set()
    tool_names: set[str] = set()
    source_seen: set[str] = set()
    for ladder in flat:
        if ladder.id in seen:
            raise _duplicate("two contributors share an id", request.request_id, ladder.id)
        seen.add(ladder.id)
        # Source ids name texts in storage, so one id must never mean two sources.
        ids = set(ladder.sources) | {ladder.id}
        if source_seen.intersection(ids) or len(set(ladder.sources)) != len(ladder.sources):
            raise _duplicate("two sources share an id", request.request_id, ladder.id)
        source_seen.update(ids)
        if tool_names.intersection(ladder.tools):
            raise _duplicate("two contributors own the same tool", request.request_id, ladder.id)
        tool_names.update(ladder.tools)
        (ladders if ladder.elastic else required).append(ladder)
    ladders.sort(key=lambda ladder: (-ladder.priority, ladder.order))

    # The system message's framing is counted whenever system content may be present; it
    # keeps sizes additive over contributors (an omitted block never makes it vanish).
    has_system = request.system_tokens > 0 or any(ladder.system for ladder in flat)
    turn_messages = request.current_turn_messages
    if turn_messages is None:
        turn_messages = 1 if request.current_turn_tokens else 0
    structure = fmt.reply_priming + (fmt.per_message if has_system else 0)
    structure += fmt.per_message * turn_messages
    content = 0
    if history_span is not None:
        structure += history_span.structure
        content = history_span.content
    # The tools preamble is counted whenever any tool may be declared, even if every owning
    # contributor ends up omitted: rounding up keeps sizes additive over contributors.
    has_tools = request.tool_schema_tokens > 0 or bool(tool_names)
    fixed: list[tuple[str, int]] = [
        ("system", request.system_tokens),
        ("messages", content),
        ("current-turn", request.current_turn_tokens),
        ("message-structure", structure),
        ("tools", request.tool_schema_tokens + (fmt.tools_preamble if has_tools else 0)),
        ("output-schema", request.output_schema_tokens),
    ]
    fixed.extend((f"context:{ladder.id}", ladder.rungs[0].tokens) for ladder in required)

    key = epoch_key(request)
    epoch = request.epoch if request.epoch is not None and request.epoch.key == key else None
    floors = tuple(epoch.floor(ladder.id) if epoch else 0 for ladder in ladders)
    options: list[tuple[Option, ...]] = []
    for ladder, floor in zip(ladders, floors, strict=True):
        lowest = max(floor, ladder.start)
        legal: list[Option] = []
        for index, rung in enumerate(ladder.rungs):
            if index < lowest:
                continue
            if rung.available:
                legal.append((index, rung.tokens))
            elif assume_prepared and rung.unprepared:
                legal.append((index, rung.expected))
        options.append(tuple(legal))
    return Composition(
        request=request,
        budget=budget,
        fmt=fmt,
        fixed=tuple(fixed),
        fixed_tokens=sum(tokens for _, tokens in fixed),
        required=tuple(required),
        ladders=tuple(ladders),
        options=tuple(options),
        floors=floors,
        epoch_key=key,
        projector=projector,
        policy=policy.kind,
        history_span=history_span,
        managed=managed,
        history_warnings=warnings,
        counted=counted,
    )
