"""Which model ids a worker serves, and the one-line remedy for those it does not."""

from __future__ import annotations

import pytest

from planner import ModelCatalog, ModelProfile
from providers.models import catalog_listing, check_model, missing_key, model_problem
from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings


@pytest.mark.parametrize(
    "model_id",
    ["offline:echo", "openai:gpt-4o", "openai:llama3-local", "anthropic:claude-sonnet-4-5"],
)
def test_served_models_pass(model_id: str) -> None:
    assert model_problem(model_id) is None
    assert check_model(model_id) == model_id


@pytest.mark.parametrize(
    "model_id", ["offline:nonexistent", "vllm:llama", "gpt-4o", "openai:", ":echo", ""]
)
def test_unknown_models_are_refused_listing_the_known_ones(model_id: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        check_model(model_id)
    assert raised.value.code == "unknown_model"
    message = str(raised.value)
    assert catalog_listing() in message and "\n" not in message


def test_an_offline_profile_of_the_catalog_is_served_and_listed() -> None:
    catalog = ModelCatalog.default().with_profiles(
        ModelProfile(
            id="offline:window-128k",
            provider="offline",
            context_window=128_000,
            default_output_reserve=4_096,
            confidence="exact",
            encoding="cl100k_base",
        )
    )
    assert model_problem("offline:window-128k", catalog) is None
    assert "offline (echo, window-128k)" in catalog_listing(catalog)
    assert model_problem("offline:window-128k") is not None


def test_a_long_or_unprintable_id_is_not_repeated() -> None:
    problem = model_problem("x" * 500 + ":y")
    assert problem is not None and "x" * 101 not in problem and "(not shown)" in problem
    problem = model_problem("bad\nid")
    assert problem is not None and "bad\nid" not in problem


@pytest.mark.parametrize(
    ("model_id", "env", "variable"),
    [
        ("openai:gpt-4o", {}, "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", {}, "ANTHROPIC_API_KEY"),
        ("openai:gpt-4o", {"OPENAI_API_KEY": ""}, "OPENAI_API_KEY"),
    ],
)
def test_a_hosted_api_without_its_key_names_the_variable(
    model_id: str, env: dict[str, str], variable: str
) -> None:
    problem = missing_key(model_id, Settings.from_env(env))
    assert problem is not None and variable in problem and "BASE_URL" in problem


@pytest.mark.parametrize(
    ("model_id", "env"),
    [
        ("offline:echo", {}),
        ("openai:llama3", {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}),
        ("openai:gpt-4o", {"OPENAI_API_KEY": "sk-x"}),
        ("anthropic:claude", {"ANTHROPIC_API_KEY": "sk-ant-x"}),
    ],
)
def test_a_key_is_not_asked_for_where_none_is_needed(model_id: str, env: dict[str, str]) -> None:
    assert missing_key(model_id, Settings.from_env(env)) is None
