"""Which processes are still running, read from /proc: for the no-leftover-process checks.

A stack's servers are found by what their command lines name (PostgreSQL's `-D <data dir>`,
the Temporal dev server's `--db-filename <stack dir>/temporal.db`) and by ancestry (children
of a process), so a check counts only the processes of the stack, the session or the command
it is about, never another test run's on the same machine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Process:
    """One live process.

    Attributes:
        pid: Its id.
        ppid: Its parent's id.
        command: Its command line, arguments joined by spaces.
    """

    pid: int
    ppid: int
    command: str

    def __str__(self) -> str:
        return f"{self.pid} (parent {self.ppid}): {self.command[:200]}"


def live_processes() -> list[Process]:
    """Every live process (zombies, which hold nothing, excluded)."""
    found: list[Process] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # it ended meanwhile
        # `pid (name) state ppid ...`: the name may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            continue
        command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        found.append(Process(int(entry.name), int(fields[1]), command))
    return found


def descendants(root: int, processes: Iterable[Process]) -> list[Process]:
    """The processes whose parent chain reaches `root` (not `root` itself)."""
    listed = list(processes)
    children: dict[int, list[Process]] = {}
    for process in listed:
        children.setdefault(process.ppid, []).append(process)
    found: list[Process] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child.pid)
    return found


def naming(paths: Iterable[str | Path], processes: Iterable[Process]) -> list[Process]:
    """The processes whose command line names one of `paths`."""
    needles = [str(path) for path in paths]
    me = os.getpid()
    return [
        process
        for process in processes
        if process.pid != me and any(needle in process.command for needle in needles)
    ]


def leftovers(
    find: Callable[[list[Process]], list[Process]], *, grace_seconds: float = 15.0
) -> list[Process]:
    """What `find` still finds after `grace_seconds` (servers take a moment to exit)."""
    deadline = time.monotonic() + grace_seconds
    while True:
        found = find(live_processes())
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)
