"""The gate core is pure: no I/O, no clock, no randomness, no layer above activities."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import activities.gate as gate

ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted((ROOT / "activities" / "gate").glob("*.py")) + [ROOT / "contracts" / "gate.py"]
ALLOWED_OURS = ("activities.gate", "contracts", "vocabulary")
ALLOWED_THIRD_PARTY = ("phonenumbers", "stdnum", "pydantic")
BANNED_STDLIB = {
    "os", "sys", "time", "random", "uuid", "socket", "subprocess", "threading", "asyncio",
    "io", "pathlib", "tempfile", "shutil", "secrets", "logging", "urllib", "http", "datetime",
}  # fmt: skip


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_gate_modules_import_only_pure_dependencies(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        if name.startswith(ALLOWED_OURS) or top in ALLOWED_THIRD_PARTY or top == "__future__":
            continue
        assert top in sys.stdlib_module_names, f"{path.name} imports {name}"
        assert top not in BANNED_STDLIB, f"{path.name} imports {name}"


def test_the_public_names_are_sorted_and_exported() -> None:
    assert gate.__all__ == sorted(gate.__all__)
    for name in gate.__all__:
        assert hasattr(gate, name), name
