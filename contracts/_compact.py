"""Activity payloads that leave out what the receiver knows already: their defaults.

Every activity input and result is written into Temporal history, once per call. Most of a
payload's fields hold their defaults on most calls (no tools, no summary, attempt zero of a
tool round), and spelling each one out is pure history weight. These models serialise
only the fields that differ from their defaults; validation fills the rest back in, so a
payload decodes to an equal model.

Only the top level is left out, and only for these models: nested shapes (receipts,
contributors, tagged unions whose tag has a default) serialise exactly as they always do.
Models whose JSON is hashed (the generation input, summary requests) are never compact.
"""

from __future__ import annotations

from typing import Any

from pydantic import SerializerFunctionWrapHandler, model_serializer

from vocabulary.commits import WireModel


class CompactWireModel(WireModel):
    """A boundary model whose serialised form omits fields equal to their defaults."""

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        for name, field in type(self).model_fields.items():
            if field.is_required() or name not in data:
                continue
            if getattr(self, name) == field.get_default(call_default_factory=True):
                del data[name]
        return data  # pyright: ignore[reportUnknownVariableType]
