"""Hooks: user code registered on the worker by name, which generations name.

Code cannot cross Temporal, so a generation names its hook and the worker runs the function
registered under that name:

- step hooks (`prepare_step="pick-model"`) adapt a provider call: the `crux.prepare_step`
  activity calls them with a content-free `StepContext`, and they return `StepOverrides`
  (or a mapping of the same fields, or `None` to change nothing);
- success hooks (`on_success=["notify"]`) run after the turn was committed: the
  `crux.run_success_hook` activity calls them with a content-free `SuccessContext`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from pydantic import ValidationError

from contracts.acceptance import SuccessContext
from contracts.hooks import StepContext, StepOverrides
from crux.context import check_id
from vocabulary.errors import ConfigurationError

HookResult = StepOverrides | Mapping[str, Any] | None
HookFunction = Callable[[StepContext], Awaitable[HookResult] | HookResult]
"""Receives the step context; returns overrides for that call, or `None`."""


@dataclass(frozen=True)
class StepHook:
    """A named hook and its function.

    Attributes:
        name: The name generations (and agents) refer to it by.
        function: Sync or async function of the `StepContext`.
    """

    name: str
    function: HookFunction

    async def run(self, context: StepContext) -> StepOverrides | None:
        """Run the function and validate what it returned.

        Raises:
            ConfigurationError: The hook returned something that is not valid overrides.
        """
        result = self.function(context)
        if inspect.isawaitable(result):
            result = await result
        if result is None or isinstance(result, StepOverrides):
            return result
        if not isinstance(result, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("a step hook must return StepOverrides, a mapping or None")
        try:
            return StepOverrides.model_validate(dict(result))
        except ValidationError as error:
            fields = sorted({str(e["loc"][0]) for e in error.errors() if e["loc"]})
            raise ConfigurationError(
                f"invalid step overrides: {', '.join(fields) or 'shape'}"
            ) from None


@overload
def step_hook(name: str, function: HookFunction) -> StepHook: ...


@overload
def step_hook(name: str, function: None = None) -> Callable[[HookFunction], StepHook]: ...


def step_hook(
    name: str, function: HookFunction | None = None
) -> StepHook | Callable[[HookFunction], StepHook]:
    """Define a step hook, directly or as a decorator.

    ```python
    @crux.step_hook("review-on-retry")
    def review(step: crux.StepContext) -> crux.StepOverrides | None:
        return crux.StepOverrides(model="openai:gpt-4o") if step.reason == "tool-round" else None
    ```

    Args:
        name: The name generations refer to it by.
        function: Sync or async function of the `StepContext`.

    Raises:
        ConfigurationError: The name is invalid or the function is not callable.
    """
    check_id(name, "hook name")

    def define(fn: HookFunction) -> StepHook:
        if not callable(fn):
            raise ConfigurationError("a step hook needs a callable")
        return StepHook(name=name, function=fn)

    return define if function is None else define(function)


def hook_name(hook: StepHook | str | None) -> str | None:
    """The name a generation sends for a hook given as a `StepHook` or a name."""
    if hook is None:
        return None
    if isinstance(hook, StepHook):
        return hook.name
    if isinstance(hook, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        check_id(hook, "hook name")
        return hook
    raise ConfigurationError("a hook is a crux.step_hook(...) or its name")


class HookRegistry:
    """The hooks a worker can run, by name."""

    def __init__(self, hooks: Iterable[StepHook] = ()) -> None:
        self._hooks: dict[str, StepHook] = {}
        for entry in hooks:
            if not isinstance(entry, StepHook):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ConfigurationError("hooks must be crux.step_hook(...) definitions")
            if entry.name in self._hooks:
                raise ConfigurationError("two hooks share one name")
            self._hooks[entry.name] = entry

    def get(self, name: str) -> StepHook | None:
        """The hook called `name`, or `None`."""
        return self._hooks.get(name)


SuccessFunction = Callable[[SuccessContext], Awaitable[None] | None]
"""Receives the committed turn's content-free context; its return value is ignored."""


@dataclass(frozen=True)
class SuccessHook:
    """A named success hook and its function.

    A success hook runs on the worker after its generation's turn was committed (never
    for a turn that was not), at least once: a worker lost mid-hook, or a hook that
    raised, runs it again (a few tries, with backoff). Give downstream systems
    `context.idempotency_key` so that repeated runs count once. A hook that keeps failing
    is reported (`Generation.hooks`), and the turn stays committed.

    Attributes:
        name: The name generations refer to it by (`on_success=[...]`).
        function: Sync or async function of the `SuccessContext`.
    """

    name: str
    function: SuccessFunction

    async def run(self, context: SuccessContext) -> None:
        """Run the function (awaiting it when it is async)."""
        result = self.function(context)
        if inspect.isawaitable(result):
            await result


@overload
def success_hook(name: str, function: SuccessFunction) -> SuccessHook: ...


@overload
def success_hook(name: str, function: None = None) -> Callable[[SuccessFunction], SuccessHook]: ...


def success_hook(
    name: str, function: SuccessFunction | None = None
) -> SuccessHook | Callable[[SuccessFunction], SuccessHook]:
    """Define a success hook, directly or as a decorator; register it on the worker.

    ```python
    @crux.success_hook("notify")
    async def notify(turn: crux.SuccessContext) -> None:
        await outbox.put(turn.idempotency_key, turn.output_message_id)
    ```

    Args:
        name: The name generations refer to it by.
        function: Sync or async function of the `SuccessContext`.

    Raises:
        ConfigurationError: The name is invalid or the function is not callable.
    """
    check_hook_name(name)

    def define(fn: SuccessFunction) -> SuccessHook:
        if not callable(fn):
            raise ConfigurationError("a success hook needs a callable")
        return SuccessHook(name=name, function=fn)

    return define if function is None else define(function)


def check_hook_name(name: object) -> str:
    """`name` if it is usable as a success hook's name on the wire, else raise.

    Raises:
        ConfigurationError: Not a string of 1-64 printable characters.
    """
    check_id(name, "success hook name")
    assert isinstance(name, str)
    if len(name) > 64:
        raise ConfigurationError("a success hook name has at most 64 characters")
    return name


def success_hook_names(hooks: Sequence[SuccessHook | str] | None) -> tuple[str, ...] | None:
    """The names a generation sends for `on_success=` (`None` stays `None`).

    Raises:
        ConfigurationError: An entry is neither a `SuccessHook` nor a name, or one repeats.
    """
    if hooks is None:
        return None
    if isinstance(hooks, str | bytes) or not isinstance(hooks, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("on_success must be a list of success hooks or their names")
    names: list[str] = []
    for hook in hooks:
        if isinstance(hook, SuccessHook):
            names.append(hook.name)
        elif isinstance(hook, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            names.append(check_hook_name(hook))
        else:
            raise ConfigurationError("on_success entries are crux.success_hook(...) or names")
    if len(set(names)) != len(names):
        raise ConfigurationError("on_success names each hook once")
    return tuple(names)


class SuccessHookRegistry:
    """The success hooks a worker can run, by name."""

    def __init__(self, hooks: Iterable[SuccessHook] = ()) -> None:
        self._hooks: dict[str, SuccessHook] = {}
        for entry in hooks:
            if not isinstance(entry, SuccessHook):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ConfigurationError("success_hooks must be crux.success_hook(...) definitions")
            if entry.name in self._hooks:
                raise ConfigurationError("two success hooks share one name")
            self._hooks[entry.name] = entry

    def get(self, name: str) -> SuccessHook | None:
        """The success hook called `name`, or `None`."""
        return self._hooks.get(name)
