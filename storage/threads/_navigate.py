"""Navigation: edits (new selected siblings of user messages) and branch selection."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from storage.threads._append import REMEMBER_TIP, check_writer
from storage.threads._control import lock_live_control, publish
from storage.threads._db import Connection, write_transaction
from storage.threads._models import ThreadSnapshot
from storage.threads._nodes import Node, group_receipt, node, path_to, publish_group
from storage.threads._read import build_snapshot
from storage.threads._validate import check_id, prepare_batch
from vocabulary.commits import ThreadCommit
from vocabulary.errors import ThreadCommitError, ThreadError
from vocabulary.messages import JsonValue, Message, Part

_TIPS = """
SELECT branch_start, leaf FROM crux_thread_leaves WHERE thread_id = $1 AND owner_id = $2
ORDER BY branch_start COLLATE "C"
"""
_TIP = """
SELECT leaf FROM crux_thread_leaves WHERE thread_id = $1 AND owner_id = $2 AND branch_start = $3
"""
_GROUP_END = """
SELECT message_id FROM crux_thread_messages
WHERE thread_id = $1 AND group_id = $2 AND group_end
"""


def _on_path(path: list[Node], target: Node) -> bool:
    return target.depth < len(path) and path[target.depth].id == target.id


async def _best_continuation(
    connection: Connection, thread_id: str, owner: str, target: Node
) -> str:
    """The remembered tip whose path contains `target`: deepest branch point, then longest."""
    best: tuple[int, int, str] | None = None
    for row in await connection.fetch(_TIPS, thread_id, owner):
        path = await path_to(connection, thread_id, row["leaf"])
        if not _on_path(path, target):
            continue
        start_depth = next((n.depth for n in path if n.id == row["branch_start"]), -1)
        candidate = (start_depth, len(path), row["leaf"])
        if best is None or candidate[:2] > best[:2]:
            best = candidate
    return best[2] if best is not None else target.id


async def edit(
    pool: Any,
    thread_id: str,
    target_id: str,
    *,
    content: str | list[Part],
    replacement_id: str | None,
    metadata: dict[str, JsonValue],
    owner: str,
) -> ThreadCommit:
    """Publish a replacement user message beside `target_id` and select it."""
    check_id(thread_id, "thread", thread_id=thread_id)
    check_id(target_id, "message", thread_id=thread_id)
    check_id(owner, "owner", thread_id=thread_id)
    try:
        message = Message(id=replacement_id, role="user", content=content, metadata=metadata)
    except ValidationError:
        # Not chained: pydantic's error quotes the rejected values, message text included.
        raise ThreadError("invalid_message", "invalid edit content", thread_id=thread_id) from None
    [prepared] = prepare_batch([message], thread_id=thread_id)
    async with write_transaction(pool, thread_id) as connection:
        control = await lock_live_control(connection, thread_id)
        target = await node(connection, thread_id, target_id)
        if target is None:
            raise ThreadError(
                "not_found", f"message {target_id} is not published", thread_id=thread_id
            )
        if target.state == "redacted":
            raise ThreadError("redacted", f"message {target_id} is redacted", thread_id=thread_id)
        existing = await node(connection, thread_id, prepared.id)
        if existing is not None:
            if existing.state == "redacted":
                raise ThreadError(
                    "redacted", f"message {prepared.id} is redacted", thread_id=thread_id
                )
            receipt = await group_receipt(connection, thread_id, existing.group_id)
            if (
                receipt is not None
                and existing.edit_of == target_id
                and existing.identity == prepared.identity
                and receipt.message_ids == [prepared.id]
            ):
                return receipt.commit(replayed=True)
            raise ThreadError(
                "identity_conflict",
                f"message id {prepared.id} is already used",
                thread_id=thread_id,
            )
        if not (
            target.state == "live"
            and target.role == "user"
            and target.seq == 0
            and target.group_end
        ):
            raise ThreadError(
                "invalid_group",
                f"message {target_id} is not a sole-member live user message",
                thread_id=thread_id,
            )
        check_writer(control, owner)
        head = control.head(owner)
        if head is None:
            raise ThreadError("not_found", f"owner {owner} has no head", thread_id=thread_id)
        current = await path_to(connection, thread_id, head)
        parent_path = (
            await path_to(connection, thread_id, target.parent_id) if target.parent_id else []
        )
        shared = 0
        while (
            shared < len(current)
            and shared < len(parent_path)
            and current[shared].id == parent_path[shared].id
        ):
            shared += 1
        if shared < len(current):
            # Remember the branch being left so selecting it again restores this head.
            await connection.execute(REMEMBER_TIP, thread_id, owner, current[shared].id, head)
        if _on_path(current, target):
            continuation = head
        else:
            continuation = await _best_continuation(connection, thread_id, owner, target)
        await connection.execute(REMEMBER_TIP, thread_id, owner, target_id, continuation)
        control.heads[owner] = prepared.id
        receipt = await publish_group(
            connection,
            control,
            owner=owner,
            parent=parent_path[-1] if parent_path else None,
            batch=[prepared],
            status="selected",
            selected_head=prepared.id,
            edit_of=target_id,
        )
        return receipt.commit(replayed=False)


async def select(pool: Any, thread_id: str, target_id: str, *, owner: str) -> ThreadSnapshot:
    """Make the branch starting at `target_id` the owner's selected path."""
    check_id(thread_id, "thread", thread_id=thread_id)
    check_id(target_id, "message", thread_id=thread_id)
    check_id(owner, "owner", thread_id=thread_id)
    async with write_transaction(pool, thread_id) as connection:
        control = await lock_live_control(connection, thread_id)
        target = await node(connection, thread_id, target_id)
        if target is None:
            raise ThreadError(
                "not_found", f"message {target_id} is not published", thread_id=thread_id
            )
        head = control.head(owner)
        if head is None:
            raise ThreadError("not_found", f"owner {owner} has no head", thread_id=thread_id)
        check_writer(control, owner)
        current = await path_to(connection, thread_id, head)
        if _on_path(current, target):
            return await build_snapshot(connection, control, thread_id, owner=owner, at=head)
        sibling = current[target.depth] if target.depth < len(current) else None
        if target.seq != 0 or sibling is None or sibling.parent_id != target.parent_id:
            raise ThreadError(
                "invalid_group",
                f"message {target_id} is not a sibling of the selected path",
                thread_id=thread_id,
            )
        leaf: str | None = await connection.fetchval(_TIP, thread_id, owner, target_id)
        if leaf is None:
            leaf = await connection.fetchval(_GROUP_END, thread_id, target.group_id)
        restored = await path_to(connection, thread_id, leaf) if leaf is not None else []
        if (
            leaf is None
            or not restored
            or not _on_path(restored, target)
            or not restored[-1].group_end
        ):
            raise ThreadCommitError(
                f"remembered continuation of {target_id} is inconsistent", thread_id=thread_id
            )
        await connection.execute(REMEMBER_TIP, thread_id, owner, sibling.id, head)
        control.heads[owner] = leaf
        await publish(connection, control)
        return await build_snapshot(connection, control, thread_id, owner=owner, at=leaf)
