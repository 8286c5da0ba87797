"""What the activities need of the worker's prompts, tools and hooks, as protocols.

The facade's `PromptRegistry`, `ToolRegistry`, `HookRegistry` and `SuccessHookRegistry`
satisfy them; the activities depend on the shape only, so they sit below the facade in the
import graph. Custom safety policies are plain functions, passed as a mapping by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from contracts.acceptance import SuccessContext
from contracts.hooks import StepContext, StepOverrides
from contracts.settings import ToolPolicySpec
from providers.types import ToolSpec
from vocabulary.messages import Message
from vocabulary.registration import not_registered


class DeclaredPrompt(Protocol):
    """A prompt registered on the worker."""

    @property
    def id(self) -> str:
        """The id callers name it by."""
        ...

    @property
    def system(self) -> str | None:
        """System instructions, if any."""
        ...

    @property
    def messages(self) -> tuple[Message, ...] | None:
        """Prompt-level messages, or `None` when unset."""
        ...

    @property
    def render(self) -> Callable[[Any], str]:
        """Turns the prompt input into the user message text."""
        ...


class PromptLookup(Protocol):
    """The worker's prompts, by id."""

    def get(self, prompt_id: str) -> DeclaredPrompt:
        """The prompt registered as `prompt_id` (raises a typed error when unknown)."""
        ...


class RunnableTool(Protocol):
    """A tool registered on the worker."""

    @property
    def name(self) -> str:
        """The name the model calls."""
        ...

    @property
    def spec(self) -> ToolSpec:
        """The provider-facing specification."""
        ...

    async def run(self, arguments: dict[str, Any]) -> str:
        """Run the tool and render its result as the tool message text."""
        ...

    @property
    def policy(self) -> ToolPolicySpec | None:
        """Retry and timeout of its calls, declared with the tool; `None` for the defaults."""
        ...


class ToolLookup(Protocol):
    """The worker's tools, by name."""

    def get(self, name: str) -> RunnableTool | None:
        """The tool called `name`, or `None`."""
        ...

    def require(self, names: Iterable[str]) -> Sequence[RunnableTool]:
        """The tools named, in order (raises a typed error for an unregistered one)."""
        ...


class NoTools:
    """A worker without tools."""

    def get(self, name: str) -> RunnableTool | None:
        """Always `None`."""
        del name
        return None

    def require(self, names: Iterable[str]) -> Sequence[RunnableTool]:
        """Empty for no names.

        Raises:
            ConfigurationError: Any name is requested (`code == "not_registered"`).
        """
        for name in names:
            raise not_registered("tool", name)
        return []


class RunnableHook(Protocol):
    """A `prepare_step` / `prepare_invocation` hook registered on the worker."""

    @property
    def name(self) -> str:
        """The name generations refer to it by."""
        ...

    async def run(self, context: StepContext) -> StepOverrides | None:
        """Run the hook on a content-free step context; return its validated overrides."""
        ...


class HookLookup(Protocol):
    """The worker's hooks, by name."""

    def get(self, name: str) -> RunnableHook | None:
        """The hook called `name`, or `None`."""
        ...


class NoHooks:
    """A worker without hooks."""

    def get(self, name: str) -> RunnableHook | None:
        """Always `None`."""
        del name
        return None


class RunnableSuccessHook(Protocol):
    """A success hook registered on the worker."""

    @property
    def name(self) -> str:
        """The name generations refer to it by (`on_success=[...]`)."""
        ...

    async def run(self, context: SuccessContext) -> None:
        """Run the hook on the committed turn's content-free context."""
        ...


class SuccessHookLookup(Protocol):
    """The worker's success hooks, by name."""

    def get(self, name: str) -> RunnableSuccessHook | None:
        """The success hook called `name`, or `None`."""
        ...


class NoSuccessHooks:
    """A worker without success hooks."""

    def get(self, name: str) -> RunnableSuccessHook | None:
        """Always `None`."""
        del name
        return None
