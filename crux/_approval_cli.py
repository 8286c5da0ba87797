"""`crux generation pending|approve|deny`: decide tool calls that wait for approval.

`crux generation pending GENERATION_ID --thread THREAD_ID` lists the waiting calls (call
id, tool name, round); `approve` and `deny` take the call id. A first argument that starts
with `crux/gen/` (or any, with `--workflow-id`) is the run's workflow id instead. Only
names and ids are printed, never arguments.
"""

from __future__ import annotations

import argparse
from typing import Any

from temporalio.client import Client

from crux._approvals import ApprovalRuns
from crux._operator import resolve_workflow_id
from crux._worker import connect_client
from vocabulary.settings import Settings

APPROVAL_COMMANDS = ("pending", "approve", "deny")
"""The `crux generation` subcommands defined here."""


def add_approval_commands(generation_commands: Any) -> None:
    """Add `pending`, `approve` and `deny` to the `crux generation` subcommands.

    Args:
        generation_commands: The subparsers object of `crux generation`.
    """
    pending = generation_commands.add_parser(
        "pending", help="list tool calls that wait for approval"
    )
    _target(pending)
    approve = generation_commands.add_parser("approve", help="let a waiting tool call run")
    _target(approve)
    approve.add_argument("call_id")
    deny = generation_commands.add_parser("deny", help="refuse a waiting tool call")
    _target(deny)
    deny.add_argument("call_id")
    deny.add_argument(
        "--reason", default=None, metavar="CODE", help="reason code the model sees (identifier)"
    )


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "generation_id", help="the generation id (or, with --workflow-id, the run's)"
    )
    parser.add_argument("--thread", default=None, help="the Thread the generation runs on")
    parser.add_argument(
        "--workflow-id", action="store_true", help="the first argument is a workflow id"
    )


class _Approvals(ApprovalRuns):
    def __init__(self, client: Client) -> None:
        self._client = client


async def run_approval_command(arguments: argparse.Namespace, settings: Settings) -> int:
    """Run one of `APPROVAL_COMMANDS`; print what was done (ids and names only).

    Raises:
        ApprovalError: The decision was refused (`not_found`, `not_awaiting`, ...).
    """
    approvals = _Approvals(await connect_client(settings))
    run: str = arguments.generation_id
    # A workflow id (`crux/gen/...`) is recognised as one, as `generation show` does.
    target: dict[str, Any] = {
        "workflow_id": run if arguments.workflow_id else resolve_workflow_id(run, arguments.thread)
    }
    command = arguments.generation_command
    if command == "pending":
        found = await approvals.pending_approvals(**target)
        for entry in found:
            print(f"{entry.call_id}\t{entry.tool_name}\tround {entry.tool_round}")
        if not found:
            print("no tool call awaits approval")
        return 0
    if command == "approve":
        await approvals.approve(arguments.call_id, **target)
        print(f"approved {arguments.call_id}")
        return 0
    await approvals.deny(arguments.call_id, arguments.reason, **target)
    print(f"denied {arguments.call_id}")
    return 0
