"""Every installed package ships its type information; dependencies are ranges, locked."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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


def _project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _locked(name: str) -> dict[str, list[str]]:
    """Package name -> the versions a lock file pins (more than one when markers fork)."""
    pins: dict[str, list[str]] = {}
    for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", line)
        if match:
            pins.setdefault(canonicalize_name(match.group(1)), []).append(match.group(2))
    return pins


def _requirements(*extras: str) -> list[Requirement]:
    project = _project()
    own = canonicalize_name(project["name"])
    found = [Requirement(spec) for spec in project["dependencies"]]
    for extra in extras:
        for spec in project["optional-dependencies"][extra]:
            requirement = Requirement(spec)
            if canonicalize_name(requirement.name) == own:
                found += _requirements(*sorted(requirement.extras))
            else:
                found.append(requirement)
    return found


def test_runtime_dependencies_are_ranges_not_pins() -> None:
    # An application that adds the package keeps its own choice of versions.
    project = _project()
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        specs += extra
    pinned = [spec for spec in specs if "==" in spec]
    assert pinned == []
    for spec in project["dependencies"]:
        assert any(s.operator == ">=" for s in Requirement(spec).specifier), spec


@pytest.mark.parametrize(
    ("lock", "extras"),
    [
        ("requirements.lock", ("serve",)),
        ("requirements-dev.lock", ("embedded", "otel", "docs", "serve", "dev")),
    ],
)
def test_the_lock_files_pin_every_dependency_within_its_range(
    lock: str, extras: tuple[str, ...]
) -> None:
    # A dependency added to pyproject.toml without `make lock` would be missing from a
    # fresh `make install`; a pin outside the declared range would be tested, not shipped.
    pins = _locked(lock)
    for requirement in _requirements(*extras):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is missing from {lock}: run `make lock`"
        assert any(requirement.specifier.contains(v) for v in pins[name]), (name, pins[name])
    text = (ROOT / lock).read_text(encoding="utf-8")
    assert "--hash=sha256:" in text


def test_the_runtime_lock_agrees_with_the_dev_lock() -> None:
    runtime, dev = _locked("requirements.lock"), _locked("requirements-dev.lock")
    assert {name: versions for name, versions in runtime.items() if dev.get(name) != versions} == {}


def test_license_is_an_spdx_expression_the_build_backend_reads() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["project"]["license"] == "Apache-2.0"
    assert any(
        Requirement(spec).name == "setuptools"
        and Requirement(spec).specifier.contains("77")
        and not Requirement(spec).specifier.contains("76")
        for spec in config["build-system"]["requires"]
    )
