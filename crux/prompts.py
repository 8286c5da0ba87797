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

from crux.context import ContextContributor
from crux.errors import ConfigurationError
from crux.models import HistorySpec, InputBudgetSpec, SummaryStrategy
from crux.tools import Tool
from planner.policies import check_cap

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
    """

    id: str
    render: Renderer = render_default
    system: str | None = None
    thread_id: str | None = None
    history: HistorySpec = field(default_factory=HistorySpec)
    input_budget: InputBudgetSpec | None = None
    contexts: tuple[ContextContributor, ...] = ()
    tools: tuple[Tool, ...] = ()


def prompt(
    *,
    id: str,
    prompt: Renderer | str | None = None,
    system: str | None = None,
    use: Sequence[object] = (),
    input_budget: Mapping[str, int] | InputBudgetSpec | None = None,
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

    Raises:
        ConfigurationError: An argument is invalid.
    """
    if not id or id != id.strip():
        raise ConfigurationError("prompt id must be a non-empty string without outer spaces")
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
    for entry in use:
        if isinstance(entry, HistorySpec):
            history = entry
        elif isinstance(entry, ContextContributor):
            if any(c.id == entry.id for c in contexts):
                raise ConfigurationError("two context contributors share one id")
            contexts.append(entry)
        elif isinstance(entry, Tool):
            if any(t.name == entry.name for t in tools):
                raise ConfigurationError("two tools share one name")
            tools.append(entry)
        elif isinstance(getattr(entry, "id", None), str) and hasattr(entry, "append"):
            thread_id = str(getattr(entry, "id"))  # noqa: B009 - duck-typed Thread handle
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
    )


@dataclass(frozen=True)
class _Fixed:
    """A renderer that always returns the same text."""

    text: str

    def __call__(self, value: Any) -> str:
        return self.text


def _budget(value: Mapping[str, int] | InputBudgetSpec | None) -> InputBudgetSpec | None:
    if value is None or isinstance(value, InputBudgetSpec):
        return value
    try:
        return InputBudgetSpec.model_validate(dict(value))
    except ValueError:
        raise ConfigurationError("input_budget accepts only optimize_at and max") from None


class PromptRegistry:
    """The prompts a worker can render for plain Temporal clients, by id."""

    def __init__(self, prompts: Iterable[Prompt] = ()) -> None:
        self._prompts: dict[str, Prompt] = {DEFAULT_PROMPT_ID: Prompt(id=DEFAULT_PROMPT_ID)}
        for entry in prompts:
            self._prompts[entry.id] = entry

    def get(self, prompt_id: str) -> Prompt:
        """Return the prompt registered under `prompt_id`.

        Raises:
            ConfigurationError: No such prompt is registered.
        """
        try:
            return self._prompts[prompt_id]
        except KeyError:
            raise ConfigurationError("unknown prompt id") from None


class _HistoryPolicies:
    """Request-history policies: `history(...)`, `history.recent(...)`, `history.exact()`."""

    def __call__(
        self,
        *,
        recent: int | Mapping[str, int] | None = None,
        summary: Mapping[str, Any] | None = None,
        on_miss: str = "inline",
    ) -> HistorySpec:
        """Managed history: a derived summary of older turns plus an exact recent suffix.

        Args:
            recent: A message cap, or `{"messages": ..., "tokens": ...}`; `None` derives the
                suffix from the request's strict maximum.
            summary: `{"model": "provider:model", "strategy": summarize.adaptive()}`; both
                optional (the response model and `adaptive` by default).
            on_miss: `inline`, `recent-only` or `fail`.

        Raises:
            ConfigurationError: A cap, strategy or miss policy is invalid.
        """
        messages: int | None
        tokens: int | None
        if recent is None:
            messages, tokens = None, None
        elif isinstance(recent, Mapping):
            unknown = set(recent) - {"messages", "tokens"}
            if unknown:
                raise ConfigurationError("recent accepts only messages and tokens")
            messages, tokens = recent.get("messages"), recent.get("tokens")
        else:
            messages, tokens = recent, None
        _check_caps(messages, tokens, required=recent is not None)
        if on_miss not in ("inline", "recent-only", "fail"):
            raise ConfigurationError("on_miss must be 'inline', 'recent-only' or 'fail'")
        options = dict(summary or {})
        unknown = set(options) - {"model", "strategy"}
        if unknown:
            raise ConfigurationError("summary accepts only model and strategy")
        strategy = options.get("strategy", "adaptive")
        if strategy not in ("adaptive", "regenerate", "rolling", "hierarchical"):
            raise ConfigurationError("unknown summary strategy")
        model = options.get("model")
        if model is not None and (not isinstance(model, str) or ":" not in model):
            raise ConfigurationError("the summary model is a 'provider:model' id")
        return HistorySpec(
            kind="managed",
            messages=messages,
            tokens=tokens,
            on_miss=on_miss,
            strategy=strategy,
            summary_model=model,
        )

    def recent(
        self, limit: int | None = None, *, messages: int | None = None, tokens: int | None = None
    ) -> HistorySpec:
        """A causal-group-safe exact suffix bounded by message count and/or tokens.

        Raises:
            ConfigurationError: A bound is not a positive integer, or none is given.
        """
        if limit is not None:
            if messages is not None:
                raise ConfigurationError("give the message cap once")
            messages = limit
        _check_caps(messages, tokens, required=True)
        return HistorySpec(kind="recent", messages=messages, tokens=tokens)

    def exact(self) -> HistorySpec:
        """The whole selected path, required (the default)."""
        return HistorySpec()


def _check_caps(messages: object, tokens: object, *, required: bool) -> None:
    check_cap("messages", messages)
    check_cap("tokens", tokens)
    if required and messages is None and tokens is None:
        raise ConfigurationError("history.recent needs a messages or tokens cap")


history = _HistoryPolicies()
"""Request-history policies (`history.recent(messages=12, tokens=8_000)`, `history()`)."""


class _SummaryStrategies:
    """Summary strategies for managed history (`summarize.adaptive()`, ...)."""

    def adaptive(self) -> SummaryStrategy:
        """One call for a short prefix, hierarchical for a long one (the default)."""
        return "adaptive"

    def regenerate(self) -> SummaryStrategy:
        """Summarise the whole prefix in one call each time (least drift)."""
        return "regenerate"

    def rolling(self) -> SummaryStrategy:
        """Extend the previous summary with the newer range, chunk by chunk."""
        return "rolling"

    def hierarchical(self) -> SummaryStrategy:
        """Summarise chunks, then summarise the summaries (prefixes too large for one call)."""
        return "hierarchical"


summarize = _SummaryStrategies()
"""Summary strategies for `history(summary={"strategy": ...})`."""
