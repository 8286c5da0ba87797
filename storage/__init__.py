"""PostgreSQL storage: Threads, derived artifacts, generation staging, receipts, the cache."""

from storage._pool import create_pool
from storage.cache import CacheMatch, CacheStore, PendingEntry, ScopeStats, cache_entry_id
from storage.generations import RESULT_CHANNEL, GenerationStore, StagedMessage
from storage.migrate import available_migrations, migrate, migrate_url
from storage.receipts import ReceiptStore, StoredReceipt
from storage.summaries import (
    SummaryArtifact,
    SummaryScope,
    SummarySource,
    SummaryStore,
    summary_artifact_id,
    transcript_ids,
    transcript_scope,
)
from storage.threads import (
    EMPTY_REVISION,
    HistoryEntry,
    HistoryView,
    MessageEntry,
    OwnerState,
    RedactedEntry,
    RemovedEntry,
    ThreadEntry,
    ThreadSnapshot,
    ThreadStore,
    VariantInfo,
    check_storable,
)
from storage.workers import WorkerDirectory, WorkerEntry

__all__ = [
    "CacheMatch",
    "CacheStore",
    "EMPTY_REVISION",
    "GenerationStore",
    "HistoryEntry",
    "HistoryView",
    "MessageEntry",
    "OwnerState",
    "PendingEntry",
    "RESULT_CHANNEL",
    "ReceiptStore",
    "RedactedEntry",
    "RemovedEntry",
    "ScopeStats",
    "StagedMessage",
    "StoredReceipt",
    "SummaryArtifact",
    "SummaryScope",
    "SummarySource",
    "SummaryStore",
    "ThreadEntry",
    "ThreadSnapshot",
    "ThreadStore",
    "VariantInfo",
    "WorkerDirectory",
    "WorkerEntry",
    "available_migrations",
    "cache_entry_id",
    "check_storable",
    "create_pool",
    "migrate",
    "migrate_url",
    "summary_artifact_id",
    "transcript_ids",
    "transcript_scope",
]
