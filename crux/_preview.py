"""The read side of `Runtime.preview`: the request skeleton, computed without writing."""

from __future__ import annotations

from typing import Any

from activities.skeleton import caller_skeleton, content_tokens, thread_skeleton
from contracts.activities import ReadRequestResult
from contracts.generation import GenerationInput
from crux.prompts import Prompt
from planner import HistorySummary
from providers import TokenCounter
from storage import SummaryStore, ThreadStore
from vocabulary.messages import Message


async def preview_skeleton(
    prompt: Prompt,
    input: Any,
    request: GenerationInput,
    counter: TokenCounter,
    *,
    messages: list[Message] | None,
    ceiling: int,
    threads: ThreadStore,
    summaries: SummaryStore,
) -> ReadRequestResult:
    """What the read activity would return, built in memory (no staging, no stored counts).

    Args:
        prompt: The prompt, rendered here.
        input: Its input.
        request: The generation input the preview stands for.
        counter: The model's counter.
        messages: Call-site or prompt-level messages, when they shadow the Thread.
        ceiling: The strict input maximum bounding the skeleton.
        threads: The Thread store (read only).
        summaries: Summary artifacts (read only).
    """
    user = Message(role="user", content=prompt.render(input))
    system = Message(role="system", content=prompt.system) if prompt.system else None
    [turn_tokens, *rest] = content_tokens(counter, [user, *([system] if system else [])])
    sources = [
        (source_id, Message(role="system", content=text))
        for contributor in prompt.contexts
        for source_id, text in contributor.texts.items()
    ]
    context_counts = content_tokens(counter, [message for _, message in sources])
    # Tool schemas are measured exactly as the read activity measures them.
    tool_schema_tokens = sum(
        counter.count_definition(entry.spec.model_dump_json()) for entry in prompt.tools
    )
    read = ReadRequestResult(
        history_source="none",
        context_tokens={
            source_id: n for (source_id, _), n in zip(sources, context_counts, strict=True)
        },
        system_tokens=rest[0] if rest else 0,
        current_turn_tokens=turn_tokens,
        counting_confidence=counter.confidence,
        encoding=counter.encoding_name,
        tool_schema_tokens=tool_schema_tokens,
    )
    if messages is not None:
        columns, older = caller_skeleton(counter, messages, ceiling)
        read = read.model_copy(
            update={
                "history_source": "caller-messages",
                "history": columns,
                "older_history": older,
            }
        )
    elif request.thread_id is not None:
        thread_id = request.thread_id
        skeleton = await thread_skeleton(
            threads,
            counter,
            thread_id,
            owner=request.owner,
            ceiling=ceiling,
            store_counts=False,
        )
        summary = None
        if request.history.kind == "managed":
            found = await summaries.best(
                thread_id,
                [entry.id for entry in skeleton.view.messages],
                strategy=request.history.strategy,
                model=request.history.summary_model or request.model,
            )
            if found is not None:
                summary = HistorySummary(
                    artifact_id=found.artifact_id, tokens=found.tokens, covers=found.covers
                )
        read = read.model_copy(
            update={
                "summary": summary,
                "history_source": "thread",
                "revision": skeleton.view.revision,
                "head": skeleton.view.head,
                "history": skeleton.history,
                "older_history": skeleton.older,
            }
        )
    return read
