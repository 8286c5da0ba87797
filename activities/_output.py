"""Structured output inside the invoke activity: the wire request and the answer's text."""

from __future__ import annotations

import json

from contracts.output import OutputSpec
from providers import StructuredOutput
from vocabulary.messages import Message, TextPart


def structured_output_of(spec: OutputSpec | None) -> StructuredOutput | None:
    """The provider request's structured output for a generation's output spec."""
    if spec is None:
        return None
    return StructuredOutput(name=spec.name, json_schema=spec.json_schema, strict=spec.strict)


def answer_from_output_tool(output: Message, spec: OutputSpec, tools: list[str]) -> Message:
    """The answer as JSON text when the provider gave it as the forced output tool's input.

    Providers that take the schema as a tool (Anthropic) answer with a call of that tool;
    the call's input is the answer. Calls of the generation's own tools stay calls.
    """
    calls = output.tool_calls
    answer = next((c for c in calls if c.tool_name == spec.name and c.tool_name not in tools), None)
    if answer is None:
        return output
    text = json.dumps(answer.input, ensure_ascii=False, separators=(",", ":"))
    return output.model_copy(update={"content": [TextPart(text=text)]})
