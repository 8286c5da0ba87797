"""Spans and metrics of the Crux activities, added by a worker interceptor.

One interceptor sees every activity the worker runs (local ones too: the read, the plan record
and the commit), so the activity code stays free of telemetry; a plan the read recorded ahead
is observed from the read's result, a commit the provider attempt ran itself from the
attempt's. Each known activity gets a span (`crux.plan`, `chat <model>`, `execute_tool`,
`crux.commit`, ...) with GenAI semantic-convention attributes read from its typed input and
result, and its metrics. Inputs and results are content-free by contract; the attributes take
only ids, names, sizes and decisions from them.

Installed by the worker only when telemetry is configured (`telemetry.setup`), so a worker
without it pays nothing.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from contracts.activities import (
    ACTIVITY_AWAIT_SUMMARY,
    ACTIVITY_COMMIT_TURN,
    ACTIVITY_COUNT_REQUEST,
    ACTIVITY_INVOKE_MODEL,
    ACTIVITY_PREPARE_SUMMARY,
    ACTIVITY_READ_REQUEST,
    ACTIVITY_RECORD_PLAN,
    ACTIVITY_RUN_TOOL,
    CommitTurnInput,
    CommitTurnResult,
    CountRequestInput,
    InvokeModelInput,
    InvokeModelResult,
    PrepareSummaryInput,
    PrepareSummaryResult,
    ReadRequestInput,
    ReadRequestResult,
    RecordPlanInput,
    RunToolInput,
    RunToolResult,
)
from contracts.hooks import ACTIVITY_PREPARE_STEP
from telemetry import metrics, tracing
from telemetry.logs import get_logger
from telemetry.tracing import (
    GEN_AI_CONVERSATION_ID,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MAX_TOKENS,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_SYSTEM,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    Attributes,
    provider_of,
)

__all__ = ["ObservingInterceptor"]

_T = TypeVar("_T")
_log = get_logger(__name__)


@dataclass(frozen=True)
class _Step:
    """How one activity is observed."""

    stage: str
    span: Callable[[Any], str]
    before: Callable[[Any], Attributes]
    after: Callable[[Any, Any], Attributes] = lambda _arg, _result: {}
    failed: Callable[[Any, BaseException], None] = lambda _arg, _error: None


def _ids(arg: Any) -> Attributes:
    thread_id = getattr(arg, "thread_id", None)
    return {
        "crux.generation_id": getattr(arg, "generation_id", None),
        "crux.thread_id": thread_id,
        GEN_AI_CONVERSATION_ID: thread_id,
    }


def _model(model: str) -> Attributes:
    provider = provider_of(model)
    return {GEN_AI_REQUEST_MODEL: model, GEN_AI_PROVIDER_NAME: provider, GEN_AI_SYSTEM: provider}


def _read_before(arg: ReadRequestInput) -> Attributes:
    return {**_ids(arg), **_model(arg.model), "crux.owner": arg.owner}


def _read_after(_arg: ReadRequestInput, result: ReadRequestResult) -> Attributes:
    return {
        "crux.history_source": result.history_source,
        "crux.revision": result.revision,
        "crux.replayed": result.existing is not None,
    }


def _plan_before(arg: RecordPlanInput) -> Attributes:
    receipt = arg.receipt
    return {
        **_ids(arg),
        **_model(receipt.model),
        "crux.request_id": receipt.id,
        "crux.plan.input_tokens": receipt.input_tokens,
        "crux.plan.max_input_tokens": receipt.max_input_tokens,
        "crux.plan.measurement": receipt.measurement,
        "crux.plan.adaptations": len(receipt.adaptations),
        "crux.plan.adaptation_kinds": [a.representation for a in receipt.adaptations],
        "crux.plan.previous_request_id": receipt.previous_request_id,
        "crux.plan.previous_reason": receipt.previous_reason,
    }


def _plan_after(arg: RecordPlanInput, _result: object) -> Attributes:
    metrics.record_adaptations([a.representation for a in arg.receipt.adaptations])
    return {}


def _invoke_before(arg: InvokeModelInput) -> Attributes:
    return {
        **_ids(arg),
        **_model(arg.model),
        GEN_AI_OPERATION_NAME: "chat",
        GEN_AI_REQUEST_MAX_TOKENS: arg.max_output_tokens,
        "crux.attempt": arg.attempt,
        "crux.stream": arg.stream,
        "crux.tools.offered": len(arg.tools),
    }


def _invoke_after(arg: InvokeModelInput, result: InvokeModelResult) -> Attributes:
    if result.revision_moved:
        outcome = "revision-moved"
    elif result.defects:
        outcome = "invalid-output"
    else:
        outcome = "answered"
    metrics.record_attempt(arg.model, outcome)
    if not result.reused_staged_output and not result.revision_moved:
        metrics.record_tokens(
            arg.model,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
        )
    return {
        GEN_AI_USAGE_INPUT_TOKENS: result.usage.input_tokens,
        GEN_AI_USAGE_OUTPUT_TOKENS: result.usage.output_tokens,
        GEN_AI_RESPONSE_FINISH_REASONS: [result.finish_reason] if result.finish_reason else [],
        "crux.outcome": outcome,
        "crux.output_tokens": result.output_tokens,
        "crux.tool_calls": len(result.tool_call_ids),
        "crux.reused_staged_output": result.reused_staged_output,
    }


def _invoke_failed(arg: InvokeModelInput, error: BaseException) -> None:
    metrics.record_attempt(arg.model, "error")
    metrics.record_error(arg.model, tracing.error_type(error))


def _count_before(arg: CountRequestInput) -> Attributes:
    return {**_ids(arg), **_model(arg.model)}


def _tool_before(arg: RunToolInput) -> Attributes:
    return {
        **_ids(arg),
        GEN_AI_OPERATION_NAME: "execute_tool",
        "crux.tool.call_index": arg.call_index,
        "crux.tool.denied": arg.denied is not None,
        "crux.tool.denial": arg.denied,
    }


def _tool_after(arg: RunToolInput, result: RunToolResult) -> Attributes:
    outcome = "denied" if arg.denied is not None else "failed" if result.failed else "ok"
    metrics.record_tool_call(outcome)
    return {"crux.tool.failed": result.failed, "crux.tool.result_tokens": result.tokens}


def _tool_failed(_arg: RunToolInput, _error: BaseException) -> None:
    metrics.record_tool_call("error")


def _summary_before(arg: PrepareSummaryInput) -> Attributes:
    return {
        **_ids(arg),
        **_model(arg.model),
        GEN_AI_OPERATION_NAME: "chat",
        "crux.summary.through_id": arg.through_id,
        "crux.summary.strategy": arg.strategy,
    }


def _summary_after(_arg: PrepareSummaryInput, result: PrepareSummaryResult) -> Attributes:
    metrics.record_summary("reused" if result.reused else "prepared")
    return {
        "crux.summary.reused": result.reused,
        "crux.summary.tokens": result.summary.tokens,
        "crux.summary.support_calls": result.support_calls,
    }


def _summary_failed(_arg: PrepareSummaryInput, _error: BaseException) -> None:
    metrics.record_summary("failed")


def _commit_before(arg: CommitTurnInput) -> Attributes:
    return {
        **_ids(arg),
        "crux.accepted_attempt": arg.accepted_attempt,
        "crux.history_source": arg.history_source,
        "crux.steps": len(arg.steps),
    }


def _commit_after(arg: CommitTurnInput, result: CommitTurnResult) -> Attributes:
    outcome = result.outcome(arg)
    commit = outcome.thread_commit
    status = commit.status if commit is not None else "unmanaged"
    metrics.record_turn(status, replayed=outcome.replayed)
    return {
        "crux.commit.status": status,
        "crux.commit.replayed": outcome.replayed,
        "crux.commit.messages": len(commit.message_ids) if commit is not None else 0,
        GEN_AI_USAGE_INPUT_TOKENS: outcome.usage.input_tokens,
        GEN_AI_USAGE_OUTPUT_TOKENS: outcome.usage.output_tokens,
    }


def _named(name: str) -> Callable[[Any], str]:
    return lambda _arg: name


_STEPS: dict[str, _Step] = {
    ACTIVITY_READ_REQUEST: _Step("read", _named("crux.read"), _read_before, _read_after),
    ACTIVITY_RECORD_PLAN: _Step("plan", _named("crux.plan"), _plan_before, _plan_after),
    ACTIVITY_INVOKE_MODEL: _Step(
        "invoke",
        lambda arg: f"chat {arg.model}",
        _invoke_before,
        _invoke_after,
        _invoke_failed,
    ),
    ACTIVITY_COUNT_REQUEST: _Step("count", _named("crux.count"), _count_before),
    ACTIVITY_RUN_TOOL: _Step(
        "tools", _named("execute_tool"), _tool_before, _tool_after, _tool_failed
    ),
    ACTIVITY_PREPARE_SUMMARY: _Step(
        "summary", _named("crux.summary"), _summary_before, _summary_after, _summary_failed
    ),
    ACTIVITY_AWAIT_SUMMARY: _Step("summary", _named("crux.summary.join"), lambda _arg: {}),
    ACTIVITY_PREPARE_STEP: _Step("hooks", _named("crux.prepare_step"), _ids),
    ACTIVITY_COMMIT_TURN: _Step("commit", _named("crux.commit"), _commit_before, _commit_after),
}


class ObservingInterceptor(Interceptor):
    """Worker interceptor: a span and metrics for every Crux activity (see the module)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Wrap the activity inbound chain."""
        return _ObservingActivity(next)


class _ObservingActivity(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        step = _STEPS.get(info.activity_type)
        if step is None or not input.args:
            return await self.next.execute_activity(input)
        arg = input.args[0]
        result = await _observing(step, arg, lambda: self.next.execute_activity(input))
        if isinstance(result, ReadRequestResult):
            await _observe_plan_ahead(result)
        elif isinstance(arg, InvokeModelInput) and isinstance(result, InvokeModelResult):
            await _observe_commit_in_attempt(arg, result)
        return result


async def _observe_plan_ahead(read: ReadRequestResult) -> None:
    """The span and metrics of a first plan the read recorded ahead, as a record's would be.

    The time it took is the read's.
    """
    if read.recorded is not None:
        await _observing(_STEPS[ACTIVITY_RECORD_PLAN], read.recorded, partial(_returning, None))


async def _observe_commit_in_attempt(arg: InvokeModelInput, result: InvokeModelResult) -> None:
    """The span and metrics of a commit the attempt ran itself, as a commit activity's would be.

    The time it took is the attempt's.
    """
    committed = result.committed
    commit = arg.answered_commit(result) if committed is not None else None
    if commit is not None:
        await _observing(_STEPS[ACTIVITY_COMMIT_TURN], commit, partial(_returning, committed))


async def _observing(step: _Step, arg: Any, run: Callable[[], Awaitable[Any]]) -> Any:
    """`run()` inside the step's span, with its attributes and metrics."""
    started = time.monotonic()
    name, before = _observed(lambda: (step.span(arg), step.before(arg)), (step.stage, {}))
    with tracing.span(name, before) as current:
        if current is not None:
            # Temporal's retry of this step (the provider attempt counts planned calls).
            current.set_attributes(
                {"crux.stage": step.stage, "crux.activity_attempt": activity.info().attempt}
            )
        try:
            result = await run()
        except BaseException as error:
            _observed(partial(step.failed, arg, error), None)
            metrics.record_stage(step.stage, time.monotonic() - started, ok=False)
            raise
        after = _observed(lambda: tracing.clean(step.after(arg, result)), {})
        if current is not None:
            current.set_attributes(after)
    metrics.record_stage(step.stage, time.monotonic() - started, ok=True)
    return result


async def _returning(value: _T) -> _T:
    return value


def _observed(read: Callable[[], _T], fallback: _T) -> _T:
    """`read()`, or `fallback` if it fails: telemetry never fails the step it observes."""
    try:
        return read()
    except Exception as error:
        _log.warning("telemetry.observe_failed", error=type(error).__name__)
        return fallback
