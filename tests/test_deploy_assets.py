"""The container image and the compose file, checked without Docker.

The structure is parsed and asserted (start-up order by health, one-shot migration and
search-attribute registration, a non-root image with a health check); the registration
script itself runs for real against the Temporal dev server with the `temporal` CLI.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tomllib
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import Client

from contracts.search import NAMES as SEARCH_ATTRIBUTE_NAMES
from crux.stack import temporal_cli_path
from vocabulary.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docker" / "temporal" / "register-search-attributes.sh"


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


def _services() -> dict[str, dict[str, Any]]:
    return _compose()["services"]


def _dockerfile_final_stage() -> list[tuple[str, str]]:
    """(instruction, arguments) of the last stage, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    text = re.sub(r"\\\n\s*", " ", text)
    instructions = [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in (raw.strip() for raw in text.splitlines())
        if line and not line.startswith("#")
    ]
    last_from = max(i for i, (name, _) in enumerate(instructions) if name == "FROM")
    return instructions[last_from:]


def _dockerfile_all() -> str:
    return (ROOT / "Dockerfile").read_text(encoding="utf-8")


def test_services_start_in_order_of_health() -> None:
    services = _services()
    for name, service in services.items():
        depends = service.get("depends_on", {})
        # The short list form only waits for a container to be created, not to be ready.
        assert isinstance(depends, dict), f"{name}: depends_on without conditions"
        for dependency, rule in depends.items():
            condition = rule["condition"]
            assert condition in ("service_healthy", "service_completed_successfully"), name
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{dependency} has no healthcheck"
    worker = services["worker"]["depends_on"]
    assert worker["postgresql"]["condition"] == "service_healthy"
    assert worker["temporal"]["condition"] == "service_healthy"
    assert worker["migrate"]["condition"] == "service_completed_successfully"
    assert worker["register-search-attributes"]["condition"] == "service_completed_successfully"
    # No cycles: every service can be started after its dependencies.
    started: list[str] = []
    while len(started) < len(services):
        ready = [
            name
            for name, service in services.items()
            if name not in started and set(service.get("depends_on", {})) <= set(started)
        ]
        assert ready, f"cyclic dependencies among {set(services) - set(started)}"
        started += sorted(ready)
    assert started.index("worker") > started.index("migrate")


def test_migrations_run_once_as_a_one_shot_service_never_in_the_worker() -> None:
    services = _services()
    migrate = services["migrate"]
    assert migrate["command"] == ["crux", "db", "migrate"]
    assert migrate["restart"] == "no"
    assert migrate["healthcheck"] == {"disable": True}
    for name, service in services.items():
        environment = service.get("environment", {})
        assert str(environment.get("CRUX_MIGRATE", "false")).lower() in ("false", "0"), name
    assert "CRUX_MIGRATE" not in _dockerfile_all()


def test_search_attributes_are_registered_before_the_worker_which_only_checks_them() -> None:
    services = _services()
    register = services["register-search-attributes"]
    assert register["restart"] == "no"
    mounted = [volume.split(":")[0] for volume in register["volumes"]]
    assert "./docker/temporal/register-search-attributes.sh" in mounted
    assert register["entrypoint"][-1].endswith("register-search-attributes.sh")
    assert services["worker"]["environment"]["CRUX_REGISTER_SEARCH_ATTRIBUTES"] == "false"
    names = re.search(r'^NAMES="([^"]+)"', SCRIPT.read_text(encoding="utf-8"), re.MULTILINE)
    assert names is not None
    assert sorted(names.group(1).split()) == sorted(SEARCH_ATTRIBUTE_NAMES)


def test_the_worker_is_healthy_only_while_it_polls() -> None:
    worker = _services()["worker"]
    assert worker["healthcheck"]["test"] == ["CMD", "crux-health"]
    assert worker["environment"]["CRUX_HEALTH_FILE"]
    assert worker["image"] == _services()["migrate"]["image"]


def test_the_worker_is_given_more_time_to_stop_than_its_shutdown_grace() -> None:
    worker = _compose()["services"]["worker"]
    grace = Settings.model_fields["shutdown_grace_seconds"].default
    stop = worker.get("stop_grace_period", "10s")  # compose's default
    assert stop.endswith("s") and float(stop[:-1]) > grace
    assert "CRUX_SHUTDOWN_GRACE_SECONDS" not in worker["environment"]


def test_the_api_is_an_optional_stateless_service_of_the_worker_image() -> None:
    services = _services()
    api, worker = services["api"], services["worker"]
    assert api["profiles"] == ["api"]  # `docker compose up` alone starts what it did
    assert api["command"] == ["crux", "serve"]
    assert api["image"] == worker["image"]
    assert "build" not in api and "volumes" not in api  # nothing of its own to keep
    assert api["depends_on"] == worker["depends_on"]
    environment = api["environment"]
    assert environment["CRUX_SERVE_HOST"] == "0.0.0.0"
    assert environment["CRUX_DATABASE_URL"] == worker["environment"]["CRUX_DATABASE_URL"]
    # One codec ring for both: the api's codec server decrypts what the worker encrypted.
    assert environment["CRUX_CODEC_KEYS"] == worker["environment"]["CRUX_CODEC_KEYS"]
    assert any("/readyz" in part for part in api["healthcheck"]["test"])
    assert api["ports"] == ["${CRUX_API_PORT:-8000}:8000"]


def test_the_image_runs_unprivileged_with_a_health_check_from_the_lock_file() -> None:
    final = _dockerfile_final_stage()
    users = [arguments for name, arguments in final if name == "USER"]
    assert users, "the final stage sets no USER (it would run as root)"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    health = [arguments for name, arguments in final if name == "HEALTHCHECK"]
    assert len(health) == 1
    assert health[0].endswith('CMD ["crux-health"]')
    environment = " ".join(arguments for name, arguments in final if name == "ENV")
    assert "CRUX_HEALTH_FILE=" in environment
    assert [arguments for name, arguments in final if name == "CMD"] == ['["crux", "worker"]']
    text = _dockerfile_all()
    assert "--require-hashes -r requirements.lock" in text
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["project"]["scripts"]["crux-health"] == "telemetry.readiness:main"
    # Every package of the distribution is copied into the image.
    packages = [p.rstrip("*") for p in config["tool"]["setuptools"]["packages"]["find"]["include"]]
    for package in packages:
        assert f"COPY {package} ./{package}" in text, package
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert ".venv" in ignored and ".git" in ignored


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [temporal_cli_path(), *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.stack
def test_the_registration_script_registers_every_attribute_and_is_idempotent(
    client: Client,
) -> None:
    namespace = f"crux-compose-{uuid.uuid4().hex[:8]}"
    cli = Path(temporal_cli_path())
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "TEMPORAL_NAMESPACE": namespace,
        # The script calls `temporal` as the admin-tools image has it on its PATH.
        "PATH": f"{cli.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    if cli.name != "temporal":
        link = Path(env["PATH"].split(os.pathsep)[0]) / "temporal"
        assert link.exists(), f"no `temporal` beside {cli}"
    created = _cli(env, "operator", "namespace", "create", "--namespace", namespace)
    assert created.returncode == 0, created.stderr
    for _ in range(2):
        run = subprocess.run(
            ["/bin/sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=180
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"registered in namespace {namespace}" in run.stdout
    listed = _cli(env, "operator", "search-attribute", "list", "--namespace", namespace)
    for name in SEARCH_ATTRIBUTE_NAMES:
        line = next((row for row in listed.stdout.splitlines() if name in row.split()), "")
        assert "Keyword" in line, (name, shlex.quote(listed.stdout[-400:]))
