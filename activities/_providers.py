"""Resolve `provider:model` ids to provider clients built from the worker's settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from contracts.settings import ModelSettingsSpec
from providers import (
    AnthropicMessagesProvider,
    ChatProvider,
    EmbeddingProvider,
    OfflineChatProvider,
    OfflineEmbeddingProvider,
    OpenAIChatProvider,
    OpenAIEmbeddingProvider,
)
from providers.models import missing_key, model_problem
from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings

SERVED_PREFIX = "test"
"""The provider prefix of models a worker serves itself (`crux.testing`)."""


class ProviderRegistry:
    """Maps a model id to a client and the provider's own model name.

    Keys stay here, on the worker: they never enter workflow inputs or history.

    Args:
        settings: Base URLs and keys.
        http: The worker's shared HTTP client (created at worker start).
        models: Providers of whole model ids the worker serves itself (the test models
            of `crux.testing`, by `test:<name>`); they win over the provider prefix.
    """

    def __init__(
        self,
        settings: Settings,
        http: httpx.AsyncClient,
        *,
        models: Mapping[str, ChatProvider] | None = None,
    ) -> None:
        self._models = dict(models or {})
        self._settings = settings
        openai_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        anthropic_key = (
            settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
        )
        self._providers: dict[str, ChatProvider] = {
            "offline": OfflineChatProvider(),
            "openai": OpenAIChatProvider(
                http,
                base_url=settings.openai_base_url,
                api_key=openai_key,
                max_tokens_field=settings.openai_output_cap_field,
            ),
            "anthropic": AnthropicMessagesProvider(
                http, base_url=settings.anthropic_base_url, api_key=anthropic_key
            ),
        }
        # Embeddings for the response cache's semantic match: the offline one, and any
        # OpenAI-compatible `/embeddings` at the OpenAI base URL (Anthropic has none).
        self._embedders: dict[str, EmbeddingProvider] = {
            "offline": OfflineEmbeddingProvider(),
            "openai": OpenAIEmbeddingProvider(
                http, base_url=settings.openai_base_url, api_key=openai_key
            ),
        }

    def resolve(self, model_id: str) -> tuple[ChatProvider, str]:
        """Return `(client, provider model name)` for a `provider:model` id.

        Nothing is sent: a model no provider serves, or a hosted API without its key, is
        refused here, before any request.

        Raises:
            ConfigurationError: The id is malformed or names an unknown provider (the
                message lists the known ones), or a hosted API's key is not set (the
                message names the variable).
        """
        provider, _, name = model_id.partition(":")
        served = self._models.get(model_id)
        if served is not None:
            return served, name
        if provider == SERVED_PREFIX and name:
            raise ConfigurationError(
                f"model {model_id} is not registered on the worker: pass the test model "
                "to crux.Worker(models=[...])",
                code="not_registered",
            )
        problem = model_problem(model_id) if provider not in self._providers or not name else None
        problem = problem or missing_key(model_id, self._settings)
        if problem is not None:
            code = "missing_api_key" if provider in self._providers and name else "unknown_model"
            raise ConfigurationError(problem, code=code)
        return self._providers[provider], name

    def resolve_embedder(self, model_id: str) -> tuple[EmbeddingProvider, str]:
        """Return `(client, provider model name)` for an embedding model id.

        Raises:
            ConfigurationError: The id is malformed or its provider offers no embeddings.
        """
        provider, separator, name = model_id.partition(":")
        if not separator or not name:
            raise ConfigurationError("embedding model ids are 'provider:model'")
        try:
            return self._embedders[provider], name
        except KeyError:
            raise ConfigurationError(
                "the cache's embedding_model names a provider without embeddings;"
                " use offline:ngram-256 or openai:<model>"
            ) from None


def sampling_fields(settings: ModelSettingsSpec | None, model_id: str) -> dict[str, Any]:
    """The `ChatRequest` fields for `settings` sent to `model_id`'s provider.

    Each provider gets only its own extras; a setting the adapter cannot send is dropped
    there (and named in the receipt by `ModelSettingsSpec.record`).
    """
    if settings is None:
        return {}
    provider = model_id.partition(":")[0]
    return {
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "stop": list(settings.stop) if settings.stop is not None else None,
        "seed": settings.seed,
        "extra": settings.for_provider(provider),
    }
