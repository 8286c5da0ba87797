"""Spans and metrics of the Thread operations: append, edit, select, redact, remove, delete.

Each operation of a `Thread` handle runs in a `crux.thread.<operation>` span and is counted
in `crux.thread.operations` (see `telemetry.metrics`). Both carry ids, counts, the status
and whether an identical retry was replayed: never message text or metadata. Off, and free,
until telemetry is configured (`telemetry.setup`).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field

from telemetry import metrics, tracing
from telemetry.logs import get_logger
from telemetry.tracing import GEN_AI_CONVERSATION_ID, Attributes
from vocabulary.commits import ThreadCommit

_log = get_logger(__name__)

_MAX_IDS = 64
"""Ids kept on a span (a redaction may name many; the count is always exact)."""


@dataclass
class ThreadOperation:
    """What one Thread operation did, filled in by the operation (content-free).

    Attributes:
        status: `selected` or `alternative` for a publication, `ok` otherwise.
        replayed: An identical retry returned the stored receipt.
        message_ids: The ids the operation published or erased.
        head: The selected head afterwards, when the operation reports it.
    """

    status: str = "ok"
    replayed: bool = False
    message_ids: tuple[str, ...] = field(default=())
    head: str | None = None

    def committed(self, commit: ThreadCommit) -> ThreadCommit:
        """Take the outcome of a publication; returns it unchanged."""
        self.status = commit.status
        self.replayed = commit.replayed
        self.message_ids = tuple(commit.message_ids)
        self.head = commit.selected_head
        return commit

    def attributes(self) -> Attributes:
        """The span attributes of the outcome."""
        return {
            "crux.thread.status": self.status,
            "crux.thread.replayed": self.replayed,
            "crux.thread.message_ids": self.message_ids[:_MAX_IDS],
            "crux.thread.messages": len(self.message_ids),
            "crux.thread.head": self.head,
        }


@contextmanager
def observed(
    operation: str, thread_id: str, *, owner: str | None = None
) -> Generator[ThreadOperation]:
    """Run one Thread operation in its span and count it.

    Args:
        operation: `append`, `edit`, `select`, `redact`, `remove` or `delete`.
        thread_id: The Thread.
        owner: The owner whose head the operation reads or moves, if any.

    Yields:
        The outcome the operation fills in.
    """
    outcome = ThreadOperation()
    attributes: Attributes = {
        GEN_AI_CONVERSATION_ID: thread_id,
        "crux.thread.operation": operation,
        "crux.thread.owner": owner,
    }
    with tracing.span(f"crux.thread.{operation}", attributes) as current:
        try:
            yield outcome
        except BaseException:
            _record(operation, "error", replayed=False)
            raise
        if current is not None:
            current.set_attributes(tracing.clean(outcome.attributes()))
        _record(operation, outcome.status, replayed=outcome.replayed)


def _record(operation: str, status: str, *, replayed: bool) -> None:
    # Observing must never fail the operation it observes (it already happened).
    try:
        metrics.record_thread_operation(operation, status, replayed=replayed)
    except Exception as error:  # pragma: no cover - a broken meter
        _log.warning("thread.metrics.failed", operation=operation, error_type=type(error).__name__)
