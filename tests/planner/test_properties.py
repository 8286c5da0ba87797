"""Property tests: optimality against exhaustive search, determinism, budget invariants.

Example counts come from `CRUX_FUZZ_EXAMPLES` (default 200; the `slow` variants default to
1,000 and explore larger cases; `make fuzz` raises both).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import (
    Contributor,
    EpochFloors,
    HistoryItem,
    InputBudget,
    PlanRequest,
    RequestCompositionError,
    SealedPlan,
    Source,
    Tool,
    context,
    droppable,
    history,
    offloadable,
    plan,
    prefer,
    preview,
    summarizable,
)
from planner.select import best_within
from tests.planner.helpers import EXACT_MAX, request

EXAMPLES = int(os.environ.get("CRUX_FUZZ_EXAMPLES", "200"))
SLOW_EXAMPLES = int(os.environ.get("CRUX_FUZZ_EXAMPLES", "1000"))
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(
    max_examples=SLOW_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass(frozen=True)
class Spec:
    """An independent description of one contributor's ladder (the oracle's view)."""

    index: int
    priority: int
    tokens: int
    tool_tokens: int
    alternatives: tuple[int, ...]
    summary: int | None | bool  # False: not summarizable; None: unprepared
    offload: int | None | bool  # False: not offloadable; None: cannot be backed
    above: int | None
    drop: bool

    @property
    def id(self) -> str:
        return f"c{self.index}"

    def build(self) -> Contributor:
        tools = (
            (Tool(name=f"tool{self.index}", tokens=self.tool_tokens),) if self.tool_tokens else ()
        )
        node: Contributor = context(
            self.id, tokens=self.tokens, tools=tools, priority=self.priority
        )
        if self.alternatives:
            alternatives = [
                context(f"{self.id}-alt{i}", tokens=t, tools=tools)
                for i, t in enumerate(self.alternatives)
            ]
            node = prefer(node, *alternatives)
        if self.summary is not False:
            summary = None if self.summary is None else int(self.summary)
            node = summarizable(node, summary_tokens=summary)
        if self.offload is not False:
            reference = None if self.offload is None else int(self.offload)
            node = offloadable(node, reference_tokens=reference, above_tokens=self.above)
        if self.drop:
            node = droppable(node)
        return node

    def rungs(self) -> list[tuple[int, bool]]:
        """(size, available) per rung in the fixed order, tools sticky but for omitted."""
        out = [(self.tokens + self.tool_tokens, True)]
        out += [(t + self.tool_tokens, True) for t in self.alternatives]
        if self.summary is not False:
            out.append(((self.summary or 0) + self.tool_tokens, self.summary is not None))
        if self.offload is not False:
            out.append(((self.offload or 0) + self.tool_tokens, self.offload is not None))
        if self.drop:
            out.append((0, True))
        return out

    def start(self) -> int:
        if self.offload is False or self.offload is None or self.above is None:
            return 0
        if self.tokens + self.tool_tokens > self.above:
            return len(self.rungs()) - 2 if self.drop else len(self.rungs()) - 1
        return 0

    @property
    def elastic(self) -> bool:
        return len(self.rungs()) > 1


sizes = st.integers(min_value=0, max_value=3_000)


@st.composite
def specs(draw: st.DrawFn, index: int) -> Spec:
    return Spec(
        index=index,
        priority=draw(st.integers(min_value=0, max_value=2)),
        tokens=draw(sizes),
        tool_tokens=draw(st.sampled_from([0, 0, 40])),
        alternatives=tuple(draw(st.lists(sizes, max_size=2))),
        summary=draw(st.one_of(st.just(False), st.none(), sizes)),
        offload=draw(st.one_of(st.just(False), st.none(), st.integers(0, 300))),
        above=draw(st.one_of(st.none(), st.integers(1, 3_000))),
        drop=draw(st.booleans()),
    )


@st.composite
def scenarios(draw: st.DrawFn, max_contributors: int = 4) -> tuple[list[Spec], int, InputBudget]:
    count = draw(st.integers(min_value=0, max_value=max_contributors))
    contributors = [draw(specs(i)) for i in range(count)]
    fixed = draw(st.integers(min_value=0, max_value=4_000))
    strict = draw(st.integers(min_value=1, max_value=EXACT_MAX + 2_000))
    soft = draw(st.integers(min_value=1, max_value=strict))
    return contributors, fixed, InputBudget(optimize_at=soft, max=strict)


def oracle(contributors: list[Spec], fixed: int, soft: int, strict: int) -> dict[str, int] | None:
    """Exhaustive search: best fidelity vector within `soft`, else within `strict`."""
    elastic = sorted((s for s in contributors if s.elastic), key=lambda s: (-s.priority, s.index))
    required = sum(s.rungs()[0][0] for s in contributors if not s.elastic)
    legal = [
        [(i, size) for i, (size, ok) in enumerate(s.rungs()) if ok and i >= s.start()]
        for s in elastic
    ]
    if any(not options for options in legal):
        return None
    for limit in (soft, strict):
        best: tuple[int, ...] | None = None
        for combo in itertools.product(*legal):
            total = fixed + required + sum(size for _, size in combo)
            vector = tuple(i for i, _ in combo)
            if total <= limit and (best is None or vector < best):
                best = vector
        if best is not None:
            return {s.id: i for s, i in zip(elastic, best, strict=True)}
    return None


def make_request(contributors: list[Spec], fixed: int, budget: InputBudget) -> PlanRequest:
    return request(
        system_tokens=fixed,
        contributors=tuple(s.build() for s in contributors),
        input_budget=budget,
    )


def chosen(sealed: SealedPlan) -> dict[str, int]:
    elastic = {c.contributor for c in sealed.inspection.candidates}
    return {c.contributor: c.rung for c in sealed.choices if c.contributor in elastic}


def check_optimal(scenario: tuple[list[Spec], int, InputBudget]) -> None:
    contributors, fixed, budget = scenario
    assert budget.optimize_at is not None and budget.max is not None
    strict = min(budget.max, EXACT_MAX)
    soft = min(budget.optimize_at, strict)
    expected = oracle(contributors, fixed, soft, strict)
    req = make_request(contributors, fixed, budget)
    if expected is None:
        with pytest.raises(RequestCompositionError) as raised:
            plan(req)
        assert raised.value.code in ("REQUEST_TOO_LARGE", "REPRESENTATION_UNAVAILABLE")
        assert preview(req).status in ("unknown", "over-limit")
        return
    sealed = plan(req)
    assert chosen(sealed) == expected
    assert preview(req).status == "fits"


@FAST
@given(scenarios())
def test_selection_is_the_best_legal_candidate_under_both_tiers(
    scenario: tuple[list[Spec], int, InputBudget],
) -> None:
    check_optimal(scenario)


@pytest.mark.slow
@SLOW
@given(scenarios(max_contributors=6))
def test_selection_is_optimal_on_larger_cases(
    scenario: tuple[list[Spec], int, InputBudget],
) -> None:
    check_optimal(scenario)


@FAST
@given(
    st.lists(
        st.lists(st.integers(0, 1_000), min_size=1, max_size=5),
        max_size=6,
    ),
    st.integers(0, 3_000),
    st.integers(0, 6_000),
)
def test_branch_and_bound_matches_brute_force(raw: list[list[int]], fixed: int, limit: int) -> None:
    options = [list(enumerate(sizes)) for sizes in raw]
    found = best_within(options, fixed, limit)
    best = None
    for combo in itertools.product(*options):
        if fixed + sum(s for _, s in combo) <= limit:
            vector = tuple(i for i, _ in combo)
            best = vector if best is None or vector < best else best
    assert (found.rungs if found else None) == best
    if found:
        assert found.tokens == fixed + sum(
            dict(o)[i] for o, i in zip(options, found.rungs, strict=True)
        )


@FAST
@given(scenarios())
def test_plans_are_byte_identical_for_the_same_input(
    scenario: tuple[list[Spec], int, InputBudget],
) -> None:
    req = make_request(*scenario)
    copy = PlanRequest.model_validate_json(req.model_dump_json())
    outcomes: list[object] = []
    for candidate in (req, copy):
        try:
            outcomes.append(plan(candidate).model_dump_json())
        except RequestCompositionError as error:
            outcomes.append((error.code, str(error), error.diagnostics))
    assert outcomes[0] == outcomes[1]
    if isinstance(outcomes[0], tuple):
        return
    first, second = plan(req), plan(copy)
    assert first.receipt.model_dump_json() == second.receipt.model_dump_json()
    assert first.model_dump_json() == second.model_dump_json()


@FAST
@given(scenarios())
def test_budget_invariants_hold(scenario: tuple[list[Spec], int, InputBudget]) -> None:
    req = make_request(*scenario)
    try:
        sealed = plan(req)
    except RequestCompositionError:
        return
    budget = sealed.budget
    assert budget.optimize_at <= budget.max <= budget.capacity_max
    assert sealed.input_tokens <= budget.max
    if sealed.tier == "optimize_at":
        assert sealed.input_tokens <= budget.optimize_at
    assert sealed.receipt.max_input_tokens == budget.max
    assert sealed.inspection.breakdown.total == sealed.input_tokens
    assert sum(e.tokens for e in sealed.inspection.breakdown.contributions) == sealed.input_tokens
    for adaptation in sealed.receipt.adaptations:
        assert adaptation.selected_tokens == sealed.input_tokens
        assert adaptation.full_tokens >= 0
    # Every rung above the chosen one was rejected for a reason, every one below is lower.
    for candidate in sealed.inspection.candidates:
        assert candidate.selected == (candidate.rejection_reason is None)


@FAST
@given(scenarios(), st.lists(st.integers(0, 4_000), min_size=1, max_size=4))
def test_reduced_contributors_never_re_expand_within_an_epoch(
    scenario: tuple[list[Spec], int, InputBudget], later_fixed: list[int]
) -> None:
    contributors, fixed, budget = scenario
    epoch: EpochFloors | None = None
    floors: dict[str, int] = {}
    for step, system in enumerate([fixed, *later_fixed]):
        req = make_request(contributors, system, budget).model_copy(
            update={"epoch": epoch, "request_id": f"step-{step}"}
        )
        try:
            sealed = plan(req)
        except RequestCompositionError:
            return
        for contributor, rung in chosen(sealed).items():
            assert rung >= floors.get(contributor, 0)
            floors[contributor] = rung
        epoch = sealed.epoch


@st.composite
def transcripts(draw: st.DrawFn) -> tuple[HistoryItem, ...]:
    items: list[HistoryItem] = []
    for g in range(draw(st.integers(0, 12))):
        group = f"g{g}"
        tokens = draw(st.integers(0, 600))
        items.append(HistoryItem(id=f"{group}u", role="user", group_id=group, tokens=tokens))
        for r in range(draw(st.integers(0, 2))):
            calls = tuple(f"{group}c{r}{k}" for k in range(draw(st.integers(1, 2))))
            items.append(
                HistoryItem(
                    id=f"{group}a{r}",
                    role="assistant",
                    group_id=group,
                    tokens=5,
                    tool_call_ids=calls,
                )
            )
            items.extend(
                HistoryItem(id=f"{call}r", role="tool", group_id=group, tokens=7, tool_call_id=call)
                for call in calls
            )
        if draw(st.booleans()):
            items.append(HistoryItem(id=f"{group}f", role="assistant", group_id=group, tokens=3))
    return tuple(items)


@FAST
@given(
    transcripts(),
    st.one_of(st.none(), st.integers(1, 30)),
    st.one_of(st.none(), st.integers(1, 8_000)),
)
def test_recent_suffix_is_causal_group_safe(
    items: tuple[HistoryItem, ...], messages: int | None, tokens: int | None
) -> None:
    policy = history.recent(messages=messages, tokens=tokens)
    sealed = plan(request(history=items, history_policy=policy))
    ids = sealed.message_ids
    by_id = {item.id: item for item in items}
    kept_groups = {by_id[i].group_id for i in ids}
    # Whole groups only, and the suffix is contiguous and newest.
    assert ids == tuple(item.id for item in items if item.group_id in kept_groups)
    assert ids == tuple(item.id for item in items)[len(items) - len(ids) :]
    if ids:
        assert by_id[ids[0]].role != "tool"
    content = sum(by_id[i].tokens for i in ids)
    if len(kept_groups) > 1:
        assert messages is None or len(ids) <= messages
        assert tokens is None or content <= tokens
    overflow = "HISTORY_CAP_OVERFLOW" in [w.code for w in sealed.receipt.warnings]
    assert overflow == (
        len(kept_groups) == 1
        and (
            (messages is not None and len(ids) > messages)
            or (tokens is not None and content > tokens)
        )
    )


def test_source_builder_round_trips_as_a_contributor() -> None:
    source = context("x", tokens=3)
    assert isinstance(source, Source)
    again = PlanRequest.model_validate_json(request(contributors=(source,)).model_dump_json())
    assert again.contributors == (source,)


@FAST
@given(
    st.integers(1_000, 2_000_000),
    st.integers(1, 900),
    st.sampled_from(["exact", "estimated", "conservative"]),
    st.one_of(st.none(), st.integers(1, 3_000_000)),
    st.one_of(st.none(), st.integers(1, 3_000_000)),
    st.one_of(st.none(), st.integers(1, 500_000)),
)
def test_derived_limits_are_ordered_and_clamped(
    window: int,
    reserve_permille: int,
    confidence: str,
    soft: int | None,
    strict: int | None,
    reserve: int | None,
) -> None:
    from planner import ModelProfile, derive_budget

    profile = ModelProfile(
        id="p:m",
        provider="p",
        context_window=window,
        default_output_reserve=max(1, window * reserve_permille // 1_000),
        confidence=confidence,  # type: ignore[arg-type]
        encoding="cl100k_base",
    )
    if soft is not None and strict is not None and soft > strict:
        soft, strict = strict, soft
    budget = derive_budget(
        profile, InputBudget(optimize_at=soft, max=strict), output_reserve=reserve
    )
    margin = {"exact": 0, "estimated": 5, "conservative": 10}[confidence]
    used_reserve = reserve if reserve is not None else profile.default_output_reserve
    capacity = max(0, window - used_reserve - 32 - -(-window * margin // 100))
    assert budget.capacity_max == capacity
    assert budget.max == (capacity if strict is None else min(strict, capacity))
    assert budget.optimize_at == (budget.max if soft is None else min(soft, budget.max))
    assert 0 <= budget.reset_at <= budget.optimize_at <= budget.max <= budget.capacity_max


@FAST
@given(
    st.lists(st.integers(0, 4_000), max_size=5),
    st.integers(0, 5_000),
    st.integers(1, 12_000),
    st.integers(1, 12_000),
)
def test_a_budget_alone_never_authorises_loss(
    plain: list[int], system: int, first: int, second: int
) -> None:
    contributors = tuple(context(f"p{i}", tokens=t) for i, t in enumerate(plain))
    budget = InputBudget(optimize_at=min(first, second), max=max(first, second))
    req = request(system_tokens=system, contributors=contributors, input_budget=budget)
    total = system + sum(plain)
    if total <= min(budget.max or 0, EXACT_MAX):
        sealed = plan(req)
        assert sealed.receipt.adaptations == ()
        assert sealed.input_tokens == total
    else:
        with pytest.raises(RequestCompositionError) as raised:
            plan(req)
        assert raised.value.code == "REQUEST_TOO_LARGE"


@FAST
@given(
    transcripts(),
    st.integers(1, 12),
    st.sampled_from(["inline", "recent-only", "fail"]),
    st.one_of(st.none(), st.integers(0, 12)),
    st.integers(50, 9_000),
)
def test_managed_history_projects_whole_groups_and_names_its_needs(
    items: tuple[HistoryItem, ...],
    recent_messages: int,
    on_miss: str,
    summary_groups: int | None,
    strict: int,
) -> None:
    from planner import HistorySummary, ManagedHistory, inline_preparations

    starts = [i for i, item in enumerate(items) if i == 0 or item.group_id != items[i - 1].group_id]
    summary = None
    if summary_groups is not None and starts:
        covers = starts[min(summary_groups, len(starts) - 1)]
        summary = HistorySummary(artifact_id="hs", tokens=50, covers=covers)
    policy = ManagedHistory(recent_messages=recent_messages, on_miss=on_miss, summary=summary)  # type: ignore[arg-type]
    req = request(history=items, history_policy=policy, input_budget=InputBudget(max=strict))
    failure: RequestCompositionError | None = None
    sealed: SealedPlan | None = None
    try:
        sealed = plan(req)
    except RequestCompositionError as error:
        failure = error
    if sealed is None:
        assert failure is not None
        assert failure.code in ("REQUEST_TOO_LARGE", "REPRESENTATION_UNAVAILABLE")
        if inline_preparations(failure):
            assert on_miss == "inline"
            # Only a missing or stale summary is worth preparing again.
            [need] = inline_preparations(failure)
            assert summary is None or summary.covers != need.prefix_messages
            assert failure.code == "REPRESENTATION_UNAVAILABLE"
        return
    assert sealed.input_tokens <= sealed.budget.max
    ids = sealed.message_ids
    assert ids == tuple(item.id for item in items)[len(items) - len(ids) :]
    if ids:
        assert ids[0] in {items[s].id for s in starts}
    choice = {c.contributor: c for c in sealed.choices}.get("history")
    if sealed.history_summary is not None:
        assert choice is not None and choice.representation == "summary"
        assert sealed.history_summary.artifact_id == "hs"
    if choice is not None and choice.representation == "omitted":
        assert on_miss == "recent-only"
