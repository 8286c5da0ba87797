"""Building read models from rows PostgreSQL already holds validated.

Every message is validated once, on the way in (`_validate.prepare_batch`), and the read
shapes are plain frozen models of stored columns. Re-validating a 1,000-message path on every
read costs more than the query itself, so reads build their models with `trusted`, which
fills the same instance state `model_construct` would, without its per-call Python overhead.
Values that still need parsing (content parts) are validated by their own adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

_M = TypeVar("_M", bound=BaseModel)

# The instance slots BaseModel declares, set through their descriptors: a bound `__set__`
# skips the attribute lookup `object.__setattr__` does on every call.
_SLOTS = vars(BaseModel)
_set_dict = _SLOTS["__dict__"].__set__
_set_fields = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__
_new = object.__new__


def maker(cls: type[_M]) -> Callable[[dict[str, Any]], _M]:
    """A constructor of trusted `cls` instances (see `trusted`), bound once for loops.

    Args:
        cls: A frozen model without validators, private attributes or extra fields.

    Raises:
        TypeError: `cls` is not frozen.
    """
    if not cls.model_config.get("frozen"):
        raise TypeError(f"{cls.__name__} is not frozen")
    # Every instance holds every field, so they share one fields-set. Pydantic adds to an
    # instance's set only on assignment, which a frozen model refuses first, and in
    # `model_copy(update=...)`, which works on a copy of the set.
    fields = set(cls.model_fields)

    def make(values: dict[str, Any]) -> _M:
        instance = _new(cls)
        _set_dict(instance, values)
        _set_fields(instance, fields)
        _set_extra(instance, None)
        _set_private(instance, None)
        return instance

    return make


_MAKERS: dict[type[BaseModel], Callable[[dict[str, Any]], Any]] = {}


def trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """An instance of `cls` holding `values` as is, without validation.

    Args:
        cls: A frozen model without validators, private attributes or extra fields.
        values: A value for every field of `cls`, already of the field's type.
    """
    make = _MAKERS.get(cls)
    if make is None:
        make = _MAKERS[cls] = maker(cls)
    instance: _M = make(values)
    return instance
