"""`crux.connect`: one call from addresses to a ready `Runtime`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import asyncpg

from contracts.approvals import DEFAULT_APPROVAL_TIMEOUT_SECONDS
from crux._checks import check_database
from crux.connection import DATABASE_ERRORS, connect_temporal, database_failure
from crux.model_settings import AttemptPolicySpec
from crux.runtime import Runtime
from planner import ModelCatalog
from storage import create_pool
from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings


async def connect(
    temporal_address: str | None = None,
    database_url: str | None = None,
    *,
    namespace: str | None = None,
    task_queue: str | None = None,
    default_model: str | None = None,
    settings: Settings | None = None,
    attempt_policy: AttemptPolicySpec | Mapping[str, Any] | None = None,
    catalog: ModelCatalog | None = None,
    search_attributes: bool = True,
    approval_timeout_seconds: int | None = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    pool_min_size: int = 1,
    pool_max_size: int = 10,
) -> Runtime:
    """Connect to Temporal and PostgreSQL and return a ready `Runtime`.

    The Temporal client uses the pydantic data converter and the pool Crux's JSON codecs
    (`storage.create_pool`), as the workers do. Whatever is not passed comes from `settings`,
    which default to the environment (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`,
    `CRUX_TASK_QUEUE`, `CRUX_DATABASE_URL`, `CRUX_MODEL`). The runtime owns the pool: close
    it with `await runtime.close()` or use `async with await crux.connect(...) as runtime:`.

    Args:
        temporal_address: `host:port` of the Temporal frontend.
        database_url: PostgreSQL URL of the Crux database (migrated: `crux db migrate`).
        namespace: Temporal namespace.
        task_queue: The Crux workers' task queue.
        default_model: Model used when a call names none (`provider:model`).
        settings: Settings to start from instead of the environment.
        attempt_policy: Retry and timeout of provider attempts for every call of the runtime.
        catalog: Model capacity profiles for `preview`.
        search_attributes: Set Crux search attributes on the runs it starts (registered
            on the namespace: `crux dev` does it, a worker checks it at start).
        approval_timeout_seconds: How long a tool call that requires approval waits for a
            decision before it is denied (`None`: without limit).
        pool_min_size: Connections opened up front.
        pool_max_size: Upper bound on open connections.

    Returns:
        A runtime that closes its pool on `close()`.

    Raises:
        ConfigurationError: No database URL is given or configured, or an argument is
            invalid; `StartupCheckError` (a `ConfigurationError`) when Temporal or
            PostgreSQL cannot be reached (the message names the variable to fix) or the
            database is not migrated (it names `crux db migrate`).
    """
    base = settings if settings is not None else Settings.from_env(os.environ)
    updates: dict[str, Any] = {
        key: value
        for key, value in (
            ("temporal_address", temporal_address),
            ("database_url", database_url),
            ("temporal_namespace", namespace),
            ("task_queue", task_queue),
            ("default_model", default_model),
        )
        if value is not None
    }
    for key, value in updates.items():
        if not isinstance(value, str) or not value:
            raise ConfigurationError(f"connect(): {key} must be a non-empty string")
    if pool_min_size < 0 or pool_max_size < max(1, pool_min_size):
        raise ConfigurationError("connect(): pool sizes must satisfy 0 <= min <= max, max >= 1")
    resolved = base.model_copy(update=updates)
    url = resolved.require_database_url()
    # Both checks fail fast with the remedy (the variable, or `crux db migrate`) rather than
    # at the first call.
    await check_database(url)
    client = await connect_temporal(resolved)
    pool = await _open_pool(url, pool_min_size, pool_max_size)
    runtime = Runtime(
        client,
        pool,
        task_queue=resolved.task_queue,
        default_model=resolved.default_model,
        attempt_policy=attempt_policy,
        catalog=catalog,
        search_attributes=search_attributes,
        approval_timeout_seconds=approval_timeout_seconds,
        # A versioned worker in this process must not take runs meant for the current build.
        eager_start=resolved.deployment_name is None,
    )
    runtime._owns_pool = True  # pyright: ignore[reportPrivateUsage]
    return runtime


async def _open_pool(url: str, min_size: int, max_size: int) -> asyncpg.Pool:
    try:
        return await create_pool(url, min_size=min_size, max_size=max_size)
    except DATABASE_ERRORS as error:
        raise database_failure(url, error) from None
