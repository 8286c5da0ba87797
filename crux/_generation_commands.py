"""`crux generation show|retry|abandon|pending|approve|deny RUN`: operate one generation run.

`RUN` is a workflow id (`crux/gen/...`) or a generation id (with `--thread THREAD` for a
Thread's generation). Every command answers within its time budget: connecting to Temporal
(at most 15 s), then `QUERY_TIMEOUT` for what only a worker can answer (`show` then falls
back to what Temporal keeps without a worker; the others exit with code 5) or
`UPDATE_TIMEOUT` for a decision. Output is content-free: stages, ids, counts, tool names.
"""

from __future__ import annotations

import json
from datetime import timedelta

from temporalio.client import Client, RPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from crux._approvals import decide, pending_approvals
from crux._checks import connect_temporal
from crux._exit import CommandError, ExitCode
from crux._operator import NoWorkerError, RunOperator, resolve_workflow_id
from vocabulary.errors import ConfigurationError, OperatorError
from vocabulary.settings import Settings

QUERY_TIMEOUT = timedelta(seconds=3)
"""How long a command waits for a worker to answer a query."""

UPDATE_TIMEOUT = timedelta(seconds=10)
"""How long a command waits for a worker to accept a decision (retry, abandon, approve)."""

ACTIONS = ("show", "retry", "abandon", "pending", "approve", "deny")
"""The `crux generation` subcommands."""


async def generation_command(
    settings: Settings,
    action: str,
    run: str,
    *,
    thread: str | None,
    as_json: bool,
    call_id: str | None = None,
    reason: str | None = None,
) -> int:
    """Run `crux generation <action>` against `TEMPORAL_ADDRESS`; returns the exit code.

    Raises:
        CommandError: No worker answered in time (exit code 5).
        OperatorError: No such run (3) or the run is not in a stage the action applies to (4).
    """
    client = await connect_temporal(settings)
    operator = RunOperator(client, query_timeout=QUERY_TIMEOUT, update_timeout=UPDATE_TIMEOUT)
    try:
        if action == "show":
            view = await operator.inspect(run, thread=thread)
            document = view.document()
            if as_json:
                print(json.dumps(document))
            else:
                for key, value in document.items():
                    if key != "note" or value is not None:
                        print(f"{key}: {value if value is not None else '-'}")
            return 0
        if action in ("retry", "abandon"):
            if action == "retry":
                stage = await operator.retry_generation(run, thread=thread)
            else:
                stage = await operator.abandon_generation(run, thread=thread)
            done = "retried" if action == "retry" else "abandoned"
            print(json.dumps({done: True, "stage": stage}) if as_json else f"{done} ({stage})")
            return 0
        return await _approval(client, action, run, thread, call_id, reason, as_json=as_json)
    except NoWorkerError as error:
        raise CommandError(str(error), ExitCode.NO_WORKER) from None


async def _approval(
    client: Client,
    action: str,
    run: str,
    thread: str | None,
    call_id: str | None,
    reason: str | None,
    *,
    as_json: bool,
) -> int:
    workflow_id = resolve_workflow_id(run, thread)
    try:
        if action == "pending":
            calls = await pending_approvals(client, workflow_id, rpc_timeout=QUERY_TIMEOUT)
            documents = [call.model_dump(mode="json") for call in calls]
            if as_json:
                print(json.dumps(documents, sort_keys=True))
            else:
                for document in documents:
                    print(json.dumps(document, sort_keys=True))
            return 0
        assert call_id is not None
        await decide(
            client,
            workflow_id,
            call_id,
            approve=action == "approve",
            reason_code=reason,
            rpc_timeout=UPDATE_TIMEOUT,
        )
    except ConfigurationError as error:
        if "no running generation" in str(error):
            raise OperatorError(
                "not_found",
                f"no running generation run {workflow_id} (the arguments are RUN CALL_ID: "
                "the run first, then the call id)"
                if action in ("approve", "deny")
                else f"no running generation run {workflow_id}",
            ) from None
        raise
    except RPCTimeoutOrCancelledError:
        raise _no_worker(action) from None
    except RPCError as error:
        if error.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise _no_worker(action) from None
        raise
    done = "approved" if action == "approve" else "denied"
    print(json.dumps({done: call_id}) if as_json else f"{done} {call_id}")
    return 0


def _no_worker(action: str) -> CommandError:
    waited = QUERY_TIMEOUT if action == "pending" else UPDATE_TIMEOUT
    return CommandError(
        f"no worker answered within {waited.total_seconds():g} s; start one with crux worker, "
        "or crux dev",
        ExitCode.NO_WORKER,
    )
