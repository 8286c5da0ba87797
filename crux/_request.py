"""One builder behind `Runtime.generate`, `stream` and `preview`: the call options, built once.

`CallOptions` holds the arguments of a public call exactly as the caller gave them; `build`
validates them into a `BuiltCall` (the ids-only `GenerationInput`, the rendered turn, the
message array that shadows the Thread); `stage_call` records its identity and stages its
texts. Every public call goes through here, so the parameter list is spelled once.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from activities.rendering import RenderedTurn, render_turn
from contracts.approvals import DEFAULT_APPROVAL_TIMEOUT_SECONDS
from contracts.generation import (
    DEFAULT_MAX_TOOL_ROUNDS,
    DEFAULT_STORAGE_WAIT_SECONDS,
    GenerationInput,
    HistorySpec,
    InputBudgetSpec,
    request_fingerprint,
)
from contracts.settings import (
    AttemptPolicySpec,
    ModelSettingsSpec,
    as_attempt_policy,
    as_settings,
    merge_attempt_policy,
    merge_settings,
)
from crux.agents import Agent, agent_prompt
from crux.output import Output, as_output
from crux.prompts import Prompt, normalise_messages
from crux.prompts import prompt as define_prompt
from crux.tools import Tool
from storage import GenerationStore
from storage.threads._validate import check_storable
from vocabulary.errors import ConfigurationError, ThreadError
from vocabulary.ids import (
    MAX_GENERATION_ID_LENGTH,
    MAX_SCOPE_ID_LENGTH,
    check_wire_id,
    generation_key,
)
from vocabulary.messages import Message
from vocabulary.staging import StagingKind
from workflows._decode import invalid_input


@dataclass(frozen=True)
class CallOptions:
    """The arguments of one public call (`generate`, `stream`, `preview`), as given.

    Field names and defaults are those of `Runtime.generate` (a test keeps them equal);
    see it for their meaning.
    """

    prompt: Prompt | Agent | str
    input: Any = None
    thread: object | None = None
    model: str | None = None
    messages: Sequence[Message | Mapping[str, Any]] | None = None
    generation_id: str | None = None
    history: HistorySpec | None = None
    input_budget: Mapping[str, int] | InputBudgetSpec | None = None
    max_output_tokens: int | None = None
    owner: str = "main"
    tool_choice: Literal["auto", "required", "none"] | None = None
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS
    on_revision_moved: Literal["replan", "fail"] = "replan"
    storage_wait_seconds: int = DEFAULT_STORAGE_WAIT_SECONDS
    settings: ModelSettingsSpec | Mapping[str, Any] | None = None
    attempt_policy: AttemptPolicySpec | Mapping[str, Any] | None = None
    approval_timeout_seconds: int | None = None
    output: Output | type[BaseModel] | Mapping[str, Any] | None = None

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> CallOptions:
        """The options of a public method's arguments (its `locals()`; `self` is ignored)."""
        names = {option.name for option in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in arguments.items() if name in names})

    def build(
        self,
        default_model: str,
        *,
        stream: bool = False,
        default_attempt_policy: AttemptPolicySpec | None = None,
        agent_settings: ModelSettingsSpec | None = None,
        agent_attempt_policy: AttemptPolicySpec | None = None,
        default_approval_timeout: int | None = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    ) -> BuiltCall:
        """Validate the options into the workflow input and the turn to stage.

        Model settings merge field by field: the call's over the agent's over the
        prompt's. The attempt policy likewise: the call's over the agent's over the
        runtime's `default_attempt_policy`.

        Raises:
            ConfigurationError: An invalid option (content-free: names the fields).
            ThreadError: `invalid_message` for text PostgreSQL cannot store.
        """
        target = self.prompt
        # An agent resolves to its prompt with the agent's values laid over the prompt's;
        # the call's own values are laid over both below (call > agent > prompt).
        defaults = target if isinstance(target, Agent) else None
        prompt = agent_prompt(defaults) if defaults is not None else target
        if defaults is not None:
            agent_settings = defaults.settings or agent_settings
            agent_attempt_policy = defaults.attempt_policy or agent_attempt_policy
        if isinstance(prompt, str):
            text = prompt
            prompt = define_prompt(id="crux.inline", prompt=lambda _input: text)
        if not isinstance(prompt, Prompt):
            raise ConfigurationError(
                "prompt must be a crux.prompt(...), a crux.agent(...) or a string"
            )
        thread_id = _thread_id(self.thread) or prompt.thread_id
        generation_id = (
            f"gen_{uuid.uuid4().hex}" if self.generation_id is None else self.generation_id
        )
        check_wire_id(generation_id, "generation_id", limit=MAX_GENERATION_ID_LENGTH)
        if thread_id is not None:
            check_wire_id(thread_id, "thread_id", limit=MAX_SCOPE_ID_LENGTH)
        key = generation_key(generation_id, thread_id)
        # Structured output: the call's, else the agent's, else the prompt's (never merged).
        chosen_output = (
            as_output(self.output)
            or (defaults.output if defaults is not None else None)
            or prompt.output
        )
        shadowed = self.messages is not None or prompt.messages is not None
        request = validated_input(
            generation_id=generation_id,
            thread_id=thread_id,
            model=self.model or (defaults.model if defaults else None) or default_model,
            prompt_id=prompt.id,
            input_ref=key,
            # Call-site messages shadow prompt-level messages, which shadow the Thread.
            messages_ref=key if shadowed else None,
            owner=self.owner,
            history=self.history or prompt.history,
            input_budget=merge_budget(prompt.input_budget, self.input_budget),
            max_output_tokens=(
                self.max_output_tokens
                if self.max_output_tokens is not None or defaults is None
                else defaults.max_output_tokens
            ),
            contributors=[c.spec for c in prompt.contexts],
            tools=[t.name for t in prompt.tools],
            tool_choice=(
                self.tool_choice
                if self.tool_choice is not None or defaults is None
                else defaults.tool_choice
            ),
            max_tool_rounds=self.max_tool_rounds,
            on_revision_moved=self.on_revision_moved,
            storage_wait_seconds=self.storage_wait_seconds,
            stream=stream,
            **agent_fields(defaults),
            settings=merge_settings(prompt.settings, agent_settings, as_settings(self.settings)),
            attempt_policy=merge_attempt_policy(
                default_attempt_policy, agent_attempt_policy, as_attempt_policy(self.attempt_policy)
            ),
            tool_policies={t.name: t.policy for t in prompt.tools if t.policy is not None},
            **approval_fields(
                prompt.tools,
                default_approval_timeout
                if self.approval_timeout_seconds is None
                else self.approval_timeout_seconds,
            ),
            output=chosen_output.spec if chosen_output is not None else None,
        )
        turn = render_turn(
            prompt,
            self.input,
            generation_id,
            contexts={
                source_id: text
                for contributor in prompt.contexts
                for source_id, text in contributor.texts.items()
            },
        )
        caller = None if self.messages is None else list(normalise_messages(self.messages))
        declared = list(prompt.messages) if caller is None and prompt.messages is not None else None
        for _, message in turn.staged():
            check_storable(message, thread_id=thread_id)
        for message in [*(caller or ()), *(declared or ())]:
            check_storable(message, thread_id=thread_id)
        return BuiltCall(
            prompt=prompt,
            request=request,
            turn=turn,
            caller=caller,
            declared=declared,
            output=chosen_output,
        )


@dataclass(frozen=True)
class BuiltCall:
    """A validated call: what the workflow gets (ids only) and what is staged for it.

    Attributes:
        prompt: The prompt (a string prompt made into one).
        request: The ids-only workflow input.
        turn: The rendered user turn, system text and context sources.
        caller: Call-site messages, when given (they shadow everything else).
        declared: Prompt-level messages, when they shadow the Thread.
        output: The structured output the reply is parsed into, if any.
    """

    prompt: Prompt
    request: GenerationInput
    turn: RenderedTurn
    caller: list[Message] | None
    declared: list[Message] | None
    output: Output | None = None

    @property
    def transcript(self) -> list[Message] | None:
        """The message array that shadows the Thread, if any."""
        return self.caller if self.caller is not None else self.declared

    def fingerprint(self) -> str:
        """The content-free fingerprint that ties the generation id to this request."""
        return request_fingerprint(
            self.request,
            [
                *([kind, message.model_dump(mode="json")] for kind, message in self.turn.staged()),
                *([m.model_dump(mode="json") for m in self.caller] if self.caller else []),
                *(
                    [
                        [StagingKind.PROMPT_MESSAGES, m.model_dump(mode="json")]
                        for m in self.declared
                    ]
                    if self.declared is not None
                    else []
                ),
            ],
        )


def approval_fields(tools: Sequence[Tool], timeout: int | None) -> dict[str, Any]:
    """The approval fields of the input: set only when a tool requires approval."""
    names = [t.name for t in tools if t.requires_approval]
    if not names:
        return {}
    return {"approval_tools": names, "approval_timeout_seconds": timeout}


async def stage_call(call: BuiltCall, generations: GenerationStore) -> GenerationInput:
    """Claim the generation id for this request and stage its texts; return the input.

    Raises:
        ThreadError: `identity_conflict` when the id was used for a different request in
            the same scope.
    """
    request = call.request
    key = generation_key(request.generation_id, request.thread_id)
    thread_id = request.thread_id
    fingerprint = call.fingerprint()
    claimed, stored = await generations.claim_identity(key, fingerprint, thread_id=thread_id)
    if stored != fingerprint:
        raise ThreadError(
            "identity_conflict",
            "this generation_id was already used with a different request",
            thread_id=thread_id,
        )
    if not claimed and await generations.find_result(key) is not None:
        # A completed generation asked again: the workflow replays its stored result;
        # staging its text again would only leave rows nobody drops.
        return request
    for kind, message in call.turn.staged():
        await generations.stage(key, 0, kind, message, thread_id=thread_id)
    if call.caller is not None:
        await generations.stage_messages(
            key, StagingKind.CALLER_MESSAGES, call.caller, thread_id=thread_id
        )
    elif call.declared is not None:
        await generations.stage_messages(
            key, StagingKind.PROMPT_MESSAGES, call.declared, thread_id=thread_id
        )
    return request


def agent_fields(defaults: Agent | None) -> dict[str, Any]:
    """The workflow input fields an agent sets beyond the prompt's (none without one)."""
    if defaults is None:
        return {}
    fields: dict[str, Any] = {
        "agent_id": defaults.id,
        "prepare_step": defaults.prepare_step,
        "prepare_invocation": defaults.prepare_invocation,
    }
    return fields


def _thread_id(thread: object | None) -> str | None:
    if thread is None:
        return None
    if isinstance(thread, str):
        return thread
    identifier = getattr(thread, "id", None)
    if isinstance(identifier, str):
        return identifier
    raise ConfigurationError("thread must be a Thread handle or an id")


def merge_budget(
    base: InputBudgetSpec | None, override: Mapping[str, int] | InputBudgetSpec | None
) -> InputBudgetSpec | None:
    """The call's input budget over the prompt's, field by field (the call wins).

    Raises:
        ConfigurationError: The budget is not a valid mapping of `optimize_at` and `max`.
    """
    if override is None:
        return base
    if not isinstance(override, InputBudgetSpec):
        if not isinstance(override, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("input_budget must be a mapping of optimize_at and max")
        try:
            override = InputBudgetSpec.model_validate(dict(override))
        except ValidationError as error:
            raise invalid_input("input_budget", error) from None
    if base is None:
        return override
    try:
        return InputBudgetSpec(
            optimize_at=(
                override.optimize_at if override.optimize_at is not None else base.optimize_at
            ),
            max=override.max if override.max is not None else base.max,
        )
    except ValidationError as error:
        raise invalid_input("input_budget", error) from None


def validated_input(**fields: Any) -> GenerationInput:
    """Build a `GenerationInput`, raising a content-free `ConfigurationError` if invalid.

    Raises:
        ConfigurationError: Names the invalid fields and the kind of each defect.
    """
    try:
        return GenerationInput(**fields)
    except ValidationError as error:
        raise invalid_input("generation request", error) from None
