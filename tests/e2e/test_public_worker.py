"""`crux.Worker`: serves its registrations, refuses a task queue served with other ones.

Two workers on one task queue share its runs at random: one with a tool and one without
would fail every run that lands on the second. So the second worker to start with different
registrations is refused before it polls, in one line naming what differs and both workers;
workers with equal registrations share the task queue; a stopped worker no longer counts.
The same check guards a `temporalio.worker.Worker` of the user's that runs `CruxPlugin`.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest
import temporalio.worker
from temporalio.client import Client

import crux
import crux.testing
from crux._announce import WorkerAnnouncement
from crux.runtime import Runtime
from tests.helpers import settings_for
from vocabulary.ids import workflow_id_for


def _forecast(city: str) -> dict[str, object]:
    """Tomorrow's forecast.

    Args:
        city: City name.
    """
    return {"city": city, "sky": "rain"}


WEATHER = crux.tool(_forecast)
REVIEW = crux.step_hook("review", lambda step: None)


def _settings(database_url: str, client: Client) -> crux.Settings:
    return settings_for(database_url).model_copy(
        update={
            "task_queue": f"public-{uuid.uuid4().hex[:8]}",
            "temporal_address": client.service_client.config.target_host,
            "sweep_interval_seconds": 0,
        }
    )


async def test_a_worker_runs_the_tools_it_registers(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = _settings(database_url, client)
    model = crux.testing.ScriptedModel(
        [crux.testing.ToolCall("_forecast", {"city": "Oslo"}), "Rain."], name="forecast"
    )
    async with crux.Worker(tools=[WEATHER], models=[model], settings=settings, client=client) as w:
        assert w.is_running and w.task_queue == settings.task_queue
        runtime = Runtime.from_settings(client, pool, settings)
        result = await runtime.generate(
            crux.prompt(id="weather", use=[WEATHER]), input="Rain?", model=model.id
        )
    assert result.text == "Rain."
    assert '"sky":"rain"' in model.requests[1].tool_results[0].text
    assert not w.is_running
    assert await pool.fetchval("SELECT count(*) FROM crux_workers") == 0  # it left


async def test_a_second_worker_with_other_registrations_is_refused_naming_both_sides(
    client: Client, database_url: str
) -> None:
    settings = _settings(database_url, client)
    # Temporal allows one worker per task queue and client connection in a process: the
    # second worker has a connection of its own, as a second process would.
    second = await Client.connect(
        client.service_client.config.target_host, namespace=client.namespace
    )
    async with crux.Worker(tools=[WEATHER], settings=settings, client=client):
        # Equal registrations share the task queue.
        async with crux.Worker(tools=[WEATHER], settings=settings, client=second):
            pass
        with pytest.raises(crux.RegistrationConflictError) as refused:
            async with crux.Worker(hooks=[REVIEW], settings=settings, client=second):
                pytest.fail("the worker must not start")
    error = refused.value
    [line] = str(error).splitlines()
    assert f"task queue {settings.task_queue}" in line
    assert "tools _forecast (only there); hooks review (only here)" in line
    assert client.identity in line  # the other worker (this process) and this one
    assert "crux dev --app module:attribute" in line and "CRUX_TASK_QUEUE" in line
    assert error.code == "registration_conflict"
    assert isinstance(error, crux.ConfigurationError)
    # Once the first stopped, the task queue takes the other registrations.
    async with crux.Worker(hooks=[REVIEW], settings=settings, client=client):
        pass


async def test_a_worker_that_died_without_leaving_is_forgotten_after_its_heartbeats_stop(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = _settings(database_url, client)
    dead = WorkerAnnouncement(pool, crux.Registrations(tools=[WEATHER]))
    dead.bind(namespace="default", task_queue=settings.task_queue, identity="9@gone", build_id="")
    await dead.join()  # and never heartbeats nor leaves, as after a SIGKILL
    with pytest.raises(crux.RegistrationConflictError, match="9@gone"):
        await crux.Worker(settings=settings, client=client).__aenter__()
    await pool.execute("UPDATE crux_workers SET heartbeat_at = now() - interval '31 seconds'")
    async with crux.Worker(settings=settings, client=client):
        rows = await pool.fetch("SELECT identity FROM crux_workers")
    assert [row["identity"] for row in rows] == [client.identity]


async def test_a_running_worker_refreshes_its_heartbeat(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = _settings(database_url, client)
    announcement = WorkerAnnouncement(pool, crux.Registrations(), heartbeat_seconds=0.1)
    announcement.bind(
        namespace="default", task_queue=settings.task_queue, identity="me", build_id=""
    )
    await announcement.join()
    await pool.execute("UPDATE crux_workers SET heartbeat_at = now() - interval '1 hour'")
    async with announcement.heartbeating():
        await asyncio.sleep(0.5)
        age = await pool.fetchval("SELECT now() - heartbeat_at FROM crux_workers")
        assert age.total_seconds() < 5
    assert await pool.fetchval("SELECT count(*) FROM crux_workers") == 0


async def test_the_plugin_serves_crux_in_a_temporal_worker_of_your_own(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = _settings(database_url, client)
    model = crux.testing.ScriptedModel(
        [crux.testing.ToolCall("_forecast", {"city": "Oslo"}), "Rain."], name="own"
    )
    worker = crux.Worker(tools=[WEATHER], models=[model], settings=settings)
    async with worker.plugin() as plugin:
        own = temporalio.worker.Worker(client, task_queue=settings.task_queue, plugins=[plugin])
        async with own:
            runtime = Runtime.from_settings(client, pool, settings)
            result = await runtime.generate(
                crux.prompt(id="weather", use=[WEATHER]), input="Rain?", model=model.id
            )
            published = await pool.fetchval("SELECT registrations FROM crux_workers")
            # A worker of your own with other registrations is refused by the same check.
            # (On a connection of its own: Temporal allows one worker per task queue and
            # connection in a process.)
            elsewhere = await Client.connect(
                client.service_client.config.target_host, namespace=client.namespace
            )
            other = crux.Worker(hooks=[REVIEW], settings=settings)
            async with other.plugin() as second:
                refused = temporalio.worker.Worker(
                    elsewhere, task_queue=settings.task_queue, plugins=[second]
                )
                with pytest.raises(crux.RegistrationConflictError):
                    await refused.run()
    assert result.text == "Rain."
    assert published["tools"] == {
        "_forecast": crux.Registrations(tools=[WEATHER]).digests()["tools"]["_forecast"]
    }
    assert await pool.fetchval("SELECT count(*) FROM crux_workers") == 0


async def test_a_generation_naming_an_unregistered_prompt_or_hook_fails_naming_it(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = _settings(database_url, client)
    async with crux.Worker(settings=settings, client=client):
        runtime = Runtime.from_settings(client, pool, settings)
        with pytest.raises(crux.PreparationError) as hook:
            await runtime.generate(
                crux.agent(id="a", prompt=crux.prompt(id="p"), prepare_step=REVIEW), input="hi"
            )
        named = f"named-{uuid.uuid4().hex[:6]}"
        handle = await client.start_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": named, "prompt_id": "registered-elsewhere", "input": "hi"},
            id=workflow_id_for(named, None),
            task_queue=settings.task_queue,
        )
        with pytest.raises(Exception) as prompt:
            await handle.result()
    assert hook.value.code == "hook_not_registered"
    assert "hook 'review' is not registered on this worker" in str(hook.value)
    assert "crux.Worker(hooks=[...])" in str(hook.value)
    cause = prompt.value.__cause__
    while cause is not None and getattr(cause, "type", None) != "ConfigurationError":
        cause = cause.__cause__
    assert cause is not None, prompt.value
    assert "prompt 'registered-elsewhere' is not registered on this worker" in str(cause)
