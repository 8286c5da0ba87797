"""`--app module:attribute`: the worker a user's module defines (the uvicorn convention).

The attribute is a `crux.Worker`, a `crux.Registrations`, or a function taking no arguments
that returns either. The module is imported with the current directory first on
`sys.path`, as `python -m` and uvicorn do, so `crux dev --app myapp:worker` finds
`./myapp.py` (or the package `./myapp/`).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any

from crux.registrations import Registrations
from crux.workers import Worker
from vocabulary.errors import ConfigurationError

__all__ = ["load_app"]

_FORM = "module:attribute (e.g. myapp.worker:worker)"


def load_app(spec: str) -> Worker:
    """Import the worker `spec` names.

    Raises:
        ConfigurationError: The spec is malformed, the module cannot be imported (the line
            names the cause and where it was raised), the attribute is missing, or it is not
            a worker, registrations or a function returning one.
    """
    module_name, separator, attribute = spec.partition(":")
    if not separator or not module_name or not attribute:
        raise ConfigurationError(f"--app takes {_FORM}, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = _import(module_name)
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigurationError(
                f"--app {spec}: module {module_name} has no attribute {attribute}"
            ) from None
    return _as_worker(value, spec)


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing == module_name or module_name.startswith(missing + "."):
            raise ConfigurationError(
                f"--app: no module {module_name} in {os.getcwd()} or on the Python path; "
                "run crux from the directory that holds it, or install it"
            ) from None
        raise ConfigurationError(
            f"--app: importing {module_name} failed: it imports {missing}, which is not installed"
        ) from None
    except Exception as error:  # the user's module raised while importing
        raise ConfigurationError(
            f"--app: importing {module_name} raised {type(error).__name__}{_where(error)}"
        ) from None


def _where(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" at {last.filename}:{last.lineno}"


def _as_worker(value: Any, spec: str) -> Worker:
    if isinstance(value, Worker):
        return value
    if isinstance(value, Registrations):
        return Worker(registrations=value)
    if callable(value) and not isinstance(value, type):
        try:
            made = value()
        except Exception as error:  # the user's factory raised
            raise ConfigurationError(
                f"--app {spec}: calling it raised {type(error).__name__}{_where(error)}"
            ) from None
        if isinstance(made, Worker):
            return made
        if isinstance(made, Registrations):
            return Worker(registrations=made)
        value = made
    raise ConfigurationError(
        f"--app {spec} is a {type(value).__name__}; it must be a crux.Worker, a "
        "crux.Registrations, or a function taking no arguments that returns one"
    )
