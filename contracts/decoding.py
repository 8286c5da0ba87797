"""Decode and validate a workflow's raw input payload, content-free.

Workflows take their parameter as a `RawValue` so that nothing a client sends can fail in the
SDK's argument decoding (which fails the workflow *task*, retried forever). Every defect,
from invalid UTF-8 to a budget with `optimize_at > max`, becomes a `ConfigurationError` that
names schema fields and error kinds only, never a value: its `code` says which defect and,
for a schema violation (`invalid_input`), `fields` lists the invalid fields' paths.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

from vocabulary.errors import ConfigurationError
from vocabulary.ids import unstorable_text

MAX_INPUT_BYTES = 2 * 1024 * 1024
"""Largest accepted input payload; bigger content belongs in PostgreSQL (`input_ref`)."""

MAX_NESTING = 64
"""Deepest accepted JSON nesting (well inside pydantic's own recursion limit)."""

MAX_VALUES = 20_000
"""Most JSON values (keys, items, scalars; a string counts once, whatever its length) an
input may hold. Validating is linear in them, and a workflow task must not run for seconds:
a million wrong list items would keep it past the SDK's deadlock timeout, failing the task
forever. Bigger content belongs in PostgreSQL (`input_ref`)."""

_JSON_ENCODINGS = (b"json/plain",)
_FIELD = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

_Model = TypeVar("_Model", bound=BaseModel)

NO_INPUT = RawValue(Payload())
"""The run parameter's default: a client that starts a workflow without an argument gets a
typed `ConfigurationError`, not a `TypeError` that would fail the workflow task forever."""


@dataclass(frozen=True)
class ExtraArguments(RawValue):
    """What a run receives instead of its input when a client sent several arguments.

    The worker's interceptor hands it to the run (`workflows.SingleInputInterceptor`), whose
    decoding refuses it like any other defect of the input: typed, and reported the way
    every refused run is.

    Attributes:
        count: How many arguments the client sent.
    """

    count: int = 2


def decode_input(raw: object, model: type[_Model], *, what: str) -> _Model:
    """Decode a JSON payload and validate it as `model`.

    Args:
        raw: The run parameter (a `RawValue`; an already decoded value is accepted too).
        model: The pydantic model the input must satisfy.
        what: Name of the input in error messages (for example `generation input`).

    Raises:
        ConfigurationError: For anything but a valid JSON object of `model`'s schema whose
            strings PostgreSQL can store.
    """
    value = _json_value(raw, what=what)
    if not isinstance(value, dict):
        raise ConfigurationError(f"{what} must be a JSON object", code="not_an_object")
    _check_tree(value, what=what)  # pyright: ignore[reportUnknownArgumentType]
    try:
        return model.model_validate(value)
    except ValidationError as error:
        raise invalid_input(what, error) from None
    except RecursionError:
        raise ConfigurationError(f"{what} is nested too deeply", code="too_deep") from None


def invalid_input(what: str, error: ValidationError) -> ConfigurationError:
    """`ConfigurationError` code `invalid_input`, naming the invalid fields' paths."""
    return ConfigurationError(
        f"invalid {what}: {describe_invalid(error)}",
        code="invalid_input",
        fields=invalid_fields(error),
    )


def invalid_fields(error: ValidationError) -> tuple[str, ...]:
    """The dotted paths of the invalid fields (list positions `*`), at most `MAX_DEFECTS`.

    An unknown key is left out: a key can carry content.
    """
    paths = {
        _path(item["loc"])
        for item in error.errors(include_url=False, include_input=False)
        if item["type"] != "extra_forbidden"
    }
    return tuple(sorted(path or "input" for path in paths)[:MAX_DEFECTS])


def _path(loc: tuple[int | str, ...]) -> str:
    return ".".join(
        "*" if isinstance(part, int) else part
        for part in loc
        if isinstance(part, int) or _FIELD.match(part)
    )


MAX_DEFECTS = 8
"""Defects named in one error; a 10^5-element list of wrong values is one defect per kind."""


def describe_invalid(error: ValidationError) -> str:
    """Name the invalid fields and the kind of each defect, never a value.

    Unknown keys are reported as `unknown field` (a key can carry content too). List
    positions are written `*`, so one defect repeated across a huge list is named once, and
    at most `MAX_DEFECTS` are named: the message stays small whatever the input.
    """
    parts: set[str] = set()
    for item in error.errors(include_url=False, include_input=False):
        if item["type"] == "extra_forbidden":
            parts.add("unknown field")
            continue
        path = _path(item["loc"])
        reason = item["type"]
        raised = item.get("ctx", {}).get("error")
        if isinstance(raised, ConfigurationError):
            # Our own validators word their messages without values.
            reason = str(raised)
        parts.add(f"{path or 'input'} ({reason})")
    named = sorted(parts)
    more = len(named) - MAX_DEFECTS
    return ", ".join(named[:MAX_DEFECTS]) + (f" and {more} more" if more > 0 else "")


def _json_value(raw: object, *, what: str) -> Any:
    if not isinstance(raw, RawValue):
        return raw
    if raw is NO_INPUT:
        raise ConfigurationError(f"{what} is missing: pass one JSON object", code="input_missing")
    if isinstance(raw, ExtraArguments):
        raise ConfigurationError(
            f"the workflow takes one JSON object, not {raw.count} arguments",
            code="too_many_arguments",
        )
    payload = raw.payload
    if payload.metadata.get("encoding", b"") not in _JSON_ENCODINGS:
        raise ConfigurationError(f"{what} must be JSON (encoding json/plain)", code="not_json")
    if len(payload.data) > MAX_INPUT_BYTES:
        raise ConfigurationError(f"{what} is larger than {MAX_INPUT_BYTES} bytes", code="too_large")
    try:
        text = payload.data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigurationError(f"{what} is not valid UTF-8", code="not_json") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ConfigurationError(f"{what} is nested too deeply", code="too_deep") from None
    except ValueError:
        raise ConfigurationError(f"{what} is not valid JSON", code="not_json") from None


def _check_tree(value: object, *, what: str) -> None:
    """Reject deep nesting, too many values, unstorable strings, NaN and infinities."""
    stack: list[tuple[object, int]] = [(value, 0)]
    values = 1
    while stack:
        if values > MAX_VALUES:
            raise ConfigurationError(
                f"{what} holds more than {MAX_VALUES} values", code="too_many_values"
            )
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ConfigurationError(
                f"{what} is nested deeper than {MAX_NESTING} levels", code="too_deep"
            )
        if isinstance(node, str):
            if unstorable_text(node):
                raise ConfigurationError(
                    f"{what} contains text PostgreSQL cannot store (NUL or lone surrogate)",
                    code="unstorable_text",
                )
        elif isinstance(node, float) and not _finite(node):
            # JSON has no NaN or infinities; the SDK's default converter writes them, and
            # passed on they would silently become null.
            raise ConfigurationError(
                f"{what} contains a number JSON cannot carry (NaN or infinity)",
                code="non_finite_number",
            )
        elif isinstance(node, dict):
            items: dict[object, object] = node  # pyright: ignore[reportUnknownVariableType]
            values += 2 * len(items)
            for key, child in items.items():
                stack.append((key, depth + 1))
                stack.append((child, depth + 1))
        elif isinstance(node, list):
            children: list[object] = node  # pyright: ignore[reportUnknownVariableType]
            values += len(children)
            stack.extend((child, depth + 1) for child in children)


def _finite(number: float) -> bool:
    return number == number and abs(number) != float("inf")  # NaN is unequal to itself
