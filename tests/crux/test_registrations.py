"""`crux.Registrations` and `--app module:attribute`: what a worker serves, and from where."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import RPCTimeoutOrCancelledError

import crux
import crux.testing
from crux._app import load_app
from crux._exit import ExitCode, classify
from crux.registrations import describe_difference


def _weather(arguments: dict[str, object]) -> dict[str, object]:
    return {"sky": "rain", **arguments}


WEATHER = crux.tool("get_weather", _weather, parameters={"type": "object", "properties": {}})
REVIEW = crux.step_hook("review", lambda step: None)


def test_registrations_list_names_per_kind_and_include_the_tools_of_registered_prompts() -> None:
    model = crux.testing.ScriptedModel(name="w")
    registered = crux.Registrations(
        prompts=[crux.prompt(id="forecast", use=[WEATHER])], hooks=[REVIEW], models=[model]
    )
    assert registered.names() == {
        "prompts": ("forecast",),
        "tools": ("get_weather",),
        "hooks": ("review",),
        "models": ("test:w",),
    }
    assert "get_weather" in repr(registered)


def test_equal_registrations_share_a_fingerprint_and_a_changed_schema_changes_it() -> None:
    one = crux.Registrations(tools=[WEATHER], hooks=[REVIEW])
    two = crux.Registrations(tools=[WEATHER], hooks=[REVIEW])
    assert one == two and one.fingerprint == two.fingerprint
    changed = crux.tool(
        "get_weather", _weather, parameters={"type": "object", "properties": {"city": {}}}
    )
    other = crux.Registrations(tools=[changed], hooks=[REVIEW])
    assert other.fingerprint != one.fingerprint
    assert describe_difference(one.digests(), other.digests()) == "tools get_weather (differs)"
    assert describe_difference(one.digests(), crux.Registrations().digests()) == (
        "tools get_weather (only here); hooks review (only here)"
    )
    assert describe_difference(one.digests(), one.digests()) == ""


def test_two_entries_of_a_kind_under_one_name_are_refused_by_name() -> None:
    other = crux.tool("get_weather", lambda _: "x")
    with pytest.raises(crux.ConfigurationError, match="two tools are registered as 'get_weather'"):
        crux.Registrations(tools=[WEATHER, other])
    assert crux.Registrations(tools=[WEATHER, WEATHER]).names()["tools"] == ("get_weather",)
    with pytest.raises(crux.ConfigurationError, match=r"crux.tool\(...\)"):
        crux.Registrations(tools=["get_weather"])  # type: ignore[list-item]
    with pytest.raises(crux.ConfigurationError, match="list"):
        crux.Registrations(tools="get_weather")  # type: ignore[arg-type]


def test_a_worker_merges_its_registrations_and_adds_served_models_to_its_catalog() -> None:
    model = crux.testing.ScriptedModel(name="w", context_window=4_096)
    worker = crux.Worker(registrations=crux.Registrations(tools=[WEATHER]), models=[model])
    assert worker.registrations.names()["tools"] == ("get_weather",)
    assert worker.catalog.resolve("test:w").context_window == 4_096
    copy = worker.replace(settings=crux.Settings(task_queue="elsewhere"))
    assert copy.registrations == worker.registrations
    assert copy.settings is not None and copy.settings.task_queue == "elsewhere"


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory holding the user's modules, made the current directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith("userapp")]:
        del sys.modules[name]


def _module(directory: Path, name: str, source: str) -> None:
    (directory / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")


def test_app_takes_a_worker_registrations_or_a_function_returning_one(app_dir: Path) -> None:
    _module(
        app_dir,
        "userapp",
        """
        import crux

        tool = crux.tool("lookup", lambda arguments: "found")
        worker = crux.Worker(tools=[tool])
        registrations = crux.Registrations(tools=[tool])

        def make():
            return crux.Worker(tools=[tool])

        class Nested:
            worker = worker
        """,
    )
    for attribute in ("worker", "registrations", "make", "Nested.worker"):
        loaded = load_app(f"userapp:{attribute}")
        assert loaded.registrations.names()["tools"] == ("lookup",), attribute


@pytest.mark.parametrize(
    ("spec", "source", "expected"),
    [
        ("userapp", "", "--app takes module:attribute"),
        ("missing_module:worker", "", "no module missing_module in"),
        ("userapp:nothing", "import crux\n", "module userapp has no attribute nothing"),
        ("userapp:value", "value = 42\n", "is a int; it must be a crux.Worker"),
        ("userapp:worker", "import not_installed_anywhere\n", "it imports not_installed_any"),
        ("userapp:worker", "x = 1\nraise RuntimeError('boom')\n", "raised RuntimeError at"),
        ("userapp:make", "def make():\n    raise KeyError('k')\n", "calling it raised KeyError"),
    ],
)
def test_app_failures_name_the_cause_in_one_line(
    app_dir: Path, spec: str, source: str, expected: str
) -> None:
    if source:
        _module(app_dir, "userapp", source)
    with pytest.raises(crux.ConfigurationError) as failed:
        load_app(spec)
    assert expected in str(failed.value)
    assert "\n" not in str(failed.value)
    assert "boom" not in str(failed.value)  # where it was raised, not what it said


def test_every_failure_maps_to_a_documented_exit_code_and_one_line() -> None:
    from crux._exit import CommandError

    cases = [
        (crux.ConfigurationError("bad\nvalue"), ExitCode.FAILED, "bad value"),
        (crux.OperatorError("not_found", "no run"), ExitCode.NOT_FOUND, "not_found: no run"),
        (crux.OperatorError("wrong_stage", "x"), ExitCode.WRONG_STAGE, "wrong_stage: x"),
        (crux.ThreadError("not_found", "t"), ExitCode.NOT_FOUND, "not_found: t"),
        (CommandError("none polls", ExitCode.NO_WORKER), ExitCode.NO_WORKER, "none polls"),
        (ConnectionRefusedError(111, "refused"), ExitCode.FAILED, "a service did not answer"),
        (RPCTimeoutOrCancelledError("x"), ExitCode.FAILED, "did not answer a call in time"),
        (ValueError("a bug"), ExitCode.INTERNAL, "unexpected ValueError; rerun with"),
    ]
    for error, code, line in cases:
        assert classify(error) == (code, classify(error)[1])
        assert classify(error)[0] == code, error
        assert line in classify(error)[1], error
        assert "\n" not in classify(error)[1]
