"""The loopback servers refuse structured-output bodies the real APIs would refuse."""

from __future__ import annotations

from typing import Any

from providers.loopback._validate import anthropic_problem, openai_problem

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "integer"}}}
MESSAGES = [{"role": "user", "content": "hi"}]


def test_openai_json_schema_response_format_needs_a_name_and_an_object_schema() -> None:
    good = {"type": "json_schema", "json_schema": {"name": "P", "schema": SCHEMA}}
    assert openai_problem({"model": "m", "messages": MESSAGES, "response_format": good}) is None
    nameless = {"type": "json_schema", "json_schema": {"schema": SCHEMA}}
    assert openai_problem({"model": "m", "messages": MESSAGES, "response_format": nameless})
    schemaless = {"type": "json_schema", "json_schema": {"name": "P"}}
    assert openai_problem({"model": "m", "messages": MESSAGES, "response_format": schemaless})
    plain = {"type": "json_object"}
    assert openai_problem({"model": "m", "messages": MESSAGES, "response_format": plain}) is None


def test_anthropic_forced_tool_must_be_offered() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 10,
        "messages": MESSAGES,
        "tools": [{"name": "P", "input_schema": SCHEMA}],
        "tool_choice": {"type": "tool", "name": "P"},
    }
    assert anthropic_problem(body) is None
    assert anthropic_problem({**body, "tool_choice": {"type": "tool", "name": "Q"}})
    assert anthropic_problem({**body, "tool_choice": {"type": "auto"}}) is None
