"""The input-budget merge: a call's budget over an agent's over a prompt's, field by field.

Both the agent definition (`crux.agent` merges its budget over its prompt's) and the call
builder (the call's over both) use it, so it sits below both.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from contracts.decoding import invalid_input
from contracts.generation import InputBudgetSpec
from vocabulary.errors import ConfigurationError


def merge_budget(
    base: InputBudgetSpec | None, override: Mapping[str, int] | InputBudgetSpec | None
) -> InputBudgetSpec | None:
    """The call's input budget over the prompt's, field by field (the call wins).

    Raises:
        ConfigurationError: The budget is not a valid mapping of `optimize_at` and `max`.
    """
    if override is None:
        return base
    if not isinstance(override, InputBudgetSpec):
        if not isinstance(override, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("input_budget must be a mapping of optimize_at and max")
        try:
            override = InputBudgetSpec.model_validate(dict(override))
        except ValidationError as error:
            raise invalid_input("input_budget", error) from None
    if base is None:
        return override
    try:
        return InputBudgetSpec(
            optimize_at=(
                override.optimize_at if override.optimize_at is not None else base.optimize_at
            ),
            max=override.max if override.max is not None else base.max,
        )
    except ValidationError as error:
        raise invalid_input("input_budget", error) from None
