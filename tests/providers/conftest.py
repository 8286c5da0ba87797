"""Fixtures for provider tests: an HTTP client and loopback servers per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest_asyncio

from providers import (
    AnthropicMessagesProvider,
    LoopbackAnthropicServer,
    LoopbackOpenAIServer,
    OpenAIChatProvider,
)


@pytest_asyncio.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10.0) as client:
        yield client


@pytest_asyncio.fixture
async def openai_server() -> AsyncIterator[LoopbackOpenAIServer]:
    async with LoopbackOpenAIServer() as server:
        yield server


@pytest_asyncio.fixture
async def anthropic_server() -> AsyncIterator[LoopbackAnthropicServer]:
    async with LoopbackAnthropicServer() as server:
        yield server


@pytest_asyncio.fixture
async def openai_provider(
    http: httpx.AsyncClient, openai_server: LoopbackOpenAIServer
) -> OpenAIChatProvider:
    # Stands in for OpenAI itself, so the cap goes where OpenAI reads it.
    return OpenAIChatProvider(
        http,
        base_url=openai_server.base_url,
        api_key="sk-test",
        headers={"x-team": "crux"},
        max_tokens_field="max_completion_tokens",
    )


@pytest_asyncio.fixture
async def anthropic_provider(
    http: httpx.AsyncClient, anthropic_server: LoopbackAnthropicServer
) -> AnthropicMessagesProvider:
    return AnthropicMessagesProvider(
        http, base_url=anthropic_server.base_url, api_key="sk-ant-test"
    )
