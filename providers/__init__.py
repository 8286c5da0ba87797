"""Model providers: wire-format adapters over httpx, token counting and loopback servers.

Adapters translate provider-neutral `ChatRequest`s into one wire format each and raise only
classified `crux.errors.ProviderError`s; they never retry (Temporal owns retries). Counting
runs in activities, never in workflows.
"""

from providers.anthropic import AnthropicMessagesProvider
from providers.counting import (
    Confidence,
    MessageFormat,
    ProfileLike,
    TokenCounter,
    count_new_messages,
    counter_for,
    encoding_for,
    message_format_for,
    message_key,
)
from providers.embeddings import (
    OFFLINE_EMBEDDING_MODEL,
    EmbeddingProvider,
    Embeddings,
    OfflineEmbeddingProvider,
    OpenAIEmbeddingProvider,
    ngram_embedding,
)
from providers.estimate import RequestEstimate, estimate_request
from providers.fake import ScriptedChatProvider
from providers.loopback import LoopbackAnthropicServer, LoopbackOpenAIServer
from providers.offline import OfflineChatProvider
from providers.openai import OpenAIChatProvider
from providers.types import (
    AuthoritativeCounter,
    ChatProvider,
    ChatRequest,
    ChatResponse,
    FinishReason,
    StreamDone,
    StreamEvent,
    StreamingChatProvider,
    SummarizingProvider,
    SummaryRequest,
    TextDelta,
    ToolCallDelta,
    ToolChoice,
    ToolChoiceTool,
    ToolSpec,
    Usage,
)

__all__ = [
    "AnthropicMessagesProvider",
    "AuthoritativeCounter",
    "ChatProvider",
    "ChatRequest",
    "ChatResponse",
    "Confidence",
    "EmbeddingProvider",
    "Embeddings",
    "FinishReason",
    "LoopbackAnthropicServer",
    "LoopbackOpenAIServer",
    "MessageFormat",
    "OFFLINE_EMBEDDING_MODEL",
    "OfflineChatProvider",
    "OfflineEmbeddingProvider",
    "OpenAIChatProvider",
    "OpenAIEmbeddingProvider",
    "ProfileLike",
    "RequestEstimate",
    "ScriptedChatProvider",
    "StreamDone",
    "StreamEvent",
    "StreamingChatProvider",
    "SummarizingProvider",
    "SummaryRequest",
    "TextDelta",
    "TokenCounter",
    "ToolCallDelta",
    "ToolChoice",
    "ToolChoiceTool",
    "ToolSpec",
    "Usage",
    "count_new_messages",
    "counter_for",
    "encoding_for",
    "estimate_request",
    "message_format_for",
    "message_key",
    "ngram_embedding",
]
