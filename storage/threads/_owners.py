"""Durable owners: registration, closing and release, each with an independent head."""

from __future__ import annotations

from typing import Any

from storage.threads._control import lock_control, lock_live_control, publish
from storage.threads._db import write_transaction
from storage.threads._validate import MAIN_OWNER, check_id
from vocabulary.errors import ThreadError

_FORGET_TIPS = "DELETE FROM crux_thread_leaves WHERE thread_id = $1 AND owner_id = $2"


def _check(thread_id: str, owner_id: str) -> None:
    check_id(thread_id, "thread", thread_id=thread_id)
    check_id(owner_id, "owner", thread_id=thread_id)
    if owner_id == MAIN_OWNER:
        raise ThreadError("identity_conflict", "owner main is reserved", thread_id=thread_id)


async def register(pool: Any, thread_id: str, owner_id: str, state: str) -> None:
    """Register `owner_id` in `state`; identical re-registration is a no-op."""
    _check(thread_id, owner_id)
    if state not in ("open", "closed"):
        raise ThreadError(
            "invalid_message", "owner state must be open or closed", thread_id=thread_id
        )
    async with write_transaction(pool, thread_id) as connection:
        control = await lock_control(connection, thread_id, create=True)
        assert control is not None
        control.ensure_live()
        current = control.owners.get(owner_id)
        if current == state:
            return
        if current is not None:
            raise ThreadError(
                "identity_conflict",
                f"owner {owner_id} is registered as {current}",
                thread_id=thread_id,
            )
        control.owners[owner_id] = state
        await publish(connection, control)


async def close(pool: Any, thread_id: str, owner_id: str) -> None:
    """Move a registered owner to `closed` (idempotent)."""
    _check(thread_id, owner_id)
    async with write_transaction(pool, thread_id) as connection:
        control = await lock_live_control(connection, thread_id)
        current = control.owners.get(owner_id)
        if current is None:
            raise ThreadError(
                "not_found", f"owner {owner_id} is not registered", thread_id=thread_id
            )
        if current == "closed":
            return
        control.owners[owner_id] = "closed"
        await publish(connection, control)


async def release(pool: Any, thread_id: str, owner_id: str) -> None:
    """Forget an owner's registration, head and remembered tips (idempotent)."""
    _check(thread_id, owner_id)
    async with write_transaction(pool, thread_id) as connection:
        control = await lock_control(connection, thread_id, create=False)
        if control is None:
            return
        control.ensure_live()
        if owner_id not in control.owners and owner_id not in control.heads:
            return
        control.owners.pop(owner_id, None)
        control.heads.pop(owner_id, None)
        await connection.execute(_FORGET_TIPS, thread_id, owner_id)
        await publish(connection, control)
