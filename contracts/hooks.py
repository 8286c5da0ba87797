"""Step hooks across Temporal: the content-free step context, the overrides, the activity.

A generation that names a `prepare_step` hook runs it (as the `crux.prepare_step` activity,
on the worker where the hook is registered) before each provider call; one that names a
`prepare_invocation` hook runs that once, before its first plan. The hook sees ids, names
and figures only, never messages, and may return `StepOverrides` for that call. Overrides
have no field that could replace canonical messages or skip validation, and
`apply_overrides` validates them as strictly as the workflow input itself.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError

from contracts._compact import CompactWireModel
from contracts.generation import GenerationInput, InputBudgetSpec, Usage
from contracts.settings import ModelSettingsSpec, merge_settings
from planner import ModelProfile
from vocabulary.commits import WireModel
from vocabulary.errors import ConfigurationError
from vocabulary.ids import MAX_TOKENS

StepReason = Literal[
    "initial",
    "tool-round",
    "validation-retry",
    "safety-retry",
    "constraint-retry",
    "overflow-recovery",
    "invocation",
]
"""Why a provider call is made: the first one, after a tool round, after a reply that failed
validation, after a reply the acceptance gate refused (output safety, constraints), after
the provider's overflow rejection; `invocation` for `prepare_invocation`."""

HookKind = Literal["step", "invocation"]

ACTIVITY_PREPARE_STEP = "crux.prepare_step"


class StepContext(WireModel):
    """What a hook learns about the next provider call (content-free).

    Attributes:
        hook: The hook's registered name.
        reason: Why the call is made (`initial`, `tool-round`, `validation-retry`,
            `safety-retry`, `constraint-retry`, `overflow-recovery`; `invocation` for a
            `prepare_invocation` hook).
        step: The provider call's number within the generation (1-based).
        generation_id: The generation's id.
        thread_id: Its Thread, when managed.
        agent_id: The agent the generation runs, if any.
        model: The model the call would use without overrides.
        usage: Usage the provider reported over the calls so far.
        tools_called: Names of the registered tools the model called so far, in order.
        tools: The tools offered to the model.
        tool_choice: The tool choice without overrides.
        max_output_tokens: The output reserve without overrides.
        input_budget: The input budget without overrides.
    """

    hook: str
    reason: StepReason
    step: int = Field(ge=1)
    generation_id: str
    thread_id: str | None = None
    agent_id: str | None = None
    model: str
    usage: Usage = Usage()
    tools_called: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    tool_choice: Literal["auto", "required", "none"] | None = None
    max_output_tokens: int | None = None
    input_budget: InputBudgetSpec | None = None


class StepOverrides(WireModel):
    """What a hook may change for one provider call; unset fields keep their values.

    There is deliberately no field for messages, history or output validation: a hook
    adapts the call, never the canonical transcript or the checks on the reply.

    Attributes:
        model: Another `provider:model` for this call (a new planning epoch).
        tool_choice: `auto`, `required` or `none`.
        active_tools: The subset of the offered tools to offer on this call.
        max_output_tokens: The output reserve of this call.
        input_budget: The input budget of this call, merged field by field over the
            generation's (a new planning epoch).
        settings: Model settings of this call (temperature, top_p, seed, ...), merged
            field by field over the generation's.
    """

    model: str | None = None
    tool_choice: Literal["auto", "required", "none"] | None = None
    active_tools: tuple[str, ...] | None = None
    max_output_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS, strict=True)
    input_budget: InputBudgetSpec | None = None
    settings: ModelSettingsSpec | None = None

    def overridden(self) -> tuple[str, ...]:
        """Names of the fields this override sets, in declaration order."""
        return tuple(name for name in type(self).model_fields if getattr(self, name) is not None)


class PrepareStepInput(CompactWireModel):
    """Run a registered hook before a provider call (ids and figures only)."""

    kind: HookKind = "step"
    context: StepContext
    turn_messages: int = 0
    """Tool-round messages of the turn staged so far (the hook activity reads the names of
    the tools called from them, never their arguments)."""


class PrepareStepResult(CompactWireModel):
    """The hook's decision, validated: overrides (or none) and the new model's profile."""

    overrides: StepOverrides | None = None
    profile: ModelProfile | None = None
    """The worker catalog's profile of an overriding model, to plan the call with."""


def apply_overrides(request: GenerationInput, overrides: StepOverrides | None) -> GenerationInput:
    """`request` as one provider call sees it once `overrides` apply.

    Validated like a workflow input: an unknown tool, an invalid budget or model id fail
    here, typed, before anything is planned or sent.

    Raises:
        ConfigurationError: An override is invalid (content-free: names the field).
    """
    if overrides is None:
        return request
    update: dict[str, Any] = {}
    if overrides.model is not None:
        update["model"] = overrides.model
    if overrides.tool_choice is not None:
        update["tool_choice"] = overrides.tool_choice
    if overrides.active_tools is not None:
        offered = set(request.tools)
        if any(name not in offered for name in overrides.active_tools):
            raise ConfigurationError("prepare_step: active_tools names a tool not offered")
        # The declared order stays; duplicates are dropped.
        update["tools"] = [name for name in request.tools if name in overrides.active_tools]
    if overrides.max_output_tokens is not None:
        update["max_output_tokens"] = overrides.max_output_tokens
    if overrides.input_budget is not None:
        base = request.input_budget or InputBudgetSpec()
        budget = overrides.input_budget
        update["input_budget"] = {
            "optimize_at": budget.optimize_at
            if budget.optimize_at is not None
            else base.optimize_at,
            "max": budget.max if budget.max is not None else base.max,
        }
    if overrides.settings is not None:
        merged = merge_settings(request.settings, overrides.settings)
        update["settings"] = None if merged is None else merged.model_dump(mode="json")
    if not update:
        return request
    try:
        return GenerationInput.model_validate({**request.model_dump(mode="json"), **update})
    except (ValidationError, ConfigurationError) as error:
        fields = sorted(update)
        raise ConfigurationError(
            f"prepare_step: invalid override of {', '.join(fields)} ({type(error).__name__})"
        ) from None
