from __future__ import annotations

import pytest

from crux.config import Settings
from crux.errors import ConfigurationError


def test_settings_read_every_documented_variable() -> None:
    settings = Settings.from_env(
        {
            "TEMPORAL_ADDRESS": "temporal:7233",
            "TEMPORAL_NAMESPACE": "prod",
            "CRUX_TASK_QUEUE": "crux-prod",
            "CRUX_DATABASE_URL": "postgresql://u@db/crux",
            "OPENAI_BASE_URL": "http://localhost:11434/v1",
            "OPENAI_API_KEY": "sk-secret-value",
            "CRUX_MODEL": "openai:llama3",
            "CRUX_MIGRATE": "true",
        }
    )
    assert settings.temporal_address == "temporal:7233"
    assert settings.temporal_namespace == "prod"
    assert settings.task_queue == "crux-prod"
    assert settings.require_database_url() == "postgresql://u@db/crux"
    assert settings.default_model == "openai:llama3"
    assert settings.migrate_on_start is True
    assert settings.openai_api_key is not None
    assert "sk-secret-value" not in repr(settings)


def test_defaults_need_no_environment() -> None:
    settings = Settings.from_env({})
    assert settings.temporal_address == "localhost:7233"
    assert settings.default_model == "offline:echo"
    with pytest.raises(ConfigurationError):
        settings.require_database_url()


@pytest.mark.parametrize(
    ("variable", "value"), [("CRUX_MIGRATE", "maybe"), ("CRUX_LOG_FORMAT", "xml")]
)
def test_invalid_values_raise_a_configuration_error_naming_no_value(
    variable: str, value: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({variable: value})
    assert value not in str(raised.value)
    assert isinstance(raised.value, TypeError)
    assert isinstance(raised.value, ValueError)


def test_operational_variables() -> None:
    settings = Settings.from_env(
        {
            "OPENAI_OUTPUT_CAP_FIELD": "both",
            "CRUX_REGISTER_SEARCH_ATTRIBUTES": "false",
            "CRUX_STAGING_RETENTION_SECONDS": "600",
            "CRUX_SWEEP_INTERVAL_SECONDS": "0",
        }
    )
    assert settings.openai_output_cap_field == "both"
    assert settings.register_search_attributes == "false"
    assert settings.staging_retention_seconds == 600
    assert settings.sweep_interval_seconds == 0
    assert Settings.from_env({}).openai_output_cap_field == "auto"
    with pytest.raises(ConfigurationError, match="openai_output_cap_field"):
        Settings.from_env({"OPENAI_OUTPUT_CAP_FIELD": "max_output"})
