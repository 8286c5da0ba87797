"""Agents, step hooks and overrides without a server: resolution and validation."""

from __future__ import annotations

import asyncio

import pytest

import crux
from contracts.generation import GenerationInput
from contracts.hooks import StepContext, StepOverrides, apply_overrides
from crux._request import CallBuilder
from crux.hooks import HookRegistry


def _agent(**fields: object) -> crux.Agent:
    tool = crux.tool("lookup", lambda arguments: "ok")
    base = crux.prompt(id="p", use=[tool], input_budget={"optimize_at": 100, "max": 200})
    return crux.agent(id="a", prompt=base, **fields)  # type: ignore[arg-type]


def test_agent_values_sit_between_the_call_and_the_prompt() -> None:
    extra = crux.tool("extra", lambda arguments: "ok")
    hook = crux.step_hook("h", lambda step: None)
    target = _agent(
        model="openai:gpt-4o-mini",
        input_budget={"max": 150},
        max_output_tokens=50,
        tools=[extra],
        tool_choice="required",
        prepare_step=hook,
        prepare_invocation="inv",
    )
    built = CallBuilder("offline:echo").build(target, {"input": "x"}).request
    assert built.model == "openai:gpt-4o-mini"
    assert built.input_budget is not None
    assert (built.input_budget.optimize_at, built.input_budget.max) == (100, 150)
    assert built.max_output_tokens == 50
    assert built.tools == ["extra", "lookup"]
    assert built.tool_choice == "required"
    assert (built.agent_id, built.prepare_step, built.prepare_invocation) == ("a", "h", "inv")
    called = (
        CallBuilder("offline:echo")
        .build(
            target,
            {
                "input": "x",
                "model": "openai:gpt-4o",
                "max_output_tokens": 10,
                "tool_choice": "none",
                "input_budget": {"optimize_at": 120},
            },
        )
        .request
    )
    assert called.model == "openai:gpt-4o"
    assert called.input_budget is not None
    assert (called.input_budget.optimize_at, called.input_budget.max) == (120, 150)
    assert (called.max_output_tokens, called.tool_choice) == (10, "none")
    # Without an agent nothing changes: the new fields stay unset and out of the payload.
    plain = CallBuilder("offline:echo").build(crux.prompt(id="p"), {"input": "x"}).request
    assert "agent_id" not in plain.start_payload()
    assert "prepare_step" not in plain.start_payload()


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "no-provider"},
        {"input_budget": {"optimize_at": 9, "max": 3}},
        {"max_output_tokens": 0},
        {"tools": ["not-a-tool"]},
        {"prepare_step": 3},
    ],
)
def test_invalid_agents_fail_typed(fields: dict[str, object]) -> None:
    with pytest.raises(crux.ConfigurationError):
        _agent(**fields)


def test_step_hook_as_decorator_and_registry() -> None:
    @crux.step_hook("pick")
    def pick(step: crux.StepContext) -> dict[str, object]:
        return {"tool_choice": "none"}

    assert isinstance(pick, crux.StepHook)
    registry = HookRegistry([pick])
    assert registry.get("pick") is pick
    assert registry.get("other") is None
    with pytest.raises(crux.ConfigurationError):
        HookRegistry([pick, pick])
    context = StepContext(hook="pick", reason="initial", step=1, generation_id="g", model="x:y")
    overrides = asyncio.run(pick.run(context))
    assert overrides == StepOverrides(tool_choice="none")
    # A hook cannot return anything outside the override type (no messages field).
    smuggler = crux.step_hook("smuggle", lambda step: {"messages": []})
    with pytest.raises(crux.ConfigurationError):
        asyncio.run(smuggler.run(context))


def test_overrides_apply_to_one_call_and_are_validated() -> None:
    request = GenerationInput(
        generation_id="g",
        model="openai:gpt-4o-mini",
        tools=["a", "b", "c"],
        input_budget={"optimize_at": 100, "max": 200},  # type: ignore[arg-type]
    )
    assert apply_overrides(request, None) is request
    step = apply_overrides(
        request,
        StepOverrides(
            model="openai:gpt-4o",
            active_tools=("c", "a"),
            input_budget={"max": 150},  # type: ignore[arg-type]
        ),
    )
    assert step.model == "openai:gpt-4o"
    assert step.tools == ["a", "c"]
    assert step.input_budget is not None
    assert (step.input_budget.optimize_at, step.input_budget.max) == (100, 150)
    assert request.model == "openai:gpt-4o-mini"  # the generation's own input is untouched
    for invalid in (
        StepOverrides(active_tools=("z",)),
        StepOverrides(model="missing-provider"),
        StepOverrides(input_budget={"max": 50}),  # type: ignore[arg-type]
    ):
        with pytest.raises(crux.ConfigurationError):
            apply_overrides(request, invalid)
    assert StepOverrides(model="x:y", tool_choice="auto").overridden() == ("model", "tool_choice")


def test_agent_settings_and_attempt_policy_sit_between_the_layers() -> None:
    base = crux.prompt(id="p", settings=crux.model_settings(temperature=0.1, top_p=0.5))
    target = crux.agent(
        id="a",
        prompt=base,
        settings={"temperature": 0.4, "seed": 3},
        attempt_policy={"max_attempts": 2},
    )
    built = CallBuilder("offline:echo").build(target, {"input": "x", "settings": {"seed": 9}})
    settings = built.request.settings
    assert settings is not None
    assert (settings.temperature, settings.top_p, settings.seed) == (0.4, 0.5, 9)
    assert built.request.attempt_policy is not None
    assert built.request.attempt_policy.max_attempts == 2
    with pytest.raises(crux.ConfigurationError):
        crux.agent(id="a", prompt=base, settings={"temperature": 9})


def test_a_settings_override_merges_over_the_generation_settings() -> None:
    request = GenerationInput(
        generation_id="g",
        model="openai:gpt-4o",
        settings={"temperature": 0.3, "seed": 1},  # type: ignore[arg-type]
    )
    step = apply_overrides(request, StepOverrides.model_validate({"settings": {"seed": 5}}))
    assert step.settings is not None
    assert (step.settings.temperature, step.settings.seed) == (0.3, 5)
    anthropic = request.model_copy(update={"model": "anthropic:claude-3-5-haiku-latest"})
    with pytest.raises(crux.ConfigurationError):
        apply_overrides(anthropic, StepOverrides.model_validate({"settings": {"temperature": 1.5}}))
