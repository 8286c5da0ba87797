"""`crux cache stats|clear`: figures of the response cache, and deleting its entries.

Both read `CRUX_DATABASE_URL`. Output is content-free: scopes (partition, prompt id, model,
owner), counts and times. Entries are selected by every filter given: `--namespace`,
`--thread` (entries derived from that Thread, whatever their partition), `--adhoc`,
`--prompt`, `--model`; `clear` deletes nothing without a filter unless `--all` or
`--expired` says so.

The top-level parser adds these commands with `add_cache_commands(commands, add)` and
dispatches `arguments.command == "cache"` to `run_cache_command(arguments, settings)`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from contracts.cache import ADHOC_PARTITION
from vocabulary.errors import ConfigurationError

if TYPE_CHECKING:
    # Only the command itself needs the driver; the parser must stay light.
    from storage import CacheStore, ScopeStats
    from vocabulary.settings import Settings

CACHE_COMMANDS = ("stats", "clear")
"""The `crux cache` subcommands."""

Add = Callable[[Any, str, str], argparse.ArgumentParser]
"""Builds a subcommand on a subparsers object from its name and help text."""


def _plain(parent: Any, name: str, text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = parent.add_parser(name, help=text)
    return parser


def add_cache_commands(commands: Any, add: Add | None = None) -> None:
    """Add `crux cache` with `stats` and `clear` to the top-level subparsers.

    Args:
        commands: The subparsers of `crux`.
        add: Builds a (sub)command from its parent subparsers, name and help text (the
            top-level parser's own builder adds its epilog); plain `add_parser` if omitted.
    """
    build = add or _plain
    cache = build(commands, "cache", "inspect or clear the response cache (CRUX_DATABASE_URL)")
    actions = cache.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    stats = build(actions, "stats", "print the entries, hits and ages of each cache scope")
    _filters(stats)
    stats.add_argument("--json", action="store_true", help="print one JSON object per scope")
    clear = build(actions, "clear", "delete cache entries (by scope, prompt, Thread, or all)")
    _filters(clear)
    clear.add_argument("--expired", action="store_true", help="only entries past their TTL")
    clear.add_argument("--all", action="store_true", help="every entry (no filter needed)")


def _filters(parser: argparse.ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--namespace", default=None, help="entries of this cache namespace")
    scope.add_argument("--adhoc", action="store_true", help="entries of ad-hoc generations")
    parser.add_argument("--thread", default=None, help="entries derived from this Thread")
    parser.add_argument("--prompt", default=None, help="entries of this prompt id")
    parser.add_argument("--model", default=None, help="entries of this model (provider:model)")


def _partition(arguments: argparse.Namespace) -> str | None:
    if arguments.namespace is not None:
        return f"namespace:{arguments.namespace}"
    return ADHOC_PARTITION if arguments.adhoc else None


async def run_cache_command(arguments: argparse.Namespace, settings: Settings) -> int:
    """Carry out `crux cache <action>` against `CRUX_DATABASE_URL`; returns the exit code."""
    from crux._checks import check_database
    from storage import CacheStore, create_pool

    url = settings.require_database_url()
    await check_database(url)
    pool = await create_pool(url, min_size=1, max_size=1)
    try:
        store = CacheStore(pool)
        if arguments.cache_command == "stats":
            return await cache_stats(store, arguments)
        return await cache_clear(store, arguments)
    finally:
        await pool.close()


async def cache_stats(store: CacheStore, arguments: argparse.Namespace) -> int:
    """Print one line (or JSON object) per scope, then the semantic-lookup method."""
    scopes = await store.stats(
        partition=_partition(arguments),
        prompt_id=arguments.prompt,
        thread_id=arguments.thread,
        model=arguments.model,
    )
    sizes = sorted(await store.indexed_sizes())
    if arguments.json:
        for scope in scopes:
            print(json.dumps(_json(scope), sort_keys=True))
        print(json.dumps({"hnsw_dimensions": sizes}))
        return 0
    if not scopes:
        print("no cache entries")
    for scope in scopes:
        newest = scope.newest.isoformat(timespec="seconds") if scope.newest else "-"
        print(
            f"{scope.partition} prompt={scope.prompt_id} model={scope.model} "
            f"owner={scope.owner}: {scope.entries} entries ({scope.expired} expired, "
            f"{scope.embedded} with embeddings), {scope.hits} hits, newest {newest}"
        )
    method = f"HNSW for {', '.join(map(str, sizes))} dimensions" if sizes else "bounded scan"
    print(f"semantic lookups: {method}")
    return 0


async def cache_clear(store: CacheStore, arguments: argparse.Namespace) -> int:
    """Delete the selected entries and print how many went.

    Raises:
        ConfigurationError: No filter, and neither `--all` nor `--expired`.
    """
    partition = _partition(arguments)
    filtered = any(
        value is not None for value in (partition, arguments.thread, arguments.prompt)
    ) or (arguments.model is not None)
    if not (filtered or arguments.all or arguments.expired):
        raise ConfigurationError(
            "crux cache clear needs a filter (--namespace, --adhoc, --thread, --prompt,"
            " --model), --expired or --all"
        )
    deleted = await store.clear(
        partition=partition,
        prompt_id=arguments.prompt,
        thread_id=arguments.thread,
        model=arguments.model,
        expired_only=arguments.expired,
    )
    print(f"deleted {deleted} cache entr{'y' if deleted == 1 else 'ies'}")
    return 0


def _json(scope: ScopeStats) -> dict[str, Any]:
    return {
        key: value.isoformat() if hasattr(value, "isoformat") else value
        for key, value in asdict(scope).items()
    }
