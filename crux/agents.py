"""Agents: a prompt with defaults, accepted wherever a prompt is.

`crux.agent(id=..., prompt=..., model=..., ...)` wraps a prompt with the configuration a
definition owns. Every public call (`generate`, `stream`, `preview`, `parallel`) resolves
its target through the same call builder, field by field: what the call sets wins over the
agent, and the agent over the prompt. Input budgets merge per field (`optimize_at`, `max`);
the agent's tools are offered beside the prompt's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from contracts.cache import CacheSpec, as_cache
from contracts.gate import ConstraintsSpec, SafetySpec
from contracts.generation import HistorySpec, InputBudgetSpec
from contracts.settings import (
    AttemptPolicySpec,
    ModelSettingsSpec,
    as_attempt_policy,
    as_settings,
)
from crux._budget import merge_budget
from crux.constraints import as_constraints
from crux.context import check_id
from crux.hooks import StepHook, SuccessHook, hook_name, success_hook_names
from crux.output import Output, as_output
from crux.prompts import Prompt
from crux.safety import as_safety
from crux.tools import Tool
from vocabulary.errors import ConfigurationError
from vocabulary.ids import MAX_TOKENS, check_model_id


@dataclass(frozen=True)
class Agent:
    """A prompt with definition-level defaults.

    Attributes:
        id: Stable agent id (recorded on every receipt of its runs).
        prompt: The prompt it runs.
        model: Its model (`provider:model`), unless the call names one.
        input_budget: Its input budget, merged per field over the prompt's.
        max_output_tokens: Its output reserve.
        history: Its request-history policy (over the prompt's).
        tools: Tools offered beside the prompt's (same name: the agent's wins).
        tool_choice: Its tool choice.
        prepare_step: Name of the worker hook run before each provider call.
        prepare_invocation: Name of the worker hook run once per composition child.
        output: Structured output definition (a pydantic model or a JSON schema).
        settings: Model settings (temperature, top_p, stop, seed, provider extras),
            merged per field between the prompt's and the call's.
        attempt_policy: Provider attempt retry/timeout, merged per field between the
            runtime's and the call's.
        cache: The response cache (over the prompt's; a call's replaces it).
        safety: Safety policies (over the prompt's; the call's win).
        constraints: Constraints on the reply (over the prompt's; the call's win).
        on_success: Success hook names (over the prompt's; the call's win).
    """

    id: str
    prompt: Prompt
    model: str | None = None
    input_budget: InputBudgetSpec | None = None
    max_output_tokens: int | None = None
    history: HistorySpec | None = None
    tools: tuple[Tool, ...] = ()
    tool_choice: Literal["auto", "required", "none"] | None = None
    prepare_step: str | None = None
    prepare_invocation: str | None = None
    output: Output | None = None
    settings: ModelSettingsSpec | None = None
    attempt_policy: AttemptPolicySpec | None = None
    cache: CacheSpec | None = None
    safety: SafetySpec | None = None
    constraints: ConstraintsSpec | None = None
    on_success: tuple[str, ...] | None = None


def agent(
    *,
    id: str,
    prompt: Prompt,
    model: str | None = None,
    input_budget: Mapping[str, int] | InputBudgetSpec | None = None,
    max_output_tokens: int | None = None,
    history: HistorySpec | None = None,
    tools: Sequence[Tool] = (),
    tool_choice: Literal["auto", "required", "none"] | None = None,
    prepare_step: StepHook | str | None = None,
    prepare_invocation: StepHook | str | None = None,
    output: Any = None,
    settings: ModelSettingsSpec | Mapping[str, Any] | None = None,
    attempt_policy: AttemptPolicySpec | Mapping[str, Any] | None = None,
    cache: CacheSpec | Mapping[str, Any] | bool | None = None,
    safety: SafetySpec | Sequence[object] | None = None,
    constraints: ConstraintsSpec | Sequence[object] | None = None,
    on_success: Sequence[SuccessHook | str] | None = None,
) -> Agent:
    """Define an agent: a prompt with defaults, usable wherever a prompt is.

    Args:
        id: Stable agent id.
        prompt: A `crux.prompt(...)`.
        model: Default model (`provider:model`).
        input_budget: `{"optimize_at": ..., "max": ...}`, merged per field over the prompt's.
        max_output_tokens: Default output reserve.
        history: Default request-history policy.
        tools: Tools offered beside the prompt's (their handlers run on the worker).
        tool_choice: Default tool choice.
        prepare_step: A `crux.step_hook(...)` (or its name) registered on the worker.
        prepare_invocation: Likewise, run once per composition child.
        output: Structured output: a pydantic model or a JSON schema.
        settings: Model settings (`crux.model_settings(...)` or a mapping).
        attempt_policy: Provider attempt retry/timeout (`crux.attempt_policy(...)` or a
            mapping).
        cache: The response cache (`crux.cache(...)`, a mapping, `True` or `False`);
            replaces the prompt's, and a call's replaces it.
        safety: Safety policies (`crux.safety(...)`, or a list of input policies).
        constraints: Constraints on the reply (`crux.constraints(...)` or a list).
        on_success: Success hooks (or their names) run after each committed turn.

    Raises:
        ConfigurationError: An invalid id, prompt, model id, budget or tool list.
    """
    check_id(id, "agent id")
    if not isinstance(prompt, Prompt):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("an agent's prompt must be a crux.prompt(...)")
    if model is not None:
        try:
            check_model_id(model)
        except ValueError:
            raise ConfigurationError("agent model must be a 'provider:model' id") from None
    if max_output_tokens is not None and (
        isinstance(max_output_tokens, bool)
        or not isinstance(max_output_tokens, int)  # pyright: ignore[reportUnnecessaryIsInstance]
        or not 1 <= max_output_tokens <= MAX_TOKENS
    ):
        raise ConfigurationError("agent max_output_tokens must be a positive integer")
    if any(not isinstance(t, Tool) for t in tools):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("agent tools must be crux.tool(...) definitions")
    if history is not None and not isinstance(history, HistorySpec):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("agent history must be a crux.history(...) policy")
    return Agent(
        id=id,
        prompt=prompt,
        model=model,
        input_budget=merge_budget(None, input_budget),
        max_output_tokens=max_output_tokens,
        history=history,
        tools=tuple(tools),
        tool_choice=tool_choice,
        prepare_step=hook_name(prepare_step),
        prepare_invocation=hook_name(prepare_invocation),
        output=as_output(output),
        settings=as_settings(settings),
        attempt_policy=as_attempt_policy(attempt_policy),
        cache=as_cache(cache),
        safety=as_safety(safety),
        constraints=as_constraints(constraints),
        on_success=success_hook_names(on_success),
    )


def agent_prompt(target: Agent) -> Prompt:
    """The agent's prompt with the agent's definition-level values over the prompt's.

    Budget (per field), history and tools (merged by name, the agent's first) resolve
    here; the call's own values are laid over the result by the call builder.
    """
    prompt = target.prompt
    agent_tools = {t.name for t in target.tools}
    return replace(
        prompt,
        input_budget=merge_budget(prompt.input_budget, target.input_budget),
        history=target.history if target.history is not None else prompt.history,
        tools=(*target.tools, *(t for t in prompt.tools if t.name not in agent_tools)),
        cache=target.cache if target.cache is not None else prompt.cache,
    )
