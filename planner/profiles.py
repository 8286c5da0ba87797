"""Model capacity profiles and the catalog that resolves them.

A profile says how much a model can take (`context_window`), how much output room a call
reserves by default, how trustworthy the token counts for it are, and which tokenizer encoding
counts its text. The planner never tokenizes; the encoding name tells the counting activity
which tokenizer to run once per message.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import Field, PrivateAttr, model_validator

from planner._base import Confidence, FrozenModel
from vocabulary.errors import ConfigurationError

DEFAULT_CONTEXT_WINDOW = 8_192
"""Window assumed for a model the catalog does not know."""

DEFAULT_OUTPUT_RESERVE = 2_048
"""Output reserve assumed for a model the catalog does not know."""

DEFAULT_ENCODING = "cl100k_base"
"""Encoding used to estimate counts for a model the catalog does not know."""


class ModelProfile(FrozenModel):
    """Capacity of one concrete model.

    Attributes:
        id: `"provider:model"`, for example `"openai:gpt-4o-mini"`.
        provider: Provider API family (`"openai"`, `"anthropic"`, `"offline"`, ...); it
            selects the per-message formatting overhead and the media estimates. An
            OpenAI-compatible server registered as `"vllm:llama-3"` uses `"openai"`.
        context_window: Total tokens the model accepts (input plus output).
        default_output_reserve: Output tokens reserved when the call sets no maximum.
        confidence: How far the counts for this model can be trusted: `exact` (margin 0),
            `estimated` (5 % of the window) or `conservative` (10 %).
        encoding: Tokenizer encoding name, such as `"o200k_base"`, `"cl100k_base"`, or
            `"anthropic"` when the provider's tokenizer is not public.
    """

    id: str = Field(min_length=3)
    provider: str = Field(min_length=1)
    context_window: int = Field(gt=0)
    default_output_reserve: int = Field(gt=0)
    confidence: Confidence
    encoding: str = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> ModelProfile:
        prefix, sep, name = self.id.partition(":")
        if not (prefix and sep and name):
            raise ValueError("profile id must be '<provider>:<model>'")
        if self.default_output_reserve >= self.context_window:
            raise ValueError("default_output_reserve must be smaller than context_window")
        return self


def conservative_profile(model_id: str) -> ModelProfile:
    """Return the conservative profile used for a model nobody described.

    Args:
        model_id: The requested id; its `provider:` prefix is kept when present.

    Returns:
        An 8,192-token window, a 2,048-token reserve and `conservative` counting.
    """
    provider, sep, name = model_id.partition(":")
    if not sep or not provider or not name:
        provider, name = "unknown", model_id or "model"
    return ModelProfile(
        id=f"{provider}:{name}",
        provider=provider,
        context_window=DEFAULT_CONTEXT_WINDOW,
        default_output_reserve=DEFAULT_OUTPUT_RESERVE,
        confidence="conservative",
        encoding=DEFAULT_ENCODING,
    )


def _openai(name: str, window: int, reserve: int, encoding: str = "o200k_base") -> ModelProfile:
    # OpenAI counts come from the public BPE files, but per-message framing is an estimate,
    # so these are `estimated`, not `exact`.
    return ModelProfile(
        id=f"openai:{name}",
        provider="openai",
        context_window=window,
        default_output_reserve=reserve,
        confidence="estimated",
        encoding=encoding,
    )


def _anthropic(name: str, reserve: int = 8_192) -> ModelProfile:
    # Anthropic's tokenizer is not public: counts are approximations, hence `conservative`.
    return ModelProfile(
        id=f"anthropic:{name}",
        provider="anthropic",
        context_window=200_000,
        default_output_reserve=reserve,
        confidence="conservative",
        encoding="anthropic",
    )


BUILTIN_PROFILES: tuple[ModelProfile, ...] = (
    _openai("gpt-4o", 128_000, 4_096),
    _openai("gpt-4o-mini", 128_000, 4_096),
    _openai("gpt-4.1", 1_047_576, 8_192),
    _openai("gpt-4.1-mini", 1_047_576, 8_192),
    _openai("gpt-4.1-nano", 1_047_576, 8_192),
    _openai("o1", 200_000, 16_384),
    _openai("o3", 200_000, 16_384),
    _openai("o3-mini", 200_000, 16_384),
    _openai("o4-mini", 200_000, 16_384),
    _openai("gpt-4-turbo", 128_000, 4_096, "cl100k_base"),
    _openai("gpt-4", 8_192, 2_048, "cl100k_base"),
    _openai("gpt-3.5-turbo", 16_385, 2_048, "cl100k_base"),
    _anthropic("claude-opus-4-1"),
    _anthropic("claude-opus-4"),
    _anthropic("claude-sonnet-4-5"),
    _anthropic("claude-sonnet-4"),
    _anthropic("claude-haiku-4-5"),
    _anthropic("claude-3-7-sonnet"),
    _anthropic("claude-3-5-sonnet"),
    _anthropic("claude-3-5-haiku"),
    _anthropic("claude-3-opus", 4_096),
    _anthropic("claude-3-haiku", 4_096),
    # The built-in offline demo provider counts with the same tiktoken encoding it is
    # measured with, so its counts are exact.
    ModelProfile(
        id="offline:echo",
        provider="offline",
        context_window=32_768,
        default_output_reserve=1_024,
        confidence="exact",
        encoding="cl100k_base",
    ),
)
"""Profiles shipped with the planner (read-only)."""


class ModelCatalog(FrozenModel):
    """An immutable set of profiles, resolved by `"provider:model"` id.

    There is no global registry: callers build a catalog (usually `ModelCatalog.default()`
    plus their own profiles via `with_profiles`) and pass it where models are resolved, so
    the same inputs always resolve the same way.

    Attributes:
        profiles: The profiles, one per id.
    """

    profiles: tuple[ModelProfile, ...] = ()
    _index: Mapping[str, ModelProfile] = PrivateAttr(default_factory=lambda: MappingProxyType({}))

    @model_validator(mode="after")
    def _unique(self) -> ModelCatalog:
        index = {profile.id: profile for profile in self.profiles}
        if len(index) != len(self.profiles):
            raise ValueError("a catalog holds at most one profile per id")
        self._index = MappingProxyType(index)
        return self

    @classmethod
    def default(cls) -> ModelCatalog:
        """Return the catalog of built-in OpenAI, Anthropic and offline profiles."""
        return _DEFAULT

    def with_profiles(self, *profiles: ModelProfile) -> ModelCatalog:
        """Return a new catalog where `profiles` replace or extend this one's.

        Args:
            *profiles: Profiles to register; a later one wins over an earlier one with the
                same id.

        Raises:
            ConfigurationError: If an argument is not a `ModelProfile`.
        """
        merged = dict(self._index)
        for profile in profiles:
            if not isinstance(profile, ModelProfile):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ConfigurationError("with_profiles accepts ModelProfile values only")
            merged[profile.id] = profile
        return ModelCatalog(profiles=tuple(merged.values()))

    def get(self, model_id: str) -> ModelProfile | None:
        """Return the registered profile for `model_id` (or a dated snapshot of it), if any.

        A dated or suffixed id such as `"openai:gpt-4o-2024-08-06"` resolves to the longest
        registered id it extends at a `-` boundary, so snapshots inherit their family's
        capacity without listing every date.
        """
        exact = self._index.get(model_id)
        if exact is not None:
            return exact
        best: ModelProfile | None = None
        for profile_id, profile in self._index.items():
            if model_id.startswith(profile_id + "-") and (
                best is None or len(profile_id) > len(best.id)
            ):
                best = profile
        return best

    def resolve(self, model_id: str) -> ModelProfile:
        """Return the profile for `model_id`, or the conservative default when unknown.

        Args:
            model_id: `"provider:model"`.

        Returns:
            The registered profile, or `conservative_profile(model_id)`.
        """
        found = self.get(model_id)
        return found if found is not None else conservative_profile(model_id)


_DEFAULT = ModelCatalog(profiles=BUILTIN_PROFILES)
