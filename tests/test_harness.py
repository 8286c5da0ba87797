import asyncpg
from temporalio.client import Client


async def test_each_test_gets_a_fresh_migrated_database(pool: asyncpg.Pool) -> None:
    versions = await pool.fetch("SELECT version FROM crux_schema_migrations")
    assert isinstance(versions, list)
    await pool.execute("CREATE TABLE scratch (id int)")


async def test_databases_are_isolated(pool: asyncpg.Pool) -> None:
    exists = await pool.fetchval("SELECT to_regclass('scratch') IS NOT NULL")
    assert exists is False


async def test_temporal_dev_server_answers(client: Client) -> None:
    assert await client.workflow_service.get_system_info(
        __import__("temporalio.api.workflowservice.v1", fromlist=["x"]).GetSystemInfoRequest()
    )
