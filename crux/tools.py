"""Tools the model may call during a managed generation.

A tool is registered on the worker (its handler runs there, as its own activity) and named
by prompts. Its schema counts toward the request like any other contributor; every
tool round is a new provider call, planned again.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crux.context import check_text
from providers.types import ToolSpec
from vocabulary.errors import ConfigurationError

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
    """

    name: str
    handler: ToolHandler
    description: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_PARAMETERS))

    @property
    def spec(self) -> ToolSpec:
        """The provider-facing specification."""
        return ToolSpec(
            name=self.name, description=self.description, parameters=dict(self.parameters)
        )

    async def run(self, arguments: dict[str, Any]) -> str:
        """Run the handler and render its result as the tool message text."""
        result = self.handler(arguments)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, str):
            return result
        return json.dumps(result, sort_keys=True, separators=(",", ":"), default=str)


def tool(
    name: str,
    handler: ToolHandler,
    *,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> Tool:
    """Define a tool.

    Args:
        name: Name the model calls (letters, digits, `_` and `-`, at most 64).
        handler: Sync or async function of the arguments object.
        description: What the tool does.
        parameters: JSON schema of the arguments (an empty object schema by default).

    Raises:
        ConfigurationError: The name or schema is invalid.
    """
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
    return Tool(name=name, handler=handler, description=description, parameters=schema)


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
                raise ConfigurationError("a requested tool is not registered on the worker")
            found.append(entry)
        return found
