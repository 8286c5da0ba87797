"""One renderer of the user turn, for the facade, `preview()` and the worker's prompts.

A turn is the rendered user message (with its deterministic id), the system instructions and
the context sources' texts. The facade stages it under the generation before the workflow
starts; the read activity renders prompts registered on the worker the same way; `preview()`
measures it in memory. One function, so the three cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from vocabulary.errors import ConfigurationError
from vocabulary.ids import user_message_id
from vocabulary.messages import Message
from vocabulary.staging import StagingKind, context_kind


class RenderablePrompt(Protocol):
    """What rendering needs of a prompt (the facade's `Prompt` and registered prompts)."""

    @property
    def id(self) -> str:
        """The prompt's id (named when its input cannot be rendered)."""
        ...

    @property
    def system(self) -> str | None:
        """System instructions, if any."""
        ...

    @property
    def render(self) -> Callable[[Any], str]:
        """Turns the prompt input into the user message text."""
        ...


@dataclass(frozen=True)
class RenderedTurn:
    """The texts of one generation's turn, before anything is stored.

    Attributes:
        user: The user message, carrying its deterministic id.
        system: The system instructions as a message, if any.
        contexts: Context source id to its text as a system message, in declaration order.
    """

    user: Message
    system: Message | None = None
    contexts: Mapping[str, Message] = field(default_factory=dict[str, Message])

    def staged(self) -> list[tuple[str, Message]]:
        """The turn as `(staging kind, message)` rows, in the order they are staged."""
        rows: list[tuple[str, Message]] = [(StagingKind.USER, self.user)]
        if self.system is not None:
            rows.append((StagingKind.SYSTEM, self.system))
        rows.extend((context_kind(source_id), text) for source_id, text in self.contexts.items())
        return rows


def render_turn(
    prompt: RenderablePrompt,
    input: Any,
    generation_id: str,
    *,
    contexts: Mapping[str, str] | None = None,
) -> RenderedTurn:
    """Render `prompt` for `input` as the turn of `generation_id`.

    Args:
        prompt: The prompt.
        input: Its input.
        generation_id: The generation (the user message id derives from it).
        contexts: Context source id to text (the prompt's contributors' sources).

    Raises:
        ConfigurationError: The prompt's renderer looked up an input key or attribute the
            input does not have (the message names the prompt and the key, not the input).
    """
    return RenderedTurn(
        user=Message(
            id=user_message_id(generation_id), role="user", content=rendered(prompt, input)
        ),
        system=Message(role="system", content=prompt.system) if prompt.system else None,
        contexts={
            source_id: Message(role="system", content=text)
            for source_id, text in (contexts or {}).items()
        },
    )


MAX_SHOWN_KEY = 64
"""Longest input key a message names (keys are identifiers, not content)."""


def rendered(prompt: RenderablePrompt, input: Any) -> str:
    """The prompt's text for `input`; a key or attribute the input lacks is named.

    A renderer such as `lambda x: f"Weather in {x['city']}"` raises a bare `KeyError` for an
    input without `city`; the caller gets a `ConfigurationError` that names the prompt and
    the key instead. Other exceptions of the renderer are the caller's own and pass through.

    Raises:
        ConfigurationError: `input_missing`, naming the prompt and the missing key.
    """
    try:
        return prompt.render(input)
    except KeyError as error:
        key = error.args[0] if error.args else None
        raise ConfigurationError(
            f"prompt {_shown(prompt.id)} needs input key {_shown(key)}; pass it in input=",
            code="input_missing",
        ) from error
    except AttributeError as error:
        if input is None or error.obj is not input:
            raise
        raise ConfigurationError(
            f"prompt {_shown(prompt.id)} needs input attribute {_shown(error.name)}; pass an "
            "input that has it",
            code="input_missing",
        ) from error


def _shown(name: object) -> str:
    """A key or id in quotes when it is a short printable name, never arbitrary data."""
    if isinstance(name, str) and len(name) <= MAX_SHOWN_KEY and name.isprintable():
        return f'"{name}"'
    if isinstance(name, int) and not isinstance(name, bool):
        return str(name)
    return "(not shown)"
