"""The members of a parallel run: validated, built like `generate`'s calls, and bundled.

Every member's call is built by the runtime's call builder (the same validation, rendering
and defaults as `generate`); its generation id derives from the parallel id and its
composition names the parent. Everything is checked before anything is staged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from contracts.decoding import invalid_input
from contracts.generation import CompositionSpec
from contracts.parallel import MAX_PARALLEL_MEMBERS, ParallelInput
from crux._request import CallBuilder
from crux._staging import BuiltCall
from crux.agents import Agent
from crux.options import CallOptions, RunOptions
from crux.prompts import Prompt
from vocabulary.errors import ConfigurationError
from vocabulary.ids import (
    MAX_MEMBER_NAME_LENGTH,
    MAX_PARALLEL_ID_LENGTH,
    check_wire_id,
    parallel_member_generation_id,
    parallel_workflow_id,
)


def check_members(
    parallel_id: str, agents: Mapping[str, object], threads: Mapping[str, object] | None
) -> None:
    """Validate the parallel id and the member names (content-free messages).

    Raises:
        ConfigurationError: An invalid id, no members, too many, or an invalid name.
    """
    check_wire_id(parallel_id, "parallel id", limit=MAX_PARALLEL_ID_LENGTH)
    if not isinstance(agents, Mapping) or not agents:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("agents must be a non-empty mapping of member names")
    if len(agents) > MAX_PARALLEL_MEMBERS:
        raise ConfigurationError(f"a parallel run takes at most {MAX_PARALLEL_MEMBERS} members")
    for name in agents:
        check_wire_id(name, "member name", limit=MAX_MEMBER_NAME_LENGTH)
    if threads is not None:
        if not isinstance(threads, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("threads must be a mapping of member names")
        if any(name not in agents for name in threads):
            raise ConfigurationError("threads names a member that is not in agents")


def build_members(
    parallel_id: str,
    agents: Mapping[str, Prompt | Agent | str],
    options: RunOptions,
    *,
    context: Any,
    threads: Mapping[str, object] | None,
    calls: CallBuilder,
) -> dict[str, BuiltCall]:
    """Build every member's call with the shared builder, before anything is staged.

    Each member gets `context` as its input, its own Thread (from `threads`, else the
    shared `thread`, else the one its prompt binds), a generation id derived from the
    parallel id, and the composition that names its parent.

    Raises:
        ConfigurationError | ThreadError: As `Runtime.generate`, for any member.
    """
    parent = parallel_workflow_id(parallel_id)
    built: dict[str, BuiltCall] = {}
    for name, agent in agents.items():
        member: CallOptions = {
            **options,
            "input": context,
            "thread": (threads or {}).get(name, options.get("thread")),
            "generation_id": parallel_member_generation_id(parallel_id, name),
        }
        call = calls.build(agent, member)
        composition = CompositionSpec(parent_workflow_id=parent, member=name)
        built[name] = dataclasses.replace(
            call, request=call.request.model_copy(update={"composition": composition})
        )
    return built


def start_payload(parallel_id: str, calls: Mapping[str, BuiltCall]) -> dict[str, Any]:
    """The parent's start payload: each member's compact, ids-only generation input.

    Raises:
        ConfigurationError: The input is invalid as a whole (duplicate names, say).
    """
    payload: dict[str, Any] = {
        "parallel_id": parallel_id,
        "members": [
            {"name": name, "generation": call.request.start_payload()}
            for name, call in calls.items()
        ],
    }
    # Validated here too, so a defect is refused before anything starts.
    try:
        ParallelInput.model_validate(payload)
    except ValidationError as error:
        raise invalid_input("parallel input", error) from None
    return payload
