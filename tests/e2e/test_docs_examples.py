"""The documentation is true: every page's examples run, as written, as a reader runs them.

Each page (the README and every page under docs/) is played by tests/docs_runner.py in a
process of its own, from a fresh working directory: its `crux dev` blocks start the embedded
stack in the background (a page without one gets a plain `crux dev` before its first
example), its shell blocks run with bash, its Python blocks are typed into one
`python -m asyncio` session, and `# >` lines are checked against what the statements print.
A loopback OpenAI-compatible server stands in for `openai:` models on the stack's worker, so
no page needs an API key. A block runs unless the line before it is
`<!-- docs-test: skip (reason) -->` (tests/docs_pages.py has the rules).

Pages that serve their own tools, prompts and hooks start `crux dev --app module:attr`, as
their readers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from providers.loopback import LoopbackOpenAIServer
from tests import docs_pages
from tests.docs_runner import interactive_statements, stack_command

RUNNER = Path(__file__).resolve().parents[1] / "docs_runner.py"
PAGE_TIMEOUT = 900.0
PAGES = docs_pages.pages()
RUNNABLE_PAGES = [
    page
    for page in PAGES
    if any(
        block.kind in ("python", "shell") and block.skip is None
        for block in docs_pages.blocks(page)
    )
]
# Variables a reader's fresh terminal does not have: the stack's export lines set them.
READER_UNSET = ("CRUX_", "TEMPORAL_", "OPENAI_", "ANTHROPIC_", "OTEL_", "PYTHONPATH")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _reader_environment() -> dict[str, str]:
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith(READER_UNSET)
    }
    # The virtual environment is active, as the pages ask: `crux` and `temporal` are on PATH.
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    environment["VIRTUAL_ENV"] = str(Path(sys.executable).parent.parent)
    return environment


def _clean_up(workdir: Path) -> None:
    """Stop whatever the page started and left behind (its stack, its PostgreSQL)."""
    for pid_file in (workdir / "stack.pid",):
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
    for postmaster in workdir.rglob("postmaster.pid"):
        try:
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGTERM)
        except (ProcessLookupError, ValueError, IndexError):
            continue
        deadline = time.monotonic() + 30
        while postmaster.exists() and time.monotonic() < deadline:
            time.sleep(0.1)


def _tail(path: Path, size: int = 3000) -> str:
    if not path.exists():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")[-size:]


# ---- what holds without running anything --------------------------------------------------


@pytest.mark.parametrize("page", PAGES, ids=docs_pages.page_id)
def test_every_python_example_is_valid_input_for_the_asyncio_repl(page: Path) -> None:
    for block in docs_pages.blocks(page):
        if block.kind == "python":
            # Raises SyntaxError where `python -m asyncio` would stop the reader.
            list(interactive_statements(block.code, block.page, block.line + 1))
        elif block.kind == "file":
            compile(block.code, f"{block.page}:{block.line}", "exec")


@pytest.mark.parametrize("page", PAGES, ids=docs_pages.page_id)
def test_every_skip_says_why_and_marks_a_block(page: Path) -> None:
    shown = {block.line - 1 for block in docs_pages.blocks(page)}
    lines = page.read_text(encoding="utf-8").splitlines()
    for number, verb, reason in docs_pages.marks(page):
        where = f"{docs_pages.page_id(page)}:{number}"
        assert verb in ("skip", "from-checkout"), f"{where}: unknown mark {verb!r}"
        assert reason and reason.strip(), f"{where}: a mark names why"
        if verb != "skip":
            continue
        following = next(n for n in range(number, len(lines)) if lines[n].strip())
        assert following in shown, (
            f"{docs_pages.page_id(page)}:{number}: the mark is not before a block"
        )


def test_the_pages_run_far_more_examples_than_they_skip() -> None:
    runnable = [
        b for page in PAGES for b in docs_pages.blocks(page) if b.kind in ("python", "shell")
    ]
    skipped = [b for b in runnable if b.skip]
    assert len(runnable) >= 60
    # Skips are installs, API keys, test suites and alternatives to a step just taken.
    assert len(skipped) * 3 <= len(runnable), [(b.page, b.line, b.skip) for b in skipped]


def test_the_worker_modules_are_served_by_a_crux_dev_block_of_their_page() -> None:
    for page in PAGES:
        page_blocks = docs_pages.blocks(page)
        files = {b.title.removesuffix(".py") for b in page_blocks if b.kind == "file" and b.title}
        apps = set()
        for block in page_blocks:
            words = stack_command(block.code) if block.kind == "shell" else None
            if words and "--app" in words:
                apps.add(words[words.index("--app") + 1].partition(":")[0])
        assert apps <= files, f"{docs_pages.page_id(page)} serves {apps - files} it never shows"


# ---- the pages, run -----------------------------------------------------------------------


async def _run_page(page: Path, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """Run the page's reader once; the plan, the runner's report and the working directory."""
    workdir = tmp_path / "reader"
    workdir.mkdir(parents=True)
    async with docs_pages_model() as model:
        plan = docs_pages.plan(
            page, workdir, port=_free_port(), ui_port=_free_port(), model_url=model.base_url
        )
        plan_file, report_file, log_file = (
            tmp_path / "plan.json",
            tmp_path / "report.json",
            tmp_path / "runner.log",
        )
        plan_file.write_text(json.dumps(plan), encoding="utf-8")
        try:
            with log_file.open("w") as log:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    str(RUNNER),
                    str(plan_file),
                    str(report_file),
                    cwd=workdir,
                    env=_reader_environment(),
                    stdout=log,
                    stderr=log,
                )
                try:
                    await asyncio.wait_for(process.wait(), timeout=PAGE_TIMEOUT)
                except TimeoutError:
                    process.kill()
                    await process.wait()
                    pytest.fail(
                        f"{plan['page']} still ran after {PAGE_TIMEOUT:.0f} s:\n{_tail(log_file)}"
                    )
        finally:
            await asyncio.to_thread(_clean_up, workdir)
    assert report_file.exists(), f"the runner ended without a report:\n{_tail(log_file)}"
    report = json.loads(report_file.read_text(encoding="utf-8"))
    return plan, report, workdir


def _port_taken(workdir: Path) -> bool:
    return any(
        "is in use; choose another" in log.read_text(encoding="utf-8", errors="replace")
        for log in workdir.glob("crux-dev-*log")
    )


@pytest.mark.stack
@pytest.mark.timeout(3 * PAGE_TIMEOUT + 120)
@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=docs_pages.page_id)
async def test_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    # A free port may be taken by another process between the pick and `crux dev`'s bind
    # (the suite runs in parallel): `crux dev` refuses it in one line, and the page runs
    # again on other ports.
    plan, report, workdir = await _run_page(page, tmp_path / "attempt-0")
    for attempt in (1, 2):
        failed = any(o["status"] == "failed" for o in report["outcomes"])
        if not (failed and _port_taken(workdir)):
            break
        plan, report, workdir = await _run_page(page, tmp_path / f"attempt-{attempt}")
    for outcome in report["outcomes"]:
        if outcome["status"] == "failed":
            stack_logs = "\n".join(_tail(p, 2000) for p in sorted(workdir.glob("crux-dev-*log")))
            pytest.fail(
                f"{plan['page']}:{outcome['line']} failed:\n{outcome['detail']}\n"
                f"--- printed ---\n{outcome['output'][-2000:]}\n--- crux dev ---\n{stack_logs}"
            )
    differences = [o["detail"] for o in report["outcomes"] if o["detail"]]
    assert not differences, "\n".join(differences)
    ran = [o for o in report["outcomes"] if o["status"] == "ok"]
    assert len(ran) == len(plan["blocks"])


def docs_pages_model() -> LoopbackOpenAIServer:
    return LoopbackOpenAIServer(responder=docs_pages.stand_in_model)
