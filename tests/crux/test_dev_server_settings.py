"""Every dev server started here, and the compose file's Temporal, run with the same settings.

The transfer-queue read rate matters most: at its default, a one-shard server dispatches
every workflow and activity task on a 50 ms beat once a few turns a second run.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from crux._devserver import _command
from crux.stack import DEV_SERVER_SETTINGS, dev_server_config_args

ROOT = Path(__file__).resolve().parent.parent.parent


def _settings() -> dict[str, str]:
    pairs = (setting.partition("=") for setting in DEV_SERVER_SETTINGS)
    return {name: value for name, _, value in pairs}


def test_the_settings_raise_the_transfer_queue_read_rate_and_allow_eager_activities() -> None:
    settings = _settings()
    assert int(settings["history.transferProcessorMaxPollRPS"]) >= 1_000
    assert settings["system.enableActivityEagerExecution"] == "true"


def test_crux_dev_passes_every_setting_to_the_server() -> None:
    command = _command("temporal", port=7233, ui_port=None, db_path=Path("t.db"), extra=[])
    pairs = list(zip(command, command[1:], strict=False))
    for setting in DEV_SERVER_SETTINGS:
        assert ("--dynamic-config-value", setting) in pairs
    assert dev_server_config_args() == [
        arg for setting in DEV_SERVER_SETTINGS for arg in ("--dynamic-config-value", setting)
    ]


def test_the_compose_files_temporal_has_the_same_settings() -> None:
    loaded = yaml.safe_load(
        (ROOT / "docker" / "temporal" / "dynamicconfig.yaml").read_text(encoding="utf-8")
    )
    for name, value in _settings().items():
        assert str(loaded[name][0]["value"]).lower() == value.lower(), name
