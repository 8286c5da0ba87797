"""One builder behind `generate`, `stream`, `preview` and `parallel`: a call, validated once.

`CallBuilder.build` turns a target (prompt, agent or string) and the call's options (the
typed dicts of `crux.options`) into a `BuiltCall`: the ids-only `GenerationInput`, the
rendered turn, the message array that shadows the Thread. Values resolve field by field:
the call's over the agent's over the prompt's, and over the runtime's defaults the builder
was made with. Options left out take `GenerationInput`'s own defaults.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError

from activities.rendering import render_turn
from contracts.approvals import DEFAULT_APPROVAL_TIMEOUT_SECONDS
from contracts.cache import as_cache
from contracts.decoding import invalid_input
from contracts.generation import GenerationInput
from contracts.settings import (
    AttemptPolicySpec,
    as_attempt_policy,
    as_settings,
    merge_attempt_policy,
    merge_settings,
)
from crux._budget import merge_budget
from crux._staging import BuiltCall
from crux.agents import Agent, agent_prompt
from crux.constraints import as_constraints
from crux.hooks import success_hook_names
from crux.options import CallOptions
from crux.output import Output, as_output
from crux.prompts import Prompt, normalise_messages
from crux.prompts import prompt as define_prompt
from crux.safety import as_safety
from crux.tools import Tool
from planner import ModelCatalog
from providers.models import check_model
from storage import check_storable
from vocabulary.errors import ConfigurationError
from vocabulary.ids import (
    MAX_GENERATION_ID_LENGTH,
    MAX_SCOPE_ID_LENGTH,
    check_wire_id,
    generation_key,
)
from vocabulary.messages import Message

WIRE_DEFAULTED = (
    "owner",
    "max_tool_rounds",
    "on_revision_moved",
    "storage_wait_seconds",
    "time_budget_seconds",
)
"""Options passed to `GenerationInput` only when given: their defaults are the input's."""

_T = TypeVar("_T")


class CallBuilder:
    """Builds the calls of one runtime, with its defaults.

    Args:
        default_model: The model of a call, agent and prompt that name none.
        attempt_policy: The runtime's attempt policy (under the agent's and the call's).
        approval_timeout: The runtime's approval timeout (a call may set its own).
        catalog: The models a call may name beyond the providers' own (its offline
            profiles); the default catalog when omitted.
    """

    def __init__(
        self,
        default_model: str,
        *,
        attempt_policy: AttemptPolicySpec | None = None,
        approval_timeout: int | None = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
        catalog: ModelCatalog | None = None,
    ) -> None:
        self._default_model = default_model
        self._attempt_policy = attempt_policy
        self._approval_timeout = approval_timeout
        self._catalog = catalog

    def build(
        self, target: Prompt | Agent | str, options: CallOptions, *, stream: bool = False
    ) -> BuiltCall:
        """Validate a call into the workflow input and the turn to stage.

        Model settings merge field by field: the call's over the agent's over the
        prompt's. The attempt policy likewise: the call's over the agent's over the
        runtime's.

        Raises:
            ConfigurationError: An invalid option (content-free: names the fields), or a
                model no provider serves (the message lists the known ones).
            ThreadError: `invalid_message` for text PostgreSQL cannot store.
        """
        # An agent resolves to its prompt with the agent's values laid over the prompt's;
        # the call's own values are laid over both below (call > agent > prompt).
        agent = target if isinstance(target, Agent) else None
        prompt = _as_prompt(agent_prompt(target) if isinstance(target, Agent) else target)
        thread_id = _thread_id(options.get("thread")) or prompt.thread_id
        generation_id = options.get("generation_id")
        if generation_id is None:
            generation_id = f"gen_{uuid.uuid4().hex}"
        check_wire_id(generation_id, "generation_id", limit=MAX_GENERATION_ID_LENGTH)
        if thread_id is not None:
            check_wire_id(thread_id, "thread_id", limit=MAX_SCOPE_ID_LENGTH)
        key = generation_key(generation_id, thread_id)
        # Structured output: the call's, else the agent's, else the prompt's (never merged).
        output = (
            as_output(options.get("output"))
            or (agent.output if agent is not None else None)
            or prompt.output
        )
        # The cache: the call's, else the agent's (laid over the prompt's by `agent_prompt`).
        call_cache = as_cache(options.get("cache"))
        cache = call_cache if call_cache is not None else prompt.cache
        # The gate likewise: the call's safety, constraints and success hooks, else the
        # agent's, else the prompt's (never merged: a list is the complete list).
        safety = _first(
            as_safety(options.get("safety")),
            agent.safety if agent is not None else None,
            prompt.safety,
        )
        checks = _first(
            as_constraints(options.get("constraints")),
            agent.constraints if agent is not None else None,
            prompt.constraints,
        )
        on_success = _first(
            success_hook_names(options.get("on_success")),
            agent.on_success if agent is not None else None,
            prompt.on_success,
        )
        messages = options.get("messages")
        approval_timeout = options.get("approval_timeout_seconds")
        model = (
            options.get("model") or (agent.model if agent is not None else None)
        ) or self._default_model
        if isinstance(model, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            # Refused here, before anything is staged or started, naming the known models.
            check_model(model, self._catalog)
        request = validated_input(
            generation_id=generation_id,
            thread_id=thread_id,
            model=model,
            prompt_id=prompt.id,
            input_ref=key,
            # Call-site messages shadow prompt-level messages, which shadow the Thread.
            messages_ref=key if messages is not None or prompt.messages is not None else None,
            history=options.get("history") or prompt.history,
            input_budget=merge_budget(prompt.input_budget, options.get("input_budget")),
            max_output_tokens=_call_or(
                options.get("max_output_tokens"), agent.max_output_tokens if agent else None
            ),
            contributors=[c.spec for c in prompt.contexts],
            tools=[t.name for t in prompt.tools],
            tool_choice=_call_or(options.get("tool_choice"), agent.tool_choice if agent else None),
            stream=stream,
            **{name: value for name, value in options.items() if name in WIRE_DEFAULTED},
            **agent_fields(agent),
            settings=merge_settings(
                prompt.settings,
                agent.settings if agent is not None else None,
                as_settings(options.get("settings")),
            ),
            attempt_policy=merge_attempt_policy(
                self._attempt_policy,
                agent.attempt_policy if agent is not None else None,
                as_attempt_policy(options.get("attempt_policy")),
            ),
            tool_policies={t.name: t.policy for t in prompt.tools if t.policy is not None},
            **approval_fields(
                prompt.tools,
                self._approval_timeout if approval_timeout is None else approval_timeout,
            ),
            output=output.spec if output is not None else None,
            # A disabled spec is the same as none: nothing to carry into history.
            cache=cache if cache is not None and cache.enabled else None,
            safety=safety,
            constraints=checks,
            on_success=list(on_success or ()),
        )
        return _rendered(prompt, request, options.get("input"), messages, output=output)


def check_keywords(options: Mapping[str, object], accepted: frozenset[str], method: str) -> None:
    """Refuse a keyword the method does not take, as Python would for a spelled-out one.

    Type checkers catch a misspelt option through the typed dicts; this catches it at run
    time too, instead of ignoring it.

    Raises:
        ConfigurationError: (a `TypeError`) naming the first unknown keyword.
    """
    for name in options:
        if name not in accepted:
            named = repr(name) if name.isidentifier() and len(name) <= 64 else "(not a name)"
            raise ConfigurationError(f"{method}() got an unexpected keyword argument {named}")


def _as_prompt(target: Prompt | str) -> Prompt:
    if isinstance(target, str):
        text = target
        return define_prompt(id="crux.inline", prompt=lambda _input: text)
    if not isinstance(target, Prompt):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("prompt must be a crux.prompt(...), a crux.agent(...) or a string")
    return target


def _first(*values: _T | None) -> _T | None:
    """The first value that is set (the call's, the agent's, then the prompt's)."""
    return next((value for value in values if value is not None), None)


def _call_or(call: _T | None, agent: _T | None) -> _T | None:
    """The call's value if it sets one, else the agent's (`None` without an agent)."""
    return call if call is not None else agent


def _rendered(
    prompt: Prompt,
    request: GenerationInput,
    value: Any,
    messages: Sequence[Message | Mapping[str, Any]] | None,
    *,
    output: Output | None,
) -> BuiltCall:
    """Render the turn and check every text PostgreSQL must store, before any I/O."""
    turn = render_turn(
        prompt,
        value,
        request.generation_id,
        contexts={
            source_id: text
            for contributor in prompt.contexts
            for source_id, text in contributor.texts.items()
        },
    )
    caller = None if messages is None else list(normalise_messages(messages))
    declared = list(prompt.messages) if caller is None and prompt.messages is not None else None
    for _, message in turn.staged():
        check_storable(message, thread_id=request.thread_id)
    for message in [*(caller or ()), *(declared or ())]:
        check_storable(message, thread_id=request.thread_id)
    return BuiltCall(
        prompt=prompt, request=request, turn=turn, caller=caller, declared=declared, output=output
    )


def approval_fields(tools: Sequence[Tool], timeout: int | None) -> dict[str, Any]:
    """The approval fields of the input: set only when a tool requires approval."""
    names = [t.name for t in tools if t.requires_approval]
    if not names:
        return {}
    return {"approval_tools": names, "approval_timeout_seconds": timeout}


def agent_fields(agent: Agent | None) -> dict[str, Any]:
    """The workflow input fields an agent sets beyond the prompt's (none without one)."""
    if agent is None:
        return {}
    return {
        "agent_id": agent.id,
        "prepare_step": agent.prepare_step,
        "prepare_invocation": agent.prepare_invocation,
    }


def _thread_id(thread: object | None) -> str | None:
    if thread is None:
        return None
    if isinstance(thread, str):
        return thread
    identifier = getattr(thread, "id", None)
    if isinstance(identifier, str):
        return identifier
    raise ConfigurationError("thread must be a Thread handle or an id")


def validated_input(**fields: Any) -> GenerationInput:
    """Build a `GenerationInput`, raising a content-free `ConfigurationError` if invalid.

    Raises:
        ConfigurationError: Names the invalid fields and the kind of each defect.
    """
    try:
        return GenerationInput(**fields)
    except ValidationError as error:
        raise invalid_input("generation request", error) from None
