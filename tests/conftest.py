"""Session-wide real servers: PostgreSQL (embedded or `CRUX_DATABASE_URL`) and Temporal.

Each test that asks for `database_url` gets a fresh database cloned from a migrated template,
so tests never see each other's rows.

Under pytest-xdist (`make test`, `make check`) every worker is a session of its own: it starts
its own PostgreSQL and Temporal dev server (random ports, temporary directories), so no two
tests share a server they could disturb, and fixed names inside one server (the README's
task queue, workflow ids built from fixed generation ids) never meet a concurrent run.

Every session keeps its temporary files under a directory of its own (`SESSION_ROOT`, also
the `TMPDIR` of the processes it starts, and the root of pytest's `tmp_path`), so that other
test runs on the machine never touch them, and so that the session can check at its end
that no server it started is still running (`_no_process_outlives_the_session`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, settings
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from crux.stack import EmbeddedPostgres, start_postgres_sync, start_temporal
from providers.loopback import LoopbackOpenAIServer
from storage import create_pool
from storage.migrate import migrate
from tests.processes import Process, descendants, leftovers, naming

TEMPLATE_DATABASE = "crux_test_template"

SESSION_ROOT = Path(tempfile.mkdtemp(prefix="crux-session-"))
"""This session's temporary files: pytest's `tmp_path`, servers' data, stacks' directories."""
# Before pytest picks its base directory and before anything makes a temporary directory.
tempfile.tempdir = str(SESSION_ROOT)
os.environ["TMPDIR"] = str(SESSION_ROOT)
# Last of all exit handlers (they run in reverse): the embedded PostgreSQL package's own
# handler still takes a lock file in the runtime directory under the root at exit.
atexit.register(shutil.rmtree, SESSION_ROOT, ignore_errors=True)

LONG_POLES = (
    "e2e/test_crash_and_outage.py",
    "e2e/test_storage_faults.py",
    "storage/test_thread_fuzz.py",
    "e2e/test_parallel_restart.py",
    "e2e/test_long_conversations.py",
    "e2e/test_flat_history.py",
    "e2e/test_identity_and_errors.py",
    "e2e/test_dev_stack.py",
    "e2e/test_operator_control.py",
    "e2e/test_canary_leaks.py",
    "e2e/test_approval_kill.py",
    "e2e/test_demo_real_model.py",
    "e2e/test_docs_examples.py",
    "e2e/test_wheel_install.py",
    "e2e/test_revision_moved.py",
    "e2e/test_hostile_input.py",
    "e2e/test_provider_faults.py",
    "ts/test_typescript_client.py",
    "http/test_openapi_properties.py",
    "planner/test_properties.py",
)
"""Modules with the longest tests, longest first (measured with `--durations`).

Parallel workers take them first, so the run does not end waiting for one long test that
started late; the short tests fill the gaps after.
"""

# A shared 2-core machine makes wall-clock health checks and deadlines flaky; the
# properties themselves stay the same. Example counts are chosen per test.
settings.register_profile(
    "crux", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("crux")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On parallel workers, run the long poles first (the order is the same on every worker)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    tests = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        if not item.path.is_relative_to(tests):
            return len(LONG_POLES)
        module = item.path.relative_to(tests).as_posix()
        return LONG_POLES.index(module) if module in LONG_POLES else len(LONG_POLES)

    items.sort(key=rank)


def _started_here(processes: list[Process]) -> list[Process]:
    # Children of this process (the Temporal dev servers the SDK starts, `crux` commands)
    # and servers whose command line names this session's directory (PostgreSQL detaches
    # from the process that started it).
    found = {p.pid: p for p in descendants(os.getpid(), processes)}
    found.update({p.pid: p for p in naming([SESSION_ROOT], processes)})
    return list(found.values())


@pytest.fixture(scope="session", autouse=True)
def _no_process_outlives_the_session() -> Iterator[None]:
    """After every other session fixture stopped its servers, none of them may still run."""
    yield
    left = leftovers(_started_here)
    assert not left, "servers this session started still run:\n" + "\n".join(map(str, left))


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of the session's PostgreSQL server (maintenance database)."""
    external = os.environ.get("CRUX_DATABASE_URL")
    if external:
        yield external
        return
    data_dir = Path(tempfile.mkdtemp(prefix="crux-test-pg-"))
    server: EmbeddedPostgres = start_postgres_sync(data_dir / "pgdata")
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest_asyncio.fixture(scope="session")
async def template_database(postgres_url: str) -> str:
    """A database with every migration applied, cloned by each test."""
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE_DATABASE}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{TEMPLATE_DATABASE}"')
    finally:
        await admin.close()
    connection = await asyncpg.connect(_with_database(postgres_url, TEMPLATE_DATABASE))
    try:
        await migrate(connection)
    finally:
        await connection.close()
    return TEMPLATE_DATABASE


@pytest_asyncio.fixture
async def database_url(postgres_url: str, template_database: str) -> AsyncIterator[str]:
    """URL of a fresh, migrated database for one test."""
    name = f"crux_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    finally:
        await admin.close()
    yield _with_database(postgres_url, name)
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest_asyncio.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A connection pool on the test's fresh database."""
    created = await create_pool(database_url, min_size=1, max_size=8)
    try:
        yield created
    finally:
        await created.close()


@pytest.fixture(scope="session")
def temporal_log() -> Iterator[Path | None]:
    """The file the session's Temporal dev server writes its output to.

    `None` when the tests run against an external server (`TEMPORAL_TEST_ADDRESS`), whose
    output this process cannot see. The level is `CRUX_TEMPORAL_LOG_LEVEL` (`info` by
    default, so the log shows what the server records of each workflow).
    """
    if os.environ.get("TEMPORAL_TEST_ADDRESS"):
        yield None
        return
    log_dir = Path(tempfile.mkdtemp(prefix="crux-test-temporal-"))
    try:
        yield log_dir / "dev-server.log"
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)


@pytest_asyncio.fixture(scope="session")
async def temporal_env(temporal_log: Path | None) -> AsyncIterator[WorkflowEnvironment]:
    """A real Temporal dev server for the whole session (`TEMPORAL_TEST_ADDRESS` overrides)."""
    address = os.environ.get("TEMPORAL_TEST_ADDRESS")
    if address or temporal_log is None:
        from temporalio.contrib.pydantic import pydantic_data_converter

        assert address is not None
        client = await Client.connect(address, data_converter=pydantic_data_converter)
        yield WorkflowEnvironment.from_client(client)
        return
    env = await start_temporal(
        ui=False,
        log_level=os.environ.get("CRUX_TEMPORAL_LOG_LEVEL", "info"),
        log_file=temporal_log,
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def client(temporal_env: WorkflowEnvironment) -> Client:
    """The Temporal client of the session's server."""
    return temporal_env.client


@pytest_asyncio.fixture
async def openai_server() -> AsyncIterator[LoopbackOpenAIServer]:
    """A loopback HTTP server speaking the OpenAI chat-completions wire format."""
    async with LoopbackOpenAIServer() as server:
        yield server
