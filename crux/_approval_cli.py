"""`crux generation pending|approve|deny`: decide the tool calls a run waits on.

A run is named by its generation id (with `--thread` for a Thread's generation) or by
`--workflow-id`. Output is ids and tool names only.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from vocabulary.settings import Settings

APPROVAL_COMMANDS = ("pending", "approve", "deny")
"""The `crux generation` subcommands defined here."""


def add_approval_commands(
    generation_commands: Any,
    add: Callable[[str, str], argparse.ArgumentParser] | None = None,
) -> None:
    """Add `pending`, `approve` and `deny` to the `crux generation` subparsers.

    Args:
        generation_commands: The subparsers of `crux generation`.
        add: Builds a subcommand from its name and help text (adds the shared epilog);
            plain `add_parser` when omitted.
    """

    def build(name: str, text: str) -> argparse.ArgumentParser:
        if add is not None:
            return add(name, text)
        parser: argparse.ArgumentParser = generation_commands.add_parser(name, help=text)
        return parser

    pending = build("pending", "list the tool calls a run waits on (tool name and call id)")
    _run_arguments(pending)
    approve = build("approve", "let a pending tool call run")
    approve.add_argument("call_id", help="the call id `crux generation pending` printed")
    _run_arguments(approve)
    deny = build("deny", "deny a pending tool call; the model sees the reason code")
    deny.add_argument("call_id", help="the call id `crux generation pending` printed")
    _run_arguments(deny)
    deny.add_argument("--reason", default=None, help="short reason code (default: denied)")


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("generation_id", nargs="?", default=None, help="the run's generation id")
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
