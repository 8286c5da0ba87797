"""Run every benchmark and write `bench/REPORT.md`.

Run: `.venv/bin/python bench/report.py [--quick]` (or `make bench`).

Each benchmark runs in its own process with logging turned down to errors; its standard
output (the tables, every figure a ratio to an anchor measured in the same run) goes into
the report, its standard error (worker and stack logs) into `bench/.logs/<name>.log`, so no
log line lands in a table. The report records the machine, the commit and each
benchmark's wall time.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
REPORT = BENCH / "REPORT.md"
LOGS = BENCH / ".logs"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark script and what its table compares."""

    script: str
    title: str
    anchor: str
    quick_args: tuple[str, ...] = ()
    venv: str | None = None
    """The virtual environment it runs in, when not this one (`make bench` creates it)."""


BENCHMARKS = (
    Benchmark(
        "bench_planner.py",
        "Planning and history projection",
        "`langchain_core.messages.trim_messages` (tiktoken per call and precomputed counts) "
        "on the same transcript; the previous per-message skeleton",
        ("--quick",),
    ),
    Benchmark(
        "bench_threads.py",
        "Thread appends and path reads",
        "raw asyncpg inserts and indexed selects of the same rows, same database, same run",
    ),
    Benchmark(
        "bench_generation.py",
        "Durable turn latency and history bytes",
        "three no-op activities on a plain `temporalio` Worker with SDK defaults (the floor) "
        "and on Crux's own worker, same dev server, interleaved; the same work without "
        "Temporal; the transcript-in-payload pattern",
    ),
    Benchmark(
        "bench_load.py",
        "Under load: turns in flight on one worker",
        "three no-op activities on a plain `temporalio` Worker with SDK defaults, run at the "
        "same concurrency in the same process and run, sub-cells alternating",
        ("60",),
    ),
    Benchmark(
        "bench_streaming.py",
        "Streaming time to first delta",
        "the provider's own first byte (raw httpx on the same loopback server), the "
        "project's adapter without Temporal, Temporal's own floor to the call (an eagerly "
        "started workflow on the same worker: a local no-op, then an activity timed to its "
        "start), and one durable PostgreSQL commit (raw asyncpg) after the same quiet spell, "
        "interleaved call by call",
    ),
    Benchmark(
        "bench_cache.py",
        "Response cache: a hit next to a miss",
        "a turn without a cache on the same worker and dev server, interleaved round by round; "
        "a hit against a miss of the same round, with the offline provider (the cache's own "
        "cost) and with a loopback model server answering after 250 ms",
        ("10",),
    ),
    Benchmark(
        "bench_tokens.py",
        "Token counting",
        "raw tiktoken on the same texts; re-tokenizing the whole history every turn",
        ("--quick",),
    ),
    Benchmark(
        "bench_peers.py",
        "A conversation turn next to the peers",
        "Pydantic AI's Temporal integration (`TemporalDurability`) and the OpenAI Agents SDK's "
        "(`temporalio.openai_agents`), each passing the transcript into a workflow per turn, "
        "on the same dev server and loopback model server, turn by turn in the same run",
        ("--quick",),
        venv=".venv-bench",
    ),
)


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


_LOG_LINE = re.compile(
    r"^(\x1b\[[0-9;]*m)*\d{4}-\d{2}-\d{2}[ T]\d"  # a timestamped log record
    r"|^Temporal (CLI|Server|Persistence|Metrics|UI)\b"  # the dev server's banner
    r"|^\s*$"
)


def _tables(stdout: str) -> tuple[str, str]:
    """Split a benchmark's standard output into its tables and stray log lines."""
    tables: list[str] = []
    logs: list[str] = []
    for line in stdout.splitlines():
        (logs if _LOG_LINE.match(line) and line.strip() else tables).append(line)
    return "\n".join(tables).strip("\n"), "\n".join(logs)


def _run(benchmark: Benchmark, quick: bool) -> tuple[str, float, int]:
    """Run one benchmark; return its tables, its wall time and its exit status."""
    # The project root on the path: benchmarks import each other as `bench.*`.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, CRUX_LOG_LEVEL="error", PYTHONUNBUFFERED="1", PYTHONPATH=path)
    python = ROOT / benchmark.venv / "bin" / "python" if benchmark.venv else Path(sys.executable)
    if not python.exists():
        return f"not run: {benchmark.venv} is missing (`make bench` creates it)", 0.0, 1
    args = [str(python), str(BENCH / benchmark.script)]
    if quick:
        args.extend(benchmark.quick_args)
    LOGS.mkdir(exist_ok=True)
    started = time.perf_counter()
    with (LOGS / f"{Path(benchmark.script).stem}.log").open("w", encoding="utf-8") as log:
        done = subprocess.run(
            args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True, check=False
        )
        # Worker and dev-server output that reached stdout belongs with the logs.
        tables, stray = _tables(done.stdout)
        if stray:
            log.write(stray + "\n")
    return tables, time.perf_counter() - started, done.returncode


def main() -> int:
    """Run the benchmarks and write the report; non-zero when one of them failed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions where offered")
    args = parser.parse_args()
    # Every benchmark runs from bytecode, as an installed wheel does (see compile_bytecode).
    sys.path.insert(0, str(ROOT))
    from bench._figures import compile_bytecode

    compile_bytecode()
    sections: list[str] = []
    failed: list[str] = []
    total = 0.0
    for benchmark in BENCHMARKS:
        print(f"== {benchmark.script}", flush=True)
        output, seconds, status = _run(benchmark, args.quick)
        total += seconds
        print(output, flush=True)
        if status != 0:
            failed.append(benchmark.script)
        sections.append(
            f"## {benchmark.title}\n\n"
            f"`bench/{benchmark.script}`, {seconds:.0f} s"
            f"{' (FAILED, see bench/.logs)' if status else ''}. Anchor: {benchmark.anchor}.\n\n"
            f"```text\n{output}\n```\n"
        )
    header = (
        "# Benchmark report\n\n"
        f"Written by `make bench` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit "
        f"`{_commit()}`; Python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs; {total:.0f} s in all{' (quick mode)' if args.quick else ''}.\n"
        "Every figure is compared with an anchor measured in the same run on the same machine; "
        "absolute times vary between machines, the ratios are the result.\n"
    )
    REPORT.write_text(header + "\n" + "\n".join(sections), encoding="utf-8")
    print(f"wrote {REPORT.relative_to(ROOT)} ({total:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
