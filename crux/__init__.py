"""Crux for Python: context planning and managed conversation Threads on Temporal.

Durable workflows on Temporal, with PostgreSQL as the canonical store.

`await crux.connect(...)` returns a ready `Runtime` (Temporal client and PostgreSQL pool).
The public surface mirrors the seed documents in Python spelling: `prompt(...)`,
`history.recent(...)`, `thread(id=..., storage=...)`, `Runtime.generate(...)`,
`RequestCompositionError.code`, `ThreadError.code`, `ThreadCommitError`.

`crux.Worker(tools=[...], hooks=[...])` runs a worker with your registrations
(`await worker.run()`, `crux dev --app module:attribute`); `crux.testing` has test models and
pytest fixtures for your own suite.
"""

from activities.gate import Verdict as SafetyVerdict
from contracts.acceptance import SuccessContext, SuccessHookOutcome
from contracts.approvals import PendingApproval
from contracts.gate import ConstraintsSpec, SafetySpec
from contracts.generation import (
    GenerationInput,
    GenerationResult,
    HistorySpec,
    InputBudgetSpec,
    StepRecord,
    Usage,
)
from contracts.hooks import StepContext, StepOverrides
from contracts.operator import GenerationStatus
from crux import testing
from crux._announce import RegistrationConflictError
from crux.agents import Agent, agent
from crux.caching import CacheSpec, cache
from crux.connect import connect
from crux.constraints import constraints
from crux.context import (
    ContextContributor,
    context,
    droppable,
    offloadable,
    prefer,
    summarizable,
)
from crux.hooks import StepHook, SuccessHook, step_hook, success_hook
from crux.model_settings import (
    AttemptPolicySpec,
    ModelSettingsSpec,
    ToolPolicySpec,
    attempt_policy,
    merge_settings,
    model_settings,
)
from crux.options import CallOptions, PlanOptions, PreviewOptions, RunOptions
from crux.output import Output, output
from crux.prompts import Prompt, history, prompt, summarize
from crux.registrations import Registrations
from crux.runtime import (
    Generation,
    ParallelRun,
    Runtime,
    StreamCommitted,
    StreamDelta,
    StreamReset,
    StreamUpdate,
)
from crux.safety import SafetyPolicy, safety
from crux.thread import MessageInput, Thread, thread
from crux.tools import Tool, ToolArgumentsError, tool
from crux.workers import Worker
from storage import (
    HistoryEntry,
    HistoryView,
    MessageEntry,
    RedactedEntry,
    RemovedEntry,
    ThreadEntry,
    ThreadSnapshot,
    VariantInfo,
)
from telemetry.logs import configure_logging
from vocabulary.commits import ThreadCommit
from vocabulary.errors import (
    CallTimeoutError,
    ConfigurationError,
    ContextOverflowError,
    CruxError,
    GenerationFailedError,
    NoWorkerError,
    OperatorError,
    OutputValidationError,
    PreparationError,
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderNotFoundError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RequestCompositionError,
    ThreadCommitError,
    ThreadError,
    ThreadInUseError,
)
from vocabulary.gate import ConstraintReport, GateReport
from vocabulary.gate_errors import (
    ConstraintError,
    GatePolicyError,
    GenerationTimeoutError,
    SafetyError,
    SuccessHookError,
)
from vocabulary.ids import workflow_id_for
from vocabulary.messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart
from vocabulary.settings import Settings

__all__ = [
    "Agent",
    "AttemptPolicySpec",
    "CacheSpec",
    "CallOptions",
    "CallTimeoutError",
    "ConfigurationError",
    "ConstraintError",
    "ConstraintReport",
    "ConstraintsSpec",
    "ContextContributor",
    "ContextOverflowError",
    "CruxError",
    "FilePart",
    "GatePolicyError",
    "GateReport",
    "Generation",
    "GenerationFailedError",
    "GenerationInput",
    "GenerationResult",
    "GenerationStatus",
    "GenerationTimeoutError",
    "HistoryEntry",
    "HistorySpec",
    "HistoryView",
    "ImagePart",
    "InputBudgetSpec",
    "Message",
    "MessageEntry",
    "MessageInput",
    "ModelSettingsSpec",
    "NoWorkerError",
    "OperatorError",
    "Output",
    "OutputValidationError",
    "ParallelRun",
    "PendingApproval",
    "PlanOptions",
    "PreparationError",
    "PreviewOptions",
    "Prompt",
    "ProviderAuthError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderNotFoundError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "ReasoningPart",
    "RedactedEntry",
    "RegistrationConflictError",
    "Registrations",
    "RemovedEntry",
    "RequestCompositionError",
    "RunOptions",
    "Runtime",
    "SafetyError",
    "SafetyPolicy",
    "SafetySpec",
    "SafetyVerdict",
    "Settings",
    "StepContext",
    "StepHook",
    "StepOverrides",
    "StepRecord",
    "StreamCommitted",
    "StreamDelta",
    "StreamReset",
    "StreamUpdate",
    "SuccessContext",
    "SuccessHook",
    "SuccessHookError",
    "SuccessHookOutcome",
    "TextPart",
    "Thread",
    "ThreadCommit",
    "ThreadCommitError",
    "ThreadEntry",
    "ThreadError",
    "ThreadInUseError",
    "ThreadSnapshot",
    "Tool",
    "ToolArgumentsError",
    "ToolCallPart",
    "ToolPolicySpec",
    "Usage",
    "VariantInfo",
    "Worker",
    "agent",
    "attempt_policy",
    "cache",
    "configure_logging",
    "connect",
    "constraints",
    "context",
    "droppable",
    "history",
    "merge_settings",
    "model_settings",
    "offloadable",
    "output",
    "prefer",
    "prompt",
    "safety",
    "step_hook",
    "success_hook",
    "summarizable",
    "summarize",
    "testing",
    "thread",
    "tool",
    "workflow_id_for",
]
