"""Capacity profiles, the catalog, and measurement constants."""

from __future__ import annotations

import pytest

from planner import (
    DEFAULT_MESSAGE_FORMAT,
    MESSAGE_FORMATS,
    ConfigurationError,
    DocumentPart,
    ImagePart,
    ModelCatalog,
    ModelProfile,
    conservative_profile,
    estimate_media_tokens,
    message_format,
    message_tokens,
    plan,
)
from tests.planner.helpers import request


@pytest.mark.parametrize(
    ("model_id", "window", "encoding", "confidence"),
    [
        ("openai:gpt-4o-mini", 128_000, "o200k_base", "estimated"),
        ("openai:gpt-4o", 128_000, "o200k_base", "estimated"),
        ("openai:gpt-4.1", 1_047_576, "o200k_base", "estimated"),
        ("openai:gpt-4", 8_192, "cl100k_base", "estimated"),
        ("anthropic:claude-sonnet-4-5", 200_000, "anthropic", "conservative"),
        ("anthropic:claude-3-haiku", 200_000, "anthropic", "conservative"),
        ("offline:echo", 32_768, "cl100k_base", "exact"),
    ],
)
def test_catalog_profiles(model_id: str, window: int, encoding: str, confidence: str) -> None:
    profile = ModelCatalog.default().resolve(model_id)
    assert (profile.id, profile.context_window, profile.encoding, profile.confidence) == (
        model_id,
        window,
        encoding,
        confidence,
    )


def test_dated_snapshots_resolve_to_their_family() -> None:
    catalog = ModelCatalog.default()
    assert catalog.resolve("openai:gpt-4o-mini-2024-07-18").id == "openai:gpt-4o-mini"
    assert catalog.resolve("openai:gpt-4o-2024-08-06").id == "openai:gpt-4o"
    assert catalog.resolve("anthropic:claude-sonnet-4-5-20250929").id == (
        "anthropic:claude-sonnet-4-5"
    )


def test_unknown_models_get_the_conservative_default() -> None:
    profile = ModelCatalog.default().resolve("vllm:llama-3-70b")
    assert profile == conservative_profile("vllm:llama-3-70b")
    assert (profile.context_window, profile.default_output_reserve) == (8_192, 2_048)
    assert profile.confidence == "conservative"
    assert conservative_profile("bare").id == "unknown:bare"


def test_users_register_profiles_on_a_new_catalog() -> None:
    mine = ModelProfile(
        id="vllm:llama-3-70b",
        provider="openai",
        context_window=65_536,
        default_output_reserve=2_048,
        confidence="estimated",
        encoding="cl100k_base",
    )
    default = ModelCatalog.default()
    extended = default.with_profiles(mine)
    assert extended.resolve("vllm:llama-3-70b") == mine
    assert default.get("vllm:llama-3-70b") is None
    override = mine.model_copy(update={"context_window": 131_072})
    assert extended.with_profiles(override).resolve(mine.id).context_window == 131_072
    with pytest.raises(ConfigurationError):
        default.with_profiles("gpt")  # type: ignore[arg-type]


def test_catalog_is_immutable_and_round_trips() -> None:
    catalog = ModelCatalog.default()
    again = ModelCatalog.model_validate_json(catalog.model_dump_json())
    assert again.resolve("offline:echo") == catalog.resolve("offline:echo")
    with pytest.raises(ValueError):
        catalog.profiles = ()
    with pytest.raises(TypeError):
        MESSAGE_FORMATS["openai"] = DEFAULT_MESSAGE_FORMAT  # type: ignore[index]


@pytest.mark.parametrize(
    "fields",
    [
        {"id": "nocolon"},
        {"id": "x:"},
        {"context_window": 0},
        {"default_output_reserve": 40_000},
    ],
)
def test_invalid_profiles_are_rejected(fields: dict[str, object]) -> None:
    base: dict[str, object] = {
        "id": "x:y",
        "provider": "x",
        "context_window": 32_000,
        "default_output_reserve": 1_000,
        "confidence": "exact",
        "encoding": "cl100k_base",
    }
    with pytest.raises(ValueError):
        ModelProfile.model_validate({**base, **fields})


def test_message_formats_per_family() -> None:
    assert message_format("openai") == MESSAGE_FORMATS["openai"]
    assert message_format("anthropic").tools_preamble > message_format("openai").tools_preamble
    assert message_format("mystery") == DEFAULT_MESSAGE_FORMAT


def test_planner_adds_the_family_framing() -> None:
    profile = ModelCatalog.default().resolve("openai:gpt-4o-mini")
    fmt = MESSAGE_FORMATS["openai"]
    sealed = plan(
        request(model=profile, message_format=None, system_tokens=10, tool_schema_tokens=5)
    )
    assert sealed.input_tokens == 10 + fmt.per_message + fmt.reply_priming + 5 + fmt.tools_preamble


@pytest.mark.parametrize(
    ("provider", "part", "tokens"),
    [
        ("openai", ImagePart(width=1024, height=1024, detail="low"), 85),
        ("openai", ImagePart(width=1024, height=1024), 85 + 170 * 4),
        ("openai", ImagePart(width=512, height=512), 85 + 170),
        ("openai", ImagePart(width=4096, height=2048), 85 + 170 * 6),
        ("anthropic", ImagePart(width=1000, height=1000), 1_334),
        ("anthropic", ImagePart(width=3136, height=3136), 1_600),
        ("anthropic", ImagePart(width=1568, height=700), 1_464),
        ("openai", DocumentPart(pages=3), 9_000),
    ],
)
def test_media_estimates(provider: str, part: ImagePart | DocumentPart, tokens: int) -> None:
    assert estimate_media_tokens(provider, part) == tokens


def test_unknown_family_takes_the_larger_image_estimate() -> None:
    part = ImagePart(width=1000, height=1000)
    assert estimate_media_tokens("x", part) == max(
        estimate_media_tokens("openai", part), estimate_media_tokens("anthropic", part)
    )


def test_message_tokens_adds_text_calls_and_media() -> None:
    media = (ImagePart(width=512, height=512, detail="low"),)
    assert message_tokens("openai", text_tokens=10, tool_call_tokens=5, media=media) == 100
