"""`crux generation show|retry|abandon`: operator control of one generation run.

Exit codes: 0 done, 2 usage, 3 no such run, 4 the run is not in a stage the command
applies to (not waiting for storage or for its commit), 1 anything else. Output is
content-free: stage, ids, counts and error type names.
"""

from __future__ import annotations

import json
import sys

from crux._checks import connect_temporal
from crux._operator import RunOperator
from vocabulary.errors import OperatorError
from vocabulary.settings import Settings

EXIT_NOT_FOUND = 3
EXIT_WRONG_STAGE = 4


async def generation_command(
    settings: Settings, action: str, run: str, *, thread: str | None, as_json: bool
) -> int:
    """Run `crux generation <action>` against `TEMPORAL_ADDRESS`; returns the exit code."""
    operator = RunOperator(await connect_temporal(settings))
    try:
        if action == "show":
            status = await operator.generation_status(run, thread=thread)
            if as_json:
                print(status.model_dump_json())
            else:
                for key, value in status.model_dump(mode="json").items():
                    print(f"{key}: {value if value is not None else '-'}")
            return 0
        if action == "retry":
            stage = await operator.retry_generation(run, thread=thread)
            print(
                json.dumps({"retried": True, "stage": stage}) if as_json else f"retried ({stage})"
            )
            return 0
        stage = await operator.abandon_generation(run, thread=thread)
        print(
            json.dumps({"abandoned": True, "stage": stage}) if as_json else f"abandoned ({stage})"
        )
        return 0
    except OperatorError as error:
        print(f"crux: OperatorError: {error}", flush=True, file=sys.stderr)
        return EXIT_NOT_FOUND if error.code == "not_found" else EXIT_WRONG_STAGE
