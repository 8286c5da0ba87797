"""What a worker serves beyond Crux's own workflows: your prompts, tools, hooks, policies, models.

Code cannot cross Temporal: a generation names a tool, a prompt or a step hook, and the worker
that runs the activity calls what is registered under that name. `Registrations` is that set,
one object per worker, so it can be compared between workers: two workers on one task queue
with different registrations would fail runs at random (each run lands on either), so a
starting `crux.Worker` publishes the registrations' fingerprint and refuses to join a task
queue served with different ones (see `crux.Worker`).

A new kind of registration is a new field here; every part of the worker that needs it reads
it from this one object.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from crux.hooks import StepHook, SuccessHook
from crux.prompts import Prompt
from crux.safety import SafetyPolicy
from crux.tools import Tool
from planner import ModelProfile
from providers import ChatProvider
from vocabulary.errors import ConfigurationError

__all__ = ["KINDS", "Registrations", "ServedModel"]

KINDS = ("prompts", "tools", "hooks", "policies", "success_hooks", "models")
"""The kinds of registration, in the order messages list them."""

_DIGEST_CHARS = 16


@runtime_checkable
class ServedModel(Protocol):
    """A model the worker answers itself, addressed by its id (`crux.testing` ships them).

    A served model needs no network: the worker's provider registry routes its id to it.
    """

    @property
    def id(self) -> str:
        """The model id generations name (`test:<name>`)."""
        ...

    @property
    def profile(self) -> ModelProfile:
        """Its capacity profile (window, output reserve, counting), added to the catalog."""
        ...

    def provider(self) -> ChatProvider:
        """The provider that answers its calls on the worker."""
        ...


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]


def _tool_digest(tool: Tool) -> str:
    # What the model and the workflow see of a tool: its schema and its call policy. The
    # handler is code: two workers running different code under one schema are not told apart.
    return _digest(
        {
            "description": tool.description,
            "parameters": dict(tool.parameters),
            "policy": tool.policy.model_dump(mode="json") if tool.policy else None,
            "requires_approval": tool.requires_approval,
        }
    )


def _prompt_digest(prompt: Prompt) -> str:
    # The declarative parts a worker renders for plain Temporal clients; `render` is code.
    return _digest(
        {
            "system": prompt.system,
            "messages": [m.model_dump(mode="json") for m in prompt.messages or ()],
            "output": prompt.output.spec.model_dump(mode="json") if prompt.output else None,
            "tools": sorted(tool.name for tool in prompt.tools),
        }
    )


def _model_digest(model: ServedModel) -> str:
    return _digest({"kind": type(model).__name__, "profile": model.profile.model_dump()})


class Registrations:
    """The prompts, tools, step hooks, safety policies, success hooks and served models of a worker.

    Tools named by a registered prompt are registered with it. Names are unique per kind.

    Args:
        prompts: Prompts plain Temporal clients may name by id (the facade renders its
            prompts itself and needs none registered).
        tools: Tools the model may call; their handlers run on the worker.
        hooks: `crux.step_hook(...)` definitions generations name as `prepare_step` or
            `prepare_invocation`.
        models: Models the worker answers itself, such as `crux.testing.ScriptedModel`.
        policies: `crux.safety.policy(...)` definitions generations name in `safety=`.
        success_hooks: `crux.success_hook(...)` definitions generations name in
            `on_success=`.

    Raises:
        ConfigurationError: An entry has the wrong type, or two entries of a kind share a
            name (the message names it).
    """

    __slots__ = ("_hooks", "_models", "_policies", "_prompts", "_success_hooks", "_tools")

    def __init__(
        self,
        *,
        prompts: Iterable[Prompt] = (),
        tools: Iterable[Tool] = (),
        hooks: Iterable[StepHook] = (),
        models: Iterable[ServedModel] = (),
        policies: Iterable[SafetyPolicy] = (),
        success_hooks: Iterable[SuccessHook] = (),
    ) -> None:
        self._prompts = _unique("prompts", _typed(prompts, Prompt, "crux.prompt(...)"), _prompt_id)
        own_tools = _typed(tools, Tool, "crux.tool(...)")
        from_prompts = [tool for prompt in self._prompts for tool in prompt.tools]
        self._tools = _unique("tools", _merge_tools(own_tools, from_prompts), _tool_name)
        self._hooks = _unique("hooks", _typed(hooks, StepHook, "crux.step_hook(...)"), _hook_name)
        self._policies = _unique(
            "policies", _typed(policies, SafetyPolicy, "crux.safety.policy(...)"), _hook_name
        )
        self._success_hooks = _unique(
            "success hooks",
            _typed(success_hooks, SuccessHook, "crux.success_hook(...)"),
            _hook_name,
        )
        served = list(models)
        for model in served:
            if not isinstance(model, ServedModel):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ConfigurationError(
                    f"models takes served models such as crux.testing.ScriptedModel, "
                    f"not {type(model).__name__}"
                )
        self._models = _unique("models", tuple(served), _model_id)

    @property
    def prompts(self) -> tuple[Prompt, ...]:
        """The registered prompts."""
        return self._prompts

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The registered tools (those of the registered prompts included)."""
        return self._tools

    @property
    def hooks(self) -> tuple[StepHook, ...]:
        """The registered step hooks."""
        return self._hooks

    @property
    def policies(self) -> tuple[SafetyPolicy, ...]:
        """The registered custom safety policies."""
        return self._policies

    @property
    def success_hooks(self) -> tuple[SuccessHook, ...]:
        """The registered success hooks."""
        return self._success_hooks

    @property
    def models(self) -> tuple[ServedModel, ...]:
        """The models the worker answers itself."""
        return self._models

    def merged(self, other: Registrations) -> Registrations:
        """These registrations and `other`'s together.

        Raises:
            ConfigurationError: Both register different entries under one name.
        """
        return Registrations(
            prompts=(*self._prompts, *other.prompts),
            tools=(*self._tools, *other.tools),
            hooks=(*self._hooks, *other.hooks),
            models=(*self._models, *other.models),
            policies=(*self._policies, *other.policies),
            success_hooks=(*self._success_hooks, *other.success_hooks),
        )

    def names(self) -> dict[str, tuple[str, ...]]:
        """The registered names per kind (see `KINDS`), sorted."""
        return {kind: tuple(sorted(digests)) for kind, digests in self.digests().items()}

    def digests(self) -> dict[str, dict[str, str]]:
        """Per kind, each name with a short digest of what a worker does with it.

        Tools are compared by schema and policy, prompts by their declarative parts, hooks,
        policies and success hooks by name (code is not compared), models by kind and
        profile. The digests are content-free: hashes, never the text they cover.
        """
        return {
            "prompts": {p.id: _prompt_digest(p) for p in self._prompts},
            "tools": {t.name: _tool_digest(t) for t in self._tools},
            "hooks": {h.name: "" for h in self._hooks},
            "policies": {p.name: "" for p in self._policies},
            "success_hooks": {h.name: "" for h in self._success_hooks},
            "models": {m.id: _model_digest(m) for m in self._models},
        }

    @property
    def fingerprint(self) -> str:
        """One digest of `digests()`: equal for workers that register the same things."""
        return _digest(self.digests())

    def __eq__(self, other: object) -> bool:
        """Registrations are equal when their fingerprints are."""
        if not isinstance(other, Registrations):
            return NotImplemented
        return self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        """Hash of the fingerprint."""
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        """The names per kind (never any text)."""
        parts = [f"{kind}={list(names)}" for kind, names in self.names().items() if names]
        return f"Registrations({', '.join(parts)})"


def describe_difference(
    ours: Mapping[str, Mapping[str, str]], theirs: Mapping[str, Mapping[str, str]]
) -> str:
    """What differs between two `Registrations.digests()`, per kind, by name.

    Returns:
        `tools get_weather (only here), lookup (differs); hooks review (only there)`,
        or an empty string when nothing differs.
    """
    parts: list[str] = []
    for kind in KINDS:
        here, there = ours.get(kind, {}), theirs.get(kind, {})
        notes: list[str] = []
        for name in sorted(set(here) | set(there)):
            if name not in there:
                notes.append(f"{name} (only here)")
            elif name not in here:
                notes.append(f"{name} (only there)")
            elif here[name] != there[name]:
                notes.append(f"{name} (differs)")
        if notes:
            shown = notes[:5] + ([f"{len(notes) - 5} more"] if len(notes) > 5 else [])
            parts.append(f"{kind} {', '.join(shown)}")
    return "; ".join(parts)


def _typed(entries: Iterable[Any], kind: type, builder: str) -> tuple[Any, ...]:
    if isinstance(entries, (str, bytes)) or not hasattr(entries, "__iter__"):
        raise ConfigurationError(f"pass a list of {builder} definitions")
    found = tuple(entries)
    for entry in found:
        if not isinstance(entry, kind):
            raise ConfigurationError(
                f"expected {builder} definitions, got a {type(entry).__name__}"
            )
    return found


def _merge_tools(own: Iterable[Tool], from_prompts: Iterable[Tool]) -> tuple[Tool, ...]:
    merged = list(own)
    for tool in from_prompts:
        if not any(tool is existing or tool == existing for existing in merged):
            merged.append(tool)
    return tuple(merged)


def _unique(kind: str, entries: tuple[Any, ...], name: Any) -> tuple[Any, ...]:
    seen: dict[str, Any] = {}
    for entry in entries:
        key = name(entry)
        previous = seen.get(key)
        if previous is not None and previous is not entry and previous != entry:
            raise ConfigurationError(f"two {kind} are registered as {key!r}; rename one")
        seen.setdefault(key, entry)
    return tuple(seen.values())


def _prompt_id(prompt: Prompt) -> str:
    return prompt.id


def _tool_name(tool: Tool) -> str:
    return tool.name


def _hook_name(hook: StepHook | SafetyPolicy | SuccessHook) -> str:
    return hook.name


def _model_id(model: ServedModel) -> str:
    return model.id
