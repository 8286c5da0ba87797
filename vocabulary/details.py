"""The error-detail codec: what a typed failure carries across Temporal, keyed and versioned.

Raising sides (activities, workflows) attach one `ErrorDetails` as the only detail of an
`ApplicationError`; catching sides (workflows, the facade) decode it with `decode_details`.
Which fields each error family fills is declared in `vocabulary.failures`. Details are
content-free: codes, ids, figures and hosts, never message text. Encoded, they are one JSON
object (`{"crux_details": 1, "code": ..., ...}`) that any Temporal SDK's default converter
decodes.

Version 0 is the positional form of earlier releases (`[code, diagnostics, request_id]` for
composition errors, `[provider, status, host, model]` for provider errors, `[code]` for Thread
errors); it is still read so that failures recorded by runs of those releases decode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

DETAILS_VERSION = 1
"""The version written by this release."""

_MARKER = "crux_details"


class ErrorDetails(BaseModel):
    """Content-free facts about a typed failure.

    Attributes:
        code: The error's code (`REQUEST_TOO_LARGE`, `identity_conflict`, ...).
        request_id: The request the failure concerns, when planned.
        diagnostics: Token figures, contributor ids and remedies.
        provider: The provider of a provider failure.
        status: Its HTTP status, when there was a response.
        host: The provider host.
        model: The model id.
        stage: The stage that failed (for storage waits).
        fields: The schema paths of invalid fields (for configuration errors).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    code: str | None = None
    request_id: str | None = None
    diagnostics: dict[str, Any] = {}
    provider: str | None = None
    status: int | None = None
    host: str | None = None
    model: str | None = None
    stage: str | None = None
    fields: tuple[str, ...] = ()


def encode_details(details: ErrorDetails) -> dict[str, Any]:
    """The one detail to attach to an `ApplicationError` (unset fields left out)."""
    return {_MARKER: DETAILS_VERSION, **details.model_dump(mode="json", exclude_defaults=True)}


def decode_details(raw: Sequence[Any], error_type: str | None = None) -> ErrorDetails:
    """Read the details of a failure, of this version or the positional version 0.

    Args:
        raw: The `ApplicationError.details` sequence.
        error_type: The failure's `type` (version 0 lays fields out by type).

    Returns:
        The details; empty when nothing usable was attached.
    """
    if raw and isinstance(raw[0], Mapping) and _MARKER in raw[0]:
        fields: dict[str, Any] = {str(k): v for k, v in raw[0].items() if k != _MARKER}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        try:
            return ErrorDetails.model_validate(fields)
        except ValidationError:
            return ErrorDetails()
    return _positional(list(raw), error_type)


def _positional(raw: list[Any], error_type: str | None) -> ErrorDetails:
    def at(index: int) -> Any:
        return raw[index] if len(raw) > index else None

    if error_type is not None and (
        error_type.startswith("Provider") or error_type == "ContextOverflowError"
    ):
        status = at(1)
        return ErrorDetails(
            provider=at(0) if isinstance(at(0), str) else None,
            status=status if isinstance(status, int) else None,
            host=at(2) if isinstance(at(2), str) else None,
            model=at(3) if isinstance(at(3), str) else None,
        )
    diagnostics = at(1)
    return ErrorDetails(
        code=at(0) if isinstance(at(0), str) else None,
        diagnostics=dict(diagnostics) if isinstance(diagnostics, Mapping) else {},  # pyright: ignore[reportUnknownArgumentType]
        request_id=at(2) if isinstance(at(2), str) else None,
    )
