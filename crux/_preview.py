"""`Runtime.preview`: the first plan of a call, computed with the read activity's function.

The call is built and rendered as `generate` builds it, sized by `activities.reading.
read_skeleton` (the read stage's own function, storing nothing) and planned by the planner's
pure `preview`, so what it answers is what the run's first plan would be.
"""

from __future__ import annotations

import uuid

from activities.reading import ReadSources, read_skeleton
from contracts.activities import ReadRequestResult
from contracts.planning import build_plan_request, max_input_tokens
from crux._staging import BuiltCall
from planner import ModelCatalog, ModelProfile, Preview
from planner import preview as plan_preview
from providers import TokenCounter
from storage import SummaryStore, ThreadStore


async def preview_read(
    call: BuiltCall, profile: ModelProfile, *, threads: ThreadStore, summaries: SummaryStore
) -> ReadRequestResult:
    """The read stage's skeleton of `call`, computed in memory (nothing is written).

    Args:
        call: The built call.
        profile: The model's profile.
        threads: The Thread store (read only).
        summaries: Summary artifacts (read only).
    """
    request = call.request
    read = await read_skeleton(
        ReadSources(
            user=call.turn.user,
            system=call.turn.system,
            contexts=list(call.turn.contexts.items()),
            tools=[tool.spec for tool in call.prompt.tools],
            transcript=call.transcript,
            output_schema=request.output.json_schema if request.output else None,
        ),
        thread_id=request.thread_id,
        owner=request.owner,
        history=request.history,
        model=request.model,
        counter=TokenCounter.for_encoding(profile.encoding),
        ceiling=max_input_tokens(profile, request),
        threads=threads,
        summaries=summaries,
        store_counts=False,
    )
    return read.model_copy(update={"profile": profile})


class Previewer:
    """Plans a call as its run's first step would, without writing anything.

    Args:
        catalog: Model capacity profiles.
        threads: The Thread store (read only).
        summaries: Summary artifacts (read only).
    """

    def __init__(
        self, catalog: ModelCatalog, threads: ThreadStore, summaries: SummaryStore
    ) -> None:
        self._catalog = catalog
        self._threads = threads
        self._summaries = summaries

    async def preview(self, call: BuiltCall) -> Preview:
        """The first plan of `call`: `fits`, `unknown` or `over-limit` (returned, not raised)."""
        profile = self._catalog.resolve(call.request.model)
        read = await preview_read(call, profile, threads=self._threads, summaries=self._summaries)
        plan_request = build_plan_request(
            request_id=f"preview_{uuid.uuid4().hex}",
            request=call.request,
            read=read,
            profile=profile,
            ceiling=None,
            previous_request_id=None,
        )
        return plan_preview(plan_request)
