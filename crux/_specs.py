"""Building a wire spec from a builder's arguments, with content-free errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError

from contracts.decoding import describe_invalid
from vocabulary.errors import ConfigurationError

_S = TypeVar("_S")


def built_spec(what: str, build: Callable[[], _S]) -> _S:
    """`build()`, its validation failure turned into a content-free `ConfigurationError`.

    A spec's own validators raise `ConfigurationError` with a message that names the rule
    (never a value); that message is kept. Other defects name the invalid fields.
    """
    try:
        return build()
    except ValidationError as error:
        for item in error.errors(include_url=False, include_input=False):
            cause = item.get("ctx", {}).get("error")
            if isinstance(cause, ConfigurationError):
                raise ConfigurationError(f"invalid {what}: {cause}") from None
        raise ConfigurationError(f"invalid {what}: {describe_invalid(error)}") from None
