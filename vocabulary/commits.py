"""The base of boundary models and the receipt of one publication to a Thread."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    """Base for boundary models: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ThreadCommit(WireModel):
    """The receipt of one publication to a Thread (an append or a managed turn).

    Attributes:
        status: `selected` when the publication advanced the selected head, `alternative`
            when it was published beside a head that had moved.
        message_ids: Ids of the published causal group, in order.
        parent_id: The group's parent (the observed head), `None` at the root.
        selected_head: The selected head right after this publication (for an alternative,
            not the new branch tip).
        committed_at: Commit time shared by every message of the group.
        replayed: `True` when an identical retry returned the stored receipt.
    """

    status: Literal["selected", "alternative"]
    message_ids: tuple[str, ...]
    parent_id: str | None = None
    selected_head: str
    committed_at: datetime
    replayed: bool = False
