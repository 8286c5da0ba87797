"""The scoped generation key: injective, and computed identically by the re-keying migration."""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crux.models import generation_key, workflow_id_for

MIGRATION = Path(__file__).parents[2] / "storage" / "migrations" / "0052_scoped_generation_keys.sql"

IDS = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    lambda value: value == value.strip()
)


@settings(max_examples=200)
@given(first=st.tuples(IDS, st.none() | IDS), second=st.tuples(IDS, st.none() | IDS))
def test_distinct_pairs_never_share_a_key(
    first: tuple[str, str | None], second: tuple[str, str | None]
) -> None:
    if first != second:
        assert generation_key(*first) != generation_key(*second)
        assert workflow_id_for(*first) != workflow_id_for(*second)


def test_slashes_and_the_adhoc_scope_stay_apart() -> None:
    assert workflow_id_for("y", "X/x") != workflow_id_for("x/y", "X")
    assert workflow_id_for("g", None) != workflow_id_for("g", "adhoc")
    assert workflow_id_for("g-1", "support:42") == "crux/gen/support:42/g-1"


def _functions() -> str:
    sql = MIGRATION.read_text(encoding="utf-8")
    return "\n".join(re.findall(r"CREATE OR REPLACE FUNCTION.*?\$\$;", sql, flags=re.S))


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=st.tuples(IDS, st.none() | IDS))
async def test_migration_rekeys_exactly_as_python_does(
    pool: asyncpg.Pool, pair: tuple[str, str | None]
) -> None:
    generation_id, thread_id = pair
    async with pool.acquire() as connection:
        await connection.execute(_functions())
        keyed = await connection.fetchval(
            "SELECT pg_temp.crux_generation_key($1, $2)", generation_id, thread_id
        )
    assert keyed == generation_key(generation_id, thread_id)
