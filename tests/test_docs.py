"""The documentation site: generated references are complete, the site is configured."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from vocabulary.errors import CruxError
from vocabulary.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(markdown: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 5 and cells[1].startswith("`"):
            rows[cells[1].strip("`")] = cells
    return rows


def test_the_configuration_reference_lists_every_settings_field_with_its_variable(
    generator: ModuleType,
) -> None:
    rows = _rows(generator.configuration_markdown())
    assert set(rows) == set(Settings.model_fields)
    for field, (variable, _, kind, default, meaning) in rows.items():
        # A field without a variable or a description would be invisible to operators.
        assert variable.startswith("`"), f"Settings.from_env reads no variable for {field}"
        assert meaning, f"{field} has no description in the Settings docstring"
        assert kind and default, field
        # The variable really sets the field (what the generator found by asking from_env).
        name = variable.strip("`")
        assert generator.environment_variables()[field] == name


def test_the_variables_in_the_reference_are_the_ones_from_env_reads() -> None:
    # An independent check of one of each kind: text, secret, boolean, number.
    env = {
        "CRUX_TASK_QUEUE": "q",
        "OPENAI_API_KEY": "k",
        "CRUX_MIGRATE": "true",
        "CRUX_SWEEP_INTERVAL_SECONDS": "5",
        "CRUX_HEALTH_FILE": "/tmp/ready",
    }
    settings = Settings.from_env(env)
    assert settings.task_queue == "q" and settings.migrate_on_start
    assert settings.sweep_interval_seconds == 5 and settings.health_file == "/tmp/ready"


def _all_errors(root: type[BaseException]) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for sub in root.__subclasses__():
        found |= {sub} | _all_errors(sub)
    return found


def test_the_error_reference_lists_every_error_class(generator: ModuleType) -> None:
    markdown = generator.errors_markdown()  # imports every module of the distribution
    packages = set(generator.PACKAGES)
    expected = {
        cls.__name__
        for cls in _all_errors(CruxError) | {CruxError}
        if cls.__module__.split(".")[0] in packages
    }
    assert {"ConfigurationError", "ThreadCommitError", "ProviderAuthError"} <= expected
    headings = set(re.findall(r"^## (\w+)$", markdown, re.MULTILINE))
    assert headings == expected
    tree = markdown.split("```text", 1)[1].split("```", 1)[0]
    assert {line.split()[0] for line in tree.strip().splitlines()} == expected
    # The codes callers match on are listed.
    assert "`identity_conflict`" in markdown and "`REQUEST_TOO_LARGE`" in markdown


def test_every_page_is_in_the_navigation_and_the_references_are_generated() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True
    assert config["hooks"] == ["docs/gen_reference.py"]

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [page for item in nav for page in pages(item)]
        if isinstance(nav, dict):
            return [page for value in nav.values() for page in pages(value)]
        return []

    listed = set(pages(config["nav"]))
    written = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    generated = {"reference/configuration.md", "reference/errors.md"}
    assert listed == written | generated
    assert not (written & generated), "generated pages must not be committed"
    for capability in ("planning", "history", "threads", "generations", "streaming", "tools"):
        assert f"{capability}.md" in listed
    assert "getting-started.md" in listed and "operations.md" in listed


@pytest.mark.stack
def test_the_site_builds_strictly_with_the_generated_references(tmp_path: Path) -> None:
    # What `make docs` runs (without --quiet, which would hide the warnings --strict counts).
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "WARNING" not in result.stderr
    configuration = (site / "reference" / "configuration" / "index.html").read_text("utf-8")
    assert "CRUX_HEALTH_FILE" in configuration and "TEMPORAL_ADDRESS" in configuration
    errors = (site / "reference" / "errors" / "index.html").read_text("utf-8")
    assert 'id="threadcommiterror"' in errors
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    docs_recipe = makefile.split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    assert "--strict" in docs_recipe and "--quiet" not in docs_recipe.replace("Not --quiet", "")
