"""Content-free failure diagnostics for plans that cannot be composed."""

from __future__ import annotations

from typing import cast

from planner._compose import Composition
from planner.receipt import Diagnostic
from planner.summary_rung import HISTORY_ID
from vocabulary.errors import CompositionErrorCode, RequestCompositionError

REQUEST_REMEDIES: tuple[str, ...] = (
    "raise input_budget.max (up to the model capacity) or use a model with a larger window",
    "reduce the exact input (system text, history, tool schemas, output schema)",
    "reserve fewer output tokens",
    "authorise a lower representation with prefer(), summarizable(), offloadable() or droppable()",
)
"""Generic remedies listed with every `REQUEST_TOO_LARGE`."""

HISTORY_EXACT_REMEDY = (
    "exact history is required in full; use history.recent(...) or history(...) to let "
    "older turns be omitted or summarised"
)


def minimum_size(comp: Composition) -> int:
    """Return the smallest size any legal candidate can have."""
    return comp.fixed_tokens + sum(
        min((size for _, size in options), default=0) for options in comp.options
    )


def minimum_breakdown(comp: Composition) -> list[tuple[str, int]]:
    """Return the size classes of the smallest candidate, largest first."""
    entries = [(name, tokens) for name, tokens in comp.fixed if tokens > 0]
    for ladder, options in zip(comp.ladders, comp.options, strict=True):
        if options:
            smallest = min(size for _, size in options)
            name = HISTORY_ID if ladder.id == HISTORY_ID else f"context:{ladder.id}"
            if smallest > 0:
                entries.append((name, smallest))
    entries.sort(key=lambda entry: (-entry[1], entry[0]))
    return entries


def composition_error(
    comp: Composition,
    code: CompositionErrorCode,
    *,
    unavailable: tuple[str, ...] = (),
    required: int | None = None,
    preparations: tuple[dict[str, object], ...] = (),
) -> RequestCompositionError:
    """Build a `REQUEST_TOO_LARGE` or `REPRESENTATION_UNAVAILABLE` error.

    Args:
        comp: The composed request.
        code: Error code.
        unavailable: Contributors whose lower rung was unavailable or unprepared.
        required: Minimum required tokens (defaults to the smallest legal candidate).
        preparations: Work that would make a rung available (e.g. an inline summary).

    Returns:
        The error, with diagnostics in the documented order: `REQUEST_INPUT_LIMIT`, up to
        three `LARGEST_REQUIRED_CONTRIBUTOR`, `EXACT_REPRESENTATION_EXHAUSTED`,
        `REPRESENTATION_CAPABILITY_UNAVAILABLE` (per unavailable rung),
        `HISTORY_EXACT_REMEDY` (exact history only), `REQUEST_REMEDY`.
    """
    request_id = comp.request.request_id
    available = comp.budget.max
    needed = minimum_size(comp) if required is None else required
    largest = minimum_breakdown(comp)[:3]
    exhausted = [name for name, tokens in comp.fixed if tokens > 0] + [
        (HISTORY_ID if ladder.id == HISTORY_ID else f"context:{ladder.id}")
        for ladder, options in zip(comp.ladders, comp.options, strict=True)
        if options and options[-1][0] == len(ladder.rungs) - 1
    ]
    items: list[Diagnostic] = [
        Diagnostic(
            id=f"{request_id}:input-limit",
            code="REQUEST_INPUT_LIMIT",
            tokens=needed,
            message=f"the request needs at least {needed} input tokens; {available} are available",
        )
    ]
    items.extend(
        Diagnostic(
            id=f"{request_id}:largest-{rank}",
            code="LARGEST_REQUIRED_CONTRIBUTOR",
            contributor=name,
            tokens=tokens,
            message=f"{name} requires {tokens} tokens",
        )
        for rank, (name, tokens) in enumerate(largest, start=1)
    )
    items.append(
        Diagnostic(
            id=f"{request_id}:exhausted",
            code="EXACT_REPRESENTATION_EXHAUSTED",
            message="no lower authorised representation remains for: " + ", ".join(exhausted),
        )
    )
    items.extend(
        Diagnostic(
            id=f"{request_id}:unavailable-{name}",
            code="REPRESENTATION_CAPABILITY_UNAVAILABLE",
            contributor=name,
            message=f"a lower representation of {name} is not prepared or cannot be backed",
        )
        for name in unavailable
    )
    exact_history = comp.policy == "exact" and (
        comp.projector.listed or comp.request.older_history.count
    )
    if exact_history:
        items.append(
            Diagnostic(
                id=f"{request_id}:history-remedy",
                code="HISTORY_EXACT_REMEDY",
                contributor=HISTORY_ID,
                message=HISTORY_EXACT_REMEDY,
            )
        )
    remedies = ((HISTORY_EXACT_REMEDY,) if exact_history else ()) + REQUEST_REMEDIES
    items.append(
        Diagnostic(
            id=f"{request_id}:remedy",
            code="REQUEST_REMEDY",
            message="; ".join(REQUEST_REMEDIES),
        )
    )
    classes = ", ".join(name for name, _ in largest) or "none"
    message = (
        f"{comp.request.model.id} accepts {available} input tokens; the request needs at least "
        f"{needed} (largest: {classes})"
    )
    return RequestCompositionError(
        code,
        message,
        request_id=request_id,
        diagnostics={
            "model": comp.request.model.id,
            "required_tokens": needed,
            "available_tokens": available,
            "largest_required": [{"name": name, "tokens": tokens} for name, tokens in largest],
            "exhausted": exhausted,
            "unavailable": list(unavailable),
            "remedies": list(remedies),
            "preparations": list(preparations),
            "items": [item.model_dump() for item in items],
        },
    )


def diagnostic_items(error: RequestCompositionError) -> tuple[Diagnostic, ...]:
    """Return the typed diagnostics carried by a composition error."""
    raw = error.diagnostics.get("items")
    if not isinstance(raw, list):
        return ()
    return tuple(Diagnostic.model_validate(item) for item in cast("list[object]", raw))
