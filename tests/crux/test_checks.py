"""Start-up checks that need no server: provider settings and the remedy they name."""

from __future__ import annotations

import pytest

from crux._checks import (
    StartupCheckError,
    check_providers,
    describe_database,
    search_attribute_command,
)
from crux.config import Settings
from crux.errors import ConfigurationError


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OPENAI_BASE_URL": "localhost:8080/v1"}, "OPENAI_BASE_URL"),
        ({"OPENAI_BASE_URL": "http://host:notaport/v1"}, "OPENAI_BASE_URL"),
        ({"ANTHROPIC_BASE_URL": "ftp://example.test"}, "ANTHROPIC_BASE_URL"),
        ({"CRUX_MODEL": "gpt-4o"}, "CRUX_MODEL"),
        ({"CRUX_MODEL": "vllm:llama"}, "CRUX_MODEL"),
        ({"CRUX_MODEL": "openai:gpt-4o"}, "OPENAI_API_KEY"),
        ({"CRUX_MODEL": "anthropic:claude-sonnet-4-5"}, "ANTHROPIC_API_KEY"),
    ],
)
def test_unusable_provider_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(StartupCheckError, match=named) as raised:
        check_providers(Settings.from_env(env))
    assert isinstance(raised.value, ConfigurationError)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"CRUX_MODEL": "openai:llama3", "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"},
        {"CRUX_MODEL": "openai:gpt-4o", "OPENAI_API_KEY": "sk-x"},
        {"CRUX_MODEL": "anthropic:claude", "ANTHROPIC_API_KEY": "sk-ant-x"},
    ],
)
def test_usable_provider_settings_pass(env: dict[str, str]) -> None:
    check_providers(Settings.from_env(env))


def test_messages_carry_no_secret() -> None:
    assert describe_database("postgresql://user:hunter2@db.internal:6543/crux") == (
        "db.internal:6543/crux"
    )
    settings = Settings(temporal_address="temporal.prod:7233", temporal_namespace="crux")
    assert search_attribute_command(settings, ["CruxStage", "CruxModel"]) == (
        "temporal operator search-attribute create --address temporal.prod:7233 "
        "--namespace crux --name CruxStage --type Keyword --name CruxModel --type Keyword"
    )


def test_describe_database_names_the_socket_directory_of_a_socket_url() -> None:
    url = "postgresql://postgres:secret@/crux?host=/work/.stack/pgdata"
    assert describe_database(url) == "/work/.stack/pgdata (socket)/crux"
