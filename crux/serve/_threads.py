"""`/v1/threads`: a tenant's Threads through the public Thread operations.

Thread ids go in the path, percent-encoded (`/` as `%2F`); message ids go in bodies. A
Thread that was never written, a deleted one and another tenant's all answer 404 alike.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from crux.serve._deps import Scope, Shared
from crux.serve._errors import ERROR_RESPONSES, NotFoundError
from crux.serve._models import AppendRequest, EditRequest, MessageRef, RedactRequest
from crux.serve._tenancy import TenantScope
from crux.thread import Thread
from storage import ThreadSnapshot, ThreadStore
from storage.threads import EMPTY_REVISION
from vocabulary.commits import ThreadCommit
from vocabulary.errors import ThreadError
from vocabulary.ids import MAX_SCOPE_ID_LENGTH

router = APIRouter(prefix="/v1/threads", tags=["threads"], responses=ERROR_RESPONSES)

_MAX_PAGE = 1000


def _handle(scope: TenantScope, thread_id: str, store: ThreadStore) -> Thread:
    return Thread(id=scope.thread(thread_id), store=store)


def _external(scope: TenantScope, snapshot: ThreadSnapshot) -> ThreadSnapshot:
    return snapshot.model_copy(update={"thread_id": scope.external_thread(snapshot.thread_id)})


async def _existing(scope: TenantScope, thread_id: str, store: ThreadStore) -> Thread:
    """A handle on a Thread that holds messages, else `NotFoundError` (one query either way)."""
    handle = _handle(scope, thread_id, store)
    try:
        revision = await handle.revision()
    except ThreadError as error:
        if error.code == "deleted":
            raise NotFoundError from None
        raise
    if revision == EMPTY_REVISION:
        raise NotFoundError
    return handle


@router.get("/{thread_id:path}", summary="Read a Thread's selected path (or a page of it)")
async def read_thread(
    thread_id: str,
    scope: Scope,
    shared: Shared,
    at: Annotated[str | None, Query(min_length=1, max_length=MAX_SCOPE_ID_LENGTH)] = None,
    before: Annotated[str | None, Query(min_length=1, max_length=MAX_SCOPE_ID_LENGTH)] = None,
    limit: Annotated[int | None, Query(ge=1, le=_MAX_PAGE)] = None,
) -> ThreadSnapshot:
    """The root-to-head path: every entry with its variants (siblings), tombstones included.

    `at` addresses another message instead of the head (a branch); `before` with `limit`
    pages towards the root (the snapshot's `cursor` is the next `before`).
    """
    handle = await _existing(scope, thread_id, shared.threads)
    return _external(scope, await handle.read(at=at, before=before, limit=limit))


@router.post("/{thread_id:path}/messages", summary="Append messages as one causal group")
async def append_messages(
    thread_id: str, body: AppendRequest, scope: Scope, shared: Shared
) -> ThreadCommit:
    """Publish the messages after the head (or `after`); creates the Thread if new.

    A retry with the same message ids returns the stored receipt with `replayed: true`.
    """
    handle = _handle(scope, thread_id, shared.threads)
    return await handle.append(body.messages, after=body.after)


@router.post("/{thread_id:path}/edit", summary="Edit a user message as a new selected branch")
async def edit_message(
    thread_id: str, body: EditRequest, scope: Scope, shared: Shared
) -> ThreadCommit:
    """Publish an edited copy of a user message (alone in its group) and select it."""
    handle = await _existing(scope, thread_id, shared.threads)
    return await handle.edit(
        body.message_id, content=body.content, id=body.id, metadata=body.metadata
    )


@router.post("/{thread_id:path}/select", summary="Select a sibling branch")
async def select_branch(
    thread_id: str, body: MessageRef, scope: Scope, shared: Shared
) -> ThreadSnapshot:
    """Select the branch of `message_id`; returns the path at the new head."""
    handle = await _existing(scope, thread_id, shared.threads)
    return _external(scope, await handle.select(body.message_id))


@router.post("/{thread_id:path}/redact", status_code=204, summary="Redact messages")
async def redact_messages(
    thread_id: str, body: RedactRequest, scope: Scope, shared: Shared
) -> Response:
    """Erase the messages irreversibly (their derived copies too), leaving tombstones."""
    handle = await _existing(scope, thread_id, shared.threads)
    await handle.redact(body.ids)
    return Response(status_code=204)


@router.post("/{thread_id:path}/remove", status_code=204, summary="Remove a causal group")
async def remove_group(thread_id: str, body: MessageRef, scope: Scope, shared: Shared) -> Response:
    """Hide the whole causal group of `message_id` from the path (provenance is kept)."""
    handle = await _existing(scope, thread_id, shared.threads)
    await shared.threads.remove_group(handle.id, body.message_id)
    return Response(status_code=204)


@router.delete("/{thread_id:path}", status_code=204, summary="Delete a Thread")
async def delete_thread(thread_id: str, scope: Scope, shared: Shared) -> Response:
    """Delete the Thread permanently with everything derived from it.

    Deleting again answers 204; a Thread that never held a message answers 404.
    """
    handle = _handle(scope, thread_id, shared.threads)
    try:
        revision = await handle.revision()
    except ThreadError as error:
        if error.code == "deleted":
            return Response(status_code=204)
        raise
    if revision == EMPTY_REVISION:
        raise NotFoundError
    await handle.delete()
    return Response(status_code=204)
