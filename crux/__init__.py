"""Crux for Python: context planning and managed conversation Threads on Temporal.

Durable workflows on Temporal, with PostgreSQL as the canonical store.

The public surface mirrors the seed documents in Python spelling: `prompt(...)`,
`history.recent(...)`, `thread(id=..., storage=...)`, `Runtime.generate(...)`,
`RequestCompositionError.code`, `ThreadError.code`, `ThreadCommitError`.
"""

from crux.config import Settings
from crux.context import (
    ContextContributor,
    context,
    droppable,
    offloadable,
    prefer,
    summarizable,
)
from crux.errors import (
    ConfigurationError,
    ContextOverflowError,
    CruxError,
    ProviderError,
    ProviderHTTPError,
    RequestCompositionError,
    ThreadCommitError,
    ThreadError,
    ThreadInUseError,
)
from crux.logs import configure_logging
from crux.messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart
from crux.models import (
    GenerationInput,
    GenerationResult,
    HistorySpec,
    InputBudgetSpec,
    StepRecord,
    ThreadCommit,
    Usage,
    workflow_id_for,
)
from crux.prompts import Prompt, history, prompt, summarize
from crux.runtime import Generation, Runtime
from crux.thread import Thread, thread
from crux.tools import Tool, tool
from storage import (
    MessageEntry,
    RedactedEntry,
    RemovedEntry,
    ThreadEntry,
    ThreadSnapshot,
    VariantInfo,
)

__all__ = [
    "ConfigurationError",
    "ContextContributor",
    "ContextOverflowError",
    "CruxError",
    "FilePart",
    "Generation",
    "GenerationInput",
    "GenerationResult",
    "HistorySpec",
    "ImagePart",
    "InputBudgetSpec",
    "Message",
    "MessageEntry",
    "Prompt",
    "ProviderError",
    "ProviderHTTPError",
    "ReasoningPart",
    "RedactedEntry",
    "RemovedEntry",
    "RequestCompositionError",
    "Runtime",
    "Settings",
    "StepRecord",
    "TextPart",
    "Thread",
    "ThreadCommit",
    "ThreadCommitError",
    "ThreadEntry",
    "ThreadError",
    "ThreadInUseError",
    "ThreadSnapshot",
    "Tool",
    "ToolCallPart",
    "Usage",
    "VariantInfo",
    "configure_logging",
    "context",
    "droppable",
    "history",
    "offloadable",
    "prefer",
    "prompt",
    "summarizable",
    "summarize",
    "thread",
    "tool",
    "workflow_id_for",
]
