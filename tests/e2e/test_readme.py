"""The README is true: its shell blocks and Python snippets run as written.

Every ```sh (or ```bash) and ```python block of README.md runs, in document order, against
real servers: the session's PostgreSQL (a fresh database) and Temporal dev server, a worker on
the task queue `crux`, and a loopback OpenAI-compatible server that stands in for `openai:`
models.
Python snippets share one namespace, as in one `python -m asyncio` session; shell blocks run
with bash from the repository root with `TEMPORAL_ADDRESS` and `CRUX_DATABASE_URL` exported,
as after `crux dev`'s two `export` lines.

A block is skipped only when the line before it is `<!-- readme-test: skip (reason) -->`
(the `make` targets, the foreground `crux dev`, a real API key); keep that set small.

The worker runs the tools and hooks the snippets define ("worker side: crux.Worker(tools=[...])"):
its registries look them up by name in the snippets' namespace when a call needs them.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import re
import subprocess
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from temporalio.client import Client

import crux
from activities import GenerationActivities, ProviderRegistry
from crux._worker import build_worker
from crux.hooks import StepHook
from crux.prompts import PromptRegistry
from crux.tools import Tool
from planner import ModelCatalog
from providers.loopback import (
    LoopbackOpenAIServer,
    RecordedRequest,
    Reply,
    ScriptedToolCall,
    TextReply,
)
from providers.loopback._shared import echo_text
from storage import GenerationStore, ThreadStore
from telemetry import setup
from tests.helpers import settings_for

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SKIP_MARK = re.compile(r"<!--\s*readme-test:\s*skip\b[^>]*-->")
FENCE = re.compile(r"^```(\w*)\s*$")
SHELL = ("sh", "bash")
RUNNABLE = (*SHELL, "python")


@dataclass(frozen=True)
class Block:
    """A fenced block of the README."""

    language: str
    code: str
    line: int
    skipped: bool


def readme_blocks(text: str) -> list[Block]:
    """The README's fenced blocks, in order, with their skip marks."""
    blocks: list[Block] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        previous = next((line for line in reversed(lines[:start]) if line.strip()), "")
        blocks.append(
            Block(match.group(1), "\n".join(body), start + 1, bool(SKIP_MARK.search(previous)))
        )
        index += 1
    return blocks


# ---- the stand-in model -------------------------------------------------------------------


def _sample(schema: dict[str, Any], name: str = "value") -> Any:
    """A value valid for a simple JSON schema (objects, arrays, scalars, enums)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        properties: dict[str, Any] = schema.get("properties", {})
        return {key: _sample(value, key) for key, value in properties.items()}
    if kind == "array":
        return [_sample(schema.get("items", {}), name)]
    if kind == "integer":
        return 12
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return True
    return "Oslo" if name == "city" else f"{name}-1"


def stand_in_model(request: RecordedRequest) -> Reply:
    """Calls an offered tool first, answers in the requested schema, echoes otherwise."""
    body: dict[str, Any] = request.body if isinstance(request.body, dict) else {}
    messages: list[dict[str, Any]] = body.get("messages") or []
    tools: list[dict[str, Any]] = body.get("tools") or []
    last = messages[-1]["role"] if messages else "user"
    if tools and last == "user" and body.get("tool_choice") != "none":
        function = tools[0]["function"]
        arguments = _sample(function.get("parameters") or {"type": "object"})
        return TextReply(tool_calls=[ScriptedToolCall(name=function["name"], arguments=arguments)])
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return TextReply(text=json.dumps(_sample(response_format["json_schema"]["schema"])))
    return TextReply(text=echo_text(messages))


# ---- the worker ---------------------------------------------------------------------------


class _Snippets:
    """Tools and hooks the snippets define, newest definition of a name first."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self._seen: set[int] = set()
        self._registered: dict[tuple[type, str], Any] = {}

    def settle(self) -> None:
        """Register what the last snippet defined (called after each one)."""
        for value in self.namespace.values():
            if isinstance(value, (Tool, StepHook)) and id(value) not in self._seen:
                self._seen.add(id(value))
                self._registered[(type(value), value.name)] = value

    def find(self, kind: type, name: str) -> Any:
        fresh = [
            value
            for value in self.namespace.values()
            if isinstance(value, kind) and value.name == name and id(value) not in self._seen
        ]
        return fresh[-1] if fresh else self._registered.get((kind, name))


class _LiveTools:
    def __init__(self, snippets: _Snippets) -> None:
        self._snippets = snippets

    def get(self, name: str) -> Tool | None:
        return self._snippets.find(Tool, name)

    def require(self, names: Iterable[str]) -> list[Tool]:
        found = [self.get(name) for name in names]
        missing = [name for name, tool in zip(names, found, strict=True) if tool is None]
        assert not missing, f"README snippet uses tools it never defined: {missing}"
        return [tool for tool in found if tool is not None]


class _LiveHooks:
    def __init__(self, snippets: _Snippets) -> None:
        self._snippets = snippets

    def get(self, name: str) -> StepHook | None:
        return self._snippets.find(StepHook, name)


@asynccontextmanager
async def _worker(
    client: Client, pool: asyncpg.Pool, base_url: str, snippets: _Snippets, database_url: str
) -> AsyncIterator[None]:
    settings = settings_for(database_url, openai_base_url=base_url)
    async with httpx.AsyncClient(timeout=30) as http:
        threads = ThreadStore(pool)
        activities = GenerationActivities(
            threads=threads,
            generations=GenerationStore(pool),
            providers=ProviderRegistry(settings, http),
            prompts=PromptRegistry(()),
            catalog=ModelCatalog.default(),
            tools=_LiveTools(snippets),
            hooks=_LiveHooks(snippets),
        )
        async with build_worker(client, task_queue="crux", activities=activities):
            yield


# ---- running the blocks -------------------------------------------------------------------


async def _run_python(block: Block, namespace: dict[str, Any]) -> None:
    code = compile(
        block.code, f"README.md:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    outcome = eval(code, namespace)
    if inspect.iscoroutine(outcome):
        await asyncio.wait_for(outcome, timeout=90)


def _run_shell(block: Block, env: dict[str, str]) -> str:
    completed = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, (
        f"README.md:{block.line} failed ({completed.returncode}):\n{block.code}\n"
        f"{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
    )
    return completed.stdout


def test_readme_has_runnable_blocks_and_few_skips() -> None:
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    runnable = [block for block in blocks if block.language in RUNNABLE]
    skipped = [block for block in runnable if block.skipped]
    assert len(runnable) >= 15
    # make, an API key, the foreground `crux dev`, two commands that run test suites, and a
    # loopback example whose worker must be started with that server's URL.
    assert len(skipped) <= 6, [block.line for block in skipped]
    for block in skipped:
        assert re.search(
            r"skip \(.+\)", README.read_text(encoding="utf-8").splitlines()[block.line - 2]
        ), f"README.md:{block.line}: a skip names its reason"
    for block in runnable:
        if block.language in SHELL and not block.skipped:
            # The CLI is reachable as written: the venv's binaries, never a bare `crux`.
            for line in block.code.splitlines():
                command = line.strip()
                if command.startswith(("crux ", "temporal ")):
                    pytest.fail(f"README.md:{block.line}: write .venv/bin/{command.split()[0]}")


@pytest.mark.stack
async def test_every_readme_block_runs_against_the_embedded_stack(
    client: Client, pool: asyncpg.Pool, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = client.service_client.config.target_host
    variables = {
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_NAMESPACE": client.namespace,
        "CRUX_DATABASE_URL": database_url,
        "CRUX_TASK_QUEUE": "crux",
        "CRUX_LOG_LEVEL": "warning",
    }
    for name in ("CRUX_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Every runtime a snippet connects is closed at the end, also one a later snippet replaced.
    opened: list[crux.Runtime] = []
    connect = crux.connect

    async def connect_and_track(*args: Any, **kwargs: Any) -> crux.Runtime:
        runtime = await connect(*args, **kwargs)
        opened.append(runtime)
        return runtime

    monkeypatch.setattr(crux, "connect", connect_and_track)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    snippets = _Snippets(namespace)
    ran: list[str] = []
    async with (
        LoopbackOpenAIServer(responder=stand_in_model) as model,
        _worker(client, pool, model.base_url, snippets, database_url),
    ):
        try:
            for block in readme_blocks(README.read_text(encoding="utf-8")):
                if block.skipped or block.language not in RUNNABLE:
                    continue
                if block.language == "python":
                    await _run_python(block, namespace)
                    snippets.settle()
                else:
                    await asyncio.to_thread(_run_shell, block, env)
                ran.append(f"{block.language}:{block.line}")
        finally:
            for runtime in opened:
                await runtime.close()
            # The observability snippet turns process-wide telemetry on: the next tests
            # start with it off, as they would in a process of their own.
            setup.reset()
    assert len(ran) >= 13, ran
    assert len(opened) >= 1
    # The snippets' `openai:` calls reached the stand-in model, tool rounds included.
    chat = [r.body for r in model.requests if isinstance(r.body, dict) and "messages" in r.body]
    assert any(body.get("tools") for body in chat)
    # The approval snippet's run waited for, and got, the operator's decision.
    assert namespace["call"].tool == "refund"
    assert namespace["result"] is not None
