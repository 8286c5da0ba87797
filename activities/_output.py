"""Structured output inside the invoke activity: the wire request and the answer's text."""

from __future__ import annotations

import json

from pydantic import BaseModel

from activities._registries import PromptLookup
from contracts.activities import InvokeModelInput
from contracts.output import OutputSpec
from providers import StructuredOutput
from providers.structured import validate_answer, validate_with_model
from vocabulary.errors import CruxError, OutputFailure
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


def validate_structured(
    text: str, request: InvokeModelInput, prompts: PromptLookup | None
) -> tuple[OutputFailure, ...]:
    """Validate a final answer: with the prompt's pydantic model when the worker knows it.

    The model is used only when its JSON schema is the one the generation asked for, so a
    plain Temporal client that sends another schema under the same prompt id is validated
    against its own schema.
    """
    spec = request.output
    if spec is None:
        return ()
    model = _registered_model(request.output_prompt_id, prompts)
    if model is not None and model.model_json_schema() == spec.json_schema:
        return validate_with_model(text, model, spec)
    return validate_answer(text, spec)


def _registered_model(
    prompt_id: str | None, prompts: PromptLookup | None
) -> type[BaseModel] | None:
    if prompt_id is None or prompts is None:
        return None
    try:
        prompt = prompts.get(prompt_id)
    except CruxError:
        return None  # an unregistered prompt: the schema alone decides
    model = getattr(prompt, "output_model", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None
