"""Generate the configuration, error and command-line reference pages from the code.

Used as a MkDocs hook (`hooks:` in mkdocs.yml): the pages are added to the site at build
time and never committed, so they cannot drift from `Settings`, the `CruxError` tree or the
`crux` command's parser. `python docs/gen_reference.py configuration|errors|cli` prints one
page.

The configuration page reads each `Settings` field's description from the class docstring
and finds its environment variable by asking `Settings.from_env` itself: every upper-case
name in the settings module is tried, and the field it sets (or refuses) is the one it maps to.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pkgutil
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `mkdocs build` from a checkout that is not installed
    sys.path.insert(0, str(ROOT))

# The distribution's packages, whose errors the reference lists.
PACKAGES = (
    "vocabulary",
    "planner",
    "contracts",
    "storage",
    "providers",
    "telemetry",
    "activities",
    "workflows",
    "crux",
)
CONFIGURATION_PAGE = "reference/configuration.md"
ERRORS_PAGE = "reference/errors.md"
CLI_PAGE = "reference/cli.md"
_PROBES = ("crux-reference-probe", "true", "7")


def _settings_class() -> type[Any]:
    from vocabulary.settings import Settings

    return Settings


def _docstring_attributes(cls: type[Any]) -> dict[str, str]:
    """`name -> description` from the `Attributes:` section of a Google-style docstring."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    section = doc.split("Attributes:", 1)[1] if "Attributes:" in doc else ""
    described: dict[str, str] = {}
    current: str | None = None
    for line in section.splitlines():
        if line and not line.startswith(" "):
            break  # the next section
        entry = re.match(r"^    (\w+)(?: \([^)]*\))?: (.*)$", line)
        if entry:
            current = str(entry.group(1))
            described[current] = entry.group(2).strip()
        elif current and line.strip():
            described[current] += " " + line.strip()
    return described


def environment_variables() -> dict[str, str]:
    """`field -> environment variable`, as `Settings.from_env` actually reads them."""
    from vocabulary.errors import ConfigurationError

    settings = _settings_class()
    source = inspect.getsource(sys.modules[settings.__module__])
    candidates = sorted(set(re.findall(r"\"([A-Z][A-Z0-9]*_[A-Z0-9_]+)\"", source)))
    baseline = settings.from_env({}).model_dump()
    found: dict[str, str] = {}
    for variable in candidates:
        for value in _PROBES:
            try:
                probed = settings.from_env({variable: value}).model_dump()
            except ConfigurationError as error:
                refused = str(error).partition("invalid settings: ")[2]
                fields = [name.strip() for name in refused.split(",") if name.strip()]
            else:
                fields = [name for name, old in baseline.items() if probed[name] != old]
            if fields:
                for name in fields:
                    found.setdefault(name, variable)
                break
    return found


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(arg) for arg in typing.get_args(annotation) if arg is not type(None)]
        return " or ".join(names) + " (optional)"
    if annotation is SecretStr:
        return "secret"
    return {str: "text", float: "number", int: "integer", bool: "boolean"}.get(
        annotation, getattr(annotation, "__name__", str(annotation))
    )


def _constraints(info: FieldInfo) -> str:
    words: list[str] = []
    for item in info.metadata:
        for attribute, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            bound = getattr(item, attribute, None)
            if bound is not None:
                words.append(f"{symbol} {bound:g}")
        pattern = getattr(item, "pattern", None)
        choices = re.fullmatch(r"\^\(([\w|]+)\)\$", pattern or "")
        if choices:
            words.append("one of " + ", ".join(f"`{c}`" for c in choices.group(1).split("|")))
        elif pattern:
            words.append(f"matches `{pattern}`")
    return ", ".join(words)


def _default(info: FieldInfo) -> str:
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def configuration_markdown() -> str:
    """The configuration reference: one row per `Settings` field."""
    settings = _settings_class()
    described = _docstring_attributes(settings)
    variables = environment_variables()
    lines = [
        "# Configuration reference",
        "",
        "Generated from `crux.Settings` when the site is built. Workers, the CLI and",
        "`crux.connect` read these variables with `Settings.from_env(os.environ)`; blank values",
        "count as unset. Keys stay on the worker and never enter workflow inputs or history.",
        "",
        "| variable | field | type | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, info in settings.model_fields.items():
        variable = variables.get(name)
        kind = _type_name(info.annotation)
        constraints = _constraints(info)
        if constraints:
            kind += f" ({constraints})"
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{variable}`" if variable else "(code only)",
                    f"`{name}`",
                    _cell(kind),
                    _cell(_default(info)),
                    _cell(described.get(name, "").replace(f" (`{variable}`)", "")),
                ]
            )
            + " |"
        )
    lines += [
        "",
        "In code, build settings explicitly instead of from the environment:",
        "",
        "```python",
        "from crux.config import Settings",
        "",
        'settings = Settings(database_url="postgresql://crux:crux@localhost:5432/crux")',
        "```",
        "",
    ]
    return "\n".join(lines)


def error_classes() -> list[type[BaseException]]:
    """Every `CruxError` subclass defined in the distribution's packages, depth first."""
    # Import every module, so that errors defined away from the package roots are seen too.
    for package in PACKAGES:
        root = importlib.import_module(package)
        for module in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    from vocabulary.errors import CruxError

    def walk(cls: type[BaseException]) -> Iterator[type[BaseException]]:
        yield cls
        for sub in sorted(cls.__subclasses__(), key=lambda c: c.__name__):
            if sub.__module__.split(".")[0] in PACKAGES:
                yield from walk(sub)

    return list(dict.fromkeys(walk(CruxError)))


def _public_path(cls: type[BaseException]) -> str:
    errors = importlib.import_module("crux.errors")
    if getattr(errors, cls.__name__, None) is cls:
        return f"crux.errors.{cls.__name__}"
    crux = importlib.import_module("crux")
    if getattr(crux, cls.__name__, None) is cls:
        return f"crux.{cls.__name__}"
    return f"{cls.__module__}.{cls.__name__}"


def _codes(cls: type[BaseException]) -> list[str]:
    """The values a `code` argument of the constructor may take, when typed as a Literal."""
    if "__init__" not in cls.__dict__:
        return []
    try:
        hints = typing.get_type_hints(cls.__init__)
    except (NameError, TypeError):
        return []
    annotation = hints.get("code")
    if typing.get_origin(annotation) is typing.Literal:
        return [str(value) for value in typing.get_args(annotation)]
    return []


def _depth(cls: type[BaseException], root: type[BaseException]) -> int:
    depth = 0
    while cls is not root:
        cls = next(base for base in cls.__bases__ if issubclass(base, root))
        depth += 1
    return depth


def errors_markdown() -> str:
    """The error reference: the tree, then one section per class."""
    from vocabulary.errors import CruxError, ErrorType

    classes = error_classes()
    wire_types = {member.value for member in ErrorType}
    lines = [
        "# Error reference",
        "",
        "Generated from the `CruxError` tree when the site is built. Every error Crux raises",
        "is one of these; messages and attributes are content-free (ids, codes, sizes, never",
        "message text). Errors that fail a workflow cross Temporal as an `ApplicationError`",
        "whose `type` is the class name, and the Python facade raises the class again.",
        "",
        "```text",
    ]
    for cls in classes:
        extra = [base.__name__ for base in cls.__bases__ if not issubclass(base, CruxError)]
        suffix = f" ({', '.join(extra)})" if extra and cls is not CruxError else ""
        lines.append("    " * _depth(cls, CruxError) + cls.__name__ + suffix)
    lines += ["```", ""]
    for cls in classes:
        facts = [
            f"`{_public_path(cls)}`, a subclass of "
            + ", ".join(f"`{base.__name__}`" for base in cls.__bases__)
            + "."
        ]
        codes = _codes(cls)
        if codes:
            facts.append("Codes: " + ", ".join(f"`{code}`" for code in codes) + ".")
        if cls.__name__ in wire_types:
            facts.append(f"Temporal failure type: `{cls.__name__}`.")
        # The docstring is rendered by mkdocstrings, like the API reference, which also
        # makes `crux.errors.X` a cross-reference target for every other page.
        lines += [f"## {cls.__name__}", "", " ".join(facts), ""]
        lines += [f"::: {_public_path(cls)}", "    options:", "      show_root_heading: false"]
        lines += ["      show_bases: false", ""]
    return "\n".join(lines)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name, in the order they were added."""
    for action in parser._actions:  # argparse keeps its subcommands on a private action
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for name, sub in _subcommands(parser).items():
        yield from _commands(sub, (*path, name))


def cli_markdown() -> str:
    """The command-line reference: every command's `--help`, as the parser prints it."""
    from crux.cli import _parser

    lines = [
        "# Command-line reference",
        "",
        "Generated from the `crux` command's parser when the site is built: each section is",
        "what `--help` prints. Commands exit with code 0 on success, 2 on a usage error and 1",
        "(or the code their help names) when they fail, with one line on standard error",
        "naming the cause.",
        "",
    ]
    # A fixed width, so the page does not depend on the terminal that builds it.
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        for path, parser in _commands(_parser(), ("crux",)):
            if len(path) > 1 and _subcommands(parser):
                # A command group: its actions have sections of their own.
                lines += [f"## {' '.join(path)}", "", parser.description or "", ""]
                continue
            level = "#" * min(len(path) + 1, 3)
            lines += [f"{level} {' '.join(path)}", "", "```text", parser.format_help().rstrip()]
            lines += ["```", ""]
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(lines)


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages to the site's files."""
    from mkdocs.structure.files import File

    for path, render in (
        (CONFIGURATION_PAGE, configuration_markdown),
        (ERRORS_PAGE, errors_markdown),
        (CLI_PAGE, cli_markdown),
    ):
        files.append(File.generated(config, path, content=render()))
    return files


if __name__ == "__main__":
    page = sys.argv[1] if len(sys.argv) > 1 else "configuration"
    renderers = {"configuration": configuration_markdown, "errors": errors_markdown}
    print(renderers.get(page, cli_markdown)())
