"""The id scheme: composite keys, workflow ids and the checks every id passes.

Composite ids percent-encode their components so they parse back unambiguously; every check
names only what was wrong, never the value.
"""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import quote

from vocabulary.errors import ConfigurationError

MAX_GENERATION_ID_LENGTH = 256
"""Longest accepted `generation_id`, in characters."""

MAX_SCOPE_ID_LENGTH = 512
"""Longest accepted Thread or owner id, in characters (the Thread store's limit)."""

MAX_WORKFLOW_ID_BYTES = 1000
"""Temporal's default limit on workflow ids, in UTF-8 bytes."""

MAX_MODEL_ID_LENGTH = 256
"""Longest accepted `provider:model` id."""

MAX_TOKENS = 2**31 - 1
"""Largest accepted token or message count (what PostgreSQL's `integer` holds)."""


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def unstorable_text(value: str) -> bool:
    """Whether PostgreSQL cannot store `value` as text: a NUL byte or a lone surrogate."""
    # One scan in C: texts are whole messages, checked on every append and staging.
    return _UNSTORABLE.search(value) is not None


def has_control_character(value: str) -> bool:
    """Whether `value` holds an ASCII control character (C0 or DEL)."""
    return _CONTROL.search(value) is not None


def check_wire_id(value: object, what: str, *, limit: int) -> str:
    """Return `value` if it is a usable id; the message names only `what`.

    Raises:
        ConfigurationError: For a non-string, empty, padded or over-long id, or one with
            control characters, NUL bytes or lone surrogates.
    """
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{what} must be a non-empty string")
    if len(value) > limit:
        raise ConfigurationError(f"{what} is longer than {limit} characters")
    if value != value.strip() or has_control_character(value):
        raise ConfigurationError(f"{what} has surrounding spaces or control characters")
    if unstorable_text(value):
        raise ConfigurationError(f"{what} contains a lone surrogate")
    return value


def check_model_id(value: object) -> str:
    """Return `value` if it has the `provider:model` shape.

    Raises:
        ConfigurationError: For a non-string, an over-long id or one with control
            characters or unstorable text, or when the provider or the model name is
            missing.
    """
    text = check_wire_id(value, "model id", limit=MAX_MODEL_ID_LENGTH)
    provider, separator, name = text.partition(":")
    if not (provider and separator and name):
        raise ConfigurationError("model ids are 'provider:model'")
    return text


def encode_id_component(component: str) -> str:
    """One component of a composite id, percent-encoded so it holds no `/`.

    Args:
        component: A Thread, generation, message or model id.

    Returns:
        The component with everything but letters, digits, `-._~` and `:` percent-encoded.
    """
    # Percent-encoding leaves no `/` inside a component, so the segments of an id parse back
    # unambiguously. Letters, digits, `-._~` and `:` stay readable.
    return quote(component, safe=":")


def generation_key(generation_id: str, thread_id: str | None) -> str:
    """The storage key of a generation: its id scoped to its Thread, injectively.

    `<thread>/<generation>` for a Thread, `<generation>` for an ad-hoc generation, each
    component percent-encoded: Thread `X/x` with generation `y` and Thread `X` with
    generation `x/y` get different keys, and an ad-hoc id never meets a Thread's. Staging
    rows, the generation ledger and receipts are keyed by it.
    """
    if thread_id is None:
        return encode_id_component(generation_id)
    return f"{encode_id_component(thread_id)}/{encode_id_component(generation_id)}"


def workflow_id_for(generation_id: str, thread_id: str | None) -> str:
    """The workflow id of a generation: `crux/gen/` + `generation_key(...)`.

    `crux/gen/<thread>/<generation>` for a Thread and `crux/gen/<generation>` for an ad-hoc
    generation, components percent-encoded (so the number of segments tells the scope).
    """
    return f"crux/gen/{generation_key(generation_id, thread_id)}"


def summary_key(thread_id: str, through_id: str, strategy: str, model: str) -> str:
    """The key of one prefix-summary preparation, injective over its four components.

    `<thread>/<through>/<strategy>/<model>`, each component percent-encoded, so a `/` inside a
    Thread id cannot shift the segments. A key that would push the workflow id past Temporal's
    length limit becomes `<thread>/sha256-<digest>` (or `sha256-<digest>` alone), whose segment
    count tells it apart from the readable form.
    """
    parts = (thread_id, through_id, strategy, model)
    readable = "/".join(encode_id_component(p) for p in parts)
    # Room for the `crux/summary/` prefix the workflow id adds.
    budget = MAX_WORKFLOW_ID_BYTES - 32
    if len(readable.encode()) <= budget:
        return readable
    digest = hashlib.sha256(json.dumps(parts[1:]).encode()).hexdigest()
    short = f"{encode_id_component(thread_id)}/sha256-{digest}"
    if len(short.encode()) <= budget:
        return short
    return f"sha256-{hashlib.sha256(json.dumps(parts).encode()).hexdigest()}"


def user_message_id(generation_id: str) -> str:
    """The id of a generation's rendered user message (the first of its committed turn)."""
    return f"gen:{generation_id}:user"


def turn_message_id(generation_id: str, index: int) -> str:
    """The id of the `index`-th tool-round message (a tool call or result) of a turn."""
    return f"gen:{generation_id}:turn:{index}"


def assistant_message_id(generation_id: str) -> str:
    """The id of a generation's final assistant message (the last of its committed turn)."""
    return f"gen:{generation_id}:assistant"


MAX_PARALLEL_ID_LENGTH = 200
"""Longest accepted `Runtime.parallel` id, in characters."""

MAX_MEMBER_NAME_LENGTH = 64
"""Longest accepted name of a parallel member, in characters."""

# Byte budgets that keep a member's workflow id (`<parent id>/<member>`) inside Temporal's
# limit whatever the parallel id and the member name encode to.
_PARALLEL_ID_BUDGET = 600
_MEMBER_SEGMENT_BUDGET = MAX_WORKFLOW_ID_BYTES - _PARALLEL_ID_BUDGET - 1


def _digest(*parts: str) -> str:
    return "sha256-" + hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def parallel_workflow_id(parallel_id: str) -> str:
    """The workflow id of a parallel run: `crux/parallel/<parallel id>`.

    The id is percent-encoded; one that would not fit its byte budget becomes
    `crux/parallel/sha256-<digest>` (a readable id never starts so: `sha256-` ids are
    hex, and readable ones that look alike are hashed too, so the two forms never meet).
    """
    encoded = encode_id_component(parallel_id)
    readable = f"crux/parallel/{encoded}"
    if len(readable.encode()) <= _PARALLEL_ID_BUDGET and not encoded.startswith("sha256-"):
        return readable
    return f"crux/parallel/{_digest(parallel_id)}"


def parallel_member_workflow_id(parallel_id: str, member: str) -> str:
    """The workflow id of one member of a parallel run, under its parent's id.

    `crux/parallel/<parallel id>/<member>`, each component percent-encoded (a member name
    that would not fit its budget is replaced by `sha256-<digest>`), so the id is
    deterministic, unique per member and within Temporal's limit.
    """
    return member_workflow_id(parallel_workflow_id(parallel_id), member)


def member_workflow_id(parent_workflow_id: str, member: str) -> str:
    """The workflow id of a composition member under its parent's workflow id.

    `<parent id>/<member>`, the name percent-encoded (or `sha256-<digest>` when it would not
    fit its budget).
    """
    segment = encode_id_component(member)
    if len(segment.encode()) > _MEMBER_SEGMENT_BUDGET or segment.startswith("sha256-"):
        segment = _digest(member)
    return f"{parent_workflow_id}/{segment}"


def parallel_member_generation_id(parallel_id: str, member: str) -> str:
    """The generation id of one member of a parallel run (its idempotency key).

    `<parallel id>/<member>`, both percent-encoded, so that running the same parallel id
    again replays each member's committed turn instead of producing another; a pair too
    long for a generation id becomes `parallel-sha256-<digest>`.
    """
    readable = f"{encode_id_component(parallel_id)}/{encode_id_component(member)}"
    if len(readable) <= MAX_GENERATION_ID_LENGTH and not readable.startswith("parallel-sha256-"):
        return readable
    return f"parallel-{_digest(parallel_id, member)}"
