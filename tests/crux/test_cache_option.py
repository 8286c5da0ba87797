"""`cache=` on a prompt, an agent and a call: the most specific wins whole."""

from __future__ import annotations

import pytest

import crux
from contracts.cache_keys import CacheKeyParts, cache_keys, semantic_text
from crux._request import CallBuilder
from vocabulary.messages import ImagePart, Message, TextPart


def _cache(target: crux.Prompt | crux.Agent, **options: object) -> crux.CacheSpec | None:
    built = CallBuilder("offline:echo").build(target, {"input": "x", **options})  # type: ignore[arg-type]
    return built.request.cache


def test_the_most_specific_cache_wins_and_false_switches_it_off() -> None:
    prompt = crux.prompt(id="p", cache=crux.cache(namespace="faq"))
    assert _cache(prompt) == crux.cache(namespace="faq")
    assert _cache(prompt, cache=False) is None
    assert _cache(prompt, cache={"semantic": True}) == crux.cache(semantic=True)
    agent = crux.agent(id="a", prompt=prompt, cache=crux.cache(ttl_seconds=60))
    assert _cache(agent) == crux.cache(ttl_seconds=60)
    assert _cache(crux.agent(id="b", prompt=prompt, cache=False)) is None
    assert _cache(crux.prompt(id="q")) is None
    assert _cache(crux.prompt(id="q"), cache=True) == crux.cache()


@pytest.mark.parametrize(
    "value",
    [
        {"similarity_threshold": 0},
        {"similarity_threshold": 1.5},
        {"embedding_model": "no-colon"},
        {"ttl_seconds": 0},
        {"namespace": ""},
        {"unknown": 1},
    ],
)
def test_an_invalid_cache_is_a_configuration_error_naming_the_field(
    value: dict[str, object],
) -> None:
    with pytest.raises(crux.ConfigurationError) as raised:
        crux.prompt(id="p", cache=value)
    assert next(iter(value)) in str(raised.value)


def _keys(**changes: object) -> tuple[str, str, str]:
    parts = {
        "model": "openai:gpt-4o-mini",
        "settings": None,
        "max_output_tokens": None,
        "leading": [Message(id="s", role="system", content="Be brief.")],
        "history": [Message(id="h1", role="user", content="Earlier.")],
        "turn": Message(id="u1", role="user", content="Now?"),
    }
    keys = cache_keys(CacheKeyParts(**{**parts, **changes}))
    return keys.exact, keys.context, keys.turn


def test_every_part_of_the_request_is_in_the_key_but_the_user_turn_id() -> None:
    exact, context, turn = _keys()
    assert _keys(turn=Message(id="u2", role="user", content="Now?")) == (exact, context, turn)
    changed = [
        _keys(model="openai:gpt-4o"),
        _keys(settings={"temperature": 0.5}),
        _keys(max_output_tokens=10),
        _keys(leading=[Message(id="s", role="system", content="Be long.")]),
        _keys(history=[Message(id="h2", role="user", content="Earlier.")]),
        _keys(history=[Message(id="h1", role="user", content="Later.")]),
        _keys(tools=[{"name": "t"}]),
        _keys(output_schema={"type": "object"}),
    ]
    for other_exact, other_context, other_turn in changed:
        assert other_exact != exact and other_context != context and other_turn == turn
    reworded = _keys(turn=Message(id="u1", role="user", content="Now!"))
    assert reworded[1] == context and reworded[0] != exact


def test_only_plain_text_turns_are_matched_semantically() -> None:
    assert semantic_text(Message(id="u", role="user", content="hi")) == "hi"
    parts = [TextPart(text="a caption"), ImagePart(url="https://example.test/x.png")]
    assert semantic_text(Message(id="u", role="user", content=parts)) is None
