"""Thread behaviours 1-23 (semantics digest section 8): construction, ids, reads, revisions."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from pydantic import ValidationError

from crux.errors import ThreadError
from crux.thread import thread
from storage.threads import EMPTY_REVISION, MessageEntry, ThreadStore
from tests.storage.conftest import abc_def, assistant, ids, tool_call, tool_result, user
from vocabulary.messages import Message

BAD_IDS = ["", "x" * 513, " padded", "padded ", "a\x00b", "tab\tbed", "del\x7f"]


class _NoIOPool:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"storage touched: {name}")


async def test_b01_creating_a_handle_does_no_io(pool: asyncpg.Pool) -> None:
    handle = thread(id="t", storage=ThreadStore(_NoIOPool()))  # type: ignore[arg-type]
    assert handle.id == "t"
    thread(id="t", storage=pool)
    assert await pool.fetchval("SELECT count(*) FROM crux_threads") == 0


async def test_b02_handle_without_storage_fails_first_operation_unsupported() -> None:
    handle = thread(id="t")
    with pytest.raises(ThreadError) as caught:
        await handle.read()
    assert caught.value.code == "unsupported_capability"
    with pytest.raises(ThreadError) as caught:
        await handle.append(user("u"))
    assert caught.value.code == "unsupported_capability"


async def test_b03_never_written_thread_reads_empty(store: ThreadStore) -> None:
    snapshot = await thread(id="fresh", storage=store).read()
    assert snapshot.entries == ()
    assert snapshot.head is None
    assert snapshot.revision == EMPTY_REVISION
    assert snapshot.cursor is None


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_b04_invalid_ids_are_rejected(store: ThreadStore, bad: str) -> None:
    with pytest.raises(ThreadError) as caught:
        thread(id=bad, storage=store)
    assert caught.value.code == "invalid_message"
    with pytest.raises(ThreadError) as caught:
        await store.append("t", user(bad))
    assert caught.value.code == "invalid_message"
    with pytest.raises(ThreadError) as caught:
        await store.read(bad)
    assert caught.value.code == "invalid_message"


async def test_b04_ids_of_512_characters_are_accepted(store: ThreadStore) -> None:
    long_id = "x" * 512
    receipt = await store.append(long_id, user(long_id))
    assert receipt.message_ids == (long_id,)


async def test_b05_generated_ids_start_with_msg_and_first_entry_has_no_variant(
    store: ThreadStore,
) -> None:
    receipt = await store.append("t", user(None))
    assert receipt.message_ids[0].startswith("msg_")
    [entry] = (await store.read("t")).entries
    assert isinstance(entry, MessageEntry)
    assert entry.variant is None


async def test_b06_first_append_is_selected_at_the_root(store: ThreadStore) -> None:
    receipt = await store.append("t", user("u1"))
    assert receipt.status == "selected"
    assert receipt.parent_id is None
    assert receipt.selected_head == "u1"
    assert receipt.replayed is False
    assert receipt.message_ids == ("u1",)


async def test_b07_a_batch_is_one_group_in_input_order(store: ThreadStore) -> None:
    await store.append("t", [user("a"), assistant("b"), assistant("c")])
    snapshot = await store.read("t")
    assert ids(snapshot) == ["a", "b", "c"]
    assert [entry.parent_id for entry in snapshot.entries] == [None, "a", "b"]


async def test_b08_second_append_follows_the_previous_group_end(store: ThreadStore) -> None:
    await store.append("t", [user("a"), assistant("b")])
    receipt = await store.append("t", user("c"))
    assert receipt.parent_id == "b"


async def test_b09_empty_batch_is_rejected_and_writes_nothing(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    with pytest.raises(ThreadError) as caught:
        await store.append("t", [])
    assert caught.value.code == "invalid_message"
    assert await pool.fetchval("SELECT count(*) FROM crux_threads") == 0
    assert await store.revision("t") == EMPTY_REVISION


async def test_b10_duplicate_id_in_a_batch_conflicts(store: ThreadStore) -> None:
    with pytest.raises(ThreadError) as caught:
        await store.append("t", [user("a"), assistant("a")])
    assert caught.value.code == "identity_conflict"


async def test_b11_tool_result_without_call_is_invalid(store: ThreadStore) -> None:
    with pytest.raises(ThreadError) as caught:
        await store.append("t", [user("u"), tool_result("r", "c1"), assistant("a")])
    assert caught.value.code == "invalid_message"
    with pytest.raises(ThreadError) as caught:
        await store.append("t", [tool_call("a1", "c1"), tool_result("r", "c2")])
    assert caught.value.code == "invalid_message"


async def test_b12_tool_call_without_result_is_invalid(store: ThreadStore) -> None:
    with pytest.raises(ThreadError) as caught:
        await store.append("t", [user("u"), tool_call("a1", "c1")])
    assert caught.value.code == "invalid_message"
    with pytest.raises(ThreadError) as caught:
        await store.append("t", [user("u"), tool_call("a1", "c1"), assistant("a2")])
    assert caught.value.code == "invalid_message"


async def test_b13_tool_round_trips_exactly(store: ThreadStore) -> None:
    batch = [user("u"), tool_call("a1", "c1"), tool_result("r1", "c1"), assistant("a2", "done")]
    await store.append("t", batch)
    snapshot = await store.read("t")
    read_back = [
        entry.to_message() for entry in snapshot.entries if isinstance(entry, MessageEntry)
    ]
    assert read_back == batch
    assert await store.load_messages("t", ["u", "a1", "r1", "a2"]) == batch


async def test_b14_receipts_and_snapshots_are_immutable(store: ThreadStore) -> None:
    receipt = await store.append("t", user("u"))
    snapshot = await store.read("t")
    with pytest.raises(ValidationError):
        receipt.status = "alternative"
    with pytest.raises(ValidationError):
        snapshot.head = "x"
    with pytest.raises(TypeError):
        snapshot.entries[0] = snapshot.entries[0]  # type: ignore[index]
    with pytest.raises(ValidationError):
        snapshot.entries[0].id = "x"
    view = await store.read_history_view("t")
    with pytest.raises(ValidationError):
        view.messages[0].tokens = 3


async def test_b15_limit_pages_whole_groups_from_the_newest(store: ThreadStore) -> None:
    await abc_def(store)
    page = await store.read("t", limit=2)
    assert ids(page) == ["d", "e", "f"]
    assert page.cursor == "d"


async def test_b16_before_pages_backwards_until_no_cursor(store: ThreadStore) -> None:
    await abc_def(store)
    page = await store.read("t", before="d", limit=2)
    assert ids(page) == ["c"]
    assert page.cursor == "c"
    last = await store.read("t", before="c", limit=2)
    assert ids(last) == ["a", "b"]
    assert last.cursor is None


async def test_b17_read_at_returns_a_structural_prefix_without_selecting(
    store: ThreadStore,
) -> None:
    await abc_def(store)
    snapshot = await store.read("t", at="e")
    assert ids(snapshot) == ["a", "b", "c", "d", "e"]
    assert snapshot.head == "e"
    assert (await store.read("t")).head == "f"


async def test_b18_before_rules(store: ThreadStore) -> None:
    await abc_def(store)
    await store.append("t", user("x"), after="b")
    for kwargs, code in [
        ({"before": "d"}, "invalid_group"),
        ({"before": "e", "limit": 2}, "invalid_group"),
        ({"before": "x", "limit": 2}, "not_found"),
    ]:
        with pytest.raises(ThreadError) as caught:
            await store.read("t", **kwargs)
        assert caught.value.code == code


@pytest.mark.parametrize("limit", [0, -1, 1.5, True])
async def test_b19_limit_must_be_a_positive_integer(store: ThreadStore, limit: Any) -> None:
    await store.append("t", user("u"))
    with pytest.raises(ThreadError) as caught:
        await store.read("t", limit=limit)
    assert caught.value.code == "invalid_message"


async def test_b20_read_at_unknown_is_not_found(store: ThreadStore) -> None:
    await store.append("t", user("u"))
    with pytest.raises(ThreadError) as caught:
        await store.read("t", at="nope")
    assert caught.value.code == "not_found"


async def test_b21_paged_reads_name_the_addressed_head(store: ThreadStore) -> None:
    await abc_def(store)
    page = await store.read("t", before="d", limit=1)
    assert page.head == "f"
    pinned = await store.read("t", at="c", before="c", limit=5)
    assert pinned.head == "c"
    assert ids(pinned) == ["a", "b"]


async def test_b22_revision_changes_on_every_mutation_and_never_on_reads(
    store: ThreadStore,
) -> None:
    seen = [await store.revision("t")]

    async def changed() -> None:
        current = await store.revision("t")
        assert current not in seen
        seen.append(current)

    await store.append("t", user("u1"))
    await changed()
    await store.append("t", assistant("a1"))
    await changed()
    await store.edit("t", "u1", content="again", id="u1b")
    await changed()
    await store.select("t", "u1")
    await changed()
    await store.redact("t", "a1")
    await changed()
    await store.remove_group("t", "u1b")
    await changed()
    await store.register_owner("t", "session-1")
    await changed()
    await store.close_owner("t", "session-1")
    await changed()
    await store.release_owner("t", "session-1")
    await changed()
    await store.read("t")
    await store.read("t", at="u1b")
    await store.read_history_view("t")
    await store.load_messages("t", ["u1"])
    assert await store.revision("t") == seen[-1]


async def test_b23_replays_and_derived_writes_keep_the_revision(store: ThreadStore) -> None:
    """Our equivalent of receipt finalisation: nothing after publication moves the revision."""
    await store.append("t", [user("u1"), assistant("a1")])
    revision = await store.revision("t")
    await store.append("t", [user("u1"), assistant("a1")])
    await store.store_token_counts("t", "enc", {"u1": 1, "a1": 2})
    assert await store.revision("t") == revision


@pytest.mark.parametrize("limit", [1, 2, 5, 17])
async def test_b15_b16_paging_a_long_path_returns_every_group_once(
    store: ThreadStore, limit: int
) -> None:
    sizes = [1, 3, 2, 30, 1, 2, *([1, 2, 3] * 12), 40]
    for index, size in enumerate(sizes):
        await store.append(
            "t", [assistant(f"g{index}-{member}") for member in range(size)], after=None
        )
    everything = ids(await store.read("t"))
    pages: list[list[str]] = []
    before: str | None = None
    while True:
        page = await store.read("t", before=before, limit=limit)
        assert page.head == everything[-1]
        pages.append(ids(page))
        groups = {entry_id.split("-")[0] for entry_id in ids(page)}
        for group in groups:
            # Pages never split a group.
            assert sum(1 for i in ids(page) if i.startswith(f"{group}-")) == sizes[int(group[1:])]
        if page.cursor is None:
            break
        assert page.cursor == ids(page)[0]
        before = page.cursor
    assert [entry for page in reversed(pages) for entry in page] == everything


async def test_loaded_messages_carry_their_ids_whatever_the_id_holds(store: ThreadStore) -> None:
    quoted = 'msg "quoted" \\ back/slash é'
    await store.append("ids", [Message(id=quoted, role="user", content="hi")])
    await store.append("ids", [Message(id="bare", role="user", content=[])])
    loaded = await store.load_messages("ids", ["bare", quoted, "bare"])
    assert [message.id for message in loaded] == ["bare", quoted, "bare"]
    assert loaded[1].text == "hi"
