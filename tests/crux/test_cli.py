"""The `crux` command against a real database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from importlib import metadata

import asyncpg

from crux.messages import Message
from storage import ThreadStore


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
