"""Crux for Python: context planning and managed conversation Threads on Temporal.

Durable workflows on Temporal, with PostgreSQL as the canonical store.

`await crux.connect(...)` returns a ready `Runtime` (Temporal client and PostgreSQL pool).
The public surface mirrors the seed documents in Python spelling: `prompt(...)`,
`history.recent(...)`, `thread(id=..., storage=...)`, `Runtime.generate(...)`,
`RequestCompositionError.code`, `ThreadError.code`, `ThreadCommitError`.
"""

from contracts.approvals import PendingApproval
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
from crux.agents import Agent, agent
from crux.caching import CacheSpec, cache
from crux.connect import connect
from crux.context import (
    ContextContributor,
    context,
    droppable,
    offloadable,
    prefer,
    summarizable,
)
from crux.hooks import StepHook, step_hook
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
from crux.runtime import (
    Generation,
    ParallelRun,
    Runtime,
    StreamCommitted,
    StreamDelta,
    StreamReset,
    StreamUpdate,
)
from crux.thread import MessageInput, Thread, thread
from crux.tools import Tool, ToolArgumentsError, tool
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
    ConfigurationError,
    ContextOverflowError,
    CruxError,
    GenerationFailedError,
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
from vocabulary.ids import workflow_id_for
from vocabulary.messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart
from vocabulary.settings import Settings

__all__ = [
    "Agent",
    "AttemptPolicySpec",
    "CacheSpec",
    "CallOptions",
    "ConfigurationError",
    "ContextContributor",
    "ContextOverflowError",
    "CruxError",
    "FilePart",
    "Generation",
    "GenerationFailedError",
    "GenerationInput",
    "GenerationResult",
    "GenerationStatus",
    "HistoryEntry",
    "HistorySpec",
    "HistoryView",
    "ImagePart",
    "InputBudgetSpec",
    "Message",
    "MessageEntry",
    "MessageInput",
    "ModelSettingsSpec",
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
    "RemovedEntry",
    "RequestCompositionError",
    "RunOptions",
    "Runtime",
    "Settings",
    "StepContext",
    "StepHook",
    "StepOverrides",
    "StepRecord",
    "StreamCommitted",
    "StreamDelta",
    "StreamReset",
    "StreamUpdate",
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
    "agent",
    "attempt_policy",
    "cache",
    "configure_logging",
    "connect",
    "context",
    "droppable",
    "history",
    "merge_settings",
    "model_settings",
    "offloadable",
    "output",
    "prefer",
    "prompt",
    "step_hook",
    "summarizable",
    "summarize",
    "thread",
    "tool",
    "workflow_id_for",
]
