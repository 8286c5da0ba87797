"""Errors raised by pure code (the planner and the builders).

They live here, at the bottom of the dependency graph, so the planner stays free of every
other package; `crux.errors` re-exports them as the public home and hangs the runtime errors
(`ThreadError`, `ProviderError`, ...) under the same root.
"""

from __future__ import annotations

from typing import Literal

CompositionErrorCode = Literal[
    "REQUEST_TOO_LARGE",
    "REPRESENTATION_UNAVAILABLE",
    "INVALID_COMPOSITION",
]


class CruxError(Exception):
    """Root of every error raised by this project."""


class ConfigurationError(CruxError, TypeError, ValueError):
    """Invalid configuration or API usage, raised before any I/O.

    Subclasses both `TypeError` (as the seed documents specify) and `ValueError` (as Python
    users expect for bad values).
    """


class RequestCompositionError(CruxError):
    """The request cannot be composed within the model's limits with authorised losses.

    Attributes:
        code: `REQUEST_TOO_LARGE`, `REPRESENTATION_UNAVAILABLE` or `INVALID_COMPOSITION`.
        request_id: The id of the request that could not be planned.
        diagnostics: Content-free details (token figures, contributor ids, remedies).
    """

    def __init__(
        self,
        code: CompositionErrorCode,
        message: str,
        *,
        request_id: str | None = None,
        diagnostics: dict[str, object] | None = None,
    ):
        super().__init__(f"{code}: {message}")
        self.code: CompositionErrorCode = code
        self.request_id = request_id
        self.diagnostics: dict[str, object] = dict(diagnostics or {})
