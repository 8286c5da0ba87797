"""A user's tests of their Crux application, with `crux.testing` only (no network, no key).

Everything here is public API: the application (`weather_app`), `crux` and `crux.testing`.
The stack is real (a Temporal dev server and PostgreSQL), the worker is the application's,
and the model is scripted in each test.
"""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path

import pytest
from pydantic import BaseModel

import crux
import crux.testing
from tests.testing_kit import weather_app

# One xdist worker runs these, so its session starts one stack for them.
pytestmark = pytest.mark.xdist_group("crux-testing-kit")

HERE = Path(__file__).parent


class Forecast(BaseModel):
    city: str
    high: int


def _thread() -> str:
    return f"weather:{uuid.uuid4().hex[:8]}"


async def test_the_tool_runs_on_the_worker_and_its_result_reaches_the_model(
    crux_runtime: crux.Runtime, scripted: crux.testing.ScriptedModel
) -> None:
    scripted.add(
        crux.testing.ToolCall("get_weather", {"city": "Oslo"}),
        "Rain in Oslo tomorrow, 12 degrees.",
    )
    thread_id = _thread()
    result = await crux_runtime.generate(
        weather_app.forecaster(thread_id), input="Will it rain in Oslo?", model=scripted.id
    )
    assert result.text == "Rain in Oslo tomorrow, 12 degrees."
    first, second = scripted.requests
    assert first.tools == ("get_weather",)
    assert first.last_user_text == "Will it rain in Oslo?"
    [tool_result] = second.tool_results
    assert json.loads(tool_result.text) == {"city": "Oslo", "sky": "rain", "high_c": 12}
    # The application's step hook shortened the call after the tool round.
    assert second.max_output_tokens == 64
    assert [step.request.preparations[0].reason for step in result.steps] == [
        "initial",
        "tool-round",
    ]
    assert result.thread_commit is not None and result.thread_commit.status == "selected"
    assert scripted.pending == 0


async def test_structured_output_is_validated_and_retried(
    crux_runtime: crux.Runtime, scripted: crux.testing.ScriptedModel
) -> None:
    scripted.add(
        crux.testing.Reply(output={"city": "Oslo", "high": "warm"}),  # fails the schema
        crux.testing.Reply(output=Forecast(city="Oslo", high=12)),
    )
    result = await crux_runtime.generate(
        "Forecast for Oslo?", thread=_thread(), model=scripted.id, output=Forecast
    )
    assert result.output == Forecast(city="Oslo", high=12)
    assert scripted.requests[0].output_schema is not None
    assert [step.request.previous_reason for step in result.steps] == [None, "validation-retry"]


async def test_a_retryable_fault_is_retried_and_a_refused_key_fails_typed(
    crux_runtime: crux.Runtime, scripted: crux.testing.ScriptedModel
) -> None:
    scripted.add(crux.testing.Fault.http(529), "Fine now.")
    result = await crux_runtime.generate(
        "Hi",
        model=scripted.id,
        attempt_policy={"max_attempts": 3, "initial_interval_seconds": 0.1},
    )
    assert result.text == "Fine now."
    assert len(scripted.requests) == 2

    scripted.add(crux.testing.Fault.http(401))
    with pytest.raises(crux.ProviderAuthError) as refused:
        await crux_runtime.generate("Hi", model=scripted.id)
    assert refused.value.status == 401
    assert scripted.pending == 0


async def test_an_exhausted_script_fails_the_generation_saying_so(
    crux_runtime: crux.Runtime, scripted: crux.testing.ScriptedModel
) -> None:
    with pytest.raises(crux.ConfigurationError, match="no scripted step left"):
        await crux_runtime.generate("Hi", model=scripted.id)


async def test_a_function_model_answers_from_the_request(
    crux_stack: crux.testing.TestStack,
) -> None:
    def shout(request: crux.testing.ModelRequest) -> crux.testing.Step:
        return (request.last_user_text or "").upper()

    model = crux.testing.FunctionModel(shout, name="shout")
    worker = crux.Worker(registrations=weather_app.REGISTRATIONS, models=[model])
    async with crux.testing.serve(worker, crux_stack) as runtime:
        updates = [update async for update in runtime.stream("quiet please", model=model.id)]
        result = await runtime.generate("hello there", thread=_thread(), model=model.id)
    final = updates[-1]
    assert isinstance(final, crux.StreamCommitted)
    assert final.generation.text == "QUIET PLEASE"
    assert result.text == "HELLO THERE"
    # Planned with the model's profile (the tokenizer it counts with), not an unknown model's.
    assert result.steps[0].request.measurement != "conservative"


async def test_a_model_the_worker_does_not_serve_names_the_remedy(
    crux_runtime: crux.Runtime,
) -> None:
    with pytest.raises(crux.ConfigurationError, match=r"crux.Worker\(models=") as missing:
        await crux_runtime.generate("Hi", model="test:not-registered")
    assert missing.value.code == "not_registered"


def test_these_tests_use_only_the_public_api() -> None:
    allowed = {"__future__", "ast", "json", "uuid", "pathlib", "pytest", "pydantic", "crux"}
    allowed |= {"crux.testing", "crux.testing.pytest_plugin", "tests.testing_kit"}
    for path in HERE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module in allowed or node.module.startswith("tests.testing_kit"), (
                    f"{path.name}: {node.module}"
                )
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name in allowed, f"{path.name}: {alias.name}"
