"""Start-up checks: fail fast, in one line, with the remedy, before any turn is accepted.

A worker that starts against an unmigrated database, an unreachable Temporal or a provider
it cannot use would otherwise accept work and fail every turn much later. Each check raises
`StartupCheckError` (a `ConfigurationError`) whose message names the variable or command
that fixes it; messages carry hosts and names, never secrets or content.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client

from contracts.search import NAMES as SEARCH_ATTRIBUTE_NAMES
from crux.connection import (
    DATABASE_CONNECT_TIMEOUT_SECONDS,
    TEMPORAL_CONNECT_TIMEOUT_SECONDS,
    StartupCheckError,
    connect_database,
    connect_temporal,
    database_target,
    describe_database,
    temporal_target,
)
from providers.models import missing_key, model_problem
from storage.migrate import available_migrations, migrate
from telemetry.logs import get_logger
from vocabulary.settings import Settings

_log = get_logger(__name__)


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def temporal_host(address: str) -> str:
    """The host part of a `host:port` Temporal address."""
    return urlsplit(f"//{address}").hostname or ""


def check_providers(settings: Settings) -> None:
    """Check that configured providers are usable: URLs parse, hosted APIs have keys.

    The default model's provider must be fully usable (it answers callers that name no
    model); the other providers only need well-formed base URLs.

    Raises:
        StartupCheckError: Naming the variable to fix.
    """
    for variable, url in (
        ("OPENAI_BASE_URL", settings.openai_base_url),
        ("ANTHROPIC_BASE_URL", settings.anthropic_base_url),
    ):
        try:
            parts = urlsplit(url)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
            parts.port  # noqa: B018 - raises on a malformed port
        except ValueError:
            valid = False
        if not valid:
            raise StartupCheckError(
                f"{variable} is not an http(s) URL with a host (e.g. http://127.0.0.1:8080/v1)"
            )
    problem = model_problem(settings.default_model)
    if problem is not None:
        raise StartupCheckError(f"CRUX_MODEL: {problem}")
    missing = missing_key(settings.default_model, settings)
    if missing is not None:
        raise StartupCheckError(f"CRUX_MODEL: {missing}")


async def migrate_database(url: str) -> list[str]:
    """Apply the pending migrations to `url`, failing in words when it cannot connect.

    Returns:
        The versions applied.

    Raises:
        StartupCheckError: PostgreSQL cannot be reached or refused the connection.
    """
    connection = await connect_database(url)
    try:
        return await migrate(connection)
    finally:
        await connection.close()


async def check_database(url: str) -> None:
    """Check that PostgreSQL answers and every bundled migration is applied.

    Raises:
        StartupCheckError: The cause in words (a missing database, a refused password, a
            server that requires TLS, ...) naming `CRUX_DATABASE_URL` or the `PGSSL*`
            variables, or `crux db migrate` / `CRUX_MIGRATE` for pending migrations.
    """
    where = database_target(url).describe()
    connection = await connect_database(url)
    try:
        try:
            rows = await connection.fetch("SELECT version FROM crux_schema_migrations")
            applied: set[str] = {str(row["version"]) for row in rows}
        except asyncpg.UndefinedTableError:
            applied = set[str]()
    finally:
        await connection.close()
    pending = [version for version, _ in available_migrations() if version not in applied]
    if pending:
        raise StartupCheckError(
            f"the database at {where} is not migrated ({len(pending)} pending migration(s), "
            "first "
            f"{pending[0]}): run `crux db migrate` or start the worker with CRUX_MIGRATE=true"
        )


def search_attribute_command(settings: Settings, missing: list[str]) -> str:
    """The exact `temporal` CLI command that registers the missing attributes.

    The CLI reads the same `TEMPORAL_*` variables and profile as Crux, so the command
    names only the address, the namespace and the profile.
    """
    target = temporal_target(settings)
    pairs = " ".join(f"--name {name} --type Keyword" for name in missing)
    profile = f" --profile {target.profile}" if target.profile else ""
    return (
        f"temporal operator search-attribute create --address {target.address} "
        f"--namespace {target.namespace}{profile} {pairs}"
    )


async def ensure_search_attributes(client: Client, settings: Settings) -> list[str]:
    """Check that the Crux search attributes are registered; register them on a dev server.

    `CRUX_REGISTER_SEARCH_ATTRIBUTES=auto` registers missing attributes when Temporal runs
    on a loopback address (a dev server) and otherwise fails with the command to run, since
    registering on a shared cluster is an operator's decision; `true` always registers,
    `false` never does.

    Returns:
        The names registered by this call.

    Raises:
        StartupCheckError: Attributes are missing (with the exact command) or mistyped.
    """
    target = temporal_target(settings)
    namespace, address = target.namespace, target.address
    try:
        listed: Any = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
    except Exception:  # an RPC failure of any kind is a start-up failure
        raise StartupCheckError(
            f"cannot list the search attributes of namespace {namespace} on Temporal at "
            f"{address}; check that the credentials may use it (TEMPORAL_API_KEY, "
            "TEMPORAL_NAMESPACE)"
        ) from None
    existing: dict[str, int] = dict(listed.custom_attributes)
    keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
    mistyped = [n for n in SEARCH_ATTRIBUTE_NAMES if n in existing and existing[n] != keyword]
    if mistyped:
        raise StartupCheckError(
            f"search attributes {', '.join(mistyped)} exist in namespace {namespace} with a "
            "type other than Keyword; remove them and run: "
            + search_attribute_command(settings, mistyped)
        )
    missing = [name for name in SEARCH_ATTRIBUTE_NAMES if name not in existing]
    if not missing:
        return []
    register = settings.register_search_attributes
    if register == "false" or (register == "auto" and not _is_loopback(temporal_host(address))):
        raise StartupCheckError(
            "search attributes are not registered in namespace "
            f"{namespace}: run `{search_attribute_command(settings, missing)}` "
            "(or set CRUX_REGISTER_SEARCH_ATTRIBUTES=true to let the worker register them)"
        )
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace, search_attributes=dict.fromkeys(missing, keyword)
            )
        )
    except Exception:  # e.g. permission denied on a managed cluster
        raise StartupCheckError(
            "the worker may not register search attributes on this namespace (permission "
            f"denied or refused): run `{search_attribute_command(settings, missing)}`"
        ) from None
    _log.info("temporal.search_attributes.registered", count=len(missing), namespace=namespace)
    return missing


__all__ = [
    "DATABASE_CONNECT_TIMEOUT_SECONDS",
    "TEMPORAL_CONNECT_TIMEOUT_SECONDS",
    "StartupCheckError",
    "check_database",
    "check_providers",
    "connect_temporal",
    "describe_database",
    "ensure_search_attributes",
    "migrate_database",
    "search_attribute_command",
    "temporal_host",
]
