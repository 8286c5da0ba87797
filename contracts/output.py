"""The structured-output contract: what shape a generation's final answer must take.

`OutputSpec` travels in `GenerationInput.output`. It carries a JSON schema (never a
Python class: any Temporal client can start a generation), its name, how many validation
retries a rejected answer gets, and whether providers enforce the schema strictly.
`output_spec_from` turns what a caller passes as `output=` (a pydantic model class, a JSON
schema mapping, or a spec) into one, refusing anything else typed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vocabulary.commits import WireModel
from vocabulary.errors import ConfigurationError

DEFAULT_OUTPUT_RETRIES = 2
"""Validation retries after the first rejected answer, unless the caller says otherwise."""

MAX_OUTPUT_RETRIES = 8
"""Each retry is a full provider call; more than this is a loop, not a retry policy."""

MAX_OUTPUT_SCHEMA_BYTES = 64_000
"""A schema is sent with every call; one this large is refused before anything is staged."""

MAX_SCHEMA_DEPTH = 32
"""Nesting deeper than this is refused (it is also what JSON validators recurse through)."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Both providers accept this alphabet for a response-format or tool name."""


def _depth(value: object, level: int = 0) -> int:
    if level > MAX_SCHEMA_DEPTH:
        return level
    if isinstance(value, Mapping):
        items: list[object] = list(value.values())  # type: ignore[arg-type]
    elif isinstance(value, list):
        items = list(value)  # type: ignore[arg-type]
    else:
        return level
    return max((_depth(item, level + 1) for item in items), default=level)


class OutputSpec(WireModel):
    """The shape the final answer of a generation must take.

    Attributes:
        name: The schema's name, sent to providers (OpenAI `json_schema.name`, the
            Anthropic forced tool's name); letters, digits, `_` and `-`, at most 64.
        json_schema: A JSON schema (an object schema: its root `type` is `object`).
        max_retries: Validation retries after a rejected answer (each a new, linked
            provider call); 0 fails on the first rejection.
        strict: Ask the provider to enforce the schema (OpenAI `strict`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64)
    json_schema: dict[str, Any]
    max_retries: int = Field(default=DEFAULT_OUTPUT_RETRIES, ge=0, le=MAX_OUTPUT_RETRIES)
    strict: bool = True

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ConfigurationError("output name must be 1-64 letters, digits, '_' or '-'")
        return value

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            encoded = json.dumps(value, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):
            raise ConfigurationError("output schema must be JSON-serialisable") from None
        if len(encoded.encode()) > MAX_OUTPUT_SCHEMA_BYTES:
            raise ConfigurationError(f"output schema exceeds {MAX_OUTPUT_SCHEMA_BYTES} bytes")
        if _depth(value) > MAX_SCHEMA_DEPTH:
            raise ConfigurationError(f"output schema nests deeper than {MAX_SCHEMA_DEPTH}")
        if value.get("type") != "object":
            raise ConfigurationError("output schema must describe an object (type: object)")
        _check_schema(value)
        return value

    def schema_text(self) -> str:
        """The schema as sent to providers, compact and key-sorted (what is measured)."""
        return json.dumps(self.json_schema, sort_keys=True, separators=(",", ":"))


def _check_schema(schema: dict[str, Any]) -> None:
    # jsonschema lives above this layer; the worker checks the metaschema again before
    # validating. Here only the shapes every validator needs are refused early.
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ConfigurationError("output schema 'properties' must be an object")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):  # type: ignore[reportUnknownVariableType]
        raise ConfigurationError("output schema 'required' must be a list of names")


def output_spec_from(
    value: object, *, max_retries: int | None = None, strict: bool | None = None
) -> OutputSpec:
    """Build the spec of an `output=` argument.

    Args:
        value: A pydantic model class (its JSON schema and class name), a JSON schema
            mapping (named by its `title`, else `output`), or an `OutputSpec`.
        max_retries: Overrides the spec's validation retries.
        strict: Overrides the spec's strict flag.

    Returns:
        The spec.

    Raises:
        ConfigurationError: For anything else, or a schema that is not usable; the
            message never quotes the value.
    """
    if isinstance(value, OutputSpec):
        spec = value
    elif isinstance(value, type) and issubclass(value, BaseModel):
        try:
            schema = value.model_json_schema()
        except Exception:
            raise ConfigurationError("output model has no JSON schema") from None
        spec = _build(_safe_name(value.__name__), schema)
    elif isinstance(value, Mapping):
        schema: dict[str, Any] = {str(k): v for k, v in value.items()}  # type: ignore[reportUnknownVariableType]
        title = schema.get("title")
        spec = _build(_safe_name(title) if isinstance(title, str) else "output", schema)
    else:
        raise ConfigurationError(
            "output must be a pydantic model class, a JSON schema mapping or an OutputSpec"
        )
    changes: dict[str, Any] = {}
    if max_retries is not None:
        changes["max_retries"] = max_retries
    if strict is not None:
        changes["strict"] = strict
    return _build(spec.name, spec.json_schema, **changes) if changes else spec


def _safe_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]
    return cleaned or "output"


def _build(name: str, schema: dict[str, Any], **extra: Any) -> OutputSpec:
    from pydantic import ValidationError

    try:
        return OutputSpec(name=name, json_schema=schema, **extra)
    except ValidationError as error:
        # Field names only: never the input value.
        fields = sorted({str(e["loc"][0]) for e in error.errors() if e["loc"]})
        raise ConfigurationError(f"invalid output spec: {', '.join(fields) or 'value'}") from None


__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "MAX_OUTPUT_RETRIES",
    "MAX_OUTPUT_SCHEMA_BYTES",
    "OutputSpec",
    "output_spec_from",
]
