"""Shared pydantic base for every planner model that crosses a boundary."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Confidence = Literal["exact", "estimated", "conservative"]
"""How far token counts can be trusted; it sets the safety margin."""


class FrozenModel(BaseModel):
    """Frozen, strict-about-unknown-fields base model.

    Planner inputs and outputs travel through Temporal payloads and PostgreSQL rows, so they
    must be immutable (the same input always describes the same request) and reject fields a
    newer or older peer might have invented.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
