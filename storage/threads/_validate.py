"""Validation and normalisation of Thread input: ids, messages, batches, tool lifecycles.

Nothing here touches storage; every failure is a content-free `ThreadError`.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from vocabulary.errors import ThreadError
from vocabulary.ids import has_control_character, unstorable_text
from vocabulary.messages import FilePart, ImagePart, Message

MAX_ID_LENGTH = 512
MAIN_OWNER = "main"
GENERATED_ID_PREFIX = "msg_"


def check_id(value: object, what: str, *, thread_id: str | None = None) -> str:
    """Return `value` if it is a legal Thread, message or owner id.

    Raises:
        ThreadError: `invalid_message` for an empty, over-long, padded or control-character id.
    """
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_ID_LENGTH
        or value != value.strip()
        or has_control_character(value)
        or unstorable_text(value)
    ):
        # An invalid Thread id is not carried on the error: it is the caller's raw value.
        known = None if thread_id is value else thread_id
        raise ThreadError("invalid_message", f"invalid {what} id", thread_id=known)
    return value


_CONTROL_BYTES = bytes([*range(0x0A), *range(0x0B, 0x20), 0x7F])
"""The ASCII control characters (C0 and DEL) but the newline `check_ids` joins ids with."""


def check_ids(values: Sequence[object], what: str, *, thread_id: str | None = None) -> list[str]:
    """`values` as a list, if every one is a legal id (`check_id`), checked in bulk.

    The same rules as `check_id`, applied to the whole list at once when every id is
    printable ASCII (a long Thread's loads name thousands of ids, each `gen:...` or
    `msg_...`): a few scans of the joined text in C. Any other list is checked id by id,
    so an error is `check_id`'s for the first bad id.

    Raises:
        ThreadError: `invalid_message`, as `check_id`.
    """
    ids: list[Any] = list(values)
    if ids and all(map(isinstance, ids, repeat(str))) and all(ids):
        # The ids as lines of bytes: ASCII holds no surrogate, deleting the other control
        # characters deletes nothing when no id holds one (NUL included), and an id with a
        # newline of its own shows as one line too many.
        lines = "\n".join(ids)
        if lines.isascii():
            raw = lines.encode("ascii")
            if (
                len(raw.translate(None, _CONTROL_BYTES)) == len(raw)
                and raw.count(b"\n") == len(ids) - 1
                and (b" " not in raw or all(map(str.__eq__, ids, map(str.strip, ids))))
                and max(map(len, ids)) <= MAX_ID_LENGTH
            ):
                return ids
    return [check_id(value, what, thread_id=thread_id) for value in ids]


UNSTORABLE_TEXT = "text PostgreSQL cannot store (a NUL byte or a lone surrogate)"
"""The content-free reason given when a message holds such text."""


def has_unstorable_text(value: object) -> bool:
    """Whether any string in a JSON-like value (keys included) is unstorable text."""
    stack: list[object] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if unstorable_text(node):
                return True
        elif isinstance(node, dict):
            items: dict[object, object] = node  # pyright: ignore[reportUnknownVariableType]
            stack.extend(items.keys())
            stack.extend(items.values())
        elif isinstance(node, list | tuple):
            children: list[object] = list(node)  # pyright: ignore[reportUnknownArgumentType]
            stack.extend(children)
    return False


def check_storable(message: Message, *, thread_id: str | None = None) -> None:
    """Refuse a message PostgreSQL could never store, before any I/O.

    Raises:
        ThreadError: `invalid_message` (content-free) for a NUL byte or a lone surrogate
            anywhere in the message.
    """
    if has_unstorable_text(message.model_dump(mode="python")):
        raise ThreadError(
            "invalid_message", f"message holds {UNSTORABLE_TEXT}", thread_id=thread_id
        )


def canonical_json(value: Any) -> str:
    """Deterministic, key-sorted, compact JSON."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def message_body(message: Message) -> dict[str, Any]:
    """The persisted form of a message: everything except its id."""
    return message.model_dump(mode="json", exclude={"id"})


def message_identity(body: dict[str, Any]) -> str:
    """Content fingerprint of a persisted message (ids and timestamps excluded)."""
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class PreparedMessage:
    """A validated message ready to be stored."""

    id: str
    role: str
    body_json: str
    identity: str
    tool_call_id: str | None
    tool_call_ids: list[str]
    has_media: bool


def prepare_message(message: Message, *, thread_id: str) -> PreparedMessage:
    """Validate one message, assign a generated id when it has none, and fingerprint it.

    Raises:
        ThreadError: `invalid_message` when the id or the message is malformed.
    """
    if not isinstance(message, Message):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ThreadError("invalid_message", "not a canonical message", thread_id=thread_id)
    message_id = message.id if message.id is not None else f"{GENERATED_ID_PREFIX}{uuid.uuid4()}"
    check_id(message_id, "message", thread_id=thread_id)
    if message.role == "tool" and not message.tool_call_id:
        raise ThreadError(
            "invalid_message", f"tool message {message_id} has no tool_call_id", thread_id=thread_id
        )
    if message.role != "tool" and message.tool_call_id is not None:
        raise ThreadError(
            "invalid_message",
            f"message {message_id} has a tool_call_id but is not a tool message",
            thread_id=thread_id,
        )
    calls = [part.tool_call_id for part in message.tool_calls]
    if any(not call or has_control_character(call) for call in calls):
        raise ThreadError(
            "invalid_message",
            f"message {message_id} has an invalid tool call id",
            thread_id=thread_id,
        )
    if calls and message.role != "assistant":
        raise ThreadError(
            "invalid_message",
            f"message {message_id} has tool calls but is not an assistant message",
            thread_id=thread_id,
        )
    check_storable(message, thread_id=thread_id)
    try:
        body = message_body(message)
        body_json = canonical_json(body)
    except (TypeError, ValueError) as exc:
        raise ThreadError(
            "invalid_message", f"message {message_id} is not JSON-serialisable", thread_id=thread_id
        ) from exc
    return PreparedMessage(
        id=message_id,
        role=message.role,
        body_json=body_json,
        identity=hashlib.sha256(body_json.encode("utf-8")).hexdigest(),
        tool_call_id=message.tool_call_id,
        tool_call_ids=calls,
        has_media=any(isinstance(part, ImagePart | FilePart) for part in message.parts),
    )


def prepare_batch(messages: Sequence[Message], *, thread_id: str) -> list[PreparedMessage]:
    """Validate a batch that will become one causal group.

    Raises:
        ThreadError: `invalid_message` for an empty batch, a malformed message or a broken tool
            lifecycle; `identity_conflict` when two members share an id.
    """
    if not messages:
        raise ThreadError("invalid_message", "empty batch", thread_id=thread_id)
    prepared = [prepare_message(message, thread_id=thread_id) for message in messages]
    seen: set[str] = set()
    for item in prepared:
        if item.id in seen:
            raise ThreadError(
                "identity_conflict",
                f"message id {item.id} repeats in one batch",
                thread_id=thread_id,
            )
        seen.add(item.id)
    check_tool_lifecycle(prepared, thread_id=thread_id)
    return prepared


def check_tool_lifecycle(batch: Iterable[PreparedMessage], *, thread_id: str) -> None:
    """Every tool result answers a pending call of an earlier assistant message in the batch.

    No other message may follow an assistant message while its calls are pending, a call id
    may not repeat, and the batch may not end with pending calls.

    Raises:
        ThreadError: `invalid_message` on any violation.
    """
    pending: list[str] = []
    used: set[str] = set()
    for item in batch:
        if item.role == "tool":
            if item.tool_call_id not in pending:
                raise ThreadError(
                    "invalid_message",
                    f"tool result {item.id} answers no pending call",
                    thread_id=thread_id,
                )
            pending.remove(item.tool_call_id)
            continue
        if pending:
            raise ThreadError(
                "invalid_message",
                f"message {item.id} follows unanswered tool calls",
                thread_id=thread_id,
            )
        for call_id in item.tool_call_ids:
            if call_id in used:
                raise ThreadError(
                    "invalid_message", f"tool call id repeats at {item.id}", thread_id=thread_id
                )
            used.add(call_id)
            pending.append(call_id)
    if pending:
        raise ThreadError(
            "invalid_message", "batch ends with pending tool calls", thread_id=thread_id
        )


def normalise_id_set(ids: str | Iterable[str], *, thread_id: str) -> list[str]:
    """De-duplicate and sort a set of message ids, validating each one.

    Raises:
        ThreadError: `invalid_message` for an empty set or an invalid id.
    """
    # A mapping iterates its keys, and bytes their integers: neither is a list of ids.
    if not isinstance(ids, str | Iterable) or isinstance(ids, Mapping | bytes | bytearray):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ThreadError(
            "invalid_message", "ids must be an id or a list of ids", thread_id=thread_id
        )
    values: list[object] = [ids] if isinstance(ids, str) else list(ids)
    if not values:
        raise ThreadError("invalid_message", "empty id set", thread_id=thread_id)
    return sorted({check_id(value, "message", thread_id=thread_id) for value in values})
