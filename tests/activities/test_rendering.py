"""A prompt input missing what its renderer looks up is named, not a bare KeyError."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

import crux
from activities.rendering import rendered
from vocabulary.errors import ConfigurationError


@dataclass
class Town:
    name: str


def test_a_missing_key_names_the_prompt_and_the_key_not_the_input() -> None:
    weather = crux.prompt(id="weather", prompt=lambda x: f"Weather in {x['city']}?")
    with pytest.raises(ConfigurationError) as raised:
        rendered(weather, {"town": "secret-town"})
    assert raised.value.code == "input_missing"
    assert str(raised.value) == 'prompt "weather" needs input key "city"; pass it in input='
    assert "secret-town" not in str(raised.value)


def test_a_missing_attribute_of_the_input_is_named() -> None:
    weather = crux.prompt(id="weather", prompt=lambda x: f"Weather in {x.city}?")
    with pytest.raises(ConfigurationError, match='input attribute "city"'):
        rendered(weather, Town(name="Oslo"))


def test_a_key_that_is_content_is_not_repeated() -> None:
    weather = crux.prompt(
        id="weather", prompt=lambda x: f"{x['a long sentence of user text!' * 5]}"
    )
    with pytest.raises(ConfigurationError) as raised:
        rendered(weather, {})
    assert "(not shown)" in str(raised.value) and "sentence" not in str(raised.value)


def test_the_renderers_own_errors_pass_through() -> None:
    def broken(_: Any) -> str:
        raise ZeroDivisionError

    def inner_attribute(_: Any) -> str:
        return str(object().missing)  # type: ignore[attr-defined]

    with pytest.raises(ZeroDivisionError):
        rendered(crux.prompt(id="p", prompt=broken), {})
    with pytest.raises(AttributeError):
        rendered(crux.prompt(id="p", prompt=inner_attribute), Town(name="x"))
