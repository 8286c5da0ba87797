"""The published workflow contract: up to date, valid, complete, and shipped.

The checked-in `schemas/` folder equals what the generator writes now; every schema is a
valid JSON Schema whose one example validates (and an input example is what the workflow
decodes; `tests/e2e/test_any_client.py` starts each workflow with it); `contract.json`
names a schema for every handler the workflows register; the workflow-id test vectors
follow the documented algorithm, re-implemented here from its description alone.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel
from temporalio import workflow

from contracts.generation import GenerationInput
from contracts.schemas import (
    CONTRACT_FILE,
    ID_VECTORS_FILE,
    SCHEMAS,
    check,
    published,
    reference_page,
    render,
    schema_of,
)
from crux.plugin import WORKFLOWS
from vocabulary.ids import workflow_id_for

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "schemas"


def test_the_checked_in_schemas_are_what_the_generator_writes() -> None:
    assert check(FOLDER) == [], "run `make schemas` and commit schemas/"


def test_the_reference_page_renders_every_schema_with_its_example() -> None:
    page = reference_page()
    assert (ROOT / "docs" / "reference" / "schemas.md").read_text("utf-8") == page, (
        "run `make schemas` and commit docs/reference/schemas.md"
    )
    for spec in SCHEMAS:
        section = page.split(f"\n## {spec.title}\n", 1)[1].split("\n## ", 1)[0]
        assert f"`schemas/{spec.file}`" in section
        example = section.split("```json\n", 1)[1].split("\n```", 1)[0]
        assert json.loads(example) == spec.example
        for name in schema_of(spec).get("properties", {}):
            assert f"| `{name}` |" in section


def test_a_changed_file_is_reported_stale(tmp_path: Path) -> None:
    for name, document in published().items():
        (tmp_path / name).write_text(render(document), encoding="utf-8")
    assert check(tmp_path) == []
    target = tmp_path / "generation-input.schema.json"
    target.write_text(target.read_text(encoding="utf-8").replace("Input of", "In"), "utf-8")
    (tmp_path / "retired.schema.json").write_text("{}", encoding="utf-8")
    assert check(tmp_path) == ["generation-input.schema.json", "retired.schema.json"]


@pytest.mark.parametrize("spec", SCHEMAS, ids=lambda spec: spec.name)
def test_every_schema_is_valid_and_its_one_example_validates(spec: Any) -> None:
    document = schema_of(spec)
    jsonschema.Draft202012Validator.check_schema(document)
    assert document["$id"] == f"{spec.name}.schema.json"
    assert document["title"] and document["description"]
    assert "Attributes:" not in document["description"]
    [example] = document["examples"]
    jsonschema.Draft202012Validator(document).validate(example)
    if spec.mode == "validation" and isinstance(spec.shape, type):
        # What the workflow itself decodes.
        assert issubclass(spec.shape, BaseModel)
        spec.shape.model_validate(example)


@pytest.mark.parametrize("spec", SCHEMAS, ids=lambda spec: spec.name)
def test_every_field_is_described(spec: Any) -> None:
    document = schema_of(spec)
    for where, schema in [("root", document), *document.get("$defs", {}).items()]:
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{spec.name}: {where}.{name}"


def test_the_input_schema_is_the_whole_contract() -> None:
    document = schema_of(next(spec for spec in SCHEMAS if spec.name == "generation-input"))
    assert set(document["properties"]) == set(GenerationInput.model_fields)
    assert len(document["properties"]) == 34
    assert document["required"] == ["generation_id"]
    assert document["additionalProperties"] is False


def test_an_invalid_input_fails_its_schema() -> None:
    document = schema_of(next(spec for spec in SCHEMAS if spec.name == "generation-input"))
    validator = jsonschema.Draft202012Validator(document)
    for invalid in (
        {},
        {"generation_id": "g", "max_tool_rounds": 99},
        {"generation_id": "g", "unknown": 1},
        {"generation_id": "g", "history": {"kind": "everything"}},
    ):
        assert list(validator.iter_errors(invalid)), invalid


def _handlers(cls: type) -> dict[str, set[str]]:
    definition = workflow._Definition.must_from_class(cls)
    return {
        "queries": {name for name in definition.queries if name},
        "updates": {name for name in definition.updates if name},
        "signals": {name for name in definition.signals if name},
    }


def test_the_contract_names_a_schema_for_every_handler_of_every_workflow() -> None:
    files = published()
    contract = files[CONTRACT_FILE]["workflows"]
    assert set(contract) == {workflow._Definition.must_from_class(cls).name for cls in WORKFLOWS}
    for cls in WORKFLOWS:
        name = workflow._Definition.must_from_class(cls).name
        handlers = _handlers(cls)
        entry = contract[name]
        for kind in ("queries", "updates", "signals"):
            assert set(entry[kind]) == handlers[kind], (name, kind)
        stems = [entry["run"]["argument"], entry["run"]["result"], entry["failure_details"]]
        for handler in [*entry["queries"].values(), *entry["updates"].values()]:
            stems += [stem for stem in handler.values() if stem is not None]
        for stem in stems:
            assert f"{stem}.schema.json" in files, (name, stem)


def _encode(component: str) -> str:
    """The documented encoding, written from its description (not from the code)."""
    kept = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:")
    return "".join(chr(byte) if byte in kept else f"%{byte:02X}" for byte in component.encode())


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(list(parts)).encode()).hexdigest()


def test_the_workflow_id_vectors_follow_the_documented_algorithm() -> None:
    vectors = published()[ID_VECTORS_FILE]
    assert len(vectors["generations"]) >= 8
    for case in vectors["generations"]:
        generation, thread = case["generation_id"], case["thread_id"]
        key = _encode(generation) if thread is None else f"{_encode(thread)}/{_encode(generation)}"
        assert case["generation_key"] == key
        assert case["workflow_id"] == f"crux/gen/{key}" == workflow_id_for(generation, thread)
    hashed = 0
    for case in vectors["parallel"]:
        parallel, member = case["parallel_id"], case["member"]
        readable = f"crux/parallel/{_encode(parallel)}"
        if len(readable.encode()) > 600 or _encode(parallel).startswith("sha256-"):
            readable = f"crux/parallel/sha256-{_digest(parallel)}"
            hashed += 1
        assert case["workflow_id"] == readable
        segment = _encode(member)
        if len(segment.encode()) > 399 or segment.startswith("sha256-"):
            segment = f"sha256-{_digest(member)}"
        assert case["member_workflow_id"] == f"{readable}/{segment}"
        generation = f"{_encode(parallel)}/{_encode(member)}"
        if len(generation) > 256 or generation.startswith("parallel-sha256-"):
            generation = f"parallel-sha256-{_digest(parallel, member)}"
        assert case["member_generation_id"] == generation
    assert hashed >= 2


def test_the_schemas_are_package_data_of_contracts() -> None:
    shipped = importlib.resources.files("contracts") / "published"
    names = {entry.name for entry in shipped.iterdir() if entry.name.endswith(".json")}
    # Beside the generated files, the codec's test vectors (tests/crux/test_codec.py).
    assert names == {*published(), "codec.test-vectors.json"}


@pytest.mark.stack
def test_the_wheel_ships_the_schemas(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(ROOT),
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            Path(name).name: archive.read(name).decode()
            for name in archive.namelist()
            if name.startswith("contracts/published/")
        }
    generated = {name: render(document) for name, document in published().items()}
    assert {name: shipped[name] for name in generated} == generated
    assert set(shipped) == {*generated, "codec.test-vectors.json"}
