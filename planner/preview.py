"""`preview()`: prospective fit of a request, without side effects.

Preview never prepares artifacts, calls a provider, runs tools or writes anything; here it is
simply a pure function of the request skeleton. It answers one of:

- `fits`: a candidate using only ready representations fits, and no runtime-only source is
  involved;
- `unknown`: only an unprepared summary (or a runtime-only tool source) could make it fit;
  measurement is then `incomplete`;
- `over-limit`: nothing can fit; returned, never raised, with the minimum prospective size.
"""

from __future__ import annotations

from typing import Literal

from planner._base import Confidence, FrozenModel
from planner._compose import compose
from planner.diagnostics import composition_error, diagnostic_items, minimum_size
from planner.receipt import Adaptation, Diagnostic, ReceiptWarning
from planner.request import PlanRequest
from planner.seal import plan
from planner.select import select_two_tier
from vocabulary.errors import ConfigurationError, RequestCompositionError

PreviewStatus = Literal["fits", "unknown", "over-limit"]


class PreviewAdaptation(Adaptation):
    """An adaptation a preview expects.

    Attributes:
        state: `selected` when the representation is ready, `unprepared` when it would have
            to be prepared first.
    """

    state: Literal["selected", "unprepared"] = "selected"


class Preview(FrozenModel):
    """The prospective fit of one request.

    Attributes:
        status: `fits`, `unknown` or `over-limit`.
        model: Model id.
        input_tokens: Prospective size (the minimum candidate's size when over the limit).
        max_input_tokens: Effective strict max.
        measurement: Counting confidence, or `incomplete` when the status is `unknown`.
        adaptations: Expected adaptations.
        warnings: Content-free warnings.
        diagnostics: Content-free diagnostics.
    """

    status: PreviewStatus
    model: str
    input_tokens: int | None = None
    max_input_tokens: int
    measurement: Confidence | Literal["incomplete"]
    adaptations: tuple[PreviewAdaptation, ...] = ()
    warnings: tuple[ReceiptWarning, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()


def _runtime_diagnostics(request: PlanRequest) -> list[Diagnostic]:
    return [
        Diagnostic(
            id=f"{request.request_id}:runtime-source-{index}",
            code="PREVIEW_RUNTIME_SOURCE",
            contributor=source,
            message=f"tool source {source} is only known at run time",
        )
        for index, source in enumerate(request.runtime_sources)
    ]


def preview(request: PlanRequest) -> Preview:
    """Return the prospective fit of `request` without any side effect.

    Args:
        request: The content-free request skeleton.

    Returns:
        The preview; `over-limit` is returned, not raised.

    Raises:
        ConfigurationError: When the request has no model or invalid configuration.
        RequestCompositionError: `INVALID_COMPOSITION` for malformed input.
    """
    if not isinstance(request, PlanRequest) or request.model is None:  # pyright: ignore[reportUnnecessaryIsInstance, reportUnnecessaryComparison]
        raise ConfigurationError("preview requires a model")
    try:
        sealed = plan(request)
    except RequestCompositionError as error:
        if error.code == "INVALID_COMPOSITION":
            raise
    else:
        # Preview schedules nothing, so it does not claim maintenance was scheduled.
        warnings = tuple(
            w for w in sealed.receipt.warnings if w.code != "HISTORY_MAINTENANCE_SCHEDULED"
        )
        ready = tuple(
            PreviewAdaptation(**adaptation.model_dump())
            for adaptation in sealed.receipt.adaptations
        )
        if not request.runtime_sources:
            return Preview(
                status="fits",
                model=request.model.id,
                input_tokens=sealed.input_tokens,
                max_input_tokens=sealed.budget.max,
                measurement=sealed.receipt.measurement,
                adaptations=ready,
                warnings=warnings,
            )
        return Preview(
            status="unknown",
            model=request.model.id,
            input_tokens=sealed.input_tokens,
            max_input_tokens=sealed.budget.max,
            measurement="incomplete",
            adaptations=ready,
            warnings=warnings,
            diagnostics=tuple(_runtime_diagnostics(request)),
        )

    comp = compose(request, assume_prepared=True)
    budget = comp.budget
    found = None
    if all(comp.options):
        found = select_two_tier(comp.options, comp.fixed_tokens, budget.optimize_at, budget.max)
    if found is not None or request.runtime_sources:
        adaptations: list[PreviewAdaptation] = []
        diagnostics = _runtime_diagnostics(request)
        total = found[0].tokens if found else None
        if found is not None:
            full_total = comp.full_tokens
            for position, (ladder, index) in enumerate(
                zip(comp.ladders, found[0].rungs, strict=True)
            ):
                rung = ladder.rungs[index]
                if rung.kind == "full":
                    continue
                pending = not rung.available
                adaptations.append(
                    PreviewAdaptation(
                        contributor=ladder.id,
                        representation=rung.kind,
                        source=rung.source,
                        full_tokens=full_total,
                        selected_tokens=found[0].tokens,
                        contributor_full_tokens=ladder.rungs[0].tokens,
                        contributor_selected_tokens=comp.rung_size(position, index),
                        state="unprepared" if pending else "selected",
                    )
                )
                if pending:
                    diagnostics.append(
                        Diagnostic(
                            id=f"{request.request_id}:unprepared-{ladder.id}",
                            code="REPRESENTATION_CAPABILITY_UNAVAILABLE",
                            contributor=ladder.id,
                            message=f"the {rung.kind} of {ladder.id} is not prepared yet",
                        )
                    )
        return Preview(
            status="unknown",
            model=request.model.id,
            input_tokens=total,
            max_input_tokens=budget.max,
            measurement="incomplete",
            adaptations=tuple(adaptations),
            diagnostics=tuple(diagnostics),
        )

    smallest = minimum_size(comp)
    error = composition_error(comp, "REQUEST_TOO_LARGE", required=smallest)
    items = diagnostic_items(error)
    return Preview(
        status="over-limit",
        model=request.model.id,
        input_tokens=smallest,
        max_input_tokens=budget.max,
        measurement=budget.measurement,
        diagnostics=items,
    )
