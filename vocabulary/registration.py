"""The error a worker raises for a name it has nothing registered under.

A generation names its tools, prompt and hooks; the worker that runs the activity looks them
up in its registrations. A missing one fails the generation typed, naming the name (names are
identifiers the application declares, not content) and the remedy.
"""

from __future__ import annotations

import re
from typing import Literal

from vocabulary.errors import ConfigurationError

RegistrationKind = Literal["tool", "prompt", "hook", "model"]

NOT_REGISTERED = "not_registered"
"""The `ConfigurationError.code` (and `PreparationError.code` for hooks: `hook_not_registered`)."""

_SHOWN = re.compile(r"[A-Za-z0-9_.:/@+=-]{1,64}")


def shown_name(name: object) -> str:
    """`name` quoted when it is a plain identifier, else a placeholder (never odd text)."""
    if isinstance(name, str) and _SHOWN.fullmatch(name):
        return repr(name)
    return "with an invalid name"


def not_registered_message(kind: RegistrationKind, name: object) -> str:
    """`tool 'get_weather' is not registered on this worker: pass it to crux.Worker(...)`."""
    return (
        f"{kind} {shown_name(name)} is not registered on this worker: pass it to "
        f"crux.Worker({kind}s=[...]) where the worker is built (on the dev stack: "
        "crux dev --app module:attribute serves your worker)"
    )


def not_registered(kind: RegistrationKind, name: object) -> ConfigurationError:
    """The typed error for a name the worker has nothing registered under."""
    return ConfigurationError(not_registered_message(kind, name), code=NOT_REGISTERED)
