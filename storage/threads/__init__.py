"""Canonical Threads on PostgreSQL: the store, its read shapes and the history view."""

from storage.threads._control import EMPTY_REVISION
from storage.threads._models import (
    HistoryEntry,
    HistoryView,
    MessageEntry,
    RedactedEntry,
    RemovedEntry,
    ThreadEntry,
    ThreadSnapshot,
    VariantInfo,
)
from storage.threads._validate import MAIN_OWNER, MAX_ID_LENGTH, check_storable
from storage.threads._validate import check_id as validate_id
from storage.threads.store import OwnerState, ThreadStore

__all__ = [
    "EMPTY_REVISION",
    "HistoryEntry",
    "HistoryView",
    "MAIN_OWNER",
    "MAX_ID_LENGTH",
    "MessageEntry",
    "OwnerState",
    "RedactedEntry",
    "RemovedEntry",
    "ThreadEntry",
    "ThreadSnapshot",
    "ThreadStore",
    "VariantInfo",
    "check_storable",
    "validate_id",
]
