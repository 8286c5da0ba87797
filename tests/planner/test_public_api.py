"""The planner's public surface: exports, purity of imports."""

from __future__ import annotations

import ast
from pathlib import Path

import planner

PLANNER_DIR = Path(planner.__file__).parent
ALLOWED_ROOTS = {
    "__future__",
    "pydantic",
    "planner",
    "vocabulary",
    "typing",
    "collections",
    "dataclasses",
    "operator",
    "bisect",
    "math",
    "types",
    "enum",
    "functools",
    "itertools",
    "array",
    "base64",
    "binascii",
    "zlib",
}


def test_all_is_sorted_and_complete() -> None:
    assert planner.__all__ == sorted(planner.__all__)
    for name in planner.__all__:
        assert hasattr(planner, name), name


def test_required_entry_names_are_exported() -> None:
    for name in (
        "ModelProfile",
        "ModelCatalog",
        "InputBudget",
        "HistoryItem",
        "HistoryAggregate",
        "PlanRequest",
        "SealedPlan",
        "RequestReceipt",
        "plan",
        "preview",
    ):
        assert name in planner.__all__


def test_planner_imports_only_pure_modules() -> None:
    """planner/ may import only the stdlib subset above, pydantic, the vocabulary and itself."""
    for path in PLANNER_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in ALLOWED_ROOTS, f"{path.name} imports {root}"


def test_requests_round_trip_through_json_and_dicts_with_every_policy() -> None:
    """Workflow payloads are validated by pydantic, through the typed constructors too."""
    from planner import (
        HistorySummary,
        InputBudget,
        ManagedHistory,
        ModelCatalog,
        PlanRequest,
        RecentHistory,
        history,
        plan,
    )

    profile = ModelCatalog.default().resolve("offline:echo")
    policies = (
        history.exact(),
        history.recent(messages=4, tokens=100),
        history(recent=3, on_miss="recent-only"),
        ManagedHistory(summary=HistorySummary(artifact_id="a", tokens=5, covers=2)),
    )
    for policy in policies:
        req = PlanRequest(
            request_id="r",
            model=profile,
            input_budget=InputBudget(optimize_at=100, max=200),
            history_policy=policy,
        )
        assert PlanRequest.model_validate_json(req.model_dump_json()) == req
        assert PlanRequest.model_validate(req.model_dump()) == req
        assert plan(PlanRequest.model_validate(req.model_dump())) == plan(req)
    assert RecentHistory.model_validate({"kind": "recent", "messages": 2}).messages == 2
    assert InputBudget.model_validate({"max": 5}).max == 5


def test_wire_validation_rejects_unknown_fields() -> None:
    import pytest

    from planner import InputBudget, RecentHistory

    with pytest.raises(ValueError):
        InputBudget.model_validate({"max": 5, "soft": 1})
    with pytest.raises(ValueError):
        RecentHistory.model_validate({"kind": "recent", "messages": 2, "turns": 1})
