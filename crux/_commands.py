"""Implementations of the CLI commands (printing is their job; logs stay content-free)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from crux._checks import StartupCheckError, check_database, describe_database, migrate_database
from crux._devserver import lock_stack_dir
from crux._embedded import STACK_DATABASE, embedded_stack
from crux._exit import CommandError, ExitCode
from crux.stack import attached_database_url, start_postgres
from crux.workers import Worker
from storage import (
    GenerationStore,
    MessageEntry,
    ThreadSnapshot,
    ThreadStore,
    create_pool,
)
from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings


def crux_command() -> str:
    """How to run `crux` from here: `crux` when it is on the PATH, else its path."""
    return _venv_command("crux")


def _venv_command(name: str) -> str:
    """`name` when the PATH finds this environment's binary, else its (relative) path."""
    installed = Path(sys.executable).parent / name
    on_path = shutil.which(name)
    if on_path and Path(on_path).resolve() == installed.resolve():
        return name
    try:
        return str(installed.relative_to(Path.cwd()))
    except ValueError:
        return str(installed)


def banner(stack_ui: str | None, settings: Settings, stack_dir: Path) -> None:
    print("Crux embedded stack")
    print(f"  Temporal address : {settings.temporal_address}")
    print(f"  Temporal UI      : {stack_ui or 'disabled'}")
    print(f"  Namespace        : {settings.temporal_namespace}")
    print(f"  Task queue       : {settings.task_queue}")
    print(f"  Database URL     : {settings.database_url}")
    print(f"  Model            : {settings.default_model}")
    print(f"  Server logs      : {stack_dir / 'temporal.log'}, {stack_dir / 'postgres.log'}")


def _registered(worker: Worker) -> str:
    names = worker.registrations.names()
    listed = [f"{kind} {', '.join(found)}" for kind, found in names.items() if found]
    return "; ".join(listed) or "nothing (serve yours with --app module:attribute)"


async def dev(
    settings: Settings,
    *,
    stack_dir: Path,
    stop: asyncio.Event,
    worker: Worker | None = None,
    app: str | None = None,
    port: int | None = None,
    ui_port: int | None = None,
) -> int:
    """Run the embedded stack with a worker (`worker`'s registrations) until interrupted."""
    worker = worker or Worker()
    async with embedded_stack(
        settings, stack_dir=stack_dir, worker=worker, port=port, ui_port=ui_port
    ) as stack:
        banner(stack.ui_url, stack.settings, stack_dir)
        print(f"  Worker registers : {_registered(worker)}" + (f" (--app {app})" if app else ""))
        print("\nExport these to point other processes at this stack:")
        print(f"  export TEMPORAL_ADDRESS={stack.settings.temporal_address}")
        print(f"  export CRUX_DATABASE_URL='{stack.settings.database_url}'")
        print(
            f"Then, e.g.: {_venv_command('temporal')} workflow list"
            f" --address {stack.settings.temporal_address}"
        )
        print("Press Ctrl-C to stop.", flush=True)
        await stop.wait()
    return 0


async def thread_show(
    settings: Settings, thread_id: str, stack_dir: Path, *, as_json: bool = False
) -> int:
    """Print a Thread's selected path with its branch points (JSON with `as_json`).

    Reads `CRUX_DATABASE_URL`, or the embedded stack's database in `stack_dir` when it is
    unset (a running stack's server is read without attaching to it; a stopped one is
    started for the read and stopped again).

    Raises:
        CommandError: No such Thread (exit code 3), or no database to read.
    """
    if settings.database_url:
        return await _print_thread(settings.database_url, thread_id, as_json=as_json)
    if not (stack_dir / "pgdata").exists():
        raise CommandError(
            f"no database to read: set CRUX_DATABASE_URL, or pass the --stack-dir of a "
            f"crux dev or crux demo ({stack_dir} holds no stack)"
        )
    try:
        lock = await asyncio.to_thread(lock_stack_dir, stack_dir)
    except ConfigurationError:
        # A running `crux dev`/`crux demo` holds it: read its server without attaching to
        # it, so that stopping that stack stops the server.
        url = attached_database_url(stack_dir / "pgdata", STACK_DATABASE)
        if url is None:
            raise StartupCheckError(
                f"the stack in {stack_dir} is starting or stopping; try again in a moment"
            ) from None
        return await _print_thread(url, thread_id, as_json=as_json)
    try:
        postgres = await start_postgres(stack_dir / "pgdata", log_path=stack_dir / "postgres.log")
        try:
            url = postgres.database_url(STACK_DATABASE)
            return await _print_thread(url, thread_id, as_json=as_json)
        finally:
            await asyncio.to_thread(postgres.stop)
    finally:
        lock.close()


async def _print_thread(database_url: str, thread_id: str, *, as_json: bool) -> int:
    await check_database(database_url)
    pool = await create_pool(database_url, min_size=1, max_size=1)
    try:
        known = await pool.fetchval("SELECT 1 FROM crux_threads WHERE thread_id = $1", thread_id)
        snapshot = await ThreadStore(pool).read(thread_id) if known else None
    finally:
        await pool.close()
    if snapshot is None:
        # Only the id the caller typed is echoed: the message stays content-free.
        raise CommandError(
            f"no Thread {thread_id!r} in {describe_database(database_url)}", ExitCode.NOT_FOUND
        )
    if as_json:
        print(json.dumps(thread_document(snapshot), ensure_ascii=False))
        return 0
    print(f"thread {thread_id}  revision {snapshot.revision[:16]}  head {snapshot.head}")
    for entry in snapshot.entries:
        data: dict[str, Any] = entry.model_dump(mode="json")
        variant = data.get("variant")
        branch = ""
        if variant:
            branch = f"  [variant {variant['index'] + 1}/{variant['count']}]"
        if data.get("kind") == "message":
            content = data.get("content")
            text = content if isinstance(content, str) else json.dumps(content)[:200]
            print(f"  {data['id']:<40} {data.get('role', ''):<9} {text[:100]}{branch}")
        else:
            print(f"  {data['id']:<40} ({data.get('kind')}){branch}")
    return 0


def thread_document(snapshot: ThreadSnapshot) -> dict[str, Any]:
    """The JSON `crux thread show --json` prints: the path's messages with their ids.

    Each message has `id`, `parent_id`, `status` (`message`, `removed` or `redacted`),
    `role` and `content` (`null` for removed and redacted ones), the tool call it answers
    and `variant` (its position among alternatives, when there are several).
    """
    messages: list[dict[str, Any]] = []
    for entry in snapshot.entries:
        data: dict[str, Any] = entry.model_dump(mode="json")
        live = isinstance(entry, MessageEntry)
        messages.append(
            {
                "id": entry.id,
                "parent_id": entry.parent_id,
                "status": entry.kind,
                "role": data.get("role") if live else None,
                "content": data.get("content") if live else None,
                "tool_call_id": data.get("tool_call_id"),
                "tool_name": data.get("tool_name"),
                "variant": data.get("variant"),
            }
        )
    return {
        "thread_id": snapshot.thread_id,
        "revision": snapshot.revision,
        "head": snapshot.head,
        "messages": messages,
    }


async def db_migrate(settings: Settings) -> int:
    """Apply pending migrations to `CRUX_DATABASE_URL`."""
    applied = await migrate_database(settings.require_database_url())
    print(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none'}")
    return 0


async def db_sweep(settings: Settings, *, older_than: float | None) -> int:
    """Delete staged text of generations that never finished, older than the retention."""
    url = settings.require_database_url()
    await check_database(url)
    age = settings.staging_retention_seconds if older_than is None else older_than
    if age < 0:
        raise StartupCheckError("--older-than must be zero or more seconds")
    pool = await create_pool(url, min_size=1, max_size=1)
    try:
        deleted = await GenerationStore(pool).sweep_orphans(age)
    finally:
        await pool.close()
    print(f"swept {deleted} staged row(s) older than {age:g} s")
    return 0
