"""Tools derived from type-hinted functions, and the forms of `crux.tool`."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest

import crux
from crux._tool_schema import parse_docstring
from crux.tools import ToolArgumentsError


def forecast(city: str, days: int = 1, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
    """Forecast the weather for a city.

    Longer explanation that is not the summary.

    Args:
        city: The city to forecast,
            by its English name.
        days (int): Days ahead.
        unit: Temperature unit.

    Returns:
        The forecast.
    """
    return {"city": city, "days": days, "unit": unit}


def test_schema_description_and_name_come_from_the_function() -> None:
    tool = crux.tool(forecast)
    assert tool.name == "forecast"
    assert tool.description == "Forecast the weather for a city."
    assert tool.parameters == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "description": "The city to forecast, by its English name."},
            "days": {"type": "integer", "default": 1, "description": "Days ahead."},
            "unit": {
                "type": "string",
                "enum": ["c", "f"],
                "default": "c",
                "description": "Temperature unit.",
            },
        },
        "required": ["city"],
    }
    assert tool.policy is None


def test_arguments_are_validated_and_passed_by_keyword() -> None:
    tool = crux.tool(forecast)
    text = asyncio.run(tool.run({"city": "Lisbon", "days": 3}))
    assert text == '{"city":"Lisbon","days":3,"unit":"c"}'
    with pytest.raises(ToolArgumentsError) as raised:
        asyncio.run(tool.run({"days": "many", "unit": "kelvin", "secret": "value"}))
    shown = raised.value.tool_result
    assert shown.startswith("error: invalid arguments: ")
    assert "city (missing)" in shown and "days (int_parsing)" in shown
    assert "many" not in shown and "kelvin" not in shown and "value" not in shown


def test_decorator_forms_and_explicit_values_win() -> None:
    @crux.tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return key.upper()

    @crux.tool(timeout=2.5, retry=3, description="Custom")
    def slow(seconds: float) -> str:
        return str(seconds)

    assert lookup.name == "lookup" and lookup.description == "Look a key up."
    assert asyncio.run(lookup.run({"key": "ab"})) == "AB"
    assert slow.description == "Custom"
    assert slow.policy is not None
    assert (slow.policy.timeout_seconds, slow.policy.max_attempts) == (2.5, 3)
    explicit = crux.tool(forecast, parameters={"type": "object", "properties": {}})
    assert explicit.parameters == {"type": "object", "properties": {}}
    retry = crux.tool(forecast, retry={"max_attempts": 2, "initial_interval_seconds": 0.1})
    assert retry.policy is not None and retry.policy.initial_interval_seconds == 0.1


def test_the_name_and_handler_form_still_works() -> None:
    def handler(arguments: dict[str, Any]) -> str:
        return str(sorted(arguments))

    tool = crux.tool("plain", handler, description="Plain", timeout=1)
    assert tool.parameters == {"type": "object", "properties": {}}
    assert asyncio.run(tool.run({"b": 1, "a": 2})) == "['a', 'b']"
    assert tool.policy is not None and tool.policy.timeout_seconds == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda: crux.tool(lambda city: city),
        lambda: crux.tool(_varargs),
        lambda: crux.tool(forecast, retry=0),
        lambda: crux.tool(forecast, retry=True),
        lambda: crux.tool(forecast, timeout=-1),
        lambda: crux.tool(forecast, retry={"timeout_seconds": 3}),
        lambda: crux.tool("named"),  # pyright: ignore[reportCallIssue, reportArgumentType]
        lambda: crux.tool(forecast, forecast),  # pyright: ignore[reportArgumentType]
    ],
)
def test_invalid_definitions_are_refused_typed(call: Any) -> None:
    with pytest.raises(crux.ConfigurationError):
        call()


def _varargs(*names: str) -> str:
    return ",".join(names)


def test_docstring_parser_handles_missing_sections() -> None:
    assert parse_docstring(None) == (None, {})
    assert parse_docstring("Only a summary.") == ("Only a summary.", {})
    summary, arguments = parse_docstring("Sum.\n\nArgs:\n    a: First.\n    b: Second.\n")
    assert summary == "Sum." and arguments == {"a": "First.", "b": "Second."}
