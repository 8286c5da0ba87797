"""The documentation's pages as the example test reads them: fenced blocks and their marks.

A page is the README or any Markdown file under docs/. Its blocks run in order (see
tests/docs_runner.py for how each kind runs):

- ` ```python ` and ` ```sh ` / ` ```bash ` blocks run;
- ` ```python title="myapp.py" ` is a file the reader saves (the page's worker module);
- any other language (`text`, `console`, `toml`, ...) is shown, not run;
- `<!-- docs-test: skip (reason) -->` on the line before a block keeps it from running, and
  says why (it needs an API key, it runs a test suite, it installs packages, ...);
- `<!-- docs-test: from-checkout (reason) -->` anywhere on a page: its reader works in a
  checkout of the repository, so its Python session can import the test suite's helpers.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from providers.loopback import RecordedRequest, Reply, ScriptedToolCall, TextReply
from providers.loopback._shared import echo_text

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MARK = re.compile(
    r"^\s*<!--\s*docs-test:\s*(?P<verb>[\w-]+)\s*(?:\((?P<reason>[^)]*)\))?\s*-->\s*$"
)
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w-]*)(?P<info>[^`]*)$")
TITLE = re.compile(r"""title=["']([^"']+)["']""")
PYTHON = ("python", "py")
SHELL = ("sh", "bash", "shell")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page.

    Attributes:
        page: The page's path, relative to the repository root.
        language: The fence's language (`python`, `sh`, `text`, ...).
        code: The block's text, without the fences and the fence's indentation.
        line: The line of the opening fence (1-based).
        title: The `title="..."` of the fence: the file the reader saves the block as.
        skip: The reason given by a `docs-test: skip (reason)` mark; `None` when it runs.
    """

    page: str
    language: str
    code: str
    line: int
    title: str | None
    skip: str | None

    @property
    def kind(self) -> str | None:
        """`file`, `python`, `shell`, or `None` for a block that is only shown."""
        if self.language in PYTHON and self.title:
            return "file"
        if self.language in PYTHON:
            return "python"
        if self.language in SHELL:
            return "shell"
        return None


def pages() -> list[Path]:
    """Every page whose blocks the test runs: the README, then docs/ in path order."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def page_id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def blocks(path: Path) -> list[Block]:
    """The page's fenced blocks, in order, with their marks."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        indent = len(fence.group("indent"))
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith("```"):
            body.append(lines[index][indent:] if lines[index][:indent].isspace() else lines[index])
            index += 1
        previous = next((line for line in reversed(lines[:start]) if line.strip()), "")
        mark = MARK.match(previous)
        skip = None
        if mark and mark.group("verb") == "skip":
            skip = (mark.group("reason") or "").strip() or "?"
        title = TITLE.search(fence.group("info"))
        found.append(
            Block(
                page=page_id(path),
                language=fence.group("language").lower(),
                code="\n".join(body),
                line=start + 1,
                title=title.group(1) if title else None,
                skip=skip,
            )
        )
        index += 1
    return found


def marks(path: Path) -> list[tuple[int, str, str | None]]:
    """Every `docs-test` mark of a page: (line, verb, reason)."""
    found: list[tuple[int, str, str | None]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        # A mark is a line of its own; prose that quotes one is not.
        if "docs-test" in line and line.strip().startswith("<!--"):
            mark = MARK.match(line)
            found.append(
                (number, mark.group("verb") if mark else "?", mark and mark.group("reason"))
            )
    return found


def from_checkout(path: Path) -> bool:
    """Whether the page's reader works in a checkout (a `from-checkout` mark)."""
    return any(verb == "from-checkout" for _, verb, _ in marks(path))


def plan(path: Path, workdir: Path, *, port: int, ui_port: int, model_url: str) -> dict[str, Any]:
    """What the runner needs to play a page's reader."""
    from tests.docs_runner import stack_command

    runnable = [block for block in blocks(path) if block.kind and block.skip is None]
    return {
        "page": page_id(path),
        "workdir": str(workdir),
        "port": port,
        "ui_port": ui_port,
        "checkout": str(ROOT) if from_checkout(path) else None,
        # DOCS_EXAMPLES_RECORD=1: report what differs from the `# >` lines instead of failing
        # (for writing a page; the test still fails, listing every difference).
        "check_output": not os.environ.get("DOCS_EXAMPLES_RECORD"),
        "implicit_stack": not any(
            block.kind == "shell" and stack_command(block.code) for block in runnable
        ),
        # The stack's worker answers `openai:` models with the stand-in, so no page needs a key.
        "stack_env": {
            "OPENAI_BASE_URL": model_url,
            "OPENAI_API_KEY": "sk-docs-stand-in-not-a-secret",
            "CRUX_LOG_LEVEL": "warning",
        },
        "stack_env_unset": [],
        "blocks": [
            {
                "kind": block.kind,
                "code": block.code,
                "line": block.line,
                "page": block.page,
                "file": block.title,
            }
            for block in runnable
        ],
    }


# ---- the stand-in for `openai:` models ----------------------------------------------------


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
