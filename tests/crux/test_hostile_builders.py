"""Hostile arguments to every public builder and Thread operation: typed, content-free errors.

Huge values (megabyte strings, 10^5-element lists), 1,200-level nesting, lone surrogates,
NUL bytes, control characters, SQL metacharacters and path separators in ids, out-of-range
numbers (NaN, infinities, 2**80) and wrong types reach the builders (`crux.prompt`,
`crux.context`, `crux.history`, `crux.agent`, `crux.tool`, `crux.output`,
`crux.model_settings`, `crux.attempt_policy`, `crux.step_hook`, `crux.thread`, ...) and every
operation of a Thread handle on a real PostgreSQL. Each call either succeeds or raises a
`CruxError` whose text is bounded, printable and repeats no hostile content; a refused Thread
operation leaves every table exactly as it was.

`CRUX_FUZZ_EXAMPLES` sets the example counts; the module prints how many hostile inputs it
tried.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crux
import planner
from crux.errors import CruxError
from tests.hostile import (
    ALL_CHECKS,
    CANARY,
    HOSTILE_IDS,
    HOSTILE_NUMBERS,
    HOSTILE_STRINGS,
    STORABLE_IDS,
    assert_content_free,
    examples,
    ids,
    table_digest,
    texts,
    values,
)

_tried = {"inputs": 0}


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    print(f"\nhostile builder and Thread inputs tried: {_tried['inputs']}")


def _call(builder: Callable[..., object], *args: Any, **kwargs: Any) -> object:
    """Call `builder`; a `CruxError` must be content-free, anything else fails the test."""
    _tried["inputs"] += 1
    try:
        return builder(*args, **kwargs)
    except CruxError as error:
        assert_content_free(error)
        return None


_PROMPT = crux.prompt(id="p")
_SOURCE = crux.context(id="s", content="s")


def _handler(arguments: dict[str, Any]) -> dict[str, Any]:
    return arguments


def test_every_hostile_constant_is_refused_or_accepted_cleanly() -> None:
    # Each constant once, in every id and text position, so the huge and deep ones are
    # always covered whatever hypothesis draws.
    for value in (*HOSTILE_IDS, *HOSTILE_STRINGS, *HOSTILE_NUMBERS):
        _call(crux.context, value, "text")
        _call(crux.context, "id", value)
        _call(crux.context, "id", "text", priority=value)
        _call(crux.prompt, id=value)
        _call(crux.prompt, id="p", system=value)
        _call(crux.prompt, id="p", prompt=value)
        _call(crux.agent, id=value, prompt=_PROMPT)
        _call(crux.agent, id="a", prompt=_PROMPT, model=value)
        _call(crux.agent, id="a", prompt=_PROMPT, max_output_tokens=value)
        _call(crux.tool, value, _handler)
        _call(crux.tool, "t", _handler, description=value)
        _call(crux.tool, "t", _handler, timeout=value)
        _call(crux.tool, "t", _handler, retry=value)
        _call(crux.output, {"type": "object"}, name=value)
        _call(crux.output, {"type": "object"}, max_retries=value)
        _call(crux.model_settings, temperature=value)
        _call(crux.model_settings, top_p=value)
        _call(crux.model_settings, seed=value)
        _call(crux.model_settings, stop=[value])
        _call(crux.attempt_policy, start_to_close_seconds=value)
        _call(crux.attempt_policy, maximum_attempts=value)
        _call(crux.history.recent, value)
        _call(crux.history.recent, tokens=value)
        _call(crux.history, recent=value)
        _call(crux.history, summary={"model": value})
        _call(crux.history, on_miss=value)
        _call(crux.step_hook, value, _handler)
        _call(crux.thread, id=value)
        _call(crux.summarizable, _SOURCE, id=value)
        _call(crux.offloadable, _SOURCE, above_tokens=value)
        _call(crux.prompt, id="p", input_budget={"max": value})
        _call(crux.prompt, id="p", input_budget={"optimize_at": value, "max": 10})


@settings(max_examples=examples(120), deadline=None, suppress_health_check=ALL_CHECKS)
@given(a=values, b=values, c=values, d=values, i=ids, t=texts)
def test_hostile_builder_arguments_raise_only_typed_content_free_errors(
    a: Any, b: Any, c: Any, d: Any, i: str, t: str
) -> None:
    _call(crux.context, i, t, placement=a, contract=b, priority=c)
    _call(crux.context, a, b)
    _call(crux.prefer, _SOURCE, a)
    _call(crux.summarizable, _SOURCE, a, id=i)
    _call(crux.offloadable, _SOURCE, above_tokens=a)
    _call(crux.droppable, a)
    _call(crux.history, recent=a, summary=b, on_miss=c, provider_native=d)
    _call(crux.history.recent, a, tokens=b)
    _call(crux.history.recent, messages=c, tokens=d)
    _call(crux.prompt, id=i, system=t, input_budget=a, messages=b, settings=c, output=d)
    _call(crux.prompt, id="p", use=a)
    _call(crux.prompt, id="p", use=[a, b])
    _call(crux.prompt, id="p", messages=[{"id": i, "role": "user", "content": t, "metadata": a}])
    _call(crux.prompt, id="p", messages=[{"role": a, "content": b}])
    _call(crux.agent, id=i, prompt=_PROMPT, model=a, input_budget=b, max_output_tokens=c)
    _call(crux.agent, id="a", prompt=a, tools=b, tool_choice=c, history=d)
    _call(crux.agent, id="a", prompt=_PROMPT, prepare_step=a, settings=b, attempt_policy=c)
    _call(crux.tool, i, _handler, description=t, parameters=a, timeout=b, retry=c)
    _call(crux.tool, a, b)
    _call(crux.tool, "t", _handler, requires_approval=a)
    _call(crux.output, a, name=b, max_retries=c)
    _call(crux.output, {"type": "object", "properties": {i: a}, "title": t})
    _call(crux.model_settings, temperature=a, top_p=b, stop=c, seed=d)
    _call(crux.model_settings, extra={"openai": {i: a}})
    _call(crux.model_settings, extra=a)
    _call(crux.attempt_policy, start_to_close_seconds=a, maximum_attempts=b)
    _call(crux.attempt_policy, **{i: a})
    _call(crux.step_hook, i, _handler)
    _call(crux.step_hook, a, b)
    _call(crux.thread, id=i)
    _call(crux.thread, id="t", storage=a)
    _call(planner.context, i, tokens=a, placement=b, priority=c)


async def test_merged_settings_refuse_non_finite_numbers() -> None:
    for value in (math.nan, math.inf, -math.inf, 2**80, -1):
        assert _call(crux.model_settings, temperature=value) is None


# --- Thread operations on a real PostgreSQL ---------------------------------------------

_messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]), "content": texts},
    optional={
        "id": ids,
        "metadata": st.dictionaries(texts, values, max_size=2),
        "tool_call_id": ids,
        "tool_name": ids,
        CANARY: values,
    },
)
_any_message = _messages | values
_operations = st.sampled_from(
    [
        *("append", "append-batch", "read", "edit", "select", "redact", "history"),
        *("for_owner", "open", "register-owner", "close-owner", "release-owner"),
        *("load-messages", "path-ids", "history-view"),
    ]
)


@pytest.fixture
async def seeded(pool: asyncpg.Pool) -> crux.Thread:
    conversation = crux.thread(id="hostile", storage=pool)
    await conversation.append({"id": "m1", "role": "user", "content": "hi"})
    await conversation.append({"id": "m2", "role": "assistant", "content": "hello"})
    return conversation


def _as_id(value: Any, marked: str) -> Any:
    """`value` for an id slot: strings (top level or in a list) become the marked id.

    An error may name a valid id (ids are not content), so content-marked strings are kept
    out of id slots; other hostile values (numbers, lists, deep mappings) stay.
    """
    if isinstance(value, str):
        return marked
    if isinstance(value, list | tuple | set | frozenset):
        items: list[Any] = list(value)
        return [marked if isinstance(item, str) else item for item in items]
    return value


async def _apply(
    conversation: crux.Thread, pool: asyncpg.Pool, operation: str, a: Any, b: Any, i: str
) -> Any:
    if operation == "append":
        return await conversation.append(a, after=None if isinstance(b, dict) else _as_id(b, i))
    if operation == "append-batch":
        return await conversation.append([{"id": "ok", "role": "user", "content": "x"}, a])
    if operation == "read":
        return await conversation.read(at=_as_id(a, i), before=_as_id(b, i), limit=b)
    if operation == "edit":
        return await conversation.edit("m1", content=a, id=i, metadata=b)
    if operation == "select":
        return await conversation.select(_as_id(a, i))
    if operation == "redact":
        return await conversation.redact(_as_id(a, i))
    if operation == "history":
        return await conversation.history(encoding=a)
    if operation == "for_owner":
        return await conversation.for_owner(i).read()
    # The store's own public methods, reached through `conversation.store`.
    store = conversation.store
    if operation == "register-owner":
        return await store.register_owner("hostile", _as_id(a, i), state=b)
    if operation == "close-owner":
        return await store.close_owner("hostile", _as_id(a, i))
    if operation == "release-owner":
        return await store.release_owner("hostile", _as_id(a, i))
    if operation == "load-messages":
        return await store.load_messages("hostile", _as_id(a, i))
    if operation == "path-ids":
        return await store.path_ids("hostile", owner=_as_id(a, i))
    if operation == "history-view":
        return await store.read_history_view("hostile", owner=_as_id(a, i), encoding=b)
    other = crux.thread(id=i, storage=pool)
    await other.revision()
    return await other.delete()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=ALL_CHECKS)
@given(operation=_operations, a=_any_message, b=values, i=ids)
async def test_hostile_thread_operations_are_refused_typed_and_write_nothing(
    pool: asyncpg.Pool, seeded: crux.Thread, operation: str, a: Any, b: Any, i: str
) -> None:
    before = await table_digest(pool)
    _tried["inputs"] += 1
    try:
        await _apply(seeded, pool, operation, a, b, i)
    except CruxError as error:
        assert_content_free(error)
        assert await table_digest(pool) == before, f"refused {operation} wrote rows"
    # The Thread still serves ordinary operations afterwards.
    snapshot = await seeded.read()
    assert snapshot.entries


async def test_hostile_but_storable_ids_and_text_round_trip(pool: asyncpg.Pool) -> None:
    # SQL metacharacters, path separators, percent signs and bidi characters are ordinary
    # text to the store: accepted, stored and read back unchanged.
    assert len(STORABLE_IDS) >= 6
    for index, value in enumerate(STORABLE_IDS):
        _tried["inputs"] += 1
        conversation = crux.thread(id=value, storage=pool)
        content = value.replace("zq-hostile-id", f"text {index}")
        commit = await conversation.append({"id": value, "role": "user", "content": content})
        snapshot = await conversation.read()
        assert commit.message_ids == (value,)
        assert [(e.id, getattr(e, "content", None)) for e in snapshot.entries] == [(value, content)]
        await conversation.redact(value)
        await conversation.delete()
