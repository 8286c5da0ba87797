"""Structured output at the provider boundary: native wire shapes and answer validation.

OpenAI receives the schema as `response_format: {type: json_schema, json_schema: {...}}`;
Anthropic as one forced tool whose input is the answer. After an answered attempt the
staged text is validated here, in the worker: what comes back is content-free (JSON paths
and failure kinds, never the values found), so it may cross Temporal and reach receipts.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ValidationError

from contracts.output import OutputSpec
from vocabulary.errors import MAX_REPORTED_FAILURES, ConfigurationError, OutputFailure


def openai_response_format(spec: OutputSpec) -> dict[str, Any]:
    """The OpenAI chat-completions `response_format` of a spec."""
    return {
        "type": "json_schema",
        "json_schema": {"name": spec.name, "schema": spec.json_schema, "strict": spec.strict},
    }


def anthropic_forced_tool(spec: OutputSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Anthropic tool carrying a spec, and the `tool_choice` forcing it.

    Returns:
        `(tool, tool_choice)`: the tool's input is the structured answer.
    """
    tool = {
        "name": spec.name,
        "description": "Reply by calling this tool; its input is the whole answer.",
        "input_schema": spec.json_schema,
    }
    return tool, {"type": "tool", "name": spec.name}


def check_schema(spec: OutputSpec) -> None:
    """Refuse a schema that is not a valid JSON schema (2020-12), typed and content-free.

    Raises:
        ConfigurationError: The schema breaks the metaschema.
    """
    try:
        Draft202012Validator.check_schema(spec.json_schema)
    except SchemaError as error:
        where = _path(list(error.path), _schema_names(spec.json_schema))
        raise ConfigurationError(f"output schema is not a valid JSON schema at {where}") from None


def validate_answer(text: str, spec: OutputSpec) -> tuple[OutputFailure, ...]:
    """Validate a staged answer against a spec.

    Args:
        text: The answer's text (JSON expected).
        spec: The requested output.

    Returns:
        `(path, kind)` pairs, empty when the answer is valid; at most
        `MAX_REPORTED_FAILURES`, ordered by path. Never carries a value of the answer.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return (("$", "json"),)
    check_schema(spec)
    validator = Draft202012Validator(spec.json_schema)
    known = _schema_names(spec.json_schema)
    found = sorted(
        {
            (_path(list(error.absolute_path), known), str(error.validator))
            for error in validator.iter_errors(value)  # type: ignore[reportUnknownMemberType]
        }
    )
    return tuple(found[:MAX_REPORTED_FAILURES])


def validate_with_model(
    text: str, model: type[BaseModel], spec: OutputSpec
) -> tuple[OutputFailure, ...]:
    """Validate a staged answer with the pydantic model the schema was made from.

    The model's own validators run too (constraints a JSON schema cannot say). Paths and
    kinds only, as `validate_answer`.
    """
    try:
        model.model_validate_json(text)
    except ValidationError as error:
        known = _schema_names(spec.json_schema)
        found = sorted(
            {
                (_path(list(e["loc"]), known), "json" if e["type"] == "json_invalid" else e["type"])
                for e in error.errors(include_input=False, include_url=False)
            }
        )
        return tuple(found[:MAX_REPORTED_FAILURES])
    return ()


def parsed_answer(text: str) -> Any:
    """The JSON value of a validated answer."""
    return json.loads(text)


def _path(parts: list[object], known: frozenset[str]) -> str:
    out = "$"
    for part in parts:
        # Only names the schema itself declares are echoed: a key the model invented
        # could carry text of the answer.
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += "." + (str(part) if str(part) in known else "<key>")
    return out


def _schema_names(schema: object) -> frozenset[str]:
    names: set[str] = set()
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():  # type: ignore[reportUnknownVariableType]
                if key in ("properties", "$defs", "definitions") and isinstance(child, dict):
                    names.update(str(k) for k in child)  # type: ignore[reportUnknownVariableType]
                stack.append(child)  # type: ignore[reportUnknownArgumentType]
        elif isinstance(node, list):
            stack.extend(node)  # type: ignore[reportUnknownArgumentType]
    return frozenset(names)


__all__ = [
    "anthropic_forced_tool",
    "check_schema",
    "openai_response_format",
    "parsed_answer",
    "validate_answer",
    "validate_with_model",
]
