"""`crux generation pending|approve|deny`: decide the tool calls a run waits on.

A run is named by its generation id (with `--thread` for a Thread's generation) or by
`--workflow-id`. Output is ids and tool names only.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from vocabulary.settings import Settings

APPROVAL_COMMANDS = ("pending", "approve", "deny")
"""The `crux generation` subcommands defined here."""


def add_approval_commands(generation_commands: Any) -> None:
    """Add `pending`, `approve` and `deny` to the `crux generation` subparsers."""
    pending = generation_commands.add_parser(
        "pending", help="list the tool calls a run waits on (tool name and call id)"
    )
    _run_arguments(pending)
    approve = generation_commands.add_parser("approve", help="let a pending tool call run")
    approve.add_argument("call_id")
    _run_arguments(approve)
    deny = generation_commands.add_parser(
        "deny", help="deny a pending tool call; the model sees the reason code"
    )
    deny.add_argument("call_id")
    _run_arguments(deny)
    deny.add_argument("--reason", default=None, help="short reason code (default: denied)")


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("generation_id", nargs="?", default=None)
    parser.add_argument("--thread", default=None, help="the generation's Thread id")
    parser.add_argument("--workflow-id", default=None, help="name the run by workflow id")


async def run_approval_command(arguments: argparse.Namespace, settings: Settings) -> int:
    """Carry out one approval subcommand against `TEMPORAL_ADDRESS`."""
    from crux._approvals import approval_workflow_id, decide, pending_approvals
    from crux._worker import connect_client

    target = approval_workflow_id(arguments.generation_id, arguments.thread, arguments.workflow_id)
    client = await connect_client(settings)
    command = arguments.generation_command
    if command == "pending":
        for call in await pending_approvals(client, target):
            print(json.dumps(call.model_dump(mode="json"), sort_keys=True))
        return 0
    await decide(
        client,
        target,
        arguments.call_id,
        approve=command == "approve",
        reason_code=getattr(arguments, "reason", None),
    )
    print(f"{'approved' if command == 'approve' else 'denied'} {arguments.call_id}")
    return 0
