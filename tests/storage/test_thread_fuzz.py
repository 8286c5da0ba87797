"""Differential state-machine test: random Thread operations on PostgreSQL and on a model.

Every observable result (receipts without timestamps, snapshots, history views, revisions and
error codes) must match the in-memory reference model in `thread_model.py`, which derives each
answer from the Thread semantics on the whole materialised path and shares no code with the
store. Both Threads start with a few turns, and most ids the operations name are published
ones, so paths grow long enough that reads page, cut before a cursor and walk back a whole
path page by page. The async store runs on one event loop owned by the test; tables are
emptied between examples.

`CRUX_FUZZ_EXAMPLES` sets the number of examples (500 by default, run as two independent
halves so that parallel workers share them; `make fuzz` runs the slow variant with 5000).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)

from crux.errors import ThreadError
from crux.messages import Message
from storage import create_pool
from storage.threads import MessageEntry, RemovedEntry, ThreadSnapshot, ThreadStore
from tests.storage.thread_model import ModelError, ModelThread

THREADS = st.sampled_from(["a", "b"])
TEXTS = st.sampled_from(["x", "y"])
ROLES = st.sampled_from(["user", "assistant"])
STRANGER = "m-unknown"
"""An id never published on any Thread: the `not_found` paths."""
LIMITS = st.none() | st.integers(1, 4)

_RESET = """
DELETE FROM crux_thread_token_counts; DELETE FROM crux_thread_leaves;
DELETE FROM crux_thread_groups; DELETE FROM crux_thread_messages; DELETE FROM crux_threads;
"""


def _examples(default: int) -> int:
    return int(os.environ.get("CRUX_FUZZ_EXAMPLES", default))


def _snapshot(snapshot: ThreadSnapshot) -> tuple[Any, ...]:
    entries: list[tuple[Any, ...]] = []
    for entry in snapshot.entries:
        if isinstance(entry, MessageEntry):
            variant = entry.variant
            entries.append(
                (
                    "message",
                    entry.id,
                    entry.parent_id,
                    (entry.role, entry.content),
                    None
                    if variant is None
                    else (variant.index, variant.count, variant.previous, variant.next),
                )
            )
        elif isinstance(entry, RemovedEntry):
            entries.append(("removed", entry.id, entry.parent_id))
        else:
            entries.append(("redacted", entry.id, entry.parent_id))
    return (snapshot.revision, snapshot.head, tuple(entries), snapshot.cursor)


class ThreadMachine(RuleBasedStateMachine):
    """Random operations whose ids mostly name messages the Thread has, so paths grow long.

    Ids are drawn from the model's published messages (most of the time), from ids new to
    both Threads, or `STRANGER`; a fresh id is new to both Threads, so a batch of fresh
    ids appends instead of colliding, and reused ids exercise replays and conflicts.
    """

    runner: ClassVar[asyncio.Runner]
    store: ClassVar[ThreadStore]

    def __init__(self) -> None:
        super().__init__()
        self.models = {"a": ModelThread(), "b": ModelThread()}
        self.batches: dict[str, list[list[tuple[str, str, str]]]] = {"a": [], "b": []}
        self.fresh = 0
        self.runner.run(self.store.pool.execute(_RESET))

    # -- inputs ----------------------------------------------------------------------------

    def _new_id(self) -> str:
        self.fresh += 1
        return f"m{self.fresh}"

    def _known(self, data: st.DataObject, thread: str) -> str:
        """A published id of `thread` (most often), or one it has never seen."""
        published = sorted(self.models[thread].messages)
        if published and data.draw(st.integers(0, 5)) > 0:
            return data.draw(st.sampled_from(published))
        return STRANGER

    def _maybe_known(self, data: st.DataObject, thread: str) -> str | None:
        return None if data.draw(st.booleans()) else self._known(data, thread)

    def _batch(self, data: st.DataObject, thread: str) -> list[tuple[str, str, str]]:
        """One to three messages: new ids mostly, a published one at times, or a replay."""
        earlier = self.batches[thread]
        if earlier and data.draw(st.integers(0, 4)) == 0:
            batch = list(data.draw(st.sampled_from(earlier)))
            if data.draw(st.booleans()):
                index = data.draw(st.integers(0, len(batch) - 1))
                message_id, role, text = batch[index]
                batch[index] = (message_id, role, "y" if text == "x" else "x")
            return batch
        size = data.draw(st.integers(1, 3))
        return [
            (
                self._known(data, thread) if data.draw(st.integers(0, 7)) == 0 else self._new_id(),
                data.draw(ROLES),
                data.draw(TEXTS),
            )
            for _ in range(size)
        ]

    # -- checking --------------------------------------------------------------------------

    def _check(
        self,
        expected: Callable[[], Any],
        actual: Callable[[], Coroutine[Any, Any, Any]],
        render: Callable[[Any], Any] = lambda value: value,
    ) -> tuple[str, Any]:
        try:
            want: tuple[str, Any] = ("ok", expected())
        except ModelError as error:
            want = ("error", error.code)
        try:
            got: tuple[str, Any] = ("ok", render(self.runner.run(actual())))
        except ThreadError as error:
            got = ("error", error.code)
        assert got == want
        return got

    @staticmethod
    def _messages(batch: list[tuple[str, str, str]]) -> list[Message]:
        return [Message(id=i, role=role, content=text) for i, role, text in batch]  # type: ignore[arg-type]

    @staticmethod
    def _receipt(commit: Any) -> tuple[Any, ...]:
        return (
            commit.status,
            tuple(commit.message_ids),
            commit.parent_id,
            commit.selected_head,
            commit.replayed,
        )

    # -- operations ------------------------------------------------------------------------

    @initialize(data=st.data())
    def grow(self, data: st.DataObject) -> None:
        """Start each Thread with a few turns (none at times), so paging has paths to cut."""
        for thread in self.models:
            for _ in range(data.draw(st.integers(0, 4))):
                batch = [
                    (self._new_id(), data.draw(ROLES), data.draw(TEXTS))
                    for _ in range(data.draw(st.integers(1, 3)))
                ]
                self._append(thread, batch, after=None)

    @rule(thread=THREADS, data=st.data())
    def append(self, thread: str, data: st.DataObject) -> None:
        self._append(thread, self._batch(data, thread), after=self._maybe_known(data, thread))

    def _append(self, thread: str, batch: list[tuple[str, str, str]], after: str | None) -> None:
        outcome = self._check(
            lambda: self.models[thread].append(batch, explicit=after is not None, parent_id=after),
            lambda: self.store.append(thread, self._messages(batch), after=after),
            self._receipt,
        )
        if outcome[0] == "ok":
            self.batches[thread].append(batch)

    @rule(thread=THREADS, data=st.data())
    def managed_commit(self, thread: str, data: st.DataObject) -> None:
        batch = self._batch(data, thread)
        # Mostly the head a managed turn read; at times a stale or unknown one.
        head = self.models[thread].head
        expected = head if data.draw(st.booleans()) else self._maybe_known(data, thread)
        outcome = self._check(
            lambda: self.models[thread].append(batch, explicit=True, parent_id=expected),
            lambda: self.store.commit_managed_turn(
                thread, self._messages(batch), expected_head=expected
            ),
            self._receipt,
        )
        if outcome[0] == "ok":
            self.batches[thread].append(batch)

    @rule(thread=THREADS, text=TEXTS, data=st.data())
    def edit(self, thread: str, text: str, data: st.DataObject) -> None:
        # Mostly a message that can be edited (a live user message alone in its group).
        editable = sorted(
            m.id
            for m in self.models[thread].messages.values()
            if m.role == "user" and m.first and m.last and m.erased is None
        )
        if editable and data.draw(st.booleans()):
            node = data.draw(st.sampled_from(editable))
        else:
            node = self._known(data, thread)
        new_id = self._known(data, thread) if data.draw(st.integers(0, 3)) == 0 else self._new_id()
        self._check(
            lambda: self.models[thread].edit(node, text, new_id),
            lambda: self.store.edit(thread, node, content=text, id=new_id),
            self._receipt,
        )

    @rule(thread=THREADS, data=st.data())
    def select(self, thread: str, data: st.DataObject) -> None:
        node = self._known(data, thread)
        self._check(
            lambda: self.models[thread].select(node),
            lambda: self.store.select(thread, node),
            _snapshot,
        )

    @rule(thread=THREADS, data=st.data())
    def redact(self, thread: str, data: st.DataObject) -> None:
        ids = [self._known(data, thread) for _ in range(data.draw(st.integers(0, 3)))]
        self._check(lambda: self.models[thread].redact(ids), lambda: self.store.redact(thread, ids))

    @rule(thread=THREADS, data=st.data())
    def remove(self, thread: str, data: st.DataObject) -> None:
        node = self._known(data, thread)
        self._check(
            lambda: self.models[thread].remove(node),
            lambda: self.store.remove_group(thread, node),
        )

    @rule(thread=THREADS, dice=st.integers(0, 5))
    def delete(self, thread: str, dice: int) -> None:
        if dice:
            return  # deletion ends a Thread's story; keep it rare
        self._check(lambda: self.models[thread].delete(), lambda: self.store.delete(thread))

    @rule(thread=THREADS, limit=LIMITS, data=st.data())
    def read(self, thread: str, limit: int | None, data: st.DataObject) -> None:
        at = self._maybe_known(data, thread)
        self._read(thread, at=at, before=self._maybe_known(data, thread), limit=limit)

    def _read(
        self, thread: str, *, at: str | None, before: str | None, limit: int | None
    ) -> tuple[str, Any]:
        return self._check(
            lambda: self.models[thread].read(at=at, before=before, limit=limit),
            lambda: self.store.read(thread, at=at, before=before, limit=limit),
            _snapshot,
        )

    @rule(thread=THREADS, data=st.data())
    def page_back(self, thread: str, data: st.DataObject) -> None:
        """Page the whole selected path (or a prefix) newest first, as a client would."""
        limit = data.draw(st.integers(1, 4))
        at = self._maybe_known(data, thread)
        before: str | None = None
        for _ in range(40):
            page = self._read(thread, at=at, before=before, limit=limit)
            if page[0] == "error" or page[1][3] is None:
                return
            before = page[1][3]

    @rule(thread=THREADS, data=st.data())
    def store_tokens(self, thread: str, data: st.DataObject) -> None:
        counts = {
            self._known(data, thread): data.draw(st.integers(0, 50))
            for _ in range(data.draw(st.integers(0, 3)))
        }
        self._check(
            lambda: self.models[thread].store_tokens(counts),
            lambda: self.store.store_token_counts(thread, "enc", counts),
        )

    @rule(thread=THREADS)
    def history(self, thread: str) -> None:
        self._check(
            lambda: self.models[thread].history(),
            lambda: self.store.read_history_view(thread, encoding="enc"),
            lambda view: (
                view.revision,
                view.head,
                tuple((m.id, m.tokens) for m in view.messages),
            ),
        )


def _run(database_url: str, *, examples: int, steps: int) -> None:
    with asyncio.Runner() as runner:
        pool = runner.run(create_pool(database_url, min_size=1, max_size=2))
        try:
            ThreadMachine.runner = runner
            ThreadMachine.store = ThreadStore(pool)
            run_state_machine_as_test(
                ThreadMachine,
                settings=settings(
                    max_examples=examples,
                    stateful_step_count=steps,
                    deadline=None,
                    database=None,
                    suppress_health_check=[
                        HealthCheck.too_slow,
                        HealthCheck.function_scoped_fixture,
                        HealthCheck.filter_too_much,
                    ],
                ),
            )
        finally:
            runner.run(pool.close())


HALVES = 2
"""The CI examples run as independent halves, so parallel workers share them."""


@pytest.mark.timeout(600)
@pytest.mark.parametrize("half", range(HALVES))
def test_thread_store_matches_the_reference_model(database_url: str, half: int) -> None:
    _run(database_url, examples=_examples(500) // HALVES, steps=30)


@pytest.mark.slow
@pytest.mark.timeout(0)
@pytest.mark.skipif(
    "CRUX_FUZZ_EXAMPLES" not in os.environ, reason="long runs only under `make fuzz`"
)
def test_thread_store_matches_the_reference_model_long_runs(database_url: str) -> None:
    _run(database_url, examples=_examples(5000), steps=60)
