"""Summary artifacts of history prefixes (derived evidence, never canonical history).

An artifact summarises a history source from its start through one message; where it ends
names the prefix, and `(scope, through_id, strategy, model)` is the artifact's identity.

- **A Thread's selected path.** The path to a message in an immutable tree is unique, so a
  message id names one prefix. Artifacts are stored with the Thread's id and every covered
  message id in `source_message_ids`, so the Thread store's redaction and deletion remove
  them in the same transaction.
- **A caller's transcript** (call-site or prompt-level messages). Its messages may carry no
  ids, and the same ids may hold other text in another call, so every message is named by
  a hash chain over the transcript (`transcript_ids`): each id digests the scope, the
  messages before it and the message itself (role, parts, tool-call links; never its
  caller id or metadata), so an id names exactly one prefix of content, and a later call
  whose transcript extends an earlier one's names the shared prefix the same way. The
  chain is seeded with the generation's scope (its Thread, or none, and its owner): a
  summary is never found across scopes. These artifacts hold caller text that no Thread
  owns, so they follow the staging retention: the retention sweep
  (`GenerationStore.sweep_orphans`, `crux db sweep`) deletes them once they are older
  than `CRUX_STAGING_RETENTION_SECONDS`, and deleting the Thread a generation named
  deletes them with everything else of that Thread.

This module stores and fetches; it never chooses. Which artifact a request uses, and when
one is prepared, is decided in `planner.summary_choice`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from pydantic import BaseModel, ConfigDict

from storage._failures import storage_errors
from vocabulary.errors import ThreadError
from vocabulary.ids import encode_id_component
from vocabulary.messages import Message
from vocabulary.staging import SummarySource

__all__ = [
    "THREAD_SUMMARY_KIND",
    "TRANSCRIPT_SUMMARY_KIND",
    "SummaryArtifact",
    "SummaryScope",
    "SummarySource",
    "SummaryStore",
    "summary_artifact_id",
    "transcript_ids",
    "transcript_scope",
]

THREAD_SUMMARY_KIND = "summary"
"""`crux_derived_artifacts.kind` of the summaries of Thread prefixes."""

TRANSCRIPT_SUMMARY_KIND = "transcript-summary"
"""`crux_derived_artifacts.kind` of the summaries of caller transcripts (swept by age)."""

_FIND = """
SELECT artifact_id, payload FROM crux_derived_artifacts
WHERE thread_id = $1 AND kind = $5
  AND payload ->> 'through_id' = ANY($2::text[])
  AND payload ->> 'strategy' = $3 AND payload ->> 'model' = $4
"""

_GET = """
SELECT payload FROM crux_derived_artifacts
WHERE artifact_id = $1 AND thread_id = $2 AND kind = $3
"""

# The Thread's control row is read FOR SHARE: a deletion (which updates that row, then
# deletes the Thread's artifacts) either waits for this insert and removes the artifact with
# the rest, or commits first and this insert is skipped. A preparation still running when
# its Thread is deleted so never leaves a summary of deleted messages behind. Returns the
# Thread's state (`live` when it has no control row: a transcript scope, an ad-hoc one).
_PUT = """
WITH control AS (
    SELECT state FROM crux_threads WHERE thread_id = $2 FOR SHARE
), stored AS (
    INSERT INTO crux_derived_artifacts (artifact_id, thread_id, kind, source_message_ids, payload)
    SELECT $1, $2, $5, $3, $4
    WHERE NOT EXISTS (SELECT 1 FROM control WHERE state <> 'live')
    ON CONFLICT (artifact_id) DO NOTHING
)
SELECT coalesce((SELECT state FROM control), 'live')
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
    """The deterministic identity of a Thread prefix summary."""
    key = "\x1f".join((thread_id, through_id, strategy, model)).encode()
    return "summary:" + hashlib.sha256(key).hexdigest()[:40]


def transcript_scope(thread_id: str | None, owner: str) -> str:
    """The scope a transcript's summaries are found in: the generation's Thread and owner.

    Args:
        thread_id: The Thread the generation names (its messages shadow it), `None` ad hoc.
        owner: The generation's owner: ad-hoc callers keep their summaries apart by it.
    """
    return f"{encode_id_component(thread_id or '')}/{encode_id_component(owner)}"


def transcript_ids(scope: str, messages: Sequence[Message]) -> list[str]:
    """Name every message of a transcript by the prefix it ends (a hash chain).

    The id of message `i` digests the scope, the ids before it, and the message's role,
    parts and tool-call links (not its caller id or metadata, which the model never
    sees): equal prefixes in one scope get equal ids, anything else different ones.

    Args:
        scope: `transcript_scope(...)` of the generation.
        messages: The transcript, oldest first.

    Returns:
        One id per message (`tx-` and 40 hex digits), in order.
    """
    chain = hashlib.sha256(("crux-transcript\x1f" + scope).encode()).digest()
    ids: list[str] = []
    for message in messages:
        body = {
            "role": message.role,
            "parts": [part.model_dump(mode="json") for part in message.parts],
            "tool_call_id": message.tool_call_id,
            "tool_name": message.tool_name,
        }
        encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        chain = hashlib.sha256(chain + hashlib.sha256(encoded.encode()).digest()).digest()
        ids.append("tx-" + chain.hex()[:40])
    return ids


@dataclass(frozen=True)
class SummaryScope:
    """Where the summaries of one history source are stored and found.

    Attributes:
        thread_id: The `thread_id` column: the Thread, or for a transcript the Thread the
            generation names (`""` ad hoc), so deleting that Thread deletes them too.
        kind: The artifact kind (`summary` or `transcript-summary`).
    """

    thread_id: str
    kind: str

    @classmethod
    def thread(cls, thread_id: str) -> SummaryScope:
        """The summaries of a Thread's prefixes."""
        return cls(thread_id, THREAD_SUMMARY_KIND)

    @classmethod
    def transcript(cls, thread_id: str | None) -> SummaryScope:
        """The summaries of caller transcripts of a generation naming `thread_id`."""
        return cls(thread_id or "", TRANSCRIPT_SUMMARY_KIND)

    @classmethod
    def of(cls, source: SummarySource, thread_id: str | None) -> SummaryScope:
        """The scope of a history source's summaries."""
        if source == "transcript":
            return cls.transcript(thread_id)
        assert thread_id is not None, "a Thread summary names its Thread"
        return cls.thread(thread_id)

    @classmethod
    def holding(cls, artifact_id: str, thread_id: str | None) -> SummaryScope:
        """The scope of the artifact `artifact_id` used by a generation naming `thread_id`.

        The artifact's kind is its id's prefix (`summary:` or `transcript-summary:`).
        """
        if artifact_id.startswith(f"{TRANSCRIPT_SUMMARY_KIND}:"):
            return cls.transcript(thread_id)
        return cls(thread_id or "", THREAD_SUMMARY_KIND)

    def artifact_id(self, through_id: str, strategy: str, model: str) -> str:
        """The deterministic identity of the summary through `through_id`.

        A transcript's `through_id` already digests its scope, so it names the artifact
        with the strategy and the model alone.
        """
        if self.kind == THREAD_SUMMARY_KIND:
            return summary_artifact_id(self.thread_id, through_id, strategy, model)
        key = "\x1f".join((self.kind, through_id, strategy, model)).encode()
        return f"{self.kind}:" + hashlib.sha256(key).hexdigest()[:40]


class SummaryStore:
    """Reads and writes summary artifacts.

    Args:
        pool: The asyncpg pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @storage_errors()
    async def candidates(
        self, scope: SummaryScope, path_ids: Sequence[str], *, strategy: str, model: str
    ) -> list[SummaryArtifact]:
        """The artifacts of `strategy` and `model` that end on the path `path_ids`.

        Fetching only: which of them a request uses is
        `planner.summary_choice.longest_prefix_summary`.
        """
        rows = await self._pool.fetch(
            _FIND, scope.thread_id, list(path_ids), strategy, model, scope.kind
        )
        return [SummaryArtifact.model_validate(row["payload"]) for row in rows]

    @storage_errors()
    async def get(self, scope: SummaryScope, artifact_id: str) -> SummaryArtifact | None:
        """The artifact, or `None` when it does not exist (or was erased)."""
        payload: Any = await self._pool.fetchval(_GET, artifact_id, scope.thread_id, scope.kind)
        return None if payload is None else SummaryArtifact.model_validate(payload)

    @storage_errors()
    async def put(
        self, scope: SummaryScope, artifact: SummaryArtifact, source_message_ids: Sequence[str]
    ) -> SummaryArtifact:
        """Store an artifact once; a concurrent identical preparation keeps the first.

        Raises:
            ThreadError: `deleted` when the scope's Thread was deleted (nothing is stored).
            KeyError: The artifact was erased as soon as it was stored.
        """
        async with self._pool.acquire() as connection:
            state = await connection.fetchval(
                _PUT,
                artifact.artifact_id,
                scope.thread_id,
                list(source_message_ids),
                artifact.model_dump(mode="json"),
                scope.kind,
            )
            if state != "live":
                raise ThreadError("deleted", "thread is deleted", thread_id=scope.thread_id)
            payload: Any = await connection.fetchval(
                _GET, artifact.artifact_id, scope.thread_id, scope.kind
            )
        if payload is None:
            # Erased between the two statements: the summary must not be used.
            raise KeyError(artifact.artifact_id)
        return SummaryArtifact.model_validate(payload)
