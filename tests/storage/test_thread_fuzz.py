"""Differential state-machine test: random Thread operations on PostgreSQL and on a model.

Every observable result (receipts without timestamps, snapshots, history views, revisions and
error codes) must match the in-memory reference model in `thread_model.py`. The async store
runs on one event loop owned by the test; tables are emptied between examples.

`CRUX_FUZZ_EXAMPLES` sets the number of examples (500 by default; `make fuzz` runs the slow
variant with 5000).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from crux.errors import ThreadError
from crux.messages import Message
from storage import create_pool
from storage.threads import MessageEntry, RemovedEntry, ThreadSnapshot, ThreadStore
from tests.storage.thread_model import ModelError, ModelThread

THREADS = st.sampled_from(["a", "b"])
IDS = st.sampled_from([f"m{i}" for i in range(8)])
TEXTS = st.sampled_from(["x", "y"])
ROLES = st.sampled_from(["user", "assistant"])
BATCHES = st.lists(st.tuples(IDS, ROLES, TEXTS), min_size=1, max_size=3)
MAYBE_ID = st.none() | IDS

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
    runner: ClassVar[asyncio.Runner]
    store: ClassVar[ThreadStore]

    def __init__(self) -> None:
        super().__init__()
        self.models = {"a": ModelThread(), "b": ModelThread()}
        self.runner.run(self.store.pool.execute(_RESET))

    def _check(
        self,
        expected: Callable[[], Any],
        actual: Callable[[], Coroutine[Any, Any, Any]],
        render: Callable[[Any], Any] = lambda value: value,
    ) -> None:
        try:
            want: tuple[str, Any] = ("ok", expected())
        except ModelError as error:
            want = ("error", error.code)
        try:
            got: tuple[str, Any] = ("ok", render(self.runner.run(actual())))
        except ThreadError as error:
            got = ("error", error.code)
        assert got == want

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

    @rule(thread=THREADS, batch=BATCHES, after=MAYBE_ID)
    def append(self, thread: str, batch: list[tuple[str, str, str]], after: str | None) -> None:
        self._check(
            lambda: self.models[thread].append(batch, explicit=after is not None, parent_id=after),
            lambda: self.store.append(thread, self._messages(batch), after=after),
            self._receipt,
        )

    @rule(thread=THREADS, batch=BATCHES, expected=MAYBE_ID)
    def managed_commit(
        self, thread: str, batch: list[tuple[str, str, str]], expected: str | None
    ) -> None:
        self._check(
            lambda: self.models[thread].append(batch, explicit=True, parent_id=expected),
            lambda: self.store.commit_managed_turn(
                thread, self._messages(batch), expected_head=expected
            ),
            self._receipt,
        )

    @rule(thread=THREADS, node=IDS, text=TEXTS, new_id=IDS)
    def edit(self, thread: str, node: str, text: str, new_id: str) -> None:
        self._check(
            lambda: self.models[thread].edit(node, text, new_id),
            lambda: self.store.edit(thread, node, content=text, id=new_id),
            self._receipt,
        )

    @rule(thread=THREADS, node=IDS)
    def select(self, thread: str, node: str) -> None:
        self._check(
            lambda: self.models[thread].select(node),
            lambda: self.store.select(thread, node),
            _snapshot,
        )

    @rule(thread=THREADS, ids=st.lists(IDS, max_size=3))
    def redact(self, thread: str, ids: list[str]) -> None:
        self._check(lambda: self.models[thread].redact(ids), lambda: self.store.redact(thread, ids))

    @rule(thread=THREADS, node=IDS)
    def remove(self, thread: str, node: str) -> None:
        self._check(
            lambda: self.models[thread].remove(node),
            lambda: self.store.remove_group(thread, node),
        )

    @rule(thread=THREADS, dice=st.integers(0, 5))
    def delete(self, thread: str, dice: int) -> None:
        if dice:
            return  # deletion ends a Thread's story; keep it rare
        self._check(lambda: self.models[thread].delete(), lambda: self.store.delete(thread))

    @rule(thread=THREADS, at=MAYBE_ID, before=MAYBE_ID, limit=st.none() | st.integers(1, 4))
    def read(self, thread: str, at: str | None, before: str | None, limit: int | None) -> None:
        self._check(
            lambda: self.models[thread].read(at=at, before=before, limit=limit),
            lambda: self.store.read(thread, at=at, before=before, limit=limit),
            _snapshot,
        )

    @rule(thread=THREADS, counts=st.dictionaries(IDS, st.integers(0, 50), max_size=3))
    def store_tokens(self, thread: str, counts: dict[str, int]) -> None:
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


@pytest.mark.timeout(600)
def test_thread_store_matches_the_reference_model(database_url: str) -> None:
    _run(database_url, examples=_examples(500), steps=30)


@pytest.mark.slow
@pytest.mark.timeout(0)
@pytest.mark.skipif(
    "CRUX_FUZZ_EXAMPLES" not in os.environ, reason="long runs only under `make fuzz`"
)
def test_thread_store_matches_the_reference_model_long_runs(database_url: str) -> None:
    _run(database_url, examples=_examples(5000), steps=60)
