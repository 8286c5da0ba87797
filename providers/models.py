"""Which `provider:model` ids a worker can serve, and the message that lists them.

A worker has three provider families: `openai` (any OpenAI-compatible server at
`OPENAI_BASE_URL`, so any model name its server knows), `anthropic` (any model name of the
Anthropic API) and `offline` (the deterministic stand-in, which serves `offline:echo` and the
offline profiles a catalog declares). Everything else is refused before anything runs, by the
caller's runtime and again by the worker, with the families and the catalog's models listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from planner import ModelCatalog
from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings

PROVIDER_FAMILIES = ("openai", "anthropic", "offline")
"""The providers a worker serves, as the first part of a model id."""
SERVED_FAMILY = "test"
"""The prefix of models a worker serves itself (`crux.testing`), checked by that worker."""

OFFLINE_MODELS = ("echo",)
"""Model names the offline provider serves without a catalog profile."""

HOSTED = {
    "openai": ("api.openai.com", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("api.anthropic.com", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
}
"""The hosted APIs that always need a key: their host, the key's variable, the URL's.

Self-hosted OpenAI-compatible servers (llama.cpp, vLLM, Ollama) often need none, so a
missing key is refused only for the hosted APIs."""

CUSTOM_PROFILE = (
    "give the runtime and the worker catalog=ModelCatalog.default().with_profiles("
    "ModelProfile(id=..., provider=..., ...))"
)


def catalog_listing(catalog: ModelCatalog | None = None) -> str:
    """The known models, by provider: `openai (gpt-4o, ...), anthropic (...), offline (echo)`."""
    ids: Iterable[str] = (profile.id for profile in (catalog or ModelCatalog.default()).profiles)
    by_family: dict[str, list[str]] = {family: [] for family in PROVIDER_FAMILIES}
    for model_id in ids:
        family, _, name = model_id.partition(":")
        if family in by_family and name not in by_family[family]:
            by_family[family].append(name)
    for name in OFFLINE_MODELS:
        if name not in by_family["offline"]:
            by_family["offline"].insert(0, name)
    return ", ".join(f"{family} ({', '.join(names)})" for family, names in by_family.items())


MAX_SHOWN_ID = 100
"""Longest model id a message repeats (a longer one is named, not quoted)."""


def _shown(text: str) -> str:
    """`text` quoted, when it is a short printable id; never arbitrary input in full."""
    if len(text) <= MAX_SHOWN_ID and text.isprintable() and '"' not in text:
        return f'"{text}"'
    return "(not shown)"


def model_problem(model_id: str, catalog: ModelCatalog | None = None) -> str | None:
    """Why a worker cannot serve `model_id`, in one line; `None` when it can.

    Args:
        model_id: The `provider:model` id a call names.
        catalog: The catalog whose offline profiles the offline provider serves too (the
            default catalog when omitted).
    """
    provider, separator, name = model_id.partition(":")
    if not separator or not provider or not name:
        return (
            f"model {_shown(model_id)} is not a provider:model id; known models: "
            f"{catalog_listing(catalog)}"
        )
    if provider == SERVED_FAMILY:
        # Served by the worker that registers it (`crux.testing`); only that worker knows.
        return None
    if provider not in PROVIDER_FAMILIES:
        return (
            f"unknown provider {_shown(provider)} in model {_shown(model_id)}: the providers are "
            f"{', '.join(PROVIDER_FAMILIES)}; known models: {catalog_listing(catalog)}; a "
            "model of another OpenAI-compatible server is openai:<name> with OPENAI_BASE_URL "
            "pointing at it"
        )
    if provider == "offline" and name not in OFFLINE_MODELS:
        known = catalog or ModelCatalog.default()
        if known.get(model_id) is None:
            return (
                f"unknown offline model {_shown(model_id)}: known models: "
                f"{catalog_listing(catalog)}; for another offline profile, {CUSTOM_PROFILE}"
            )
    return None


def missing_key(model_id: str, settings: Settings) -> str | None:
    """Why `model_id` cannot be called with `settings`' keys, in one line; `None` if it can.

    A hosted API (api.openai.com, api.anthropic.com) without its key would only answer
    401 after a round trip; this says which variable to set before any request is sent.
    """
    provider = model_id.partition(":")[0]
    hosted = HOSTED.get(provider)
    if hosted is None:
        return None
    host, key_variable, url_variable = hosted
    base_url = settings.openai_base_url if provider == "openai" else settings.anthropic_base_url
    key = settings.openai_api_key if provider == "openai" else settings.anthropic_api_key
    if key is not None and key.get_secret_value():
        return None
    if urlsplit(base_url).hostname != host:
        return None
    return (
        f"model {_shown(model_id)} is served by {host}, which needs {key_variable}: set it on the "
        f"worker, or point {url_variable} at a server that needs no key"
    )


def check_model(model_id: str, catalog: ModelCatalog | None = None) -> str:
    """Return `model_id` if a worker can serve it.

    Raises:
        ConfigurationError: Naming the known providers and models (`model_problem`).
    """
    problem = model_problem(model_id, catalog)
    if problem is not None:
        raise ConfigurationError(problem, code="unknown_model")
    return model_id


__all__ = [
    "CUSTOM_PROFILE",
    "OFFLINE_MODELS",
    "PROVIDER_FAMILIES",
    "catalog_listing",
    "HOSTED",
    "check_model",
    "missing_key",
    "model_problem",
]
