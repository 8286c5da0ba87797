"""Tools the model may call during a managed generation.

A tool is registered on the worker (its handler runs there, as its own activity) and named
by prompts. Its schema counts toward the request like any other contributor; every
tool round is a new provider call, planned again.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, overload

from pydantic import ValidationError

from contracts.settings import ToolPolicySpec, describe_fields
from crux._tool_schema import (
    ToolArgumentsError,
    arguments_model,
    parameters_schema,
    parse_docstring,
    validating_handler,
)
from crux.context import check_text
from providers.types import ToolSpec
from vocabulary.errors import ConfigurationError
from vocabulary.registration import not_registered

ToolHandler = Callable[[dict[str, Any]], Awaitable[Any] | Any]
"""Receives the parsed arguments; returns a string or any JSON value."""

DEFAULT_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Tool:
    """A tool definition with its handler.

    Attributes:
        name: Name the model calls.
        description: What the tool does (shown to the model).
        parameters: JSON schema of the arguments object.
        handler: The function run on the worker.
        policy: Retry and timeout of its calls; `None` runs each call once, as before.
        requires_approval: Each call waits for an operator's approve or deny before it
            runs (`Runtime.approve`, `Runtime.deny`); a denied call never runs.
    """

    name: str
    handler: ToolHandler
    description: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_PARAMETERS))
    policy: ToolPolicySpec | None = None
    requires_approval: bool = False

    @property
    def spec(self) -> ToolSpec:
        """The provider-facing specification."""
        return ToolSpec(
            name=self.name, description=self.description, parameters=dict(self.parameters)
        )

    async def run(self, arguments: dict[str, Any]) -> str:
        """Run the handler and render its result as the tool message text.

        With a timeout in its policy, a synchronous handler runs in a thread so that the
        timeout can end the wait (the thread itself cannot be stopped and finishes alone).
        """
        if self.policy is not None and self.policy.timeout_seconds is not None:
            result = await asyncio.to_thread(self.handler, arguments)
        else:
            result = self.handler(arguments)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, str):
            return result
        return json.dumps(result, sort_keys=True, separators=(",", ":"), default=str)


RetrySpec = int | Mapping[str, Any] | ToolPolicySpec
"""A tool's retry: a number of attempts, or a mapping (or spec) of `max_attempts`,
`initial_interval_seconds`, `backoff_coefficient` and `max_interval_seconds`."""


@overload
def tool(
    name: str,
    handler: ToolHandler,
    *,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    retry: RetrySpec | None = None,
    requires_approval: bool = False,
) -> Tool: ...


@overload
def tool(
    name: Callable[..., Any],
    *,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    retry: RetrySpec | None = None,
    requires_approval: bool = False,
) -> Tool: ...


@overload
def tool(
    name: None = None,
    *,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    retry: RetrySpec | None = None,
    requires_approval: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    name: str | Callable[..., Any] | None = None,
    handler: ToolHandler | None = None,
    *,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    retry: RetrySpec | None = None,
    requires_approval: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Define a tool: from a name and a handler, or from a type-hinted function.

    `tool(fn)` (also `@tool` and `@tool(timeout=...)`) takes the name from the function,
    the description from its docstring's summary and the arguments schema from its
    signature (pydantic; `Args:` entries describe the properties). The model's arguments
    are validated against that schema and passed by keyword; invalid ones become an error
    result the model sees. `tool(name, handler)` keeps the handler of the arguments object.
    An explicit `description` or `parameters` always wins.

    Args:
        name: The tool name (letters, digits, `_` and `-`, at most 64), or the function.
        handler: With a name: sync or async function of the arguments object.
        description: What the tool does.
        parameters: JSON schema of the arguments (derived, or an empty object schema).
        timeout: Seconds a call may run; a call that takes longer ends as an error result.
        retry: Attempts of a failing call (an int), or a retry mapping (see `RetrySpec`).
        requires_approval: Each call waits in the `awaiting_approval` stage for an
            operator's decision; a denied (or timed-out) call never runs and the model sees
            a denial result.

    Raises:
        ConfigurationError: The name, schema, signature or policy is invalid.
    """
    if not isinstance(requires_approval, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("requires_approval is True or False")
    defined = _tool(name, handler, description, parameters, _policy(timeout, retry))
    if not requires_approval:
        return defined
    if isinstance(defined, Tool):
        return replace(defined, requires_approval=True)
    decorate = defined
    return lambda function: replace(decorate(function), requires_approval=True)


def _tool(
    name: str | Callable[..., Any] | None,
    handler: ToolHandler | None,
    description: str | None,
    parameters: Mapping[str, Any] | None,
    policy: ToolPolicySpec | None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    if name is None:
        if handler is not None:
            raise ConfigurationError("a tool handler needs a tool name")

        def decorate(function: Callable[..., Any]) -> Tool:
            return _from_function(function, description, parameters, policy)

        return decorate
    if not isinstance(name, str):
        if handler is not None:
            raise ConfigurationError("pass a tool name with a handler, or a function alone")
        return _from_function(name, description, parameters, policy)
    if handler is None:
        raise ConfigurationError("a tool needs a callable handler")
    return _define(name, handler, description, parameters, policy)


def _from_function(
    function: Callable[..., Any],
    description: str | None,
    parameters: Mapping[str, Any] | None,
    policy: ToolPolicySpec | None,
) -> Tool:
    if not callable(function):
        raise ConfigurationError("a tool needs a callable handler")
    summary, arguments = parse_docstring(inspect.getdoc(function))
    model = arguments_model(function, arguments)
    return _define(
        getattr(function, "__name__", ""),
        validating_handler(function, model),
        description if description is not None else summary,
        parameters if parameters is not None else parameters_schema(model),
        policy,
    )


def _policy(timeout: float | None, retry: RetrySpec | None) -> ToolPolicySpec | None:
    if timeout is None and retry is None:
        return None
    fields: dict[str, Any]
    if isinstance(retry, ToolPolicySpec):
        fields = retry.model_dump(exclude_unset=True)
    elif isinstance(retry, Mapping):
        fields = dict(retry)
        if "timeout_seconds" in fields:
            raise ConfigurationError("give a tool's timeout as timeout=")
    elif retry is None:
        fields = {}
    elif isinstance(retry, bool) or not isinstance(retry, int):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("retry is a number of attempts or a retry mapping")
    else:
        fields = {"max_attempts": retry}
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("timeout is a number of seconds")
        fields["timeout_seconds"] = timeout
    try:
        return ToolPolicySpec.model_validate(fields)
    except ValidationError as error:
        raise ConfigurationError(f"invalid tool policy: {describe_fields(error)}") from None


def _define(
    name: str,
    handler: ToolHandler,
    description: str | None,
    parameters: Mapping[str, Any] | None,
    policy: ToolPolicySpec | None,
) -> Tool:
    valid = (
        isinstance(name, str)  # pyright: ignore[reportUnnecessaryIsInstance]
        and 0 < len(name) <= 64
        and all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in name)
    )
    if not valid:
        raise ConfigurationError("tool names use letters, digits, '_' and '-' (at most 64)")
    if not callable(handler):
        raise ConfigurationError("a tool needs a callable handler")
    if description is not None:
        check_text(description, "tool description")
    if parameters is not None and not isinstance(parameters, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("tool parameters must be a JSON schema object")
    schema = dict(parameters) if parameters is not None else dict(DEFAULT_PARAMETERS)
    if schema.get("type") != "object":
        raise ConfigurationError("tool parameters must be a JSON schema of type 'object'")
    try:
        # The schema is sent to providers and counted: it must be plain, storable JSON.
        check_text(json.dumps(schema, allow_nan=False), "tool parameters")
    except (TypeError, ValueError, RecursionError):
        raise ConfigurationError("tool parameters must be a JSON-serialisable schema") from None
    return Tool(
        name=name, handler=handler, description=description, parameters=schema, policy=policy
    )


__all__ = [
    "DEFAULT_PARAMETERS",
    "RetrySpec",
    "Tool",
    "ToolArgumentsError",
    "ToolHandler",
    "ToolRegistry",
    "tool",
]


class ToolRegistry:
    """The tools a worker can run, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for entry in tools:
            if entry.name in self._tools:
                raise ConfigurationError("two tools share one name")
            self._tools[entry.name] = entry

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or `None`."""
        return self._tools.get(name)

    def require(self, names: Iterable[str]) -> list[Tool]:
        """The tools named, in order.

        Raises:
            ConfigurationError: A name is not registered on this worker.
        """
        found: list[Tool] = []
        for name in names:
            entry = self._tools.get(name)
            if entry is None:
                raise not_registered("tool", name)
            found.append(entry)
        return found
