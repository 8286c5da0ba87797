"""Step hooks: user code that adapts a provider call, registered on the worker by name.

Code cannot cross Temporal, so a generation names its hook (`prepare_step="pick-model"`)
and the worker that runs the `crux.prepare_step` activity calls the function registered
under that name. A hook receives a content-free `StepContext` and returns `StepOverrides`
(or a mapping of the same fields, or `None` to change nothing).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, overload

from pydantic import ValidationError

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
