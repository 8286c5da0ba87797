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

_FIELDS: dict[type[BaseModel], set[str]] = {}
_new = object.__new__
_set = object.__setattr__


def trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """An instance of `cls` holding `values` as is, without validation.

    Args:
        cls: A model without validators, private attributes or extra fields.
        values: A value for every field of `cls`, already of the field's type.
    """
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = set(cls.model_fields)
    instance = _new(cls)
    _set(instance, "__dict__", values)
    # A set of its own: `model_copy(update=...)` adds to it.
    _set(instance, "__pydantic_fields_set__", fields.copy())
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


def maker(cls: type[_M]) -> Callable[[dict[str, Any]], _M]:
    """`trusted` for one class, bound once: for loops that build many instances."""
    fields = frozenset(cls.model_fields)
    new = _new
    put = _set

    def make(values: dict[str, Any]) -> _M:
        instance = new(cls)
        put(instance, "__dict__", values)
        put(instance, "__pydantic_fields_set__", set(fields))
        put(instance, "__pydantic_extra__", None)
        put(instance, "__pydantic_private__", None)
        return instance

    return make
