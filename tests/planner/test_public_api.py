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
    """planner/ may import only the stdlib subset above, pydantic and itself."""
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
