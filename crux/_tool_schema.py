"""Tool definitions derived from a function: name, description and arguments schema.

The schema comes from the signature's type hints through pydantic; descriptions from the
Google-style docstring (its summary, and the `Args:` entries for the properties). The
handler built here validates the model's arguments with the same pydantic model, so the
function only ever sees values of the types it declares.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from vocabulary.errors import ConfigurationError

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(.*)$")


class ToolArgumentsError(ValueError):
    """The model called a tool with arguments its signature does not accept.

    Attributes:
        tool_result: What the model is shown: the invalid argument names and the kind of
            each defect, never a value.
    """

    def __init__(self, error: ValidationError) -> None:
        parts = sorted(
            {
                ".".join(str(part) for part in item["loc"]) + f" ({item['type']})"
                if item["loc"]
                else item["type"]
                for item in error.errors(include_url=False, include_input=False)
            }
        )
        self.tool_result = "error: invalid arguments: " + ", ".join(parts)
        super().__init__("invalid tool arguments")


def parse_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """The summary and the `Args:` descriptions of a Google-style docstring.

    Returns:
        `(summary, {argument: description})`; the summary is the first paragraph.
    """
    if not doc:
        return None, {}
    lines = inspect.cleandoc(doc).splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        summary_lines.append(line.strip())
    summary = " ".join(summary_lines) or None
    arguments: dict[str, str] = {}
    in_args = False
    current: str | None = None
    indent = 0
    for line in lines:
        stripped = line.strip()
        heading = _SECTION.match(stripped)
        if heading and len(line) - len(line.lstrip()) == 0:
            in_args = heading.group(1) in ("Args", "Arguments", "Parameters")
            current = None
            continue
        if not in_args or not stripped:
            continue
        depth = len(line) - len(line.lstrip())
        entry = _ARG.match(stripped)
        if entry and (current is None or depth <= indent):
            name = entry.group(1).lstrip("*")
            current, indent = name, depth
            arguments[name] = entry.group(3).strip()
        elif current is not None:
            arguments[current] = f"{arguments.get(current, '')} {stripped}".strip()
    return summary, arguments


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


def arguments_model(function: Callable[..., Any], descriptions: dict[str, str]) -> type[BaseModel]:
    """A pydantic model of `function`'s keyword-callable parameters.

    Raises:
        ConfigurationError: The signature has `*args`, `**kwargs`, positional-only
            parameters, or hints that cannot be resolved or expressed as JSON schema.
    """
    try:
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function)
    except (TypeError, ValueError, NameError):
        raise ConfigurationError("the tool's signature cannot be read") from None
    fields: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if parameter.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
            inspect.Parameter.POSITIONAL_ONLY,
        ):
            raise ConfigurationError("tool functions take named parameters only")
        annotation = hints.get(name, Any)
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[name] = (annotation, Field(default, description=descriptions.get(name)))
    try:
        model = create_model(f"{function.__name__}_arguments", __base__=_Arguments, **fields)
        model.model_json_schema()
    except Exception:  # pydantic raises several kinds for unsupported hints
        raise ConfigurationError(
            "the tool's parameters cannot be expressed as JSON schema"
        ) from None
    return model


def parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an arguments model, without pydantic's generated titles."""
    schema = model.model_json_schema()
    return _untitled(schema)


def _untitled(node: Any) -> Any:
    if isinstance(node, dict):
        entries: dict[str, Any] = node  # pyright: ignore[reportUnknownVariableType]
        return {
            key: (_untitled_map(value) if key in ("properties", "$defs") else _untitled(value))
            for key, value in entries.items()
            if key != "title"
        }
    if isinstance(node, list):
        items: list[Any] = node  # pyright: ignore[reportUnknownVariableType]
        return [_untitled(item) for item in items]
    return node


def _untitled_map(node: Any) -> Any:
    # Property names are keys here, not schema keywords: a property called `title` stays.
    if isinstance(node, dict):
        entries: dict[str, Any] = node  # pyright: ignore[reportUnknownVariableType]
        return {key: _untitled(value) for key, value in entries.items()}
    return node


def validating_handler(
    function: Callable[..., Any], model: type[BaseModel]
) -> Callable[[dict[str, Any]], Awaitable[Any] | Any]:
    """A handler of the arguments object that validates it and calls `function` by name.

    Raises (when called):
        ToolArgumentsError: The arguments do not fit the signature.
    """

    def handler(arguments: dict[str, Any]) -> Awaitable[Any] | Any:
        try:
            validated = model.model_validate(arguments)
        except ValidationError as error:
            raise ToolArgumentsError(error) from None
        return function(**{name: getattr(validated, name) for name in type(validated).model_fields})

    return handler
