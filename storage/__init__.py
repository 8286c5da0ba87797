"""PostgreSQL storage: Threads, derived artifacts, generation staging and receipts."""

from storage._pool import create_pool
from storage.generations import GenerationStore, StagedMessage
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

__all__ = [
    "EMPTY_REVISION",
    "GenerationStore",
    "HistoryEntry",
    "HistoryView",
    "MessageEntry",
    "OwnerState",
    "ReceiptStore",
    "RedactedEntry",
    "RemovedEntry",
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
    "available_migrations",
    "check_storable",
    "create_pool",
    "migrate",
    "migrate_url",
    "summary_artifact_id",
    "transcript_ids",
    "transcript_scope",
]
