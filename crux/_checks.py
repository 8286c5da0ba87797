"""Start-up checks: fail fast, in one line, with the remedy, before any turn is accepted.

A worker that starts against an unmigrated database, an unreachable Temporal or a provider
it cannot use would otherwise accept work and fail every turn much later. Each check raises
`StartupCheckError` (a `ConfigurationError`) whose message names the variable or command
that fixes it; messages carry hosts and names, never secrets or content.
"""

from __future__ import annotations

import asyncio
import ipaddress
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import asyncpg
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime

from contracts.search import NAMES as SEARCH_ATTRIBUTE_NAMES
from crux._telemetry import client_interceptors
from crux.codec import codec_from_settings, with_codec
from storage.migrate import available_migrations
from telemetry.logs import get_logger
from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings

_log = get_logger(__name__)

TEMPORAL_CONNECT_TIMEOUT_SECONDS = 10.0
DATABASE_CONNECT_TIMEOUT_SECONDS = 10.0

# Hosted APIs that always need a key; self-hosted OpenAI-compatible servers often need none.
_KEYED_HOSTS = {
    "openai": ("api.openai.com", "OPENAI_API_KEY"),
    "anthropic": ("api.anthropic.com", "ANTHROPIC_API_KEY"),
}
_KNOWN_PROVIDERS = ("offline", "openai", "anthropic")


class StartupCheckError(ConfigurationError):
    """A start-up check failed; the message names the remedy."""


def describe_database(url: str) -> str:
    """`host:port/database` of a PostgreSQL URL (no user, no password)."""
    parts = urlsplit(url)
    socket_dir = parse_qs(parts.query).get("host")
    if not parts.hostname and socket_dir:
        # A Unix socket (the embedded stack's): its directory says where the server is.
        return f"{socket_dir[0]} (socket){parts.path or '/'}"
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    return f"{host}:{port}{parts.path or '/'}"


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
    provider, separator, name = settings.default_model.partition(":")
    if not separator or not name or provider not in _KNOWN_PROVIDERS:
        raise StartupCheckError(
            "CRUX_MODEL must be 'provider:model' with provider one of "
            f"{', '.join(_KNOWN_PROVIDERS)} (e.g. openai:gpt-4o-mini)"
        )
    keyed = _KEYED_HOSTS.get(provider)
    if keyed is None:
        return
    hosted, key_variable = keyed
    base_url = settings.openai_base_url if provider == "openai" else settings.anthropic_base_url
    key = settings.openai_api_key if provider == "openai" else settings.anthropic_api_key
    if urlsplit(base_url).hostname == hosted and key is None:
        raise StartupCheckError(
            f"CRUX_MODEL uses {hosted}, which needs {key_variable}; set it, or point "
            f"{'OPENAI_BASE_URL' if provider == 'openai' else 'ANTHROPIC_BASE_URL'} at a "
            "server that needs no key"
        )


async def check_database(url: str) -> None:
    """Check that PostgreSQL answers and every bundled migration is applied.

    Raises:
        StartupCheckError: Naming `CRUX_DATABASE_URL`, or `crux db migrate` / `CRUX_MIGRATE`.
    """
    where = describe_database(url)
    try:
        connection = await asyncpg.connect(url, timeout=DATABASE_CONNECT_TIMEOUT_SECONDS)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise StartupCheckError(
            f"cannot connect to PostgreSQL at {where} (CRUX_DATABASE_URL): {type(error).__name__}"
        ) from None
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


async def connect_temporal(settings: Settings, *, runtime: Runtime | None = None) -> Client:
    """Connect to Temporal, failing within a bounded time when it is unreachable.

    The client uses the pydantic data converter, with the encryption payload codec when
    the settings configure keys (`CRUX_CODEC_KEYS`, `crux.codec`).

    Args:
        settings: Address and namespace.
        runtime: The Temporal runtime (a worker's serves Prometheus); the default otherwise.

    Raises:
        StartupCheckError: Naming `TEMPORAL_ADDRESS` (and `TEMPORAL_NAMESPACE`).
        ConfigurationError: The codec keys are invalid (naming the variable).
    """
    converter = with_codec(pydantic_data_converter, codec_from_settings(settings))
    try:
        client = await asyncio.wait_for(
            Client.connect(
                settings.temporal_address,
                namespace=settings.temporal_namespace,
                data_converter=converter,
                connect_timeout=timedelta(seconds=TEMPORAL_CONNECT_TIMEOUT_SECONDS),
                # Tracing starts at the client when telemetry is on.
                interceptors=client_interceptors(),
                runtime=runtime,
            ),
            timeout=TEMPORAL_CONNECT_TIMEOUT_SECONDS + 5,
        )
    except (RuntimeError, OSError, TimeoutError) as error:
        raise StartupCheckError(
            f"cannot reach Temporal at {settings.temporal_address} (TEMPORAL_ADDRESS): "
            f"{type(error).__name__}"
        ) from None
    return client


def search_attribute_command(settings: Settings, missing: list[str]) -> str:
    """The exact `temporal` CLI command that registers the missing attributes."""
    pairs = " ".join(f"--name {name} --type Keyword" for name in missing)
    return (
        f"temporal operator search-attribute create --address {settings.temporal_address} "
        f"--namespace {settings.temporal_namespace} {pairs}"
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
    namespace = settings.temporal_namespace
    try:
        listed: Any = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
    except Exception as error:  # an RPC failure of any kind is a start-up failure
        raise StartupCheckError(
            f"cannot list search attributes of namespace {namespace} on "
            f"{settings.temporal_address} (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE): "
            f"{type(error).__name__}"
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
    if register == "false" or (
        register == "auto" and not _is_loopback(temporal_host(settings.temporal_address))
    ):
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
    except Exception as error:  # e.g. permission denied on a managed cluster
        raise StartupCheckError(
            f"could not register search attributes ({type(error).__name__}): run "
            f"`{search_attribute_command(settings, missing)}`"
        ) from None
    _log.info("temporal.search_attributes.registered", count=len(missing), namespace=namespace)
    return missing
