"""Import rules: `planner/` is pure and `workflows/` only sequences."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)

# Modules that would make planning non-deterministic or do I/O.
PLANNER_BANNED_STDLIB = {
    "os",
    "sys",
    "time",
    "random",
    "uuid",
    "socket",
    "subprocess",
    "threading",
    "asyncio",
    "io",
    "pathlib",
    "tempfile",
    "shutil",
    "secrets",
    "logging",
    "urllib",
    "http",
    "sqlite3",
}
WORKFLOW_ALLOWED_PREFIXES = (
    "temporalio",
    "pydantic",
    "planner",
    "crux.models",
    "crux.errors",
    "activities.contracts",
    "workflows",
    "__future__",
    "contextlib",
    "datetime",
    "typing",
    "collections",
    "dataclasses",
    "enum",
    "json",
    "re",
)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("planner"), ids=lambda p: p.name)
def test_planner_imports_only_stdlib_pydantic_and_itself(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        if top in ("planner", "pydantic", "__future__", "typing_extensions"):
            continue
        assert top in STDLIB, f"{path.name} imports {name}"
        assert top not in PLANNER_BANNED_STDLIB, f"{path.name} imports {name}"


@pytest.mark.parametrize("path", _modules("planner"), ids=lambda p: p.name)
def test_planner_reads_no_clock_and_no_randomness(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    for banned in ("datetime.now", "datetime.utcnow", "date.today", "uuid4", "random."):
        assert banned not in source, f"{path.name} uses {banned}"


@pytest.mark.parametrize("path", _modules("workflows"), ids=lambda p: p.name)
def test_workflows_import_only_the_allowed_layers(path: Path) -> None:
    for name in _imports(path):
        assert name.startswith(WORKFLOW_ALLOWED_PREFIXES), f"{path.name} imports {name}"


def test_workflow_modules_import_no_io_libraries() -> None:
    for path in _modules("workflows"):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top not in {"httpx", "asyncpg", "tiktoken", "structlog", "storage", "providers"}


def test_providers_have_no_temporal_types() -> None:
    for path in _modules("providers"):
        for name in _imports(path):
            assert not name.startswith("temporalio"), f"{path.name} imports {name}"
