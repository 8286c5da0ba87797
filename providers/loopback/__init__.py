"""Loopback HTTP servers speaking the provider wire formats, for tests and demos.

They are real HTTP servers on 127.0.0.1 (never another interface), scripted with
`enqueue(...)`, recording every request in `requests`.
"""

from providers.loopback._replies import (
    CountReply,
    DisconnectReply,
    ErrorReply,
    HangReply,
    RawReply,
    Reply,
    ResetReply,
    ScriptedToolCall,
    StreamErrorReply,
    TextReply,
    tool_call_reply,
)
from providers.loopback._server import LOOPBACK_HOST, LoopbackServer, RecordedRequest, Responder
from providers.loopback.anthropic import LoopbackAnthropicServer
from providers.loopback.openai import LoopbackOpenAIServer

__all__ = [
    "CountReply",
    "DisconnectReply",
    "ErrorReply",
    "HangReply",
    "LOOPBACK_HOST",
    "LoopbackAnthropicServer",
    "LoopbackOpenAIServer",
    "LoopbackServer",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "ResetReply",
    "Responder",
    "ScriptedToolCall",
    "StreamErrorReply",
    "TextReply",
    "tool_call_reply",
]
