from __future__ import annotations

import ast
from pathlib import Path

import providers
import providers.loopback

ROOT = Path(providers.__file__).parent


def test_exports_are_sorted_and_resolvable() -> None:
    for module in (providers, providers.loopback):
        assert module.__all__ == sorted(module.__all__)
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_required_names_are_exported() -> None:
    required = {
        "ChatRequest",
        "ToolSpec",
        "ChatResponse",
        "Usage",
        "ChatProvider",
        "OpenAIChatProvider",
        "AnthropicMessagesProvider",
        "OfflineChatProvider",
        "TokenCounter",
        "LoopbackOpenAIServer",
        "LoopbackAnthropicServer",
    }
    assert required <= set(providers.__all__)


def test_no_temporal_imports_in_providers() -> None:
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] == "temporalio" for n in names), path


def test_loopback_servers_bind_to_loopback_only() -> None:
    assert providers.loopback.LOOPBACK_HOST == "127.0.0.1"


async def test_adapters_satisfy_the_seams() -> None:
    import httpx

    from providers import (
        AnthropicMessagesProvider,
        AuthoritativeCounter,
        ChatProvider,
        OfflineChatProvider,
        OpenAIChatProvider,
        StreamingChatProvider,
        SummarizingProvider,
    )

    http = httpx.AsyncClient()
    adapters = [
        OpenAIChatProvider(http, base_url="http://127.0.0.1:1/v1"),
        AnthropicMessagesProvider(http, base_url="http://127.0.0.1:1/v1"),
        OfflineChatProvider(),
    ]
    for adapter in adapters:
        for seam in (
            ChatProvider,
            StreamingChatProvider,
            SummarizingProvider,
            AuthoritativeCounter,
        ):
            assert isinstance(adapter, seam), (adapter, seam)
