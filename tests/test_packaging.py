"""Every installed package ships its type information."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    included = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return [pattern.rstrip("*") for pattern in included]


def test_every_package_is_marked_typed() -> None:
    packages = _packages()
    assert "vocabulary" in packages and "contracts" in packages
    missing = [name for name in packages if not (ROOT / name / "py.typed").is_file()]
    assert missing == []


def test_the_marker_is_package_data_of_every_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = config["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data["*"]
    # A package with its own entry does not inherit the wildcard's files.
    assert all("py.typed" in files for files in data.values())
