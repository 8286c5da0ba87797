"""Hostile arguments to every `Runtime` method: only typed, content-free errors.

`generate`, `preview` and `parallel` get one hostile argument each (megabyte strings,
10^5-element lists, 1,200-level nesting, lone surrogates, NaN, 2**80, wrong types, ids with
SQL metacharacters and path separators); `receipt`, `inspect`, the operator commands and the
approval commands get hostile ids. Accepted calls run on a real worker and complete; refused
ones raise a `CruxError` whose text repeats nothing hostile, and a refused configuration
writes no row. The worker serves an ordinary generation afterwards. `CRUX_FUZZ_EXAMPLES`
sets the count; the module prints how many hostile inputs it tried.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from hypothesis import strategies as st
from temporalio.client import Client

from crux.errors import CruxError
from crux.runtime import ParallelRun
from tests.helpers import RunningWorker, new_worker, settings_for
from tests.hostile import (
    CANARY,
    ID_MARK,
    assert_content_free,
    drawn,
    examples,
    json_values,
    ordinary_generation_still_completes,
    table_digest,
)

RUN_BOUND_SECONDS = 60.0
"""A call that has not returned by now counts as wedged."""

_tried = {"inputs": 0, "completed": 0, "refused": 0}


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    print(
        f"\nhostile Runtime inputs tried: {_tried['inputs']} "
        f"(completed {_tried['completed']}, refused typed {_tried['refused']})"
    )


@pytest.fixture
async def running_worker(client: Client, pool: asyncpg.Pool, database_url: str) -> Any:
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        yield worker


_KWARGS = (
    "input",
    "thread",
    "model",
    "messages",
    "generation_id",
    "history",
    "input_budget",
    "max_output_tokens",
    "owner",
    "tool_choice",
    "max_tool_rounds",
    "on_revision_moved",
    "storage_wait_seconds",
    "settings",
    "attempt_policy",
    "approval_timeout_seconds",
    "output",
)

_PREVIEW = (
    "input",
    "thread",
    "model",
    "messages",
    "history",
    "input_budget",
    "max_output_tokens",
    "owner",
    "settings",
    "output",
)

_PARALLEL = (
    "id",
    "agents",
    "context",
    "thread",
    "threads",
    "model",
    "history",
    "input_budget",
    "owner",
    "settings",
    "output",
)


def _marked_id(value: Any) -> Any:
    """`value` for an id slot: an error may name a valid id, so strings carry the id mark."""
    return value.replace(CANARY, ID_MARK) if isinstance(value, str) else value


@st.composite
def _runtime_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    method = draw(
        st.sampled_from(["generate", "generate", "generate", "preview", "parallel", "lookup"])
    )
    value = draw(json_values | st.sampled_from([math.nan, object(), b"\xff", (CANARY,)]))
    if method == "lookup":
        return method, {"value": _marked_id(value)}
    if method == "parallel":
        name = draw(st.sampled_from(_PARALLEL))
        if name in ("id", "owner", "model", "thread"):
            value = _marked_id(value)
        elif name == "agents":
            value = draw(st.sampled_from([value, {_marked_id(str(value))[:80]: "hello"}]))
        base = {"id": f"par-{uuid.uuid4().hex[:8]}", "agents": {"a": "hello", "b": "hi"}}
        return method, {**base, name: value}
    name = draw(st.sampled_from(("prompt", *(_KWARGS if method == "generate" else _PREVIEW))))
    if name in ("thread", "generation_id", "owner", "model"):
        value = _marked_id(value)
    kwargs: dict[str, Any] = {"prompt": "hello", name: value}
    if name != "generation_id" and method == "generate":
        kwargs["generation_id"] = f"rt-{uuid.uuid4().hex[:8]}"
    return method, kwargs


async def _lookups(worker: RunningWorker, value: Any) -> None:
    runtime = worker.runtime
    for call in (
        lambda: runtime.receipt(value),
        lambda: runtime.inspect(value),
        lambda: runtime.generation_status(value),
        lambda: runtime.generation_status("g", thread=value),
        lambda: runtime.retry_generation(value),
        lambda: runtime.abandon_generation(value),
        lambda: runtime.pending_approvals(value),
        lambda: runtime.pending_approvals(workflow_id=value),
        lambda: runtime.approve(value, "g"),
        lambda: runtime.approve("c", "g", thread=value),
        lambda: runtime.deny("c", value),
        lambda: runtime.deny("c", "g", reason_code=value),
    ):
        _tried["inputs"] += 1
        try:
            await asyncio.wait_for(call(), RUN_BOUND_SECONDS)
        except KeyError:
            pass  # the documented error of `receipt` and `inspect` for an unknown id
        except CruxError as error:
            assert_content_free(error)


async def test_hostile_runtime_arguments_raise_only_typed_errors(
    running_worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    runtime = running_worker.runtime
    for method, kwargs in drawn(_runtime_calls(), examples(60)):
        if method == "lookup":
            await _lookups(running_worker, kwargs["value"])
            continue
        _tried["inputs"] += 1
        before = await table_digest(pool)
        call = {
            "generate": runtime.generate,
            "preview": runtime.preview,
            "parallel": runtime.parallel,
        }[method]
        try:
            result = await asyncio.wait_for(call(**kwargs), RUN_BOUND_SECONDS)
            _tried["completed"] += 1
            if isinstance(result, ParallelRun):
                for member_error in result.errors.values():
                    assert_content_free(member_error)
        except CruxError as error:
            _tried["refused"] += 1
            assert_content_free(error)
            if method == "preview" or isinstance(error, TypeError):
                assert await table_digest(pool) == before, f"refused {method} wrote rows"
    await ordinary_generation_still_completes(running_worker)
