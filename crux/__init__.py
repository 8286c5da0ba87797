"""Crux for Python: context planning and managed conversation Threads on Temporal.

Durable workflows on Temporal, with PostgreSQL as the canonical store.

The public surface mirrors the seed documents in Python spelling: `prompt(...)`,
`history.recent(...)`, `thread(id=..., storage=...)`, `Runtime.generate(...)`,
`RequestCompositionError.code`, `ThreadError.code`, `ThreadCommitError`.
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING

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
    GenerationFailedError,
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
from crux.tools import Tool, tool

if TYPE_CHECKING:
    from crux.runtime import (
        Generation,
        Runtime,
        StreamCommitted,
        StreamDelta,
        StreamReset,
        StreamUpdate,
    )
    from crux.thread import MessageInput, Thread, thread
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

# Names whose modules reach storage and Temporal are loaded on first use, so that
# `import storage` (or `import crux.messages`) never drags the runtime in half-initialised.
_LAZY = {
    "Generation": "crux.runtime",
    "Runtime": "crux.runtime",
    "StreamCommitted": "crux.runtime",
    "StreamDelta": "crux.runtime",
    "StreamReset": "crux.runtime",
    "StreamUpdate": "crux.runtime",
    "MessageInput": "crux.thread",
    "Thread": "crux.thread",
    "thread": "crux.thread",
    "HistoryEntry": "storage",
    "HistoryView": "storage",
    "MessageEntry": "storage",
    "RedactedEntry": "storage",
    "RemovedEntry": "storage",
    "ThreadEntry": "storage",
    "ThreadSnapshot": "storage",
    "VariantInfo": "storage",
}


class _Package(types.ModuleType):
    """The `crux` module, whose lazy names win over same-named submodules.

    Importing `crux.thread` (directly, or to resolve `crux.Thread`) makes the import system
    bind the submodule on the package as `thread`, which would shadow the `crux.thread(...)`
    function for everyone afterwards; such bindings are skipped, the submodule stays
    reachable through `sys.modules` and `import crux.thread`.
    """

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == value.__name__:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crux' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ConfigurationError",
    "ContextContributor",
    "ContextOverflowError",
    "CruxError",
    "FilePart",
    "Generation",
    "GenerationFailedError",
    "GenerationInput",
    "GenerationResult",
    "HistoryEntry",
    "HistorySpec",
    "HistoryView",
    "ImagePart",
    "InputBudgetSpec",
    "Message",
    "MessageEntry",
    "MessageInput",
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
    "Runtime",
    "Settings",
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
