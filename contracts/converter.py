"""The payload converter of Crux workers: pydantic JSON, every payload `json/plain`.

Whatever a Crux worker writes (results, query answers, update results, failure details,
summaries and details) is a `json/plain` payload, which the default converter of every
Temporal SDK decodes. The one thing the Python SDK would write otherwise is the answer of its
built-in queries: `__temporal_workflow_metadata` (which carries the current details) and
`__enhanced_stack_trace` answer with protobuf messages, encoded as `json/protobuf`, which a
TypeScript client's default converter refuses. Here every protobuf message is written as
`json/plain` in the protobuf JSON mapping (camelCase keys), which is exactly what a
TypeScript worker answers; reading accepts both encodings, so a Python client that asks for
a `WorkflowMetadata` still gets one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter

__all__ = ["PlainJSONPayloadConverter"]

_PLAIN = b"json/plain"


class PlainJSONPayloadConverter(PydanticPayloadConverter):
    """Pydantic JSON, with protobuf messages written as `json/plain` too."""

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        """See base class; a protobuf message becomes `json/plain` (its JSON mapping)."""
        payloads: list[Payload] = []
        for value in values:  # a loop, not a comprehension: `super()` needs the method's frame
            if isinstance(value, Message):
                payloads.append(_plain(value))
            else:
                payloads += super().to_payloads([value])
        return payloads

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[type] | None = None
    ) -> list[Any]:
        """See base class; a `json/plain` payload decodes into a protobuf type it names."""
        hints: list[type | None] = list(type_hints or [])
        hints += [None] * (len(payloads) - len(hints))
        values: list[Any] = []
        for payload, hint in zip(payloads, hints, strict=False):
            if _is_message_type(hint) and payload.metadata.get("encoding") == _PLAIN:
                assert hint is not None
                message = hint()
                json_format.Parse(payload.data, message, ignore_unknown_fields=True)
                values.append(message)
            else:
                values += super().from_payloads([payload], None if hint is None else [hint])
        return values


def _plain(message: Message) -> Payload:
    return Payload(
        metadata={"encoding": _PLAIN},
        data=json_format.MessageToJson(message, indent=None).encode(),
    )


def _is_message_type(hint: object) -> bool:
    return isinstance(hint, type) and issubclass(hint, Message)
