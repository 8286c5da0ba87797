"""`implements(stub)`: register a method as the worker's implementation of a workflow stub.

The workflows call the typed stubs of `contracts.stubs`; this decorator gives the method the
stub's activity name and checks, when the module is imported, that the method takes and
returns exactly the stub's types. A renamed payload or a changed result therefore fails at
import, not in a running workflow.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar, get_type_hints

from temporalio import activity

_Method = TypeVar("_Method", bound=Callable[..., Awaitable[Any]])


def implements(stub: Callable[..., Awaitable[Any]]) -> Callable[[_Method], _Method]:
    """Mark an activity method as the implementation of `stub`.

    Args:
        stub: A function of `contracts.stubs`.

    Raises:
        TypeError: At import, when the method's input or result type differs from the stub's.
    """
    name = activity_name(stub)
    wanted = _signature(stub, skip_self=False)

    def register(method: _Method) -> _Method:
        found = _signature(method, skip_self=True)
        if found != wanted:
            raise TypeError(
                f"{method.__qualname__} implements activity {name} with types {found},"
                f" the stub declares {wanted}"
            )
        return activity.defn(name=name)(method)

    return register


def activity_name(function: Callable[..., Any]) -> str:
    """The registered activity name of a stub or an implementation."""
    # Where `activity.defn` keeps the definition; the SDK offers no public accessor.
    definition = getattr(function, "__temporal_activity_definition", None)
    name = getattr(definition, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"{function.__qualname__} is not an activity definition")
    return name


def implementations(*holders: object) -> list[Callable[..., Awaitable[Any]]]:
    """The bound activity methods of `holders`, in a stable order (for the worker)."""
    found: list[Callable[..., Awaitable[Any]]] = []
    for holder in holders:
        for _, member in inspect.getmembers(holder, inspect.ismethod):
            if hasattr(member, "__temporal_activity_definition"):
                found.append(member)
    return found


def stub_names(stubs: Iterable[Callable[..., Awaitable[Any]]]) -> list[str]:
    """The activity names of `stubs`."""
    return [activity_name(stub) for stub in stubs]


def _signature(function: Callable[..., Any], *, skip_self: bool) -> tuple[object, ...]:
    hints = get_type_hints(function)
    parameters = list(inspect.signature(function).parameters)
    if skip_self:
        parameters = parameters[1:]
    return (*(hints.get(parameter) for parameter in parameters), hints.get("return"))
