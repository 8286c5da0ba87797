"""Model settings and retry/timeout policies as they cross Temporal.

`ModelSettingsSpec` holds the sampling settings sent with every provider call of a
generation; `AttemptPolicySpec` and `ToolPolicySpec` say how provider attempts and tool
calls are retried and timed out. Every field is optional and an absent spec means today's
behaviour, so inputs without them run (and replay) exactly as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from planner.receipt import SettingsRecord
from vocabulary.commits import WireModel
from vocabulary.errors import ConfigurationError
from vocabulary.ids import unstorable_text

MAX_STOP_SEQUENCES = 4
"""Stop sequences per request: the strictest limit among the supported providers."""

MAX_STOP_LENGTH = 128
"""Characters per stop sequence."""

MAX_EXTRA_BYTES = 4096
"""Serialised size of the provider-specific extras."""

MAX_EXTRA_DEPTH = 8
"""Nesting of the provider-specific extras."""

MAX_SEED = 2**63 - 1
"""Largest seed (a signed 64-bit integer, as OpenAI accepts)."""

RESERVED_EXTRA_KEYS = frozenset(
    {
        "model",
        "messages",
        "input",
        "instructions",
        "system",
        "tools",
        "tool_choice",
        "stream",
        "stream_options",
        "max_tokens",
        "max_output_tokens",
        "max_completion_tokens",
        "response_format",
        "text",
        "temperature",
        "top_p",
        "stop",
        "stop_sequences",
        "seed",
    }
)
"""Body fields the adapters set themselves: extras can never replace them."""

_PROVIDER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


class ModelSettingsSpec(WireModel):
    """Sampling settings for every provider call of a generation; `None` leaves a default.

    Attributes:
        temperature: Sampling temperature, 0 to 2.
        top_p: Nucleus sampling mass, above 0 and at most 1.
        stop: Up to 4 stop sequences (1 to 128 characters each).
        seed: A sampling seed (OpenAI). Anthropic has no seed: it is not sent there, and the
            receipt names it under `ignored`.
        extra: Provider-specific body fields by provider name, for example
            `{"openai": {"logit_bias": {...}}, "anthropic": {"top_k": 5}}`. Each provider gets
            only its own object, merged into the request body; fields the adapter sets
            (model, messages, tools, sampling fields, ...) are refused. At most 4 KiB of
            JSON.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    temperature: float | None = Field(default=None, ge=0, le=2, allow_inf_nan=False)
    top_p: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    stop: tuple[str, ...] | None = Field(default=None, max_length=MAX_STOP_SEQUENCES)
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED, strict=True)
    extra: dict[str, dict[str, Any]] | None = None

    @field_validator("temperature", "top_p", mode="before")
    @classmethod
    def _number(cls, value: object) -> object:
        # A boolean is an int to Python; as a temperature it is a caller's mistake.
        if isinstance(value, bool):
            raise ConfigurationError("sampling settings are numbers")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigurationError("sampling settings are finite numbers")
        return value

    @field_validator("stop")
    @classmethod
    def _stop(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        for entry in value:
            if not 0 < len(entry) <= MAX_STOP_LENGTH:
                raise ConfigurationError(
                    f"stop sequences are 1 to {MAX_STOP_LENGTH} characters long"
                )
            if "\x00" in entry or unstorable_text(entry):
                raise ConfigurationError("stop sequences must be storable text")
        return value

    @field_validator("extra")
    @classmethod
    def _extra(cls, value: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
        if value is None:
            return None
        for provider, fields in value.items():
            if not 0 < len(provider) <= 32 or not set(provider) <= _PROVIDER_CHARS:
                raise ConfigurationError("extra is keyed by provider names (for example openai)")
            if set(fields) & RESERVED_EXTRA_KEYS:
                raise ConfigurationError("extra cannot set fields the adapter sets")
        try:
            encoded = json.dumps(value, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            raise ConfigurationError("extra must be plain JSON") from None
        if len(encoded.encode("utf-8", "surrogatepass")) > MAX_EXTRA_BYTES:
            raise ConfigurationError(f"extra is larger than {MAX_EXTRA_BYTES} bytes")
        if _depth(value) > MAX_EXTRA_DEPTH or unstorable_text(encoded):
            raise ConfigurationError("extra must be plain, shallow JSON")
        return value

    def for_provider(self, provider: str) -> dict[str, Any]:
        """The extra body fields for `provider` (an empty object when there are none)."""
        return dict((self.extra or {}).get(provider, {}))

    def record(self, model: str) -> SettingsRecord:
        """The content-free receipt record of these settings for `model`.

        Numbers are recorded as values; stop sequences only by count (they are caller
        text); extras by their field names under the model's provider.
        """
        provider = model.partition(":")[0]
        ignored = ("seed",) if provider == "anthropic" and self.seed is not None else ()
        return SettingsRecord(
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            stop_count=len(self.stop or ()),
            extra_fields=tuple(sorted(self.for_provider(provider))),
            ignored=ignored,
        )


def _depth(value: object) -> int:
    """Nesting depth of containers in `value`, without recursion (any depth is measured)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Mapping[object, object] = node  # pyright: ignore[reportUnknownVariableType]
            stack.extend((child, depth + 1) for child in children.values())
        elif isinstance(node, list | tuple):
            items: list[object] = list(node)  # pyright: ignore[reportUnknownArgumentType]
            stack.extend((child, depth + 1) for child in items)
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
    return deepest


def merge_settings(*layers: ModelSettingsSpec | None) -> ModelSettingsSpec | None:
    """Merge settings field by field; later layers win (prompt, then agent, then call site).

    `extra` merges per provider and field, so a call can change one provider field without
    repeating the rest.

    Returns:
        The merged settings, or `None` when no layer sets anything.
    """
    merged: dict[str, Any] = {}
    extra: dict[str, dict[str, Any]] = {}
    for layer in layers:
        if layer is None:
            continue
        for name in ("temperature", "top_p", "stop", "seed"):
            value = getattr(layer, name)
            if value is not None:
                merged[name] = value
        for provider, fields in (layer.extra or {}).items():
            extra.setdefault(provider, {}).update(fields)
    if extra:
        merged["extra"] = extra
    if not merged:
        return None
    try:
        return ModelSettingsSpec.model_validate(merged)
    except ValidationError as error:
        raise ConfigurationError(f"invalid settings: {describe_fields(error)}") from None


def as_settings(value: ModelSettingsSpec | Mapping[str, Any] | None) -> ModelSettingsSpec | None:
    """Validate settings given as a spec or a mapping.

    Raises:
        ConfigurationError: An unknown field or an invalid value (the message names fields
            and defects, never values).
    """
    return _as_spec(ModelSettingsSpec, value, "settings")


class AttemptPolicySpec(WireModel):
    """How provider attempts are retried and timed out (today's values are the defaults).

    Attributes:
        max_attempts: Attempts of one provider call, the first included.
        initial_interval_seconds: Pause before the first retry (a provider's retry-after
            takes precedence).
        backoff_coefficient: Growth of the pause per retry.
        max_interval_seconds: Longest pause between retries.
        timeout_seconds: Longest single attempt (start to close).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    max_attempts: int = Field(default=5, ge=1, le=100, strict=True)
    initial_interval_seconds: float = Field(default=1.0, gt=0, le=3600, allow_inf_nan=False)
    backoff_coefficient: float = Field(default=2.0, ge=1, le=10, allow_inf_nan=False)
    max_interval_seconds: float = Field(default=60.0, gt=0, le=86_400, allow_inf_nan=False)
    timeout_seconds: float = Field(default=600.0, gt=0, le=86_400, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> AttemptPolicySpec:
        if self.max_interval_seconds < self.initial_interval_seconds:
            raise ConfigurationError("max_interval_seconds must not be below the initial one")
        return self


class ToolPolicySpec(WireModel):
    """How one tool's calls are retried and timed out (today's values are the defaults).

    A handler that raises or exceeds `timeout_seconds` is run again, up to `max_attempts`
    times in all, with the given backoff; after the last attempt its failure becomes an
    error tool result the model sees (the generation goes on).

    Attributes:
        timeout_seconds: Longest run of the handler; `None` for no limit of its own (the
            activity's five minutes still apply).
        max_attempts: Runs of the handler for one call, the first included.
        initial_interval_seconds: Pause before the first retry.
        backoff_coefficient: Growth of the pause per retry.
        max_interval_seconds: Longest pause between retries.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    timeout_seconds: float | None = Field(default=None, gt=0, le=86_400, allow_inf_nan=False)
    max_attempts: int = Field(default=1, ge=1, le=100, strict=True)
    initial_interval_seconds: float = Field(default=1.0, gt=0, le=3600, allow_inf_nan=False)
    backoff_coefficient: float = Field(default=2.0, ge=1, le=10, allow_inf_nan=False)
    max_interval_seconds: float = Field(default=30.0, gt=0, le=86_400, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> ToolPolicySpec:
        if self.max_interval_seconds < self.initial_interval_seconds:
            raise ConfigurationError("max_interval_seconds must not be below the initial one")
        return self


def as_attempt_policy(
    value: AttemptPolicySpec | Mapping[str, Any] | None,
) -> AttemptPolicySpec | None:
    """Validate an attempt policy given as a spec or a mapping.

    Raises:
        ConfigurationError: An unknown field or an invalid value.
    """
    return _as_spec(AttemptPolicySpec, value, "attempt_policy")


_Spec = TypeVar("_Spec", bound=WireModel)


def _as_spec(kind: type[_Spec], value: _Spec | Mapping[str, Any] | None, what: str) -> _Spec | None:
    if value is None:
        return None
    if isinstance(value, kind):
        return value
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{what} must be a mapping or a {kind.__name__}")
    try:
        return kind.model_validate(dict(value))
    except ValidationError as error:
        raise ConfigurationError(f"invalid {what}: {describe_fields(error)}") from None


def describe_fields(error: ValidationError) -> str:
    """Name the invalid fields of a settings or policy spec and each defect, never a value."""
    parts: set[str] = set()
    for item in error.errors(include_url=False, include_input=False):
        if item["type"] == "extra_forbidden":
            parts.add("unknown field")
            continue
        # Only the spec's own field names: keys inside `extra` are the caller's.
        path = str(item["loc"][0]) if item["loc"] else "input"
        raised = item.get("ctx", {}).get("error")
        reason = str(raised) if isinstance(raised, ConfigurationError) else item["type"]
        parts.add(f"{path} ({reason})")
    return ", ".join(sorted(parts))


def merge_attempt_policy(*layers: AttemptPolicySpec | None) -> AttemptPolicySpec | None:
    """Merge attempt policies field by field; later layers win (runtime, agent, call site).

    Only the fields a layer set explicitly override; the rest keep today's defaults.

    Returns:
        The merged policy, or `None` when no layer sets one (today's options).
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer is not None:
            merged.update(layer.model_dump(include=layer.model_fields_set))
    if not merged and all(layer is None for layer in layers):
        return None
    try:
        return AttemptPolicySpec.model_validate(merged)
    except ValidationError as error:
        raise ConfigurationError(f"invalid attempt_policy: {describe_fields(error)}") from None
