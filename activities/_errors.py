"""Every activity's exceptions leave through here, as the registry's `ApplicationError`s.

The stores and the provider clients raise typed domain errors (driver and transport errors
are classified where they happen: `storage/_failures.py`, `providers/_errors.py`); how each
family crosses Temporal is declared once in `vocabulary.failures`. An error nobody classified
fails at once as `InternalError`, naming only its class: retrying it would repeat a paid
provider call or a tool run for nothing. Nothing here carries content.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from temporalio.exceptions import ApplicationError

from contracts.failures import application_error, internal_error
from vocabulary.errors import CruxError, ProviderError

_P = ParamSpec("_P")
_R = TypeVar("_R")


def maps_errors(method: Callable[_P, Awaitable[_R]]) -> Callable[_P, Awaitable[_R]]:
    """Decorate an activity so every exception leaves through `to_application_error`.

    A provider error is told which model the call was for (the activity input's `model`),
    so its message can name it.
    """

    @functools.wraps(method)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return await method(*args, **kwargs)
        except Exception as error:
            if isinstance(error, ProviderError) and error.model is None:
                error.model = _model_of(args)
            mapped = to_application_error(error)
            if mapped is error:
                raise
            # Never chained: a driver's or handler's message may quote content, and the
            # cause chain is serialised into workflow history and logged.
            raise mapped from None

    return wrapper


def _model_of(args: tuple[object, ...]) -> str | None:
    for arg in args:
        model = getattr(arg, "model", None)
        if isinstance(model, str):
            return model
    return None


def to_application_error(error: BaseException) -> ApplicationError:
    """What Temporal should see of `error` (an `ApplicationError` is passed through)."""
    if isinstance(error, ApplicationError):
        return error
    return application_error(error if isinstance(error, CruxError) else internal_error(error))
