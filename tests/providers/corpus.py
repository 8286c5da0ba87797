"""A deterministic corpus of chat requests (tools, tool rounds, images, many scripts) used by
the estimate test and the token benchmark."""

from __future__ import annotations

import json
import random

from crux.messages import ImagePart, Message, Part, TextPart, ToolCallPart
from providers import ChatRequest, ToolSpec

SNIPPETS = [
    "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly plan.",
    "def merge(a: list[int], b: list[int]) -> list[int]:\n    return sorted(a + b)\n",
    '{"order_id": 98123, "items": [{"sku": "A-17", "qty": 2}], "status": "shipped"}',
    "Der Vertrag verlängert sich automatisch um zwölf Monate, sofern er nicht gekündigt wird.",
    "東京の天気は明日晴れる予報です。気温は二十度前後になるでしょう。",
    "Le musée ouvre à 9 h 30 ; l'entrée est gratuite le premier dimanche du mois.",
    "Invoice #4471 — total due: $12,940.55 (net 30). Contact billing@example.test.",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days' ORDER BY id;",
    "Emoji check: 🚀✨ done — résumé naïve façade coöperate.",
    "    indented line\n\n\ttabbed line\r\nwindows line ending and trailing spaces   ",
]

TOOLS = [
    ToolSpec(
        name="search_orders",
        description="Find orders by customer and status.",
        parameters={
            "type": "object",
            "properties": {
                "customer_id": {"type": "string", "description": "Customer id"},
                "status": {"type": "string", "enum": ["open", "shipped", "cancelled"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            },
            "required": ["customer_id"],
        },
    ),
    ToolSpec(
        name="get_weather",
        description="Current weather for a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    ),
]


def _text(rng: random.Random, paragraphs: int) -> str:
    return "\n\n".join(rng.choice(SNIPPETS) for _ in range(paragraphs))


def build_corpus(size: int = 40, seed: int = 7) -> list[ChatRequest]:
    """`size` requests mixing plain turns, tool rounds, parallel calls and images."""
    rng = random.Random(seed)
    corpus: list[ChatRequest] = []
    for index in range(size):
        messages = [Message(id=f"r{index}-sys", role="system", content=_text(rng, 2))]
        for turn in range(rng.randint(1, 6)):
            prefix = f"r{index}-t{turn}"
            content: str | list[Part] = _text(rng, rng.randint(1, 8))
            if rng.random() < 0.3:
                content = [
                    TextPart(text=_text(rng, 1)),
                    ImagePart(url="https://example.test/a.png", detail="low"),
                    ImagePart(url="https://example.test/b.png", width=1024, height=768),
                ]
            messages.append(Message(id=f"{prefix}-u", role="user", content=content))
            if rng.random() < 0.5:
                calls = [
                    ToolCallPart(
                        tool_call_id=f"{prefix}-c{k}",
                        tool_name="search_orders",
                        input={"customer_id": f"cus_{rng.randint(1, 9999)}", "status": "open"},
                    )
                    for k in range(rng.randint(1, 3))
                ]
                messages.append(
                    Message(
                        id=f"{prefix}-a",
                        role="assistant",
                        content=[TextPart(text="Let me look that up."), *calls],
                    )
                )
                for call in calls:
                    result = {"orders": [json.loads(SNIPPETS[2])] * rng.randint(1, 4)}
                    messages.append(
                        Message(
                            id=f"{call.tool_call_id}-r",
                            role="tool",
                            tool_call_id=call.tool_call_id,
                            tool_name=call.tool_name,
                            content=json.dumps(result),
                        )
                    )
            messages.append(
                Message(id=f"{prefix}-f", role="assistant", content=_text(rng, rng.randint(1, 4)))
            )
        tools = TOOLS if rng.random() < 0.6 else []
        corpus.append(ChatRequest(model="gpt-4o", messages=messages, tools=tools))
    return corpus
