"""Summary artifacts of Thread prefixes (derived evidence, never canonical history).

An artifact summarises the selected path from its start through one message. The path to a
message in an immutable tree is unique, so `(thread, through_id, strategy, model)` names
exactly one prefix: that is the artifact's identity. Artifacts live in
`crux_derived_artifacts` with every covered message id in `source_message_ids`, so the
Thread store's redaction and deletion remove them in the same transaction.

This module stores and fetches; it never chooses. Which artifact a request uses, and when
one is prepared, is decided in `planner.summary_choice`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import asyncpg
from pydantic import BaseModel, ConfigDict

from storage._failures import storage_errors

_FIND = """
SELECT artifact_id, payload FROM crux_derived_artifacts
WHERE thread_id = $1 AND kind = 'summary'
  AND payload ->> 'through_id' = ANY($2::text[])
  AND payload ->> 'strategy' = $3 AND payload ->> 'model' = $4
"""

_GET = """
SELECT payload FROM crux_derived_artifacts
WHERE artifact_id = $1 AND thread_id = $2 AND kind = 'summary'
"""

_PUT = """
INSERT INTO crux_derived_artifacts (artifact_id, thread_id, kind, source_message_ids, payload)
VALUES ($1, $2, 'summary', $3, $4)
ON CONFLICT (artifact_id) DO NOTHING
"""


class SummaryArtifact(BaseModel):
    """A stored summary.

    Attributes:
        artifact_id: Identity of the artifact.
        through_id: Last message it covers.
        covers: Conversational messages it covers (after the leading system prefix).
        tokens: Content tokens of the rendered summary message.
        strategy: How it was prepared.
        model: Support model that wrote it.
        text: The summary text (never leaves PostgreSQL except in a provider request).
        support_request_ids: Support calls that produced it.
        support_requests: Their content-free receipts (id, model, sizes, measurement).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    artifact_id: str
    through_id: str
    covers: int
    tokens: int
    strategy: str
    model: str
    text: str
    support_request_ids: list[str] = []
    support_requests: list[dict[str, Any]] = []


def summary_artifact_id(thread_id: str, through_id: str, strategy: str, model: str) -> str:
    """The deterministic identity of a prefix summary."""
    key = "\x1f".join((thread_id, through_id, strategy, model)).encode()
    return "summary:" + hashlib.sha256(key).hexdigest()[:40]


class SummaryStore:
    """Reads and writes summary artifacts.

    Args:
        pool: The asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @storage_errors()
    async def candidates(
        self, thread_id: str, path_ids: Sequence[str], *, strategy: str, model: str
    ) -> list[SummaryArtifact]:
        """The artifacts of `strategy` and `model` that end on the path `path_ids`.

        Fetching only: which of them a request uses is
        `planner.summary_choice.longest_prefix_summary`.
        """
        rows = await self._pool.fetch(_FIND, thread_id, list(path_ids), strategy, model)
        return [SummaryArtifact.model_validate(row["payload"]) for row in rows]

    @storage_errors()
    async def get(self, thread_id: str, artifact_id: str) -> SummaryArtifact | None:
        """The artifact, or `None` when it does not exist (or was erased)."""
        payload: Any = await self._pool.fetchval(_GET, artifact_id, thread_id)
        return None if payload is None else SummaryArtifact.model_validate(payload)

    @storage_errors()
    async def put(
        self, thread_id: str, artifact: SummaryArtifact, source_message_ids: Sequence[str]
    ) -> SummaryArtifact:
        """Store an artifact once; a concurrent identical preparation keeps the first."""
        async with self._pool.acquire() as connection:
            await connection.execute(
                _PUT,
                artifact.artifact_id,
                thread_id,
                list(source_message_ids),
                artifact.model_dump(mode="json"),
            )
            payload: Any = await connection.fetchval(_GET, artifact.artifact_id, thread_id)
        if payload is None:
            # Redacted between the two statements: the summary must not be used.
            raise KeyError(artifact.artifact_id)
        return SummaryArtifact.model_validate(payload)
