"""Crux search attributes: the Keyword attributes that name a run in Temporal's visibility.

Values are ids, model names and stage names: never content. The facade sets them when it
starts a run, the workflows keep them current, and the worker and `crux dev` check or
register them on the namespace (upserting an unregistered attribute fails the workflow task).
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

STAGE = SearchAttributeKey.for_keyword("CruxStage")
THREAD_ID = SearchAttributeKey.for_keyword("CruxThreadId")
GENERATION_ID = SearchAttributeKey.for_keyword("CruxGenerationId")
MODEL = SearchAttributeKey.for_keyword("CruxModel")

KEYS: tuple[SearchAttributeKey[str], ...] = (THREAD_ID, GENERATION_ID, STAGE, MODEL)
"""Every Keyword attribute the workflows set (register these on the namespace)."""

NAMES: tuple[str, ...] = tuple(key.name for key in KEYS)
"""The names of `KEYS`."""
