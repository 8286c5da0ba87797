"""The structured answer of a generation, as the caller asked for it."""

from __future__ import annotations

import dataclasses
import json

from pydantic import BaseModel, ValidationError

from contracts.generation import GenerationInput
from crux._outcomes import Generation
from crux._request import CallOptions
from crux.agents import Agent, agent_prompt
from crux.prompts import Prompt, output_model_of
from vocabulary.errors import OutputValidationError


def output_model_for(options: CallOptions) -> type[BaseModel] | None:
    """The pydantic model a call's answer is parsed into: the call's, else its prompt's."""
    if options.output is not None:
        return output_model_of(options.output)
    target = options.prompt
    prompt = agent_prompt(target) if isinstance(target, Agent) else target
    return prompt.output_model if isinstance(prompt, Prompt) else None


def with_output(
    generation: Generation, request: GenerationInput, model: type[BaseModel] | None
) -> Generation:
    """`generation` with its `output` set when the call asked for a structured answer.

    The worker validated the committed answer against the schema already; the model's own
    validators run here too, and a failure is reported by paths and kinds only.
    """
    if request.output is None:
        return generation
    try:
        value = json.loads(generation.text)
        output = model.model_validate(value) if model is not None else value
    except ValueError as error:
        failures = (
            [("$" + "".join(f".{part}" for part in e["loc"]), e["type"]) for e in error.errors()]
            if isinstance(error, ValidationError)
            else [("$", "json")]
        )
        raise OutputValidationError(failures, attempts=1) from None
    return dataclasses.replace(generation, output=output)
