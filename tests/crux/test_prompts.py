from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crux.errors import ConfigurationError
from crux.models import HistorySpec
from crux.prompts import DEFAULT_PROMPT_ID, PromptRegistry, history, prompt, render_default


def test_default_rendering_of_strings_and_message_objects() -> None:
    assert render_default("hi") == "hi"
    assert render_default({"message": "hello"}) == "hello"
    assert render_default({"a": 1}) == '{"a":1}'


@pytest.mark.parametrize("value", [None, "", {"message": ""}])
def test_empty_inputs_are_configuration_errors(value: object) -> None:
    with pytest.raises(ConfigurationError):
        render_default(value)


def test_prompt_binds_thread_and_history_from_use() -> None:
    class Handle:
        id = "support:1"

        async def append(self) -> None: ...

    policy = history.recent(messages=12, tokens=8_000)
    defined = prompt(id="p", use=[Handle(), policy], prompt=lambda v: f"[{v}]")
    assert defined.thread_id == "support:1"
    assert defined.history == HistorySpec(kind="recent", messages=12, tokens=8_000)
    assert defined.render("x") == "[x]"


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_recent_rejects_non_positive_bounds(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        history.recent(messages=bad)  # type: ignore[arg-type]


def test_unknown_use_entries_and_ids_are_rejected() -> None:
    with pytest.raises(ConfigurationError):
        prompt(id="p", use=[object()])
    with pytest.raises(ConfigurationError):
        prompt(id=" padded ")


def test_registry_has_the_default_prompt_and_rejects_unknown_ids() -> None:
    registry = PromptRegistry([prompt(id="mine", prompt="fixed")])
    assert registry.get(DEFAULT_PROMPT_ID).render("x") == "x"
    assert registry.get("mine").render(None) == "fixed"
    with pytest.raises(ConfigurationError):
        registry.get("missing")


@given(st.text(min_size=1))
def test_default_rendering_never_loses_text(text: str) -> None:
    assert render_default(text) == text
    assert render_default({"message": text}) == text
