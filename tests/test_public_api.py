"""The facade's exports are pinned: adding or removing a public name is deliberate."""

from __future__ import annotations

import crux
import planner
import providers
import storage

EXPECTED_CRUX = sorted(crux.__all__)


def test_crux_all_is_sorted_and_complete() -> None:
    assert crux.__all__ == sorted(crux.__all__)
    for name in crux.__all__:
        assert hasattr(crux, name), name


def test_crux_exports_are_pinned() -> None:
    assert set(crux.__all__) >= {
        "ConfigurationError",
        "Generation",
        "GenerationInput",
        "GenerationResult",
        "Message",
        "PendingApproval",
        "RequestCompositionError",
        "Runtime",
        "Settings",
        "ThreadCommit",
        "ThreadCommitError",
        "ThreadError",
        "history",
        "prompt",
        "Agent",
        "Output",
        "OutputValidationError",
        "output",
        "PreparationError",
        "StepContext",
        "StepHook",
        "StepOverrides",
        "agent",
        "step_hook",
        "GenerationStatus",
        "OperatorError",
        "connect",
        "Worker",
        "Registrations",
        "RegistrationConflictError",
    }


def test_configuration_error_is_both_type_and_value_error() -> None:
    assert issubclass(crux.ConfigurationError, TypeError)
    assert issubclass(crux.ConfigurationError, ValueError)


def test_package_alls_are_sorted() -> None:
    for package in (crux, planner, providers, storage):
        exported = list(package.__all__)
        assert exported == sorted(exported), package.__name__
        for name in exported:
            assert hasattr(package, name), f"{package.__name__}.{name}"
