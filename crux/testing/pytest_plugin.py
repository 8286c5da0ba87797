"""pytest fixtures for suites that test code built on Crux, against the real runtime.

Enable them in your top-level `conftest.py`:

```python
pytest_plugins = ["crux.testing.pytest_plugin"]
```

(or import the fixtures you use into a `conftest.py`:
`from crux.testing.pytest_plugin import crux_runtime, crux_stack, crux_worker`).

- `crux_stack` (session): a Temporal dev server and an embedded PostgreSQL, started once
  for the session (in a temporary directory of their own) and stopped at its end.
- `crux_worker` (override it): the `crux.Worker` your tests run; by default one without
  registrations. Return yours, with your tools, hooks and test models.
- `crux_runtime`: your worker running on the stack (a fresh task queue and database per
  test) and a `crux.Runtime` that reaches it.

The async fixtures need `pytest-asyncio` (any mode; in strict mode mark your tests with
`@pytest.mark.asyncio`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from crux.runtime import Runtime
from crux.testing._stack import TestStack, embedded_stack, serve
from crux.workers import Worker

__all__ = ["crux_runtime", "crux_stack", "crux_worker"]


@pytest.fixture(scope="session")
def crux_stack() -> Iterator[TestStack]:
    """A Temporal dev server and PostgreSQL for the session (stopped at its end).

    Their data lives in a temporary directory of their own (removed at the end), not under
    pytest's `tmp_path` base, which concurrent pytest runs of one user re-create.
    """
    with embedded_stack() as stack:
        yield stack


@pytest.fixture
def crux_worker() -> Worker:
    """The worker the tests run: override this fixture to return yours."""
    return Worker()


@pytest_asyncio.fixture
async def crux_runtime(crux_stack: TestStack, crux_worker: Worker) -> AsyncIterator[Runtime]:
    """`crux_worker` running on the stack, and a `Runtime` that reaches it."""
    async with serve(crux_worker, crux_stack) as runtime:
        yield runtime
