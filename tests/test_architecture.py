"""Import rules: the layers, bottom to top, and what the workflow sandbox loads.

```
vocabulary   errors, messages, ids, stages, staging kinds, the error-detail codec, gathered
             outcomes (the leaf)
planner      pure planning                                   -> vocabulary
contracts    shapes that cross Temporal                      -> planner, vocabulary
storage      PostgreSQL        providers   HTTP wire formats -> contracts, planner, vocabulary
telemetry    logging
activities   the I/O steps     workflows   sequencing only   -> everything below
crux         the public facade                               -> everything
```

Direct imports are checked per module; the workflow sandbox's closure is checked by importing
`workflows` in a fresh interpreter. Across the packages, a private (`_`-prefixed) module is
imported only inside its own package, and no two modules import each other, directly or
through others (a function-local import counts: it hides a cycle, it does not remove it).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)

# Modules that would make planning non-deterministic or do I/O.
PLANNER_BANNED_STDLIB = {
    "os",
    "sys",
    "time",
    "random",
    "uuid",
    "socket",
    "subprocess",
    "threading",
    "asyncio",
    "io",
    "pathlib",
    "tempfile",
    "shutil",
    "secrets",
    "logging",
    "urllib",
    "http",
    "sqlite3",
}
WORKFLOW_ALLOWED_PREFIXES = (
    # Temporal runs workflow code on its own deterministic asyncio loop: tasks, `gather`
    # and `wait` are scheduled by it (the time budget races the work before the commit
    # against a durable timer; success hooks run concurrently).
    "asyncio",
    "temporalio",
    "pydantic",
    "vocabulary",
    "planner",
    "contracts",
    "workflows",
    "__future__",
    "contextlib",
    "datetime",
    "typing",
    "collections",
    "dataclasses",
    "enum",
    "json",
    "re",
)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("planner"), ids=lambda p: p.name)
def test_planner_imports_only_stdlib_pydantic_and_itself(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        if top in ("planner", "vocabulary", "pydantic", "__future__", "typing_extensions"):
            continue
        assert top in STDLIB, f"{path.name} imports {name}"
        assert top not in PLANNER_BANNED_STDLIB, f"{path.name} imports {name}"


@pytest.mark.parametrize("path", _modules("planner"), ids=lambda p: p.name)
def test_planner_reads_no_clock_and_no_randomness(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    for banned in ("datetime.now", "datetime.utcnow", "date.today", "uuid4", "random."):
        assert banned not in source, f"{path.name} uses {banned}"


@pytest.mark.parametrize("path", _modules("workflows"), ids=lambda p: p.name)
def test_workflows_read_no_clock_and_no_randomness(path: Path) -> None:
    """Time and ids come from `workflow.now()` and `workflow.uuid4()` (replayed, not re-read).

    The workflows run outside the SDK's sandbox; the replay suite runs them inside it too.
    """
    source = path.read_text(encoding="utf-8")
    for banned in ("datetime.now", "datetime.utcnow", "date.today", "time.time", "random."):
        assert banned not in source, f"{path.name} uses {banned}"
    assert "uuid4" not in source.replace("workflow.uuid4", ""), f"{path.name} uses uuid4"


@pytest.mark.parametrize("path", _modules("workflows"), ids=lambda p: p.name)
def test_workflows_import_only_the_allowed_layers(path: Path) -> None:
    for name in _imports(path):
        assert name.startswith(WORKFLOW_ALLOWED_PREFIXES), f"{path.name} imports {name}"


def test_workflow_modules_import_no_io_libraries() -> None:
    for path in _modules("workflows"):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top not in {"httpx", "asyncpg", "tiktoken", "structlog", "storage", "providers"}


def test_providers_have_no_temporal_types() -> None:
    for path in _modules("providers"):
        for name in _imports(path):
            assert not name.startswith("temporalio"), f"{path.name} imports {name}"


OURS = {
    "vocabulary",
    "planner",
    "contracts",
    "storage",
    "providers",
    "telemetry",
    "activities",
    "workflows",
    "crux",
    "worker",
}
# Which of our packages each layer may import (itself always).
LAYERS: dict[str, set[str]] = {
    "vocabulary": set(),
    "planner": {"vocabulary"},
    "contracts": {"vocabulary", "planner"},
    "storage": {"vocabulary", "planner", "contracts"},
    "providers": {"vocabulary", "planner", "contracts"},
    "telemetry": set(),
    "activities": {"vocabulary", "planner", "contracts", "storage", "providers", "telemetry"},
    "workflows": {"vocabulary", "planner", "contracts"},
}
# What the workflow sandbox must never load: I/O libraries and the layers that use them.
SANDBOX_BANNED = {
    "asyncpg",
    "httpx",
    "tiktoken",
    "structlog",
    "storage",
    "providers",
    "activities",
    "telemetry",
    "crux",
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_layer_imports_only_the_layers_below(layer: str) -> None:
    allowed = LAYERS[layer] | {layer}
    for path in _modules(layer):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in OURS:
                assert top in allowed, f"{path.relative_to(ROOT)} imports {name}"


def test_vocabulary_imports_only_the_standard_library_and_pydantic() -> None:
    for path in _modules("vocabulary"):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top in STDLIB or top in ("vocabulary", "pydantic", "__future__"), name


def _loaded_after(statement: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = f"{statement}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


def test_the_workflow_sandbox_loads_no_io_module_transitively() -> None:
    loaded = _loaded_after(
        "import workflows.generation, workflows.summary, workflows.parallel, workflows.arity"
    )
    banned = sorted(name for name in loaded if name.split(".")[0] in SANDBOX_BANNED)
    assert banned == []
    ours = {name.split(".")[0] for name in loaded} & OURS
    assert ours <= {"vocabulary", "planner", "contracts", "workflows"}


def test_the_leaf_loads_nothing_else_of_ours() -> None:
    loaded = _loaded_after(
        "import vocabulary.errors, vocabulary.messages, vocabulary.ids, vocabulary.details,"
        " vocabulary.staging, vocabulary.stages, vocabulary.commits, vocabulary.settings"
    )
    assert {name.split(".")[0] for name in loaded} & OURS == {"vocabulary"}


def test_the_worker_passes_only_named_deterministic_modules_through() -> None:
    from crux.plugin import PASSTHROUGH_MODULES

    # The workflow modules themselves are executed afresh by the sandbox, where every
    # call they make is checked.
    assert set(PASSTHROUGH_MODULES) <= {"pydantic", "pydantic_core", *LAYERS["workflows"]}
    assert not set(PASSTHROUGH_MODULES) & SANDBOX_BANNED


def test_the_workflow_modules_keep_no_state_between_runs() -> None:
    """Modules shared by every run of a worker: no `global`, no mutable value at module level."""
    mutable = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
    names = [name for name in MODULES if name == "workflows" or name.startswith("workflows.")]
    assert "workflows.generation" in names
    for name in names:
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.Global)], name
        assigned = {
            ast.unparse(
                node.targets[0] if isinstance(node, ast.Assign) else node.target
            ): node.value
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        }
        shared = {
            target
            for target, value in assigned.items()
            if isinstance(value, mutable) and target not in _SET_UP_ONLY
        }
        assert not shared, name


_SET_UP_ONLY = {"__all__", "_RAW_EXTRAS"}
"""Module-level containers no run touches: the export list, and the payload converter
classes `workflows.arity.raw_extras_converter` makes once when a worker is built."""


def test_the_workflows_package_itself_imports_nothing() -> None:
    """The sandbox executes the package of a workflow module on every run: it stays empty."""
    tree = ast.parse((ROOT / "workflows" / "__init__.py").read_text(encoding="utf-8"))
    assert not [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]


# The distribution's modules: the packages and the worker script (tests and benchmarks reach
# into private modules on purpose and are not part of this graph).
PACKAGES = sorted(OURS - {"worker"})


def _module_files() -> dict[str, Path]:
    """Module name -> file, for every module of the packages and the worker script."""
    files: dict[str, Path] = {"worker": ROOT / "worker.py"}
    for package in PACKAGES:
        for path in _modules(package):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


MODULES = _module_files()


def _resolve(name: str) -> str | None:
    """The deepest of our modules that `name` (a module or a name inside one) lies in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _edges(module: str) -> set[str]:
    """Every module of ours `module` imports, at any depth of its code."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            # `from package import module` imports the module (the package's `__init__`
            # runs first, as for any submodule, which is not counted); a name, its module.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                found.add(target)
    return found


GRAPH = {module: _edges(module) for module in MODULES}


def _private_owner(module: str) -> str | None:
    """The package a private module belongs to (`a.b` for `a.b._c.d`), `None` if public."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_"):
            return ".".join(parts[:index])
    return None


def test_no_module_imports_a_private_module_of_another_package() -> None:
    crossing = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if (owner := _private_owner(target)) is not None
        and module != owner
        and not module.startswith(owner + ".")
    )
    # The worker script uses the public `crux.Worker`, like any application's.
    assert crossing == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_import_cycles_among_the_modules() -> None:
    assert _cycles(GRAPH) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_sees_function_local_and_package_imports() -> None:
    # `crux.cli` imports the app loader inside a function; `workflows._generation` imports
    # private modules by `from workflows import _ui`.
    assert "crux._app" in GRAPH["crux.cli"]
    assert "workflows._ui" in GRAPH["workflows._generation"]
