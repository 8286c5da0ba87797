"""Run the tool calls of a turn: each result staged once, as the turn's next message."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities._inputs import scoped_key
from activities._outage import keeping_side_effect
from activities._registries import RunnableTool, ToolLookup
from activities.skeleton import content_tokens
from contracts.activities import RunToolInput, RunToolResult
from contracts.settings import ToolPolicySpec
from planner import ModelCatalog
from providers import TokenCounter
from storage import GenerationStore
from telemetry import tracing
from telemetry.logs import get_logger
from telemetry.tracing import GEN_AI_TOOL_NAME
from vocabulary.errors import ThreadError
from vocabulary.ids import turn_message_id
from vocabulary.messages import Message
from vocabulary.staging import turn_kind

_log = get_logger(__name__)

TOOL_ATTEMPT_FAILED = "ToolAttemptFailed"
"""Error type of a tool attempt whose handler failed while its policy allows another."""


class ToolRunner:
    """Runs tool handlers registered on this worker.

    Args:
        generations: Generation staging (tool calls are read from it, results written).
        tools: The registered tools.
        catalog: Model profiles (to size results with the response model's tokenizer).
    """

    def __init__(
        self, generations: GenerationStore, tools: ToolLookup, catalog: ModelCatalog
    ) -> None:
        self._generations = generations
        self._tools = tools
        self._catalog = catalog

    async def run(self, request: RunToolInput) -> RunToolResult:
        """Run one tool call (once: a staged result is reused) and size its result."""
        result_kind = turn_kind(request.result_turn_index)
        staged = await self._generations.get_staged(scoped_key(request), 0, result_kind)
        if staged is None:
            call_message = await self._generations.get_staged(
                scoped_key(request), 0, turn_kind(request.call_turn_index)
            )
            if call_message is None:
                raise ThreadError("not_found", "the staged tool call is missing")
            call = call_message.message.tool_calls[request.call_index]
            entry = self._tools.get(call.tool_name)
            failed = entry is None
            if entry is not None:
                # Only a registered name: an invented one is the model's text.
                tracing.annotate({GEN_AI_TOOL_NAME: call.tool_name, "crux.tool.known": True})
            if request.denied is not None:
                # An operator denied the call: the handler never runs; the model sees why.
                text, failed = denial_result(request.denied), True
            elif entry is None:
                text = f"error: no tool named {call.tool_name!r} is available"
            else:
                text, failed = await _run_handler(entry, dict(call.input), request.policy)
                if failed and _retries_left(request.policy):
                    # Nothing is staged yet: the next attempt runs the handler again.
                    _log.info(
                        "tool.call.retrying",
                        generation_id=request.generation_id,
                        tool=call.tool_name,
                        attempt=activity.info().attempt,
                    )
                    raise ApplicationError("the tool failed; retrying", type=TOOL_ATTEMPT_FAILED)
            result = Message(
                id=turn_message_id(request.generation_id, request.result_turn_index),
                role="tool",
                content=text,
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
            )
            # The tool has run: its result is kept through a short outage, not run again.
            staged = await keeping_side_effect(
                lambda: self._generations.stage(
                    scoped_key(request),
                    0,
                    result_kind,
                    result,
                    thread_id=request.thread_id,
                    info={"failed": failed},
                )
            )
            # The name is the model's choice: log a registered name as is, never an
            # invented one (it could carry anything the model was shown).
            _log.info(
                "tool.call.completed",
                generation_id=request.generation_id,
                tool=call.tool_name if entry is not None else None,
                tool_known=entry is not None,
                failed=failed,
                denied=request.denied is not None,
            )
        counter = TokenCounter.for_encoding(self._catalog.resolve(request.model).encoding)
        [tokens] = content_tokens(counter, [staged.message])
        return RunToolResult(tokens=tokens, failed=bool(staged.info and staged.info.get("failed")))


def denial_result(reason: str) -> str:
    """The tool result a denied call stages: fixed JSON naming the reason code only."""
    return json.dumps({"error": "denied", "reason": reason}, separators=(",", ":"))


async def _run_handler(
    entry: RunnableTool, arguments: dict[str, Any], policy: ToolPolicySpec | None
) -> tuple[str, bool]:
    """Run the handler within its policy's timeout: `(result text, failed)`.

    Failures become content-free error texts the model sees: the exception's type, never
    its message (which may quote anything). An error that carries its own content-free
    `tool_result` (invalid arguments, naming fields only) is shown as that.
    """
    timeout = policy.timeout_seconds if policy is not None else None
    try:
        if timeout is None:
            return await entry.run(arguments), False
        return await asyncio.wait_for(entry.run(arguments), timeout), False
    except TimeoutError:
        return f"error: the tool timed out after {timeout:g} seconds", True
    except Exception as error:
        shown = getattr(error, "tool_result", None)
        if isinstance(shown, str):
            return shown, True
        return f"error: the tool failed ({type(error).__name__})", True


def _retries_left(policy: ToolPolicySpec | None) -> bool:
    """Whether the policy allows running a failed handler again."""
    if policy is None or policy.max_attempts <= 1:
        return False
    return activity.in_activity() and activity.info().attempt < policy.max_attempts
