"""Upserts of the Crux search attributes (`contracts.search`) made by the workflows themselves.

The workflows set these whatever the starter passed, so a plain Temporal client sees a run's
stage (`commit_blocked`, ...) in the UI too. Values are ids, model names and stage names:
never content. The worker checks at start that every name is registered, because upserting
an unregistered attribute fails the workflow task.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate, TypedSearchAttributes

from contracts.search import GENERATION_ID, MODEL, STAGE, THREAD_ID

__all__ = ["STAGE", "identity", "upsert"]

# Temporal caps a Keyword value at 2 KB; ids beyond that are rejected earlier anyway, the
# cut only keeps an upsert from failing a workflow task.
_MAX_VALUE_CHARS = 1_000


def identity(
    *,
    thread_id: str | None,
    generation_id: str | None,
    model: str | None,
    stage: str,
    present: TypedSearchAttributes | None = None,
) -> list[SearchAttributeUpdate[Any]]:
    """The updates naming one run: thread, generation, model and the first stage.

    Args:
        thread_id: The Thread (`None` ad hoc).
        generation_id: The generation.
        model: The model id.
        stage: The first stage.
        present: The attributes the run started with: values the starter already set
            (the facade sets them all) are left out, so they cost no history event.
    """
    updates: list[SearchAttributeUpdate[Any]] = [STAGE.value_set(stage)]
    for key, value in ((THREAD_ID, thread_id), (GENERATION_ID, generation_id), (MODEL, model)):
        if value:
            updates.append(key.value_set(value[:_MAX_VALUE_CHARS]))
    if present is None:
        return updates
    return [update for update in updates if present.get(update.key) != update.value]


def upsert(updates: list[SearchAttributeUpdate[Any]]) -> None:
    """Apply updates from inside a workflow."""
    workflow.upsert_search_attributes(updates)  # pyright: ignore[reportUnknownMemberType]
