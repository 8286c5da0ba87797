"""Structured output as it crosses Temporal: the schema a reply must match.

The schema is configuration, not content: it is measured by the planner as part of every
request, sent to the provider natively and used by the worker to validate the reply before
it is staged. A reply that fails validation is never staged, committed or logged; only the
paths and kinds of its defects travel, and only in a rejection.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vocabulary.commits import WireModel
from vocabulary.errors import ConfigurationError
from vocabulary.ids import unstorable_text

MAX_OUTPUT_SCHEMA_BYTES = 64 * 1024
"""Serialised size of an output schema (providers reject larger ones long before)."""

MAX_VALIDATION_RETRIES = 8
"""Most validation retries a generation may ask for."""

DEFAULT_VALIDATION_RETRIES = 2
"""Validation retries when the caller does not say."""

MAX_DEFECTS = 16
"""Defects reported in a rejection (paths and kinds only)."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class OutputSpec(WireModel):
    """The structured output a generation asks for.

    Attributes:
        name: The schema's name as providers see it (letters, digits, `_`, `-`).
        json_schema: The JSON schema of the reply (an object schema).
        max_retries: Validation retries before the generation fails with
            `OutputValidationError`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    name: str = "output"
    json_schema: dict[str, Any]
    max_retries: int = Field(default=DEFAULT_VALIDATION_RETRIES, ge=0, le=MAX_VALIDATION_RETRIES)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ConfigurationError("output names use letters, digits, '_' and '-' (at most 64)")
        return value

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_output_schema(value)


def check_output_schema(schema: object) -> dict[str, Any]:
    """Return `schema` if it is a storable, valid JSON schema of an object, else raise.

    Raises:
        ConfigurationError: Not a mapping, not JSON, too large, not a valid JSON schema or
            not a schema of an object.
    """
    if not isinstance(schema, dict):
        raise ConfigurationError("an output schema must be a JSON schema object")
    try:
        encoded = json.dumps(schema, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        raise ConfigurationError("an output schema must be JSON-serialisable") from None
    if len(encoded.encode("utf-8", "surrogatepass")) > MAX_OUTPUT_SCHEMA_BYTES:
        raise ConfigurationError(f"an output schema must fit in {MAX_OUTPUT_SCHEMA_BYTES} bytes")
    if unstorable_text(encoded):
        raise ConfigurationError("an output schema must not contain NUL or lone surrogates")
    try:
        Draft202012Validator.check_schema(schema)  # pyright: ignore[reportUnknownArgumentType]
    except SchemaError:
        raise ConfigurationError("the output schema is not a valid JSON schema") from None
    except RecursionError:
        raise ConfigurationError("the output schema is nested too deeply") from None
    if schema.get("type") != "object":  # pyright: ignore[reportUnknownMemberType]
        raise ConfigurationError("an output schema must describe an object ('type': 'object')")
    return schema  # pyright: ignore[reportUnknownVariableType]


def output_defects(schema: dict[str, Any], text: str) -> list[str]:
    """Where `text` fails to be a JSON value matching `schema`: paths and kinds, no values.

    Args:
        schema: The output schema.
        text: The reply.

    Returns:
        Up to `MAX_DEFECTS` defects such as `$: invalid_json`, `$.items[2].price: type`
        or `$: required`; empty when the reply matches. Object keys appear in a path only
        when the schema declares them; any other key is reply content and shows as `*`.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return ["$: invalid_json"]
    declared = _declared_keys(schema)
    validator: Any = Draft202012Validator(schema)
    errors: list[Any] = list(validator.iter_errors(value))
    defects = sorted({f"{_path(e.absolute_path, declared)}: {e.validator}" for e in errors})
    return defects[:MAX_DEFECTS]


def model_defects(model: type[BaseModel], schema: dict[str, Any], text: str) -> list[str]:
    """Where `text` fails the pydantic `model`: paths and kinds, no values.

    Used when the worker knows the model the schema was derived from, so validators the
    schema cannot express (ranges checked in code, cross-field rules) also decide.

    Args:
        model: The pydantic model.
        schema: Its JSON schema, as sent (names the keys a path may show).
        text: The reply.
    """
    try:
        model.model_validate_json(text)
    except ValidationError as error:
        declared = _declared_keys(schema)
        defects = sorted(
            {f"{_path(detail['loc'], declared)}: {detail['type']}" for detail in error.errors()}
        )
        return defects[:MAX_DEFECTS]
    return []


def _declared_keys(schema: object) -> frozenset[str]:
    """Every property name the schema declares, at any depth."""
    found: set[str] = set()
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            properties = node.get("properties")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if isinstance(properties, dict):
                found.update(str(key) for key in properties)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            stack.extend(node.values())  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(node, list):
            stack.extend(node)  # pyright: ignore[reportUnknownArgumentType]
    return frozenset(found)


def _path(parts: Any, declared: frozenset[str]) -> str:
    path = "$"
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif isinstance(part, str) and part in declared and _NAME.match(part):
            path += f".{part}"
        else:
            path += ".*"
    return path
