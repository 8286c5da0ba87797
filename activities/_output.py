"""Validating a structured reply on the worker, before anything of it is staged."""

from __future__ import annotations

from pydantic import BaseModel

from activities._registries import PromptLookup
from contracts.activities import InvokeModelInput
from contracts.output import model_defects, output_defects
from vocabulary.errors import CruxError


def reply_defects(request: InvokeModelInput, text: str, prompts: PromptLookup | None) -> list[str]:
    """Where a final reply fails the requested output (paths and kinds; empty: accepted).

    The JSON schema always decides; the pydantic model of the prompt registered on this
    worker decides too when its schema is the one requested, so its own validators hold
    for plain Temporal clients as well, before the turn is committed.
    """
    schema = request.output_schema
    if schema is None:
        return []
    defects = output_defects(schema, text)
    if defects:
        return defects
    model = _registered_model(request.output_prompt_id, prompts)
    if model is None or model.model_json_schema() != schema:
        return []
    return model_defects(model, schema, text)


def _registered_model(
    prompt_id: str | None, prompts: PromptLookup | None
) -> type[BaseModel] | None:
    if prompt_id is None or prompts is None:
        return None
    try:
        prompt = prompts.get(prompt_id)
    except CruxError:
        return None  # not registered here: the schema alone decides
    output: object = getattr(prompt, "output", None)
    model: object = getattr(output, "model", None)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model
    return None
