"""`crux dev --app module:attribute`, used as a newcomer would: from a shell, with their own module.

The user's module sits in their own directory (not this repository): a tool, a step hook,
and a test model that calls the tool and then answers with its result. `crux dev --app`
serves it on the embedded stack; a separate script of theirs generates through
`crux.connect()` with the exported variables; `crux thread show --json` reads the Thread;
a second worker with other registrations is refused at start, in one line naming both
sides; and once `crux dev` is stopped with Ctrl-C, none of the stack's processes remain.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from crux._devserver import free_port
from tests.processes import leftovers, naming

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
CRUX = [sys.executable, "-m", "crux"]

APP = '''
import crux
import crux.testing


@crux.tool
def get_weather(city: str) -> dict[str, object]:
    """Tomorrow's forecast for a city.

    Args:
        city: City name.
    """
    return {"city": city, "sky": "rain", "high_c": 12}


@crux.step_hook("short-after-tools")
def short_after_tools(step):
    return crux.StepOverrides(max_output_tokens=64) if step.reason == "tool-round" else None


def answer(request):
    if request.tool_results:
        return "Forecast: " + request.tool_results[-1].text
    return crux.testing.ToolCall("get_weather", {"city": "Oslo"})


worker = crux.Worker(
    tools=[get_weather],
    hooks=[short_after_tools],
    models=[crux.testing.FunctionModel(answer, name="weather")],
)
'''

OTHER_APP = """
import crux

worker = crux.Worker(tools=[crux.tool("lookup", lambda arguments: "found")])
"""

CLIENT = '''
import asyncio

import crux


@crux.tool
def get_weather(city: str) -> dict[str, object]:
    """Tomorrow's forecast for a city.

    Args:
        city: City name.
    """
    raise AssertionError("tools run on the worker, not in the caller")


@crux.tool
def book_table(city: str) -> str:
    """Book a table.

    Args:
        city: City name.
    """
    raise AssertionError("never registered on the worker")


async def main() -> None:
    async with await crux.connect() as runtime:
        forecaster = crux.agent(
            id="forecaster",
            prompt=crux.prompt(
                id="forecast",
                system="Answer with the get_weather tool.",
                use=[crux.thread(id="weather:oslo"), get_weather],
            ),
            prepare_step="short-after-tools",  # named: the hook runs on the worker
        )
        result = await runtime.generate(
            forecaster, input="Rain in Oslo?", model="test:weather", generation_id="first"
        )
        print("TEXT", result.text)
        try:
            await runtime.generate(
                crux.prompt(id="booking", use=[book_table]),
                input="Book one.",
                model="test:weather",
            )
        except crux.CruxError as error:
            print("REFUSED", type(error).__name__, error)


asyncio.run(main())
'''


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CRUX_", "TEMPORAL_", "OPENAI_", "ANTHROPIC_"))
    }
    # The project is importable as if installed; the user's modules come from their cwd.
    env["PYTHONPATH"] = str(ROOT)
    env["CRUX_LOG_LEVEL"] = "warning"
    return env


def _wait_for(process: subprocess.Popen[str], marker: str, timeout: float = 120.0) -> str:
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    process.kill()
    _, errors = process.communicate()
    raise AssertionError(f"no {marker!r} from crux dev:\n" + "".join(seen) + errors[-3000:])


def _run(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_crux_dev_serves_the_users_app_and_leaves_nothing_behind(tmp_path: Path) -> None:
    home = tmp_path / "project"
    home.mkdir()
    (home / "weather.py").write_text(textwrap.dedent(APP), encoding="utf-8")
    (home / "other.py").write_text(textwrap.dedent(OTHER_APP), encoding="utf-8")
    (home / "client.py").write_text(textwrap.dedent(CLIENT), encoding="utf-8")
    stack_dir = tmp_path / "stack"
    env = _env(tmp_path)
    dev = subprocess.Popen(
        [
            *CRUX,
            "dev",
            "--app",
            "weather:worker",
            "--stack-dir",
            str(stack_dir),
            "--port",
            str(free_port()),
            "--ui-port",
            str(free_port()),
        ],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        banner = _wait_for(dev, "Press Ctrl-C to stop.")
        assert (
            "Worker registers : tools get_weather; hooks short-after-tools; models test:weather"
            in banner
        )
        assert "(--app weather:worker)" in banner
        exported = dict(re.findall(r"export (\w+)='?([^'\n]+)'?", banner))
        user_env = {**env, **exported}

        client = _run([sys.executable, "client.py"], user_env, home, timeout=120)
        assert client.returncode == 0, client.stderr[-3000:]
        [text] = [line for line in client.stdout.splitlines() if line.startswith("TEXT ")]
        assert text.startswith("TEXT Forecast: ")
        assert json.loads(text.removeprefix("TEXT Forecast: ")) == {
            "city": "Oslo",
            "sky": "rain",
            "high_c": 12,
        }
        [refused] = [line for line in client.stdout.splitlines() if line.startswith("REFUSED")]
        assert "tool 'book_table' is not registered on this worker" in refused
        assert "crux.Worker(" in refused  # the remedy

        shown = _run(
            [*CRUX, "thread", "show", "weather:oslo", "--stack-dir", str(stack_dir), "--json"],
            env,
            home,
        )
        assert shown.returncode == 0, shown.stderr[-2000:]
        document = json.loads(shown.stdout)
        roles = [message["role"] for message in document["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"], document

        status = _run(
            [*CRUX, "generation", "show", "first", "--thread", "weather:oslo", "--json"],
            user_env,
            home,
        )
        assert status.returncode == 0, status.stderr[-2000:]
        assert json.loads(status.stdout)["stage"] == "completed"

        # A second worker with other registrations on the same task queue is refused.
        started = time.monotonic()
        second = _run([*CRUX, "worker", "--app", "other:worker"], user_env, home)
        assert second.returncode == 1, second.stdout + second.stderr
        assert time.monotonic() - started < 45
        [line] = second.stderr.strip().splitlines()
        assert "task queue crux" in line
        assert "tools get_weather (only there)" in line and "lookup (only here)" in line
        assert "hooks short-after-tools (only there)" in line
        assert "CRUX_TASK_QUEUE" in line
        assert "Traceback" not in second.stderr
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            _, errors = dev.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            dev.kill()
            _, errors = dev.communicate()
    assert dev.returncode == 0, errors[-3000:]
    # (The worker's JSON log lines may carry a failed activity's stack; no crash is printed.)
    assert not any(line.startswith("Traceback") for line in errors.splitlines()), errors[-4000:]
    # Neither the Temporal dev server nor PostgreSQL (which `thread show` attached to)
    # outlives `crux dev`.
    left = leftovers(lambda processes: naming([stack_dir], processes))
    assert not left, "\n".join(map(str, left))
