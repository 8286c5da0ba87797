"""The `crux.testing` fixtures, enabled as a user's conftest does (public API only).

A user's top-level conftest writes `pytest_plugins = ["crux.testing.pytest_plugin"]`; a
nested conftest (this one) imports the fixtures instead, which pytest treats the same.
"""

from __future__ import annotations

import pytest

import crux
import crux.testing
from crux.testing.pytest_plugin import crux_runtime, crux_stack
from tests.testing_kit.weather_app import REGISTRATIONS

__all__ = ["crux_runtime", "crux_stack"]


@pytest.fixture
def scripted() -> crux.testing.ScriptedModel:
    """A fresh scripted model for one test."""
    return crux.testing.ScriptedModel(name="weather")


@pytest.fixture
def crux_worker(scripted: crux.testing.ScriptedModel) -> crux.Worker:
    """The application's registrations with the test's scripted model."""
    return crux.Worker(registrations=REGISTRATIONS, models=[scripted])
