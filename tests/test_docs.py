"""The documentation site: generated references are complete, the site is configured.

The site is organised as tutorial, how-to guides, reference and explanations; the API
reference renders (mkdocstrings) every public name from its docstring, and every page
links to it.
"""

from __future__ import annotations

import importlib
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
    assert listed == written | GENERATED
    assert not (written & GENERATED), "generated pages must not be committed"
    sections = [next(iter(item)) for item in config["nav"] if isinstance(item, dict)]
    for section in (
        "Getting started",
        "How-to guides",
        "Reference",
        "API reference",
        "Explanations",
    ):
        assert section in sections, section


GENERATED = {"reference/configuration.md", "reference/errors.md", "reference/cli.md"}
PUBLIC_MODULES = (
    "crux",
    "crux.errors",
    "crux.messages",
    "crux.models",
    "crux.options",
    "crux.plugin",
    "crux.config",
    "crux.logs",
)
# What results hand back from the pure planner: receipts, inspections, previews, profiles.
PLANNER_NAMES = (
    "RequestReceipt",
    "Adaptation",
    "ReceiptWarning",
    "SettingsRecord",
    "StepPreparation",
    "RequestInspection",
    "Breakdown",
    "BreakdownEntry",
    "ContributionRecord",
    "CandidateRecord",
    "ContributorChoice",
    "HistoryRecord",
    "ArtifactRecord",
    "SupportRequestRecord",
    "Counting",
    "Diagnostic",
    "Preview",
    "PreviewAdaptation",
    "ModelCatalog",
    "ModelProfile",
)
DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$")


def _resolve(path: str) -> object:
    """The object a mkdocstrings identifier names (a module, or a name inside one)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            target = getattr(target, name)
        return target
    raise ImportError(path)


def _directives(markdown: str) -> list[str]:
    """The identifiers a page renders: each `::: path`, and the `members` it lists."""
    found: list[str] = []
    current: str | None = None
    listing = False
    for line in markdown.splitlines():
        directive = DIRECTIVE.match(line)
        if directive:
            current, listing = directive.group(1), False
            found.append(directive.group(1))
        elif current and re.match(r"^\s+members:\s*\[(.*)\]\s*$", line):
            inline = re.match(r"^\s+members:\s*\[(.*)\]\s*$", line)
            assert inline is not None
            found += [f"{current}.{name.strip()}" for name in inline.group(1).split(",")]
        elif current and re.match(r"^\s+members:\s*$", line):
            listing = True
        elif current and listing and re.match(r"^\s+- (\w+)\s*$", line):
            found.append(f"{current}.{line.strip()[2:]}")
        elif line.strip() and not line.startswith(" "):
            current, listing = None, False
    return found


def _api_identifiers(generator: ModuleType) -> list[str]:
    pages = [p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "reference").rglob("*.md")]
    pages.append(generator.errors_markdown())
    return [identifier for page in pages for identifier in _directives(page)]


def test_every_public_name_is_in_the_api_reference(generator: ModuleType) -> None:
    identifiers = _api_identifiers(generator)
    assert len(identifiers) == len(set(identifiers)), "a name is rendered twice"
    rendered = {identifier: _resolve(identifier) for identifier in identifiers}
    objects = {id(target) for target in rendered.values()}
    scalar = (int, float, str, bool)
    public = [
        (module, name)
        for module in PUBLIC_MODULES
        for name in importlib.import_module(module).__all__
    ] + [("planner", name) for name in PLANNER_NAMES]
    missing = []
    for module, name in public:
        target = getattr(importlib.import_module(module), name)
        if isinstance(target, scalar) or target is None:
            # Equal constants share objects: a constant is covered by its own name only.
            covered = f"{module}.{name}" in rendered
        else:
            covered = id(target) in objects
        if not covered:
            missing.append(f"{module}.{name}")
    assert missing == [], f"add these to a page under docs/reference/api/: {missing}"


def test_the_how_to_pages_link_the_api_names_they_use() -> None:
    for page in sorted((ROOT / "docs" / "how-to").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        if "```python" in text:
            # A cross-reference (`[name][crux.X]`) to the API reference.
            assert re.search(r"\]\[(crux|planner)\.[\w.]+\]", text), page.name


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
    # Every rendered name has its anchor: a name without a docstring would be left out.
    built = "".join(p.read_text("utf-8") for p in (site / "reference").rglob("index.html"))
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    unrendered = [i for i in _api_identifiers(generator) if f'id="{i}"' not in built]
    assert unrendered == [], unrendered
    cli = (site / "reference" / "cli" / "index.html").read_text("utf-8")
    assert "crux dev" in cli and "crux generation show" in cli
    # The API reference is linked from every page (the navigation holds it).
    api = (site / "reference" / "api").resolve()
    for page in site.rglob("index.html"):
        targets = {
            (page.parent / href).resolve()
            for href in re.findall(r'href="([^"#:]*)/?"', page.read_text("utf-8"))
        }
        assert api in targets, f"{page.relative_to(site)} does not link the API reference"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    docs_recipe = makefile.split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    assert "--strict" in docs_recipe and "--quiet" not in docs_recipe.replace("Not --quiet", "")


def test_the_readme_is_short_and_keeps_what_a_newcomer_needs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150
    assert "## Where behaviour lives" in readme
    # Install lines that work: a wheel built from the checkout, and git; PyPI marked as such.
    wheel = re.search(
        r"pip install \"dist/(crux_temporal-[\w.]+-py3-none-any\.whl)\[embedded\]\"", readme
    )
    assert wheel is not None
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    version = re.search(r'^version = "([^"]+)"', project, flags=re.MULTILINE)
    assert (
        version is not None
        and wheel.group(1) == f"crux_temporal-{version.group(1)}-py3-none-any.whl"
    )
    assert "git+" in readme
    assert re.search(r"pip install \"crux-temporal\[embedded\]\".*not yet published", readme)
    # Every page the README links exists.
    for target in re.findall(r"\]\(((?:docs/)[^)#]+)\)", readme):
        assert (ROOT / target).exists(), target


def test_getting_started_imports_no_private_module_and_names_no_compose_database() -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", page, flags=re.MULTILINE)
    assert imports, "the tutorial imports crux"
    assert not [name for name in imports if any(part.startswith("_") for part in name.split("."))]
    assert not [name for name in imports if name.split(".")[0] not in ("crux", "myapp", "asyncio")]
    # crux dev prints its own database URL; the docker-compose one is a different database.
    assert "localhost:5432" not in page and "5432" not in page
