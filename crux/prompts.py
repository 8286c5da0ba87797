"""Prompts: how a caller's input becomes the rendered user turn.

A prompt renders the current user message from its input (the seed's
`prompt({ id, use, prompt })`). The rendered message, not the raw input, is what the
provider receives and what a managed turn commits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from contracts.cache import CacheSpec, as_cache
from contracts.gate import ConstraintsSpec, SafetySpec
from contracts.generation import HistorySpec, InputBudgetSpec, SummaryStrategy
from contracts.settings import ModelSettingsSpec, as_settings
from crux.constraints import as_constraints
from crux.context import ContextContributor, check_id
from crux.hooks import SuccessHook, success_hook_names
from crux.output import Output, as_output
from crux.safety import as_safety
from crux.tools import Tool
from planner.policies import DEFAULT_RECENT_MESSAGES, check_cap
from vocabulary.errors import ConfigurationError, RequestCompositionError
from vocabulary.ids import MAX_TOKENS
from vocabulary.messages import Message
from vocabulary.registration import not_registered

DEFAULT_PROMPT_ID = "crux.default"

Renderer = Callable[[Any], str]


def render_default(value: Any) -> str:
    """Render an input the default way: a string as is, `{"message": ...}` by its message.

    Raises:
        ConfigurationError: The input has nothing to render.
    """
    if isinstance(value, str):
        if not value:
            raise ConfigurationError("the prompt input is empty")
        return value
    message = value.get("message") if isinstance(value, Mapping) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if isinstance(message, str):
        if not message:
            raise ConfigurationError("the prompt input message is empty")
        return message
    if value is None:
        raise ConfigurationError("the prompt needs an input")
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Prompt:
    """A named prompt.

    Attributes:
        id: Stable prompt id (recorded on receipts).
        render: Turns the input into the user message text.
        system: Optional system instructions (an exact contract: never summarised).
        thread_id: The Thread bound through `use`, if any.
        history: The request-history policy bound through `use`.
        input_budget: Definition-level input budget.
        contexts: Context contributors, in declaration order.
        tools: Tools the model may call (registered on the worker by the same name).
        messages: Prompt-level messages: a transcript that shadows the Thread (but not
            call-site messages) for every invocation of this prompt; `None` when unset.
        settings: Model settings for every call of this prompt (agents and call sites
            override them field by field).
        output: Structured output of every call (agents and call sites replace it).
        cache: The response cache of every call (agents and call sites replace it).
        safety: Safety policies of every call (agents and call sites replace them).
        constraints: Constraints on every call's reply (agents and call sites replace
            them).
        on_success: Success hooks run after every call's commit (agents and call sites
            replace the list).
    """

    id: str
    render: Renderer = render_default
    system: str | None = None
    thread_id: str | None = None
    history: HistorySpec = field(default_factory=HistorySpec)
    input_budget: InputBudgetSpec | None = None
    contexts: tuple[ContextContributor, ...] = ()
    tools: tuple[Tool, ...] = ()
    messages: tuple[Message, ...] | None = None
    settings: ModelSettingsSpec | None = None
    output: Output | None = None
    cache: CacheSpec | None = None
    safety: SafetySpec | None = None
    constraints: ConstraintsSpec | None = None
    on_success: tuple[str, ...] | None = None


def prompt(
    *,
    id: str,
    prompt: Renderer | str | None = None,
    system: str | None = None,
    use: Sequence[object] = (),
    input_budget: Mapping[str, int] | InputBudgetSpec | None = None,
    messages: Sequence[Message | Mapping[str, Any]] | None = None,
    settings: ModelSettingsSpec | Mapping[str, Any] | None = None,
    output: Output | type[BaseModel] | Mapping[str, Any] | None = None,
    cache: CacheSpec | Mapping[str, Any] | bool | None = None,
    safety: SafetySpec | Sequence[object] | None = None,
    constraints: ConstraintsSpec | Sequence[object] | None = None,
    on_success: Sequence[SuccessHook | str] | None = None,
) -> Prompt:
    """Define a prompt.

    Args:
        id: Stable prompt id.
        prompt: A function of the input returning the user message, or a fixed string;
            the default renders a string input or an object's `message`.
        system: System instructions.
        use: Contributors: a Thread handle, a history policy (`history.recent(...)`),
            context contributors (`context(...)`, `prefer(...)`, `droppable(...)`, ...).
        input_budget: `{"optimize_at": ..., "max": ...}`.
        messages: Prompt-level messages. They come second in the history-source precedence
            (call-site messages > prompt-level messages > the Thread's selected path >
            none; arrays are never merged): when present and the call passes no messages,
            they are the transcript and the Thread is neither read nor committed.
        settings: Model settings (`crux.model_settings(...)` or a mapping of temperature,
            top_p, stop, seed and extra).
        output: Structured output for every call of this prompt: a pydantic model class,
            a JSON schema of an object, or `crux.output(...)`; agents and call sites
            override it.
        cache: The response cache of every call (`crux.cache(...)`, a mapping of its
            fields, or `True` for the defaults); agents and call sites replace it.
        safety: Safety policies (`crux.safety(input=[...], output=[...])`, or a list of
            input policies); agents and call sites override them.
        constraints: Constraints on the reply (`crux.constraints(...)` or a list);
            agents and call sites override them.
        on_success: Success hooks (`crux.success_hook(...)` or their names, registered
            on the worker) run after each committed turn; agents and call sites override
            the list.

    Raises:
        ConfigurationError: An argument is invalid.
        RequestCompositionError: `INVALID_COMPOSITION` when `use` activates two history
            projections or two Threads.
    """
    check_id(id, "prompt id")
    if system is not None and not isinstance(system, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("system must be a string or None")
    if isinstance(use, str | bytes) or not isinstance(use, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("use must be a list of contributors")
    renderer: Renderer
    if prompt is None:
        renderer = render_default
    elif isinstance(prompt, str):
        renderer = _Fixed(prompt)
    elif callable(prompt):
        renderer = prompt
    else:
        raise ConfigurationError("prompt must be a callable, a string or None")
    thread_id: str | None = None
    history = HistorySpec()
    contexts: list[ContextContributor] = []
    tools: list[Tool] = []
    history_bound = False
    for entry in use:
        if isinstance(entry, HistorySpec):
            if history_bound:
                raise _invalid_history("a prompt activates more than one history projection")
            history, history_bound = entry, True
        elif isinstance(entry, ContextContributor):
            if any(c.id == entry.id for c in contexts):
                raise ConfigurationError("two context contributors share one id")
            contexts.append(entry)
        elif isinstance(entry, Tool):
            if any(t.name == entry.name for t in tools):
                raise ConfigurationError("two tools share one name")
            tools.append(entry)
        elif isinstance(getattr(entry, "id", None), str) and hasattr(entry, "append"):
            other = str(getattr(entry, "id"))  # noqa: B009 - duck-typed Thread handle
            if thread_id is not None:
                # Programmatic errors name both sources by their exact ids (no content).
                raise _invalid_history(
                    f"a prompt binds two Threads ({thread_id!r} and {other!r}); bind one "
                    "(or pass thread= per call)"
                )
            thread_id = other
        else:
            raise ConfigurationError(f"unsupported use[] entry: {type(entry).__name__}")
    return Prompt(
        id=id,
        render=renderer,
        system=system,
        thread_id=thread_id,
        history=history,
        input_budget=_budget(input_budget),
        contexts=tuple(contexts),
        tools=tuple(tools),
        messages=None if messages is None else normalise_messages(messages),
        settings=as_settings(settings),
        output=as_output(output),
        cache=as_cache(cache),
        safety=as_safety(safety),
        constraints=as_constraints(constraints),
        on_success=success_hook_names(on_success),
    )


def normalise_messages(messages: Sequence[Message | Mapping[str, Any]]) -> tuple[Message, ...]:
    """Validate a transcript given as messages or message mappings.

    Raises:
        ConfigurationError: An entry is not a canonical message (content-free message).
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("messages must be a list of canonical messages")
    normalised: list[Message] = []
    for entry in messages:
        if isinstance(entry, Message):
            normalised.append(entry)
            continue
        if not isinstance(entry, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("messages must be a list of canonical messages")
        try:
            normalised.append(Message.model_validate(dict(entry)))
        except (ValidationError, ValueError, TypeError):
            raise ConfigurationError("messages must be a list of canonical messages") from None
    # Text PostgreSQL cannot store is refused when the request is staged, typed as
    # `ThreadError("invalid_message")` like every other text.
    return tuple(normalised)


def _invalid_history(message: str) -> RequestCompositionError:
    """The `INVALID_COMPOSITION` error for bad history ownership (content-free)."""
    return RequestCompositionError(
        "INVALID_COMPOSITION",
        message,
        diagnostics={
            "items": [
                {
                    "id": "definition:history",
                    "code": "INVALID_HISTORY_COMPOSITION",
                    "contributor": "history",
                    "tokens": None,
                    "message": message,
                }
            ]
        },
    )


@dataclass(frozen=True)
class _Fixed:
    """A renderer that always returns the same text."""

    text: str

    def __call__(self, value: Any) -> str:
        return self.text


def _budget(value: Mapping[str, int] | InputBudgetSpec | None) -> InputBudgetSpec | None:
    if value is None:
        return None
    if isinstance(value, InputBudgetSpec):
        spec = value
    else:
        if not isinstance(value, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("input_budget must be a mapping")
        if set(value) - {"optimize_at", "max"}:
            raise ConfigurationError("input_budget accepts only optimize_at and max")
        for name in ("optimize_at", "max"):
            check_cap(f"input_budget {name}", value.get(name))
        try:
            spec = InputBudgetSpec.model_validate(dict(value))
        except (ValidationError, ValueError, TypeError):
            raise ConfigurationError("input_budget accepts only optimize_at and max") from None
    check_cap("input_budget optimize_at", spec.optimize_at)
    check_cap("input_budget max", spec.max)
    if spec.optimize_at is not None and spec.max is not None and spec.optimize_at > spec.max:
        raise ConfigurationError("input_budget optimize_at must not exceed max")
    return spec


class PromptRegistry:
    """The prompts a worker can render for plain Temporal clients, by id."""

    def __init__(self, prompts: Iterable[Prompt] = ()) -> None:
        self._prompts: dict[str, Prompt] = {DEFAULT_PROMPT_ID: Prompt(id=DEFAULT_PROMPT_ID)}
        for entry in prompts:
            self._prompts[entry.id] = entry

    def get(self, prompt_id: str) -> Prompt:
        """Return the prompt registered under `prompt_id`.

        Raises:
            ConfigurationError: No such prompt is registered (`code == "not_registered"`).
        """
        try:
            return self._prompts[prompt_id]
        except KeyError:
            raise not_registered("prompt", prompt_id) from None


class _HistoryPolicies:
    """Request-history policies: `history(...)`, `history.recent(...)`, `history.exact()`."""

    def __call__(
        self,
        *,
        recent: int | Mapping[str, int] | None = None,
        summary: Mapping[str, Any] | None = None,
        on_miss: str = "inline",
        provider_native: bool = True,
    ) -> HistorySpec:
        """Managed history: a derived summary of older turns plus an exact recent suffix.

        Args:
            recent: A message cap, or `{"messages": ..., "tokens": ...}`; `None` derives the
                suffix from the request's strict maximum.
            summary: `{"model": "provider:model", "strategy": summarize.adaptive()}`; both
                optional (the response model and `adaptive` by default).
            on_miss: `inline`, `recent-only` or `fail`.
            provider_native: Allow a compatible provider-native summary path; `False` forces
                the portable path (replay or compliance). The receipt says which path ran.

        Raises:
            ConfigurationError: A cap, strategy, miss policy or flag is invalid.
        """
        messages: object
        tokens: object
        if recent is None:
            messages, tokens = None, None
        elif isinstance(recent, Mapping):
            unknown = set(recent) - {"messages", "tokens"}
            if unknown or not recent:
                raise ConfigurationError("recent accepts messages and/or tokens")
            messages, tokens = recent.get("messages"), recent.get("tokens")
        else:
            messages, tokens = recent, None
        _check_caps(messages, tokens, required=recent is not None)
        if not isinstance(on_miss, str) or on_miss not in ("inline", "recent-only", "fail"):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("on_miss must be 'inline', 'recent-only' or 'fail'")
        if not isinstance(provider_native, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("provider_native must be a boolean")
        if summary is not None and not isinstance(summary, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("summary must be a mapping of model and strategy")
        options: dict[str, Any] = dict(summary or {})
        if set(options) - {"model", "strategy"}:
            raise ConfigurationError("summary accepts only model and strategy")
        chosen = options.get("strategy", "adaptive")
        if isinstance(chosen, Summarizer):
            strategy, chunk_tokens, chunk_units = (
                chosen.kind,
                chosen.chunk_tokens,
                chosen.chunk_units,
            )
        else:
            strategy, chunk_tokens, chunk_units = chosen, None, None
        if not isinstance(strategy, str) or strategy not in _STRATEGIES:
            raise ConfigurationError("unknown summary strategy; build one with summarize.*()")
        model = options.get("model")
        if model is not None and (not isinstance(model, str) or not _is_model_id(model)):
            raise ConfigurationError("the summary model is a 'provider:model' id")
        return HistorySpec(
            kind="managed",
            messages=_as_cap(messages),
            tokens=_as_cap(tokens),
            on_miss=on_miss,
            strategy=strategy,
            summary_model=model,
            provider_native=provider_native,
            chunk_tokens=chunk_tokens,
            chunk_units=chunk_units,
        )

    def recent(
        self, limit: int | None = None, *, messages: int | None = None, tokens: int | None = None
    ) -> HistorySpec:
        """A causal-group-safe exact suffix bounded by message count and/or tokens.

        Without any cap the suffix keeps the newest 20 messages (the seed's default).

        Raises:
            ConfigurationError: A bound is not a positive integer, or is given twice.
        """
        if limit is not None:
            if messages is not None:
                raise ConfigurationError("give the message cap once")
            messages = limit
        _check_caps(messages, tokens, required=False)
        if messages is None and tokens is None:
            messages = DEFAULT_RECENT_MESSAGES
        return HistorySpec(kind="recent", messages=messages, tokens=tokens)

    def exact(self) -> HistorySpec:
        """The whole selected path, required (the default)."""
        return HistorySpec()


_STRATEGIES = ("adaptive", "regenerate", "rolling", "hierarchical")


def _is_model_id(value: str) -> bool:
    provider, _, name = value.partition(":")
    return bool(provider) and bool(name) and value == value.strip()


def _as_cap(value: object) -> int | None:
    """A cap already checked by `check_cap` (a positive int or `None`)."""
    return value if isinstance(value, int) else None


def _check_caps(messages: object, tokens: object, *, required: bool) -> None:
    check_cap("messages", messages)
    check_cap("tokens", tokens)
    for name, cap in (("messages", messages), ("tokens", tokens)):
        # The wire keeps caps in PostgreSQL integers; refuse larger ones here, typed.
        if isinstance(cap, int) and cap > MAX_TOKENS:
            raise ConfigurationError(f"the {name} cap must be at most {MAX_TOKENS}")
    if required and messages is None and tokens is None:
        raise ConfigurationError("recent needs a messages or tokens cap")


history = _HistoryPolicies()
"""Request-history policies (`history.recent(messages=12, tokens=8_000)`, `history()`)."""


@dataclass(frozen=True)
class Summarizer:
    """A summary strategy and how large its chunks may be (built by `summarize.*()`).

    Attributes:
        kind: `adaptive`, `regenerate`, `rolling` or `hierarchical`.
        chunk_tokens: Content tokens one chunk of the summarised prefix may hold; `None`
            for what one support call of the summary model can take (never more).
        chunk_units: Causal groups one chunk may hold; `None` for no bound (8 for
            `hierarchical`).
    """

    kind: SummaryStrategy
    chunk_tokens: int | None = None
    chunk_units: int | None = None


def _summarizer(
    kind: SummaryStrategy, chunk_tokens: int | None, chunk_units: int | None
) -> Summarizer:
    for name, value in (("chunk_tokens", chunk_tokens), ("chunk_units", chunk_units)):
        check_cap(name, value)
        if isinstance(value, int) and value > MAX_TOKENS:
            raise ConfigurationError(f"{name} must be at most {MAX_TOKENS}")
    return Summarizer(kind, chunk_tokens, chunk_units)


class _SummaryStrategies:
    """Summary strategies for managed history (`summarize.adaptive()`, ...).

    Every strategy cuts the prefix it summarises into chunks of whole causal groups. By
    default a chunk is as large as one support call of the summary model can take (its
    window less the instructions and the output cap), and only `hierarchical` bounds the
    groups per chunk (8). `chunk_tokens=` and `chunk_units=` set smaller limits (never
    above one call's): `summarize.hierarchical(chunk_tokens=4_000, chunk_units=8)` asks for
    the original fixed chunks. The sizes shape how a summary is prepared, not which one it
    is: a stored summary of the same prefix, strategy and model is used whatever sizes
    prepared it.

    Raises:
        ConfigurationError: A chunk limit is not a positive integer.
    """

    def adaptive(
        self, *, chunk_tokens: int | None = None, chunk_units: int | None = None
    ) -> Summarizer:
        """The default: one call for a prefix of one chunk, hierarchical for a longer one.

        When an earlier summary of the conversation exists, a longer prefix is folded into
        it instead (as `rolling`), so a refresh pays only for what is new.
        """
        return _summarizer("adaptive", chunk_tokens, chunk_units)

    def regenerate(
        self, *, chunk_tokens: int | None = None, chunk_units: int | None = None
    ) -> Summarizer:
        """Summarise the whole prefix in one call each time (least drift).

        A prefix of more than one chunk cannot be one call: it is prepared hierarchically.
        """
        return _summarizer("regenerate", chunk_tokens, chunk_units)

    def rolling(
        self, *, chunk_tokens: int | None = None, chunk_units: int | None = None
    ) -> Summarizer:
        """Extend the previous summary with the newer range, chunk by chunk."""
        return _summarizer("rolling", chunk_tokens, chunk_units)

    def hierarchical(
        self, *, chunk_tokens: int | None = None, chunk_units: int | None = None
    ) -> Summarizer:
        """Summarise chunks, then summarise the summaries (prefixes too large for one call)."""
        return _summarizer("hierarchical", chunk_tokens, chunk_units)


summarize = _SummaryStrategies()
"""Summary strategies for `history(summary={"strategy": ...})`."""
