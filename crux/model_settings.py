"""Model settings and retry/timeout policies as the facade spells them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contracts.settings import (
    AttemptPolicySpec,
    ModelSettingsSpec,
    ToolPolicySpec,
    as_attempt_policy,
    as_settings,
    merge_attempt_policy,
    merge_settings,
)
from vocabulary.errors import ConfigurationError

__all__ = [
    "AttemptPolicySpec",
    "ModelSettingsSpec",
    "ToolPolicySpec",
    "as_attempt_policy",
    "as_settings",
    "attempt_policy",
    "merge_attempt_policy",
    "merge_settings",
    "model_settings",
]


def model_settings(
    *,
    temperature: float | None = None,
    top_p: float | None = None,
    stop: Sequence[str] | None = None,
    seed: int | None = None,
    extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> ModelSettingsSpec:
    """Model settings for a prompt, an agent or a call; `None` leaves a field unset.

    Args:
        temperature: Sampling temperature, 0 to 2 (Anthropic: 0 to 1).
        top_p: Nucleus sampling mass, above 0 and at most 1.
        stop: Up to 4 stop sequences of 1 to 128 characters.
        seed: A sampling seed; sent to OpenAI, not to Anthropic (which has none: its
            receipts name the seed under `settings.ignored`).
        extra: Provider-specific body fields by provider name, such as
            `{"openai": {"logprobs": True}, "anthropic": {"top_k": 40}}`.

    Raises:
        ConfigurationError: A value is out of range, not finite, or not plain JSON.
    """
    fields: dict[str, Any] = {
        "temperature": temperature,
        "top_p": top_p,
        "stop": None if stop is None else _stop_list(stop),
        "seed": seed,
        "extra": None if extra is None else _extra(extra),
    }
    settings = as_settings({name: value for name, value in fields.items() if value is not None})
    return settings or ModelSettingsSpec()


def attempt_policy(**fields: Any) -> AttemptPolicySpec:
    """A provider-attempt retry and timeout policy (`AttemptPolicySpec` fields by name).

    Raises:
        ConfigurationError: An unknown field or an invalid value.
    """
    policy = as_attempt_policy(fields)
    return policy or AttemptPolicySpec()


def _stop_list(stop: Sequence[str]) -> list[str]:
    if isinstance(stop, str) or not isinstance(stop, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("stop is a list of strings")
    return list(stop)


def _extra(extra: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    # Mappings become plain dicts for validation; anything else is left for the spec to
    # refuse, typed, rather than failing here on its shape.
    if not isinstance(extra, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("extra is a mapping of provider names to body fields")
    return {k: dict(v) if isinstance(v, Mapping) else v for k, v in extra.items()}  # pyright: ignore[reportUnnecessaryIsInstance]
