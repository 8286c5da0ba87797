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

__all__ = [
    "CONTRACT_FILE",
    "DIALECT",
    "ID_VECTORS_FILE",
    "SCHEMAS",
    "SchemaSpec",
    "check",
    "contract",
    "id_vectors",
    "published",
    "render",
    "schema_of",
    "write",
]

REPOSITORY_FOLDER = Path(__file__).resolve().parent.parent / "schemas"
"""Where the files are checked in (the repository's `schemas/`)."""


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


def _existing(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.glob("*.json")) if folder.is_dir() else []


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
    if arguments.check:
        wrong = check(arguments.out)
        for name in wrong:
            print(f"stale: {name} (run `make schemas`)", file=sys.stderr)
        return 1 if wrong else 0
    for name in write(arguments.out):
        print(arguments.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
