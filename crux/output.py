"""Structured output on the caller's side: a pydantic model or a JSON schema, and its value.

`output=` (on a prompt, an agent or a call) names what the reply must be. The schema goes
to the worker in the workflow input (it is measured, sent natively and checked there before
anything is staged); the pydantic model, when one was given, stays here and turns the
accepted reply into `Generation.output`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from contracts.output import DEFAULT_VALIDATION_RETRIES, OutputSpec, check_output_schema
from vocabulary.errors import ConfigurationError, OutputValidationError

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Output:
    """A structured-output definition.

    Attributes:
        spec: What the worker gets: name, JSON schema and validation retries.
        model: The pydantic model the reply is parsed into, when one was given.
    """

    spec: OutputSpec
    model: type[BaseModel] | None = None

    def parse(self, text: str) -> Any:
        """The accepted reply as the typed value (the model, or plain JSON for a schema).

        Raises:
            OutputValidationError: The reply does not satisfy the model (a validator of the
                model stricter than its schema); only paths and kinds are reported.
        """
        if self.model is None:
            return json.loads(text)
        try:
            return self.model.model_validate_json(text)
        except ValidationError as error:
            defects = tuple(
                f"$.{'.'.join(str(p) for p in e['loc'])}: {e['type']}" for e in error.errors()
            )
            raise OutputValidationError(defects, attempts=1) from None


def output(
    target: type[BaseModel] | Mapping[str, Any],
    *,
    name: str | None = None,
    max_retries: int = DEFAULT_VALIDATION_RETRIES,
) -> Output:
    """Define the structured output a reply must match.

    Args:
        target: A pydantic model class (its JSON schema is sent; the reply is parsed into
            it) or a JSON schema of an object (the reply is returned as parsed JSON).
        name: The schema's name as providers see it; the model's name or the schema's
            `title` by default.
        max_retries: How many times a reply that fails validation is asked for again (a
            new planned call each time) before `OutputValidationError`.

    Raises:
        ConfigurationError: Not a model or an object schema, or an invalid name or count.
    """
    model: type[BaseModel] | None = None
    if isinstance(target, type) and issubclass(target, BaseModel):  # pyright: ignore[reportUnnecessaryIsInstance]
        model = target
        try:
            schema = target.model_json_schema()
        except Exception:  # pydantic raises several kinds for unschemable models
            raise ConfigurationError("the output model has no JSON schema") from None
        default_name = target.__name__
    elif isinstance(target, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        schema = dict(target)
        title = schema.get("title")
        default_name = title if isinstance(title, str) and title else "output"
    else:
        raise ConfigurationError("output must be a pydantic model class or a JSON schema")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("max_retries must be an integer")
    chosen = name if name is not None else _UNSAFE_NAME.sub("_", default_name)[:64] or "output"
    try:
        spec = OutputSpec(
            name=chosen, json_schema=check_output_schema(schema), max_retries=max_retries
        )
    except ValidationError as error:
        fields = sorted({str(e["loc"][0]) for e in error.errors() if e["loc"]})
        raise ConfigurationError(f"invalid output: {', '.join(fields) or 'value'}") from None
    return Output(spec=spec, model=model)


def as_output(value: object) -> Output | None:
    """`value` as an output definition (`None` stays `None`).

    Raises:
        ConfigurationError: Not an `Output`, a pydantic model class or a JSON schema.
    """
    if value is None or isinstance(value, Output):
        return value
    if isinstance(value, type) and issubclass(value, BaseModel):
        return output(value)
    if isinstance(value, Mapping):
        return output(value)  # pyright: ignore[reportUnknownArgumentType]
    raise ConfigurationError("output must be a pydantic model class or a JSON schema")
