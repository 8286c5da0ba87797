"""How a managed-history request chooses its summary: the whole rule, as pure functions.

Managed history (`history(...)`) offers the selector up to three rungs, as the first
fidelity dimension (every other contributor is reduced before it): `full` (everything),
`summary` (the leading system prefix, one assistant-role summary of the older turns, then
every raw message after it) and, only under `on_miss="recent-only"`, `omitted` (the prefix
and the exact recent suffix). Which summary the `summary` rung is, whether it can be used,
and what must be prepared is decided here and, for steps 2 and 3 (the rung of one
request), in `planner.summary_rung`. Nothing else decides: storage only fetches
candidates, and the reader, the preparer and the generation workflow call these functions
and carry out what they return.

1. **Identity and candidates.** A summary is named by its Thread, the last message it
   covers (`through_id`: a message's path is unique, so this names one prefix), its
   strategy and its support model (`summary_model`: the configured one, else the response
   model). Storage fetches the artifacts of that strategy and model ending on the owner's
   selected path; `longest_prefix_summary` keeps the one covering the longest prefix. The
   same ranking gives a `rolling` or `adaptive` preparation the earlier summary it folds
   the newer range into (`preparation_strategy`, step 7). The chunk sizes (step 7) shape
   how a summary is prepared, not which one it is: a stored summary of the same prefix,
   strategy and model is used whatever sizes prepared it.
2. **The split.** The exact suffix is the newest causal groups under the recent caps
   (`recent_caps`: by default 40 % of the strict max, in tokens). When it already holds
   everything, history stays exact and nothing is chosen. Otherwise the wanted summary
   covers everything before the suffix (`SummaryTarget`: the message just before it, by id
   or by position in the history source).
3. **Alignment and staleness.** A stored summary replaces whole groups, so it must end at
   a group boundary past the aggregate of older history (`summary_boundary`); one that
   cannot be placed is unavailable. One that ends before the suffix starts is *stale*
   (`HISTORY_SUMMARY_STALE`): still usable, the uncovered gap sent raw. A missing or stale
   summary makes a refresh due. A missing one leaves the rung unprepared, which preview
   sizes as the suffix plus `expected_summary_tokens`.
4. **When nothing fits: the miss policy.** If no complete request fits the strict max while
   a refresh is due, the fresh summary is the missing representation
   (`REPRESENTATION_UNAVAILABLE`), except under `recent-only`, whose `omitted` rung is the
   accepted degradation (`summary_missing`). `inline` asks for that summary before dispatch
   (`miss_preparations`, then `inline_summary_need`: once per step, over a Thread or over a
   caller's transcript, whose summaries are named by the content of its prefix) and
   plans again; the runtime joins an identical preparation already running (one workflow
   per summary identity) instead of starting a second, and the receipt says which
   (`HISTORY_SUMMARY_INLINE` or `HISTORY_SUMMARY_JOINED`). `fail` fails the request but
   starts the same preparation in the background (`failure_refresh`), so a later turn can
   fit. A required summary whose preparation fails (its support calls' provider failed, or
   a call cannot fit the summary model) fails the request with
   `REPRESENTATION_UNAVAILABLE`, the failure behind it kept as a content-free cause
   (`unprepared_summary`).
5. **Maintenance after a fitting plan.** Past the maintenance watermark (`optimize_at`, at
   most 85 % of `max`), when the summary does not yet cover what the *next* request will
   keep out of its suffix (this turn committed, `next_suffix_start`), a refresh through
   there is started after the commit and never awaited (`maintenance`,
   `HISTORY_MAINTENANCE_SCHEDULED`). Below the watermark nothing is prepared (the
   hysteresis); `recent-only` never pays for a support call.
6. **Later steps of one generation.** Tool rounds and re-reads plan again; a summary
   prepared for an earlier step may no longer fit. A step fails for a summary only when
   that very summary was already prepared in the run (`needs_fresh_summary`).

7. **How a preparation runs.** The prefix is cut into chunks of whole units
   (`planner.summaries.summary_chunks`; the leading system prefix is never summarised).
   A chunk holds at most `chunk_tokens` content tokens: by default what one support call
   of the summary model can take (its window less the instructions, the framing and the
   output cap), never more; `summarize.*(chunk_tokens=4_000, chunk_units=8)` asks for the
   original fixed chunks. It holds at most `chunk_units` units: unbounded by default,
   except `hierarchical`, whose chunks hold `SUMMARY_CHUNK_UNITS` (`chunk_limits`). Then
   (`preparation_strategy`): `regenerate` makes one call when the prefix is one chunk and
   goes hierarchical when one call cannot hold it; `rolling` folds the range after the
   longest earlier summary into it, chunk by chunk; `hierarchical` summarises every chunk
   and reduces the summaries in batches; `adaptive` regenerates a one-chunk prefix, rolls
   from an earlier summary when there is one, and goes hierarchical for a prefix of several
   chunks without one. `planner.summaries.summary_calls` counts the support calls of each.

Every preparation says how large the summary may be (`max_summary_tokens`): its limit
(`max` inline, the watermark for maintenance) minus all it is sent beside, at the smallest
legal size of everything else.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar, cast

from planner.budget import DerivedBudget
from planner.receipt import Diagnostic, ReceiptWarning
from planner.sealed import Preparation
from planner.summary_rung import HISTORY_ID, Managed, SummaryTarget
from vocabulary.details import ErrorDetails
from vocabulary.errors import CruxError, ErrorType, RequestCompositionError
from vocabulary.failures import failure_cause, is_provider_failure

SUMMARY_CHUNK_TOKENS = 4_000
"""The original fixed chunk size, in content tokens (`summarize.*(chunk_tokens=4_000)`)."""

SUMMARY_CHUNK_UNITS = 8
"""Units one chunk of a `hierarchical` preparation holds by default (and the original
fixed chunks' unit limit)."""

MAINTENANCE_PERCENT = 85
"""Without a lower `optimize_at`, maintenance starts past this share of the strict max."""

MAINTENANCE_SCHEDULED = ReceiptWarning(
    code="HISTORY_MAINTENANCE_SCHEDULED",
    message="a history summary will be prepared after the response",
)

PreparationKey = tuple[str | None, int | None]
"""A summary preparation by where it ends: `(through_id, through_position)`."""


# -- 1. identity and candidates ------------------------------------------------------------


class SummaryCandidate(Protocol):
    """A stored summary as far as ranking needs it: where it ends."""

    @property
    def through_id(self) -> str:
        """The last message it covers."""
        ...


CandidateT = TypeVar("CandidateT", bound=SummaryCandidate)


def summary_model(configured: str | None, response_model: str) -> str:
    """The support model of a summary: the configured one, else the response model."""
    return configured or response_model


def longest_prefix_summary(
    path_ids: Sequence[str], candidates: Iterable[CandidateT]
) -> CandidateT | None:
    """The candidate covering the longest prefix of `path_ids`, or `None`.

    Args:
        path_ids: The selected path, oldest first.
        candidates: Stored summaries of the wanted strategy and model; those not ending on
            the path are ignored.
    """
    position = {message_id: index for index, message_id in enumerate(path_ids)}
    on_path = [candidate for candidate in candidates if candidate.through_id in position]
    return max(on_path, key=lambda candidate: position[candidate.through_id], default=None)


def folds_earlier_summary(strategy: str, *, chunks: int) -> bool:
    """Whether a preparation of `strategy` over `chunks` chunks looks for an earlier summary.

    `rolling` always does; `adaptive` when the prefix is more than one chunk (a one-chunk
    prefix is regenerated whatever is stored).
    """
    return strategy == "rolling" or (strategy == "adaptive" and chunks > 1)


def preparation_strategy(strategy: str, *, chunks: int, has_earlier: bool) -> str:
    """The strategy a preparation runs over a prefix of `chunks` chunks (step 7).

    Args:
        strategy: The configured strategy.
        chunks: Chunks of the whole prefix (`summary_chunks` under `chunk_limits`).
        has_earlier: A stored summary of an earlier prefix was found to fold into (only
            looked for when `folds_earlier_summary`).

    Returns:
        `regenerate` (one call), `rolling` (from the earlier summary, chunk by chunk) or
        `hierarchical` (every chunk, then reductions).
    """
    if strategy == "rolling":
        return "rolling"
    if chunks <= 1 and strategy in ("regenerate", "adaptive"):
        return "regenerate"
    if strategy == "adaptive" and has_earlier:
        # Fold only the newer range into the earlier summary: one call per new chunk,
        # however long the conversation grew.
        return "rolling"
    # Several chunks without an earlier summary (or a regenerate one call cannot hold).
    return "hierarchical"


@dataclass(frozen=True, slots=True)
class ChunkLimits:
    """How large one chunk of a prefix may be (step 7).

    Attributes:
        tokens: Content tokens.
        units: Units (causal groups, or the leading system prefix); `None` for no bound.
    """

    tokens: int
    units: int | None


def chunk_limits(
    strategy: str, *, call_tokens: int, chunk_tokens: int | None, chunk_units: int | None
) -> ChunkLimits:
    """The chunk limits of a preparation.

    Args:
        strategy: The configured strategy.
        call_tokens: The content tokens one support call of the summary model can take.
        chunk_tokens: The caller's chunk token limit (`summarize.*(chunk_tokens=...)`), if
            any; never above `call_tokens`.
        chunk_units: The caller's chunk unit limit, if any; by default unbounded, except
            `hierarchical`'s `SUMMARY_CHUNK_UNITS`.
    """
    tokens = call_tokens if chunk_tokens is None else max(1, min(chunk_tokens, call_tokens))
    if chunk_units is not None:
        return ChunkLimits(tokens, chunk_units)
    return ChunkLimits(tokens, SUMMARY_CHUNK_UNITS if strategy == "hierarchical" else None)


# -- 4. and 5. the miss policy and maintenance --------------------------------------------


def summary_missing(facts: Managed) -> bool:
    """Whether a fresh summary is the representation a request that does not fit lacks.

    `recent-only` accepts its `omitted` rung instead: it never waits for a summary.
    """
    return facts.refresh_due and facts.policy.on_miss != "recent-only"


def _preparation(
    target: SummaryTarget,
    when: Literal["inline", "after-response"],
    room: int,
) -> Preparation:
    return Preparation(
        contributor=HISTORY_ID,
        when=when,
        prefix_messages=target.prefix_messages,
        through_id=target.through_id,
        through_position=target.through_position,
        max_summary_tokens=max(0, room),
    )


def miss_preparations(
    facts: Managed, budget: DerivedBudget, smallest_rest: int
) -> tuple[Preparation, ...]:
    """What a request that does not fit asks to prepare, per the miss policy.

    `inline`: the summary through the suffix start, before dispatch. `fail`: the same
    summary, started without waiting (otherwise every later turn would fail the same way).
    `recent-only`, a summary that is not due, or one that cannot be named: nothing.

    Args:
        facts: The request's summary choice.
        budget: The request's limits (the summary must fit `max`).
        smallest_rest: Everything but history, at its smallest legal size.
    """
    target, on_miss = facts.target, facts.policy.on_miss
    if not facts.refresh_due or target.through_position is None or on_miss == "recent-only":
        return ()
    room = budget.max - smallest_rest - facts.suffix.tokens - facts.framing
    return (_preparation(target, "inline" if on_miss == "inline" else "after-response", room),)


def maintenance_watermark(budget: DerivedBudget) -> int:
    """Request size past which a due summary refresh is started after the response.

    The soft watermark `optimize_at`, or a share of `max` when the budget sets no lower
    watermark: a background refresh needs headroom to land before the next turn needs it.
    """
    return min(budget.optimize_at, budget.max * MAINTENANCE_PERCENT // 100)


def maintenance(
    facts: Managed, budget: DerivedBudget, total: int, smallest_rest: int
) -> Preparation | None:
    """The refresh to start after the commit of a fitting request of `total` tokens, if any.

    Args:
        facts: The request's summary choice.
        budget: The request's limits (the refresh must fit below the watermark).
        total: The sealed request's size.
        smallest_rest: Everything but history, at its smallest legal size.
    """
    target, summary = facts.next_target, facts.policy.summary
    watermark = maintenance_watermark(budget)
    if (
        target.through_position is None
        or facts.policy.on_miss == "recent-only"
        or total <= watermark
        or (summary is not None and summary.covers >= target.prefix_messages)
    ):
        return None
    room = watermark - smallest_rest - facts.suffix.tokens - facts.framing
    return _preparation(target, "after-response", room)


# -- 6. what the runtime does --------------------------------------------------------------


def _preparations(error: RequestCompositionError) -> tuple[Preparation, ...]:
    raw = error.diagnostics.get("preparations")
    if not isinstance(raw, list):
        return ()
    return tuple(Preparation.model_validate(item) for item in cast("list[object]", raw))


def inline_preparations(error: RequestCompositionError) -> tuple[Preparation, ...]:
    """Return the preparations a `REPRESENTATION_UNAVAILABLE` error asks to run inline.

    A managed history whose summary is missing while the full history cannot fit (with
    `on_miss="inline"`) fails planning with this list; the runtime prepares the summary
    (joining an identical preparation already running), then plans again.

    Args:
        error: An error raised by `plan`.

    Returns:
        The preparations, empty when there is nothing to prepare.
    """
    return tuple(need for need in _preparations(error) if need.when == "inline")


def background_preparations(error: RequestCompositionError) -> tuple[Preparation, ...]:
    """Return the refreshes a rejected request asks to start without waiting.

    Under `on_miss="fail"` a stale or missing summary fails the request, and the refresh it
    needs is listed here: the runtime starts it in the background so that a later turn
    finds a summary that fits.
    """
    return tuple(need for need in _preparations(error) if need.when == "after-response")


def inline_summary_need(
    error: RequestCompositionError, *, summarisable: bool, summary_prepared: bool
) -> Preparation | None:
    """The summary to prepare (or join) before planning again, if any.

    Only a history source that can be summarised (a Thread's path, or a caller's
    transcript, named by content), and at most once per step: a second request for one
    fails instead of looping.
    """
    needs = inline_preparations(error)
    return needs[0] if needs and summarisable and not summary_prepared else None


def failure_refresh(error: RequestCompositionError, *, summarisable: bool) -> Preparation | None:
    """The refresh a failing request starts without waiting (`on_miss="fail"`), if any."""
    refreshes = background_preparations(error) if summarisable else ()
    return refreshes[0] if refreshes else None


def preparation_key(need: Preparation) -> PreparationKey:
    """Which summary a preparation makes, by where it ends."""
    return need.through_id, need.through_position


def needs_fresh_summary(
    error: CruxError | None,
    *,
    summary_prepared: bool,
    prepared_this_step: bool,
    prepared: set[PreparationKey],
) -> bool:
    """Whether a step failed only for a summary no earlier step of this run prepared.

    The summary prepared for an earlier step no longer fits this one (the Thread moved,
    or the turn grew): the step may prepare the one it needs. A summary this run already
    prepared, or one prepared for this very step, is never prepared again.

    Args:
        error: Why planning failed.
        summary_prepared: The step was planned with a summary prepared in this run.
        prepared_this_step: That summary was prepared for this very step.
        prepared: Keys (`preparation_key`) of the summaries this run prepared inline.
    """
    if prepared_this_step or not summary_prepared:
        return False
    if not isinstance(error, RequestCompositionError):
        return False
    needs = inline_preparations(error)
    return bool(needs) and preparation_key(needs[0]) not in prepared


def unprepared_summary(
    error_type: str | None, details: ErrorDetails
) -> RequestCompositionError | None:
    """The error of a request whose required summary could not be prepared, if it is one.

    A preparation that failed because of its support calls (their provider failed, or one
    cannot fit the summary model) leaves the summary the request needs unavailable: the
    request fails with `REPRESENTATION_UNAVAILABLE`, as the seed's error table says, with
    the preparation's failure as its content-free cause (`diagnostics["cause"]`: type,
    code, provider, HTTP status, host, model). Other failures (storage outages, a deleted
    Thread, invalid configuration) stand as they are: `None`.

    Args:
        error_type: The preparation failure's `ApplicationError.type`.
        details: Its decoded details.
    """
    if not (is_provider_failure(error_type) or error_type == ErrorType.REQUEST_COMPOSITION):
        return None
    assert error_type is not None
    cause = failure_cause(error_type, details)
    by = f"{details.provider} HTTP {details.status}" if details.status else error_type
    return RequestCompositionError(
        "REPRESENTATION_UNAVAILABLE",
        f"the history summary could not be prepared ({by}); check the summary model and its"
        " provider, or set on_miss='recent-only' to send the recent turns without it",
        diagnostics={
            "items": [
                Diagnostic(
                    id=f"{HISTORY_ID}:summary-unprepared",
                    code="REPRESENTATION_CAPABILITY_UNAVAILABLE",
                    contributor=HISTORY_ID,
                    message=f"the summary of {HISTORY_ID} could not be prepared",
                ).model_dump(mode="json")
            ],
            "cause": cause,
        },
    )
