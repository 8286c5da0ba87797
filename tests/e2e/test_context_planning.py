"""Whole-request planning end to end: representation ladders decide what is sent."""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from temporalio.client import Client

import crux
from providers.loopback import LoopbackOpenAIServer, TextReply
from tests.helpers import new_worker, settings_for

POLICY = "Refunds are possible within thirty days of purchase. " * 8
FAQ = "Frequently asked: shipping takes five days; returns use the prepaid label. " * 30
GUIDE = "Full style guide: be warm, concise, cite the policy, avoid jargon, sign off. " * 30
GUIDE_SHORT = "Style: warm, concise, cite policy."


def _support_prompt() -> crux.Prompt:
    return crux.prompt(
        id="support",
        system="You answer support questions.",
        use=[
            crux.context("policy", POLICY, contract=True, priority=10),
            crux.prefer(crux.context("guide", GUIDE), crux.context("guide-short", GUIDE_SHORT)),
            crux.droppable(crux.context("faq", FAQ, placement="message")),
        ],
    )


def _system_text(server: LoopbackOpenAIServer, index: int) -> str:
    body = server.requests[index].body
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")


async def test_contributors_go_in_full_when_they_fit(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    openai_server.enqueue(TextReply(text="ok"))
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            _support_prompt(), input="Can I return this?", model="openai:gpt-4o",
            thread=f"ctx:{uuid.uuid4().hex[:6]}",
        )  # fmt: skip
    sent = _system_text(openai_server, 0)
    assert POLICY.strip() in sent
    assert GUIDE.strip() in sent
    assert FAQ.strip() in sent
    assert result.steps[0].request.adaptations == ()


async def test_pressure_selects_authored_alternatives_and_drops_droppables(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    openai_server.enqueue(TextReply(text="ok"))
    async with new_worker(client, pool, settings) as worker:
        preview = await worker.runtime.preview(
            _support_prompt(), input="Can I return this?", model="openai:gpt-4o",
            input_budget={"max": 260},
        )  # fmt: skip
        result = await worker.runtime.generate(
            _support_prompt(), input="Can I return this?", model="openai:gpt-4o",
            input_budget={"max": 260},
        )  # fmt: skip
    sent = _system_text(openai_server, 0)
    assert POLICY.strip() in sent
    assert GUIDE_SHORT in sent
    assert GUIDE.strip() not in sent
    assert FAQ.strip() not in sent
    receipt = result.steps[0].request
    assert receipt.input_tokens <= 260
    kinds = {a.contributor: a.representation for a in receipt.adaptations}
    assert kinds == {"guide": "authored", "faq": "omitted"}
    assert preview.status == "fits"
    assert {a.contributor for a in preview.adaptations} == {"guide", "faq"}


async def test_required_context_that_cannot_fit_fails_typed_before_dispatch(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(crux.RequestCompositionError) as raised:
            await worker.runtime.generate(
                _support_prompt(), input="hi", model="openai:gpt-4o", input_budget={"max": 60}
            )
    assert raised.value.code == "REQUEST_TOO_LARGE"
    assert "Refunds" not in str(raised.value)
    assert openai_server.requests == []


def test_illegal_nesting_is_rejected_at_definition_time() -> None:
    with pytest.raises(crux.RequestCompositionError) as raised:
        crux.droppable(crux.droppable(crux.context("x", "text")))
    assert raised.value.code == "INVALID_COMPOSITION"
    with pytest.raises(crux.RequestCompositionError):
        crux.summarizable(crux.context("rules", "text", contract=True))
