"""The demo conversation against an OpenAI-compatible server posing as a real local model.

The loopback server behaves like llama.cpp: it reads only `max_tokens` (a request capped
with `max_completion_tokens` alone gets a rambling 800-token answer) and replies with
realistic lengths, so a budget that only suits the offline echo would fail by turn 2.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client

from activities._support import SUMMARY_OUTPUT_TOKENS
from crux._demo import converse, demo_budget, demo_weather_tool
from crux._devserver import free_port
from crux.config import Settings
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply
from providers.loopback._server import RecordedRequest
from storage import ThreadStore
from tests.helpers import new_worker
from tests.processes import leftovers, naming

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN_MODEL = "openai:llama-3.2-3b-instruct-q4_k_m"
UNCAPPED_ANSWER_WORDS = 800
SENTENCE = (
    "Lisbon rewards slow mornings: start in Alfama, climb to the castle, then walk down "
    "through the lanes to the river, stopping for coffee and a pastel de nata on the way; "
    "in the afternoon take tram 28 west and end the day at a miradouro for the sunset."
)
WORDS = tuple(SENTENCE.split(" "))


class LlamaLikeServer:
    """Replies like a small local model: long answers, cut only by `max_tokens`."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self._lengths = itertools.cycle((180, 260, 320, 220, 140))

    def __call__(self, request: RecordedRequest) -> TextReply:
        body: dict[str, Any] = request.body
        self.bodies.append(body)
        messages: list[dict[str, Any]] = body["messages"]
        if body.get("tools") and body.get("tool_choice") == "required":
            return TextReply(
                tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Lisbon"})]
            )
        wanted = next(self._lengths) if messages[-1]["role"] != "tool" else 60
        cap = body.get("max_tokens")
        if cap is None:
            # `max_completion_tokens` means nothing to this server: it rambles on.
            wanted = UNCAPPED_ANSWER_WORDS
        words = min(wanted, cap) if isinstance(cap, int) else wanted
        text = " ".join(itertools.islice(itertools.cycle(WORDS), words))
        finish = "length" if isinstance(cap, int) and wanted > cap else "stop"
        return TextReply(text=text, output_tokens=words, finish_reason=finish)


async def test_demo_conversation_runs_on_an_unknown_openai_compatible_model(
    client: Client, pool: asyncpg.Pool, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model_server = LlamaLikeServer()
    async with LoopbackOpenAIServer(responder=model_server) as server:
        # Configured exactly as a user would point the demo at llama.cpp: no key, a model
        # the catalog does not know, the server's base URL.
        settings = Settings.from_env(
            {
                "CRUX_MODEL": UNKNOWN_MODEL,
                "OPENAI_BASE_URL": server.base_url,
                "CRUX_DATABASE_URL": database_url,
            }
        )
        weather = demo_weather_tool()
        async with new_worker(
            client, pool, settings, tools=[weather], default_model=settings.default_model
        ) as worker:
            thread_id = await converse(
                worker.runtime, model=settings.default_model, turns=5, weather=weather
            )
    output = capsys.readouterr().out

    budget = demo_budget(UNKNOWN_MODEL)
    assert budget.max > 1_000  # derived from the conservative 8k profile, not a fixed 240
    chat = [body for body in model_server.bodies if "messages" in body]
    assert len(chat) >= 7  # five turns, the tool round's two calls
    for body in chat:
        # The turns keep the demo's output cap; the history summary's own calls (the turn
        # under pressure summarises older turns) keep theirs.
        summarising = "summaries of conversations" in json.dumps(body["messages"])
        cap = SUMMARY_OUTPUT_TOKENS if summarising else budget.max_output_tokens
        assert body["max_tokens"] <= cap
        assert "max_completion_tokens" not in body
    assert "replayed=True" in output
    assert "turn 5 " in output  # the turn's rule
    snapshot = await ThreadStore(pool).read(thread_id)
    roles = [getattr(entry, "role", None) for entry in snapshot.entries]
    # Five question/answer pairs, the tool round (user, tool call, tool result, answer),
    # then the turn under pressure (user, answer).
    assert roles.count("user") == 7
    assert roles.count("tool") == 1


@pytest.mark.stack
async def test_crux_demo_command_talks_to_the_configured_server(tmp_path: Path) -> None:
    model_server = LlamaLikeServer()
    async with LoopbackOpenAIServer(responder=model_server) as server:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CRUX_", "OPENAI_", "ANTHROPIC_", "TEMPORAL_ADDRESS"))
        }
        env.update(PYTHONPATH=str(ROOT), CRUX_MODEL=UNKNOWN_MODEL, OPENAI_BASE_URL=server.base_url)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "crux",
            "demo",
            "--turns",
            "6",  # one more than the scripted questions: a follow-up is generated
            # Any free ports: the well-known 7233/8233 belong to the developer's own stack.
            "--port",
            str(free_port()),
            "--ui-port",
            str(free_port()),
            "--stack-dir",
            str(tmp_path / "stack"),
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=180)
    output = stdout.decode()
    assert process.returncode == 0, stderr.decode()[-2000:]
    assert "turn 6 " in output and "turn 7 " not in output  # the turns' rules: six, not five
    assert "replayed=True" in output
    # The UI address comes while the stack runs (before the first turn); the closing lines
    # give a `thread show` command that works as printed once the stack has stopped.
    ui = output.index("Temporal UI      : http://127.0.0.1:")
    assert ui < output.index("turn 1 ")
    stack_dir = tmp_path / "stack"
    shown = re.search(r"Show the Thread: (\S+) thread show (demo:\w+) --stack-dir (\S+)", output)
    assert shown is not None, output[-1500:]
    assert shown.group(3) == str(stack_dir)
    read = subprocess.run(
        [sys.executable, "-m", "crux", "thread", "show", shown.group(2), "--stack-dir",
         shown.group(3), "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr[-2000:]
    assert len(json.loads(read.stdout)["messages"]) >= 12
    # Neither the demo nor `thread show` left a server of the stack running.
    left = leftovers(lambda processes: naming([stack_dir], processes))
    assert not left, "\n".join(map(str, left))
    chat = [body for body in model_server.bodies if "messages" in body]
    assert chat
    assert all("max_tokens" in body and "max_completion_tokens" not in body for body in chat)
