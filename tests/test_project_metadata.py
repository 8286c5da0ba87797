"""Project metadata a build reads without warnings: an SPDX license string; rich required."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _config() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_license_is_an_spdx_expression_with_a_backend_that_reads_it() -> None:
    config = _config()
    project = config["project"]
    assert isinstance(project, dict)
    # A TOML table here makes setuptools warn on every build (three times per install).
    assert project["license"] == "Apache-2.0"
    assert not any("License ::" in c for c in project.get("classifiers", []))
    build = config["build-system"]
    assert isinstance(build, dict)
    [setuptools] = [r for r in build["requires"] if r.startswith("setuptools")]
    match = re.fullmatch(r"setuptools>=(\d+)", setuptools)
    assert match is not None and int(match.group(1)) >= 77  # PEP 639 license expressions


def test_the_demo_renderer_is_a_runtime_dependency() -> None:
    project = _config()["project"]
    assert isinstance(project, dict)
    assert any(re.match(r"rich\b", requirement) for requirement in project["dependencies"])
