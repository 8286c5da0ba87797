"""Plans do not depend on the process: same bytes under different hash seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
from planner import *
from tests.planner.helpers import request, tool_round, turns

items = turns(6) + tool_round("g7", "c7") + tool_round("g8", "c8")
contributors = (
    prefer(context("catalog", tokens=3000), context("catalog-index", tokens=400)),
    droppable(context("faq", tokens=2000, tools=(Tool(name="faq_lookup", tokens=60),))),
    offloadable(context("crm", tokens=1500), reference_tokens=90, handle_id="h"),
    droppable(summarizable(context("notes", tokens=900), summary_tokens=100, artifact_id="s")),
)
req = request(
    system_tokens=500,
    history=items,
    history_policy=history.recent(messages=10),
    contributors=contributors,
    input_budget=InputBudget(optimize_at=1500, max=4000),
)
first = plan(req)
second = plan(req.model_copy(update={"request_id": "req-2", "epoch": first.epoch}))
print(first.model_dump_json())
print(second.model_dump_json())
print(preview(req).model_dump_json())
"""


def run(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


def test_plans_are_byte_identical_across_processes_and_hash_seeds() -> None:
    outputs = {run(seed) for seed in ("0", "1", "12345")}
    assert len(outputs) == 1
    assert '"adaptations":[' in next(iter(outputs))
