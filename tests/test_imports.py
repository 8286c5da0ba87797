"""Every top-level package imports alone, in a fresh interpreter (no import cycles)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.stack

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "vocabulary",
    "contracts",
    "telemetry",
    "providers",
    "crux",
    "storage",
    "activities",
    "workflows",
    "planner",
    "worker",
    # Entry points a process may import first.
    "providers.openai",
    "providers.loopback",
    "crux.cli",
    "crux.stack",
    "crux._worker",
    "storage.generations",
)


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_alone(package: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", f"import {package}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_crux_thread_stays_the_function_after_its_module_is_imported() -> None:
    code = (
        "import crux.thread\n"
        "from crux.thread import Thread\n"
        "import crux\n"
        "assert callable(crux.thread) and not isinstance(crux.thread, type(crux)), crux.thread\n"
        "assert crux.Thread is Thread\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
