"""The published workflow contract: JSON Schemas of everything a Temporal client exchanges.

One schema per workflow input and result, query answer, and update argument and result of
the three workflows (`ManagedGenerationWorkflow`, `ParallelGenerationWorkflow`,
`SummaryWorkflow`), generated from the pydantic models that cross Temporal, each with its
`$id`, title, description (from the docstrings) and one example. `contract.json` says which
schema each handler uses, and `workflow-ids.test-vectors.json` holds the workflow-id rule's
test vectors for implementations in other languages.

The files are checked in under `schemas/` at the repository root and shipped in the wheel
(`contracts/published`); a test regenerates them in memory and compares, validates every
example against its schema, and starts each workflow with its example input.

The same contract is rendered for the documentation (`docs/reference/schemas.md`: each
schema's fields and its example), checked in beside them and compared by the same test.

`python -m contracts.schemas` (or `make schemas`) writes them; `--check` only compares.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from contracts._schema_catalog import (
    CONTRACT,
    CONTRACT_FILE,
    DIALECT,
    ID_VECTORS_FILE,
    SCHEMAS,
    SchemaSpec,
    id_vectors,
)
from vocabulary.details import DETAILS_VERSION
from vocabulary.failures import FAMILIES

__all__ = [
    "CONTRACT_FILE",
    "DIALECT",
    "ID_VECTORS_FILE",
    "SCHEMAS",
    "SchemaSpec",
    "check",
    "contract",
    "reference_page",
    "id_vectors",
    "published",
    "render",
    "schema_of",
    "write",
]

REPOSITORY_FOLDER = Path(__file__).resolve().parent.parent / "schemas"
"""Where the files are checked in (the repository's `schemas/`)."""

REFERENCE_PAGE = REPOSITORY_FOLDER.parent / "docs" / "reference" / "schemas.md"
"""The documentation page that renders them (checked in, compared by the same test)."""


def schema_of(spec: SchemaSpec) -> dict[str, Any]:
    """The JSON Schema document of `spec`, with its `$id`, title, description and example."""
    generated: dict[str, Any] = TypeAdapter(spec.shape).json_schema(mode=spec.mode)
    _describe_fields(generated, spec.shape)
    if spec.name == "failure-details":
        generated["properties"] = {
            "crux_details": {
                "const": DETAILS_VERSION,
                "description": "The version of the details' layout (always present).",
            },
            **generated["properties"],
        }
        generated["required"] = ["crux_details"]
    description = spec.description or _summary(spec.shape)
    generated.pop("title", None)
    generated.pop("description", None)
    return {
        "$schema": DIALECT,
        "$id": spec.file,
        "title": spec.title,
        "description": description,
        **generated,
        "examples": [spec.example],
    }


def contract() -> dict[str, Any]:
    """Which schema each workflow's run, queries and updates use (`contract.json`)."""
    return {
        "description": (
            "The workflows a Crux worker serves, by workflow type: the schema of the run's "
            "argument and result and of each query, update and signal (file stems under "
            "schemas/, `<stem>.schema.json`). Every payload is one JSON value (json/plain)."
        ),
        "workflows": CONTRACT,
    }


def published() -> dict[str, Any]:
    """Every published file by name: the schemas, the contract and the id test vectors."""
    files: dict[str, Any] = {spec.file: schema_of(spec) for spec in SCHEMAS}
    files[CONTRACT_FILE] = contract()
    files[ID_VECTORS_FILE] = id_vectors()
    return files


def render(document: Any) -> str:
    """A published file's text (stable: two-space indent, a final newline)."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def write(folder: Path = REPOSITORY_FOLDER) -> list[str]:
    """Write every published file into `folder`, remove stale ones; the names written."""
    folder.mkdir(parents=True, exist_ok=True)
    files = published()
    for stale in sorted(set(_existing(folder)) - set(files)):
        (folder / stale).unlink()
    for name, document in files.items():
        (folder / name).write_text(render(document), encoding="utf-8")
    return sorted(files)


def check(folder: Path = REPOSITORY_FOLDER) -> list[str]:
    """The names whose checked-in file is missing, stale or no longer generated."""
    files = published()
    wrong = [
        name
        for name, document in files.items()
        if not (folder / name).is_file()
        or (folder / name).read_text(encoding="utf-8") != render(document)
    ]
    return sorted(wrong + [name for name in _existing(folder) if name not in files])


def reference_page() -> str:
    """The documentation page of the contract: per schema, its fields and its example."""
    lines = [
        "# Workflow schemas",
        "",
        "<!-- Generated by `make schemas` (python -m contracts.schemas); do not edit. -->",
        "",
        "The JSON Schemas (draft 2020-12) of everything a Temporal client exchanges with a",
        "Crux worker, generated from the workflow contracts and checked in under `schemas/`",
        "(also shipped in the wheel as `contracts/published`). Every payload is one JSON",
        "value, `json/plain`: the default converter of every Temporal SDK reads and writes",
        "it. How to use them from another language: [Any Temporal client]"
        "(../how-to/any-client.md).",
        "",
        "## Handlers",
        "",
        "| Workflow | Handler | Argument | Result |",
        "| --- | --- | --- | --- |",
    ]
    for workflow_type, handlers in CONTRACT.items():
        run = handlers["run"]
        lines.append(
            f"| `{workflow_type}` | run | {_stem(run['argument'])} | {_stem(run['result'])} |"
        )
        for kind in ("queries", "updates", "signals"):
            for name, shape in handlers[kind].items():
                argument = _stem(shape.get("argument"))
                label = kind.removesuffix("ies").removesuffix("s") + (
                    "y" if kind == "queries" else ""
                )
                lines.append(
                    f"| `{workflow_type}` | {label} `{name}` | {argument} |"
                    f" {_stem(shape.get('result'))} |"
                )
    lines += [
        "",
        "A typed failure carries one detail, the `failure-details` object, whatever the",
        "workflow. Workflow ids follow one rule, with test vectors in",
        f"`schemas/{ID_VECTORS_FILE}`.",
    ]
    for spec in SCHEMAS:
        document = schema_of(spec)
        lines += ["", f"## {spec.title}", "", f"`schemas/{spec.file}`", ""]
        lines += [document["description"], ""]
        properties: dict[str, Any] = document.get("properties", {})
        if properties:
            required = set(document.get("required", []))
            lines += ["| Field | Type | Required | Description |", "| --- | --- | --- | --- |"]
            for name, prop in properties.items():
                mark = "yes" if name in required else ""
                described = _cell(str(prop.get("description", "")))
                lines.append(f"| `{name}` | {_type_of(prop)} | {mark} | {described} |")
            lines.append("")
        elif document.get("type") == "array" or "enum" in document:
            lines += [f"Type: {_type_of(document)}.", ""]
        lines += ["Example:", "", "```json", render(spec.example).rstrip("\n"), "```"]
        if spec.name == "failure-details":
            lines += ["", *_families()]
    return "\n".join(lines) + "\n"


def _families() -> list[str]:
    """The failure families: the `type` another SDK sees, codes, detail keys, retries."""
    lines = [
        "Which keys each failure type fills, its codes, and when Temporal retries it (the",
        "failure's `non_retryable` flag says so for each one):",
        "",
        "| Failure type | Codes | Detail keys | Retried |",
        "| --- | --- | --- | --- |",
    ]
    for error_type, family in FAMILIES.items():
        codes = ", ".join(f"`{code}`" for code in family.codes) or "none"
        keys = ", ".join(f"`{key}`" for key in ("crux_details", *family.keys))
        lines.append(f"| `{error_type.value}` | {codes} | {keys} | {_cell(family.retry_rule)} |")
    return lines


def _stem(stem: str | None) -> str:
    return "none" if stem is None else f"[{stem}](#{_anchor(stem)})"


def _anchor(stem: str) -> str:
    spec = next(spec for spec in SCHEMAS if spec.name == stem)
    title = re.sub(r"[^\w\s-]", "", spec.title.lower())
    return re.sub(r"[-\s]+", "-", title).strip("-")


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def _type_of(prop: dict[str, Any]) -> str:
    """A short name of a property's JSON Schema type (`string or null`, `array of X`)."""
    if "$ref" in prop:
        return "`" + str(prop["$ref"]).rsplit("/", 1)[-1] + "`"
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return "one of " + ", ".join(f"`{json.dumps(value)}`" for value in prop["enum"])
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " or ".join(dict.fromkeys(_type_of(option) for option in prop[key]))
    kind: Any = prop.get("type")
    if kind == "array" and isinstance(prop.get("items"), dict):
        return f"array of {_type_of(prop['items'])}"
    if isinstance(kind, list):
        kinds: list[Any] = kind  # pyright: ignore[reportUnknownVariableType]
        return " or ".join(str(item) for item in kinds)
    return str(kind) if kind is not None else "any"


def _existing(folder: Path) -> list[str]:
    """The generator's files in `folder` (the codec's test vectors have their own)."""
    if not folder.is_dir():
        return []
    owned = {CONTRACT_FILE, ID_VECTORS_FILE}
    return sorted(
        path.name
        for path in folder.glob("*.json")
        if path.name.endswith(".schema.json") or path.name in owned
    )


# Docstring sections that follow the summary.
_SECTIONS = re.compile(r"^(Attributes|Args|Raises|Returns|Examples?):\s*$", re.MULTILINE)


def _summary(shape: Any) -> str:
    """The prose of a model's docstring, without its `Attributes:` and later sections."""
    doc = inspect.cleandoc(getattr(shape, "__doc__", None) or "")
    return " ".join(_SECTIONS.split(doc, maxsplit=1)[0].split())


def _attributes(cls: type[Any]) -> dict[str, str]:
    """`name -> description` from the `Attributes:` section of a Google-style docstring."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    section = doc.split("Attributes:", 1)[1] if "Attributes:" in doc else ""
    found: dict[str, str] = {}
    current: str | None = None
    for line in section.splitlines():
        if line and not line.startswith(" "):
            break  # the next section
        entry = re.match(r"^    (\w+)(?: \([^)]*\))?: (.*)$", line)
        if entry:
            current = str(entry.group(1))
            found[current] = str(entry.group(2)).strip()
        elif current and line.strip():
            found[current] += " " + line.strip()
    return found


def _models(shape: Any, seen: dict[str, type[BaseModel]] | None = None) -> dict[str, type[Any]]:
    """Every pydantic model `shape` holds, by class name (the `$defs` keys)."""
    seen = {} if seen is None else seen
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        if shape.__name__ in seen:
            return seen
        seen[shape.__name__] = shape
        for info in shape.model_fields.values():
            _models(info.annotation, seen)
        return seen
    for argument in typing.get_args(shape):
        _models(argument, seen)
    return seen


def _describe_fields(document: dict[str, Any], shape: Any) -> None:
    """Give each model's schema its prose and each property the docstring's description."""
    models = _models(shape)
    targets: list[tuple[dict[str, Any], type[Any]]] = []
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        targets.append((document, shape))
    for name, definition in document.get("$defs", {}).items():
        if name in models:
            targets.append((definition, models[name]))
    for target, cls in targets:
        summary = _summary(cls)
        if summary:
            target["description"] = summary
        described = _attributes(cls)
        for name, prop in target.get("properties", {}).items():
            if name in described and "description" not in prop:
                prop["description"] = described[name]


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m contracts.schemas", description="Write the published JSON Schemas."
    )
    parser.add_argument("--out", type=Path, default=REPOSITORY_FOLDER, help="target folder")
    parser.add_argument(
        "--check", action="store_true", help="only report files that are missing or stale"
    )
    arguments = parser.parse_args(argv)
    page = REFERENCE_PAGE if arguments.out == REPOSITORY_FOLDER else None
    if arguments.check:
        wrong = check(arguments.out)
        if page is not None and (not page.is_file() or page.read_text("utf-8") != reference_page()):
            wrong.append(str(page.relative_to(REPOSITORY_FOLDER.parent)))
        for name in wrong:
            print(f"stale: {name} (run `make schemas`)", file=sys.stderr)
        return 1 if wrong else 0
    for name in write(arguments.out):
        print(arguments.out / name)
    if page is not None:
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(reference_page(), encoding="utf-8")
        print(page)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
