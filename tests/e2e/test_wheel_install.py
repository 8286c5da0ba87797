"""The built wheel installs into a fresh virtual environment and works there.

What `make dist` builds (the sdist, and the wheel built from it) is installed into a new
virtual environment next to the exact dependencies of `requirements.lock` (hash-checked;
from the package registry, or pip's cache), away from the checkout: nothing of the source
tree is importable there. That installation then runs `crux --version`, applies the shipped
SQL migrations to an empty database, serves a worker (`crux worker`) against the session's
Temporal server, and a script of a user's commits one turn through `crux.connect`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import uuid
import zipfile
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
USER_SCRIPT = """
import asyncio

import crux


async def main() -> None:
    async with await crux.connect() as runtime:
        result = await runtime.generate("Hello from a wheel", thread="wheel:1")
        print(crux.__file__)
        print(result.text)
        print(result.thread_commit.status)


asyncio.run(main())
"""


def _run(
    command: list[str],
    *,
    timeout: float = 300,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> str:
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd, env=env
    )
    assert completed.returncode == 0, (
        f"{' '.join(command)} exited {completed.returncode}:\n"
        f"{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
    )
    return completed.stdout


def _clean_environment(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that points at this checkout or its venv."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CRUX_", "TEMPORAL_", "OPENAI_", "ANTHROPIC_", "PYTHON"))
        and name != "VIRTUAL_ENV"
    }
    return {**environment, **extra}


def _source_copy(target: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore), copied to `target`.

    The build runs there, not in the checkout: the rest of the suite runs meanwhile, and
    its processes write bytecode and documentation into the checkout, which a build that
    lists the package files could see appear and vanish.
    """
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if not source.is_symlink() and not source.exists():
            continue  # deleted in the working tree, not yet in the index
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination, follow_symlinks=False)
    return target


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and wheel, built as `make dist` builds them."""
    out = tmp_path_factory.mktemp("dist")
    source = _source_copy(tmp_path_factory.mktemp("source"))
    _run(
        [str(BIN / "uv"), "build", "--quiet", "--no-build-isolation", "--python",
         sys.executable, "--out-dir", str(out)],
        cwd=source,
    )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def installed(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the locked dependencies and the wheel."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    environment = _clean_environment()
    _run([*pip, "install", "--require-hashes", "-r", str(ROOT / "requirements.lock")],
         env=environment, timeout=480)  # fmt: skip
    # Without --no-deps: the wheel's own requirements must be met by the lock, so pip
    # installs nothing more (and `pip check` agrees).
    [wheel] = built.glob("*.whl")
    _run([*pip, "install", str(wheel)], env=environment)
    _run([*pip, "check"], env=environment)
    return venv


def test_make_dist_builds_the_wheel_from_the_sdist() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\ndist:", 1)[1].split("\n\n", 1)[0]
    # The same command as the fixture above: `uv build` makes the sdist, then the wheel from it.
    assert "uv build --quiet --no-build-isolation" in recipe and "--out-dir $(DIST_DIR)" in recipe


def _package_data(root: Path) -> set[str]:
    """Files the packages read at run time: everything in a package that is not Python."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    packages = [p.rstrip("*") for p in config["tool"]["setuptools"]["packages"]["find"]["include"]]
    tracked = _run(["git", "ls-files", *packages], cwd=root).split()
    files: set[str] = set()
    for path in tracked:
        target = root / path
        if target.is_dir():  # a tracked link to a folder (contracts/published): its files
            files.update(f"{path}/{inner.name}" for inner in target.iterdir() if inner.is_file())
        else:
            files.add(path)
    return {
        path
        for path in files
        if not path.endswith((".py", ".md")) and "/tests/" not in path and "__pycache__" not in path
    }


def test_the_wheel_holds_every_package_and_its_data(built: Path) -> None:
    [wheel] = built.glob("*.whl")
    assert wheel.name == f"crux_temporal-{VERSION}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(_package_data(ROOT) - names)
    assert missing == [], f"package data left out of the wheel: {missing}"
    assert "storage/migrations/0001_threads.sql" in names and "crux/py.typed" in names
    modules = set(_run(["git", "ls-files", "crux", "storage"], cwd=ROOT).split())
    assert {m for m in modules if m.endswith(".py")} <= names
    # Nothing of the development tree ships.
    assert not [name for name in names if name.startswith(("tests/", "bench/", "docs/"))]
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Provides-Extra: embedded" in text and "Requires-Dist: temporalio" in text
    [sdist] = built.glob("*.tar.gz")
    assert sdist.name == f"crux_temporal-{VERSION}.tar.gz"


def test_the_installed_command_prints_its_version(installed: Path) -> None:
    out = _run([str(installed / "bin" / "crux"), "--version"], env=_clean_environment())
    assert out.strip() == f"crux {VERSION}"


@pytest_asyncio.fixture
async def empty_database(postgres_url: str) -> AsyncIterator[str]:
    name = f"crux_wheel_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    parts = urlsplit(postgres_url)
    yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@contextmanager
def _worker(command: Path, environment: dict[str, str], health: Path) -> Iterator[None]:
    log = health.with_suffix(".log")
    with log.open("w") as output:
        process = subprocess.Popen(
            [str(command), "worker"], env=environment, stdout=output, stderr=output,
            cwd=health.parent, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not health.exists():
            assert process.poll() is None, f"the worker stopped:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, (
                f"the worker never polled:\n{log.read_text()[-3000:]}"
            )
            time.sleep(0.2)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_the_installed_package_migrates_serves_and_generates(
    installed: Path, empty_database: str, client: Client, tmp_path: Path
) -> None:
    environment = _clean_environment(
        CRUX_DATABASE_URL=empty_database,
        TEMPORAL_ADDRESS=client.service_client.config.target_host,
        TEMPORAL_NAMESPACE=client.namespace,
        CRUX_TASK_QUEUE=f"crux-wheel-{uuid.uuid4().hex[:8]}",
        CRUX_LOG_LEVEL="warning",
    )
    crux = installed / "bin" / "crux"
    migrations = sorted(p.stem for p in (ROOT / "storage" / "migrations").glob("*.sql"))
    out = _run([str(crux), "db", "migrate"], env=environment, cwd=tmp_path)
    assert out.startswith(f"applied {len(migrations)} migration(s)"), out
    health = tmp_path / "worker.ready"
    with _worker(crux, {**environment, "CRUX_HEALTH_FILE": str(health)}, health):
        script = tmp_path / "hello.py"
        script.write_text(USER_SCRIPT, encoding="utf-8")
        out = _run([str(installed / "bin" / "python"), str(script)], env=environment, cwd=tmp_path)
    location, text, status = out.strip().splitlines()
    # The installed copy ran, not the checkout.
    assert Path(location).is_relative_to(installed), location
    assert text == '[offline echo] turn 1: I received 1 message; you said "Hello from a wheel"'
    assert status == "selected"
