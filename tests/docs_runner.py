"""Run one page's code blocks as a reader would, in a process of their own.

`python tests/docs_runner.py PLAN.json REPORT.json` plays the reader of a page, from the
page's working directory:

- a `crux dev ...` block is the first terminal: the command starts in the background (with
  the free ports the plan gives), and its `export` lines apply to everything after it, as
  when the reader pastes them into the second terminal;
- shell blocks run with bash in the second terminal;
- Python blocks are typed into one `python -m asyncio` session: line by line, with that
  console's rules (a compound statement ends at a blank line, top-level `await` works,
  `asyncio` is imported), so a block that only runs as a script fails here as it would there;
- a block titled with a file name (` ```python title="myapp.py" `) is saved to that file.

A `# >` comment after a statement is the output the statement prints (`...` matches
anything); the block fails when the output differs.

The report (JSON) lists every block with its outcome; the run stops at the first failure.
Standard library only: the session imports nothing the reader would not.

A page's `crux dev --app module:attribute` runs exactly as written: the stack serves the
reader's own registrations.
"""

from __future__ import annotations

import ast
import asyncio
import codeop
import contextlib
import inspect
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BANNER_END = "Press Ctrl-C to stop."
EXPORT = re.compile(r"^\s*export\s+(.+)$")
STATEMENT_TIMEOUT = 120.0
SHELL_TIMEOUT = 180.0
STACK_START_TIMEOUT = 180.0
# The formatter's spelling of `#>` (ruff formats the pages' code blocks too).
OUTPUT_MARK = "# >"


@dataclass
class Outcome:
    """What happened to one block."""

    line: int
    kind: str
    status: str = "ok"
    detail: str = ""
    output: str = ""
    seconds: float = 0.0


@dataclass
class Session:
    """The reader's two terminals: the stack in the first, a shell and Python in the second."""

    workdir: Path
    plan: dict[str, Any]
    namespace: dict[str, Any] = field(default_factory=dict)
    stack: subprocess.Popen[str] | None = None
    stack_log: Path | None = None
    started_stack: bool = False

    def __post_init__(self) -> None:
        # What `python -m asyncio` starts with.
        self.namespace.update({"__name__": "__main__", "__builtins__": __builtins__})
        self.namespace["asyncio"] = asyncio


# ---- Python, as the asyncio REPL reads it -------------------------------------------------


def expected_output(code: str) -> dict[int, list[str]]:
    """`# >` lines, keyed by the 1-based line of the statement line they follow."""
    expected: dict[int, list[str]] = {}
    owner = 0
    for number, line in enumerate(code.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(OUTPUT_MARK):
            expected.setdefault(owner, []).append(stripped[len(OUTPUT_MARK) :].strip())
        elif stripped and not stripped.startswith("#"):
            owner = number
    return expected


def output_matches(expected: list[str], printed: str) -> bool:
    """Whether `printed` is the expected text, whitespace-normalised, `...` matching anything."""
    want = " ".join(" ".join(expected).split())
    got = " ".join(printed.split())
    pattern = ".*?".join(re.escape(part) for part in want.split("..."))
    return re.fullmatch(pattern, got, flags=re.DOTALL) is not None


def interactive_statements(code: str, filename: str, first_line: int) -> Iterator[Any]:
    """Compile `code` as the interactive console would, one statement at a time.

    Yields `(code object, first block line, last block line)`; raises `SyntaxError` where the
    console would show one (with the page's line number).
    """
    compiler = codeop.CommandCompiler()
    compiler.compiler.flags |= ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    lines = code.splitlines()
    buffer: list[str] = []
    start = 0
    # The reader presses Enter once more after the block: a compound statement ends there.
    for index, line in enumerate([*lines, ""]):
        if not buffer:
            start = index
        buffer.append(line)
        source = "\n" * (first_line - 1 + start) + "\n".join(buffer)
        try:
            compiled = compiler(source, filename, "single")
        except SyntaxError as error:
            raise error from None
        if compiled is None:
            continue
        if any(part.strip() for part in buffer):
            yield compiled, start + 1, index + 1
        buffer = []


class _Tee(io.TextIOBase):
    def __init__(self, target: Any) -> None:
        self.target = target
        self.captured = io.StringIO()

    def write(self, text: str) -> int:
        self.captured.write(text)
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()


async def run_python(session: Session, block: dict[str, Any], outcome: Outcome) -> None:
    filename = block["page"]
    expected = expected_output(block["code"])
    for compiled, first, last in interactive_statements(block["code"], filename, block["line"] + 1):
        tee = _Tee(sys.stdout)
        with contextlib.redirect_stdout(tee):
            result = types.FunctionType(compiled, session.namespace)()
            if inspect.iscoroutine(result):
                await asyncio.wait_for(result, timeout=STATEMENT_TIMEOUT)
        printed = tee.captured.getvalue()
        outcome.output += printed
        wanted = [
            text for owner, texts in expected.items() if first <= owner <= last for text in texts
        ]
        if wanted and not output_matches(wanted, printed):
            line = block["line"] + last
            mismatch = (
                f"{filename}:{line}: printed\n{printed.rstrip()}\nwhere the page shows\n"
                + "\n".join(wanted)
            )
            if session.plan.get("check_output", True):
                raise AssertionError(mismatch)
            outcome.detail += mismatch + "\n"


# ---- the shell and the stack --------------------------------------------------------------


def stack_command(code: str) -> list[str] | None:
    """The `crux dev ...` command of a block that starts the stack (None for other blocks)."""
    commands = [
        line.split("#", 1)[0].strip() for line in code.splitlines() if line.split("#", 1)[0].strip()
    ]
    if len(commands) != 1:
        return None
    words = shlex.split(commands[0])
    return words if words[:2] == ["crux", "dev"] else None


def _wait_for_banner(process: subprocess.Popen[str], deadline: float) -> str:
    assert process.stdout is not None
    seen = ""
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen += line
        if BANNER_END in line:
            return seen
    raise RuntimeError(f"crux dev did not come up; it printed:\n{seen[-3000:]}")


async def start_stack(session: Session, words: list[str]) -> str:
    """Start `crux dev` as the first terminal would, and apply its export lines."""
    await stop_stack(session)
    session.started_stack = True
    plan = session.plan
    command = [*words, "--port", str(plan["port"]), "--ui-port", str(plan["ui_port"])]
    session.stack_log = session.workdir / f"crux-dev-{int(time.monotonic() * 1000)}.log"
    environment = {**os.environ, **plan["stack_env"]}
    for name in plan["stack_env_unset"]:
        environment.pop(name, None)
    with session.stack_log.open("w") as log:
        session.stack = subprocess.Popen(
            command,
            cwd=session.workdir,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            # A process group of its own: stopping it is a terminal's Ctrl-C.
            start_new_session=True,
        )
    (session.workdir / "stack.pid").write_text(str(session.stack.pid))
    deadline = time.monotonic() + STACK_START_TIMEOUT
    banner = await asyncio.to_thread(_wait_for_banner, session.stack, deadline)
    for line in banner.splitlines():
        match = EXPORT.match(line)
        if match:
            name, _, value = shlex.split(match.group(1))[0].partition("=")
            os.environ[name] = value
    return banner


async def stop_stack(session: Session) -> None:
    process = session.stack
    if process is None:
        return
    session.stack = None
    await _interrupt(process)


async def _interrupt(process: subprocess.Popen[str]) -> None:
    """Ctrl-C in the process's terminal; killed when it has not stopped within a minute."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            await asyncio.to_thread(process.wait, 60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await asyncio.to_thread(process.wait, 10)
    if process.stdout is not None:
        process.stdout.close()


async def run_shell(session: Session, block: dict[str, Any], outcome: Outcome) -> None:
    process = await asyncio.create_subprocess_exec(
        "bash",
        "-e",
        "-o",
        "pipefail",
        "-c",
        block["code"],
        cwd=session.workdir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout=SHELL_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(
            f"{block['page']}:{block['line']}: still running after {SHELL_TIMEOUT:.0f} s"
        ) from None
    outcome.output = out.decode(errors="replace")
    if process.returncode != 0:
        raise AssertionError(
            f"{block['page']}:{block['line']}: exit code {process.returncode}\n"
            + outcome.output[-3000:]
        )


# ---- the page -----------------------------------------------------------------------------


async def run_page(session: Session) -> dict[str, Any]:
    plan = session.plan
    outcomes: list[Outcome] = []
    report: dict[str, Any] = {"outcomes": []}
    try:
        for block in plan["blocks"]:
            outcome = Outcome(line=block["line"], kind=block["kind"])
            outcomes.append(outcome)
            began = time.monotonic()
            try:
                if block["kind"] == "file":
                    target = session.workdir / block["file"]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(block["code"] + "\n", encoding="utf-8")
                    continue
                words = stack_command(block["code"]) if block["kind"] == "shell" else None
                if words is not None:
                    outcome.output = await start_stack(session, words)
                elif session.stack is None and _assumes_a_stack(session, block):
                    # The page's reader already runs `crux dev`, as the page says.
                    await start_stack(session, ["crux", "dev"])
                    await _run_block(session, block, outcome)
                else:
                    await _run_block(session, block, outcome)
            except BaseException as error:  # every failure is reported
                outcome.status = "failed"
                outcome.detail = "".join(
                    traceback.format_exception(type(error), error, error.__traceback__)
                )[-6000:]
                break
            finally:
                outcome.seconds = round(time.monotonic() - began, 2)
    finally:
        began = time.monotonic()
        await stop_stack(session)
        report["stop_seconds"] = round(time.monotonic() - began, 2)
        report["outcomes"] = [vars(outcome) for outcome in outcomes]
    return report


def _assumes_a_stack(session: Session, block: dict[str, Any]) -> bool:
    """Whether a block runs against a `crux dev` the page did not start itself.

    A page without a `crux dev` block assumes one throughout; a page with one assumes one for
    the Python examples before it (a shell command there, such as `crux --version`, runs
    before any stack, as the page tells it).
    """
    if session.started_stack:
        return False
    return session.plan["implicit_stack"] or block["kind"] == "python"


async def _run_block(session: Session, block: dict[str, Any], outcome: Outcome) -> None:
    if block["kind"] == "python":
        await run_python(session, block, outcome)
    else:
        await run_shell(session, block, outcome)


def main() -> None:
    plan_path, report_path = Path(sys.argv[1]), Path(sys.argv[2])
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    workdir = Path(plan["workdir"])
    os.chdir(workdir)
    # As in `python -m asyncio` started there: the working directory comes first.
    sys.path[0] = str(workdir)
    if plan.get("checkout"):
        # The page's reader works in a checkout: the repository's packages import from there.
        sys.path.insert(1, plan["checkout"])
    session = Session(workdir=workdir, plan=plan)
    report = asyncio.run(run_page(session))
    report_path.write_text(json.dumps(report), encoding="utf-8")
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without interpreter finalisation, as the reader closing the terminal does: the
    # Temporal runtime's threads can abort a finalising process.
    os._exit(0)


if __name__ == "__main__":
    main()
