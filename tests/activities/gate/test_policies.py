"""Policies one by one and in a gate: decisions, reason codes, counts, order, errors."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from activities.gate import (
    MAX_REGEX_TEXT_CHARS,
    Allow,
    Block,
    Gate,
    GatePolicyError,
    Retry,
    Transform,
    Verdict,
    run_gate,
)
from contracts.gate import (
    MAX_POLICIES,
    CustomPolicySpec,
    DenyListPolicySpec,
    GateReport,
    LengthPolicySpec,
    PiiPolicySpec,
    PiiRule,
    PolicySpec,
)
from vocabulary.errors import ConfigurationError

CONTACT = "Mail a@example.com or b@example.org, card 4111 1111 1111 1111, call +1 650-253-0000."


def test_pii_masks_with_the_default_tokens_and_counts_each_kind() -> None:
    run = run_gate(CONTACT, [PiiPolicySpec()], stage="input")
    assert run.text == "Mail [email] or [email], card [card], call [phone]."
    (outcome,) = run.report.outcomes
    assert outcome.decision == "transform"
    assert outcome.reason_code == "pii.email"
    assert outcome.counts == {"email": 2, "card": 1, "phone": 1}
    assert (outcome.chars_before, outcome.chars_after) == (len(CONTACT), len(run.text))
    assert run.report.decision == "transform" and run.report.accepted


def test_pii_keeps_the_last_four_card_digits_and_custom_tokens_when_asked() -> None:
    rules = (
        PiiRule(kind="card", keep_last4=True),
        PiiRule(kind="email", token="[E-Mail entfernt]"),
    )
    run = run_gate(CONTACT, [PiiPolicySpec(rules=rules)], stage="input")
    assert run.text == (
        "Mail [E-Mail entfernt] or [E-Mail entfernt], card [card ****1111], call +1 650-253-0000."
    )


def test_pii_block_mode_wins_over_masking_and_leaves_the_text_alone() -> None:
    rules = (PiiRule(kind="email"), PiiRule(kind="card", mode="block"))
    run = run_gate(CONTACT, [PiiPolicySpec(rules=rules)], stage="input")
    assert run.text == CONTACT
    assert run.report.decision == "block" and not run.report.accepted
    assert (run.report.policy, run.report.reason_code) == ("pii", "pii.card")
    assert run.report.outcomes[0].counts == {"email": 2, "card": 1}


def test_pii_on_output_retries_or_blocks_but_never_masks() -> None:
    retry = PiiPolicySpec(rules=(PiiRule(kind="card", mode="retry"),))
    run = run_gate(CONTACT, [retry], stage="output")
    assert (run.report.decision, run.report.reason_code, run.text) == ("retry", "pii.card", CONTACT)
    assert run_gate("no numbers here", [retry], stage="output").report.decision == "allow"
    with pytest.raises(ConfigurationError, match="output policies cannot mask"):
        Gate([PiiPolicySpec()], stage="output")
    with pytest.raises(ConfigurationError, match="input policies cannot retry"):
        Gate([retry], stage="input")


def test_pii_without_findings_allows_and_reports_nothing_found() -> None:
    run = run_gate("Nothing to see, order 1234 5678 9012 3456.", [PiiPolicySpec()], stage="input")
    assert run.report.decision == "allow"
    assert run.report.outcomes[0].counts == {}
    assert run.report.outcomes[0].reason_code is None


@pytest.mark.parametrize(
    "rule",
    [
        {"kind": "email", "keep_last4": True},
        {"kind": "card", "token": "[card 1]"},
        {"kind": "card", "token": "card"},
        {"kind": "email", "token": "[a@b]"},
        {"kind": "email", "token": "[]"},
    ],
)
def test_pii_rules_refuse_tokens_a_detector_could_find_and_misplaced_options(
    rule: dict[str, object],
) -> None:
    with pytest.raises(ValidationError):
        PiiRule.model_validate(rule)


def test_pii_specs_refuse_duplicate_kinds_and_unknown_regions() -> None:
    with pytest.raises(ValidationError):
        PiiPolicySpec(rules=(PiiRule(kind="card"), PiiRule(kind="card", mode="block")))
    with pytest.raises(ValidationError):
        PiiPolicySpec(phone_region="us")
    with pytest.raises(ConfigurationError, match="region"):
        Gate([PiiPolicySpec(phone_region="ZZ")], stage="input")


def test_length_blocks_over_the_character_limit_without_truncating() -> None:
    run = run_gate("x" * 11, [LengthPolicySpec(max_chars=10)], stage="input")
    assert run.text == "x" * 11
    assert (run.report.decision, run.report.reason_code) == ("block", "length.exceeded")
    assert run.report.outcomes[0].counts == {"chars": 11, "max_chars": 10}
    allowed = run_gate("x" * 10, [LengthPolicySpec(max_chars=10)], stage="input")
    assert allowed.report.decision == "allow"
    assert allowed.report.outcomes[0].counts == {"chars": 10, "max_chars": 10}


def test_length_counts_tokens_with_the_given_counter_and_retries_on_output() -> None:
    def two_per_word(text: str) -> int:
        return len(text.split()) * 2

    spec = LengthPolicySpec(max_tokens=3, on_exceed="retry")
    run = run_gate("abcd", [spec], stage="output", count_tokens=two_per_word)
    assert (run.report.decision, run.report.outcomes[0].counts) == (
        "allow",
        {"tokens": 2, "max_tokens": 3},
    )
    run = run_gate("a b", [spec], stage="output", count_tokens=two_per_word)
    assert (run.report.decision, run.report.outcomes[0].counts) == (
        "retry",
        {"tokens": 4, "max_tokens": 3},
    )
    with pytest.raises(ConfigurationError, match="counter"):
        run_gate("a", [spec], stage="output")
    with pytest.raises(ValidationError):
        LengthPolicySpec()


def test_a_text_over_the_character_limit_is_not_tokenized() -> None:
    def refuse(text: str) -> int:
        raise AssertionError("tokenized")

    spec = LengthPolicySpec(max_chars=3, max_tokens=100)
    run = run_gate("abcd", [spec], stage="input", count_tokens=refuse)
    assert run.report.outcomes[0].counts == {"chars": 4, "max_chars": 3}
    run = run_gate("abc", [spec], stage="input", count_tokens=len)
    assert run.report.outcomes[0].counts == {
        "chars": 3,
        "max_chars": 3,
        "tokens": 3,
        "max_tokens": 100,
    }


DENY = DenyListPolicySpec(words=("class", "credit card", "c++"), patterns=(r"secret-\d++",))


@pytest.mark.parametrize(
    ("text", "entries", "matches"),
    [
        ("A CLASS act", (0,), 1),
        ("classic and subclass are other words", (), 0),
        ("my Credit\n  Card number", (1,), 1),
        ("I write C++ and c++", (2,), 2),
        ("c++class: punctuation is a boundary", (0, 2), 2),
        ("the secret-42 and secret-7", (3,), 2),
        ("class, credit card, secret-1", (0, 1, 3), 3),
    ],
)
def test_deny_list_matches_whole_words_case_insensitively_and_names_entries_by_index(
    text: str, entries: tuple[int, ...], matches: int
) -> None:
    run = run_gate(text, [DENY], stage="input")
    outcome = run.report.outcomes[0]
    if not entries:
        assert outcome.decision == "allow"
        return
    assert (outcome.decision, outcome.reason_code) == ("block", "deny_list.match")
    assert outcome.entries == entries
    assert outcome.counts == {"matches": matches}


def test_deny_list_options_substring_case_sensitive_and_mask() -> None:
    loose = DenyListPolicySpec(words=("class",), whole_word=False)
    assert run_gate("subclass", [loose], stage="input").report.decision == "block"
    exact = DenyListPolicySpec(words=("Class",), ignore_case=False)
    assert run_gate("class", [exact], stage="input").report.decision == "allow"
    masked = run_gate("a class, a CLASS", [DENY.model_copy(update={"mode": "mask"})], stage="input")
    assert masked.text == "a [redacted], a [redacted]"
    assert masked.report.outcomes[0].counts == {"matches": 2}


def test_deny_list_refuses_a_token_it_would_match_and_risky_patterns() -> None:
    with pytest.raises(ConfigurationError, match="token"):
        Gate([DenyListPolicySpec(words=("redacted",), mode="mask")], stage="input")
    with pytest.raises(ConfigurationError, match="backreferences"):
        Gate([DenyListPolicySpec(patterns=(r"(a)\1",))], stage="input")
    with pytest.raises(ConfigurationError, match="exponential"):
        Gate([DenyListPolicySpec(patterns=(r"(a+)+b",))], stage="input")
    with pytest.raises(ValidationError):
        DenyListPolicySpec(patterns=("(unclosed",))
    with pytest.raises(ValidationError):
        DenyListPolicySpec(patterns=("(?i)global flags",))
    DenyListPolicySpec(patterns=("(?i:scoped flags)",))
    with pytest.raises(ValidationError):
        DenyListPolicySpec(words=("  ",))
    with pytest.raises(ValidationError):
        DenyListPolicySpec()


def test_deny_list_regexes_refuse_texts_beyond_the_cap_and_words_do_not() -> None:
    text = "x " * (MAX_REGEX_TEXT_CHARS // 2 + 1)
    run = run_gate(text, [DENY], stage="input")
    assert (run.report.decision, run.report.reason_code) == ("block", "deny_list.text_too_long")
    words_only = DenyListPolicySpec(words=("class",))
    assert run_gate(text, [words_only], stage="input").report.decision == "allow"


def shout(text: str) -> Verdict:
    return Transform(text.upper(), reason_code="custom.shout") if "!" in text else Allow()


def refuse_tea(text: str) -> Verdict:
    return Block("custom.tea") if "TEA" in text else Allow()


def test_custom_policies_transform_feed_the_next_policy_and_block_with_their_code() -> None:
    specs = [CustomPolicySpec(name="shout"), CustomPolicySpec(name="refuse_tea")]
    gate = Gate(specs, stage="input", custom={"shout": shout, "refuse_tea": refuse_tea})
    run = gate.run("tea!")
    assert run.report.decision == "block"
    assert [o.decision for o in run.report.outcomes] == ["transform", "block"]
    assert (run.report.policy, run.report.reason_code) == ("refuse_tea", "custom.tea")
    assert run.text == "TEA!"
    assert gate.run("coffee").report.decision == "allow"
    assert gate.run("coffee").report.outcomes[0].reason_code is None


def test_a_transform_to_the_same_text_is_reported_as_allow() -> None:
    run = run_gate(
        "SAME!", [CustomPolicySpec(name="shout")], stage="input", custom={"shout": shout}
    )
    assert run.report.outcomes[0].decision == "allow"


def test_the_first_block_stops_the_gate() -> None:
    specs: list[PolicySpec] = [LengthPolicySpec(max_chars=3), PiiPolicySpec()]
    run = run_gate("a@example.com", specs, stage="input")
    assert [o.policy for o in run.report.outcomes] == ["length"]
    assert run.text == "a@example.com"


def test_masking_feeds_the_length_policy_the_masked_text() -> None:
    specs: list[PolicySpec] = [PiiPolicySpec(), LengthPolicySpec(max_chars=len("mail [email]"))]
    run = run_gate("mail someone.with.a.long.name@example.com", specs, stage="input")
    assert run.report.decision == "transform"
    assert run.text == "mail [email]"


class Boom(RuntimeError):
    pass


def leaky(text: str) -> Verdict:
    raise Boom(f"could not parse {text}")


@pytest.mark.parametrize(
    ("function", "code", "error_type"),
    [
        (leaky, "raised", "Boom"),
        (lambda text: "allow", "invalid_result", None),
        (lambda text: Block("Not A Code"), "invalid_result", None),
        (lambda text: Transform(b"bytes"), "invalid_result", None),  # type: ignore[arg-type]
        (lambda text: Retry("custom.again"), "invalid_result", None),
    ],
)
def test_a_failing_custom_policy_raises_a_content_free_error_naming_it(
    function: object, code: str, error_type: str | None
) -> None:
    gate = Gate([CustomPolicySpec(name="mine")], stage="input", custom={"mine": function})  # type: ignore[dict-item]
    with pytest.raises(GatePolicyError) as caught:
        gate.run("secret text")
    error = caught.value
    assert (error.policy, error.code, error.error_type) == ("mine", code, error_type)
    assert "secret" not in str(error)
    assert error.__cause__ is None and error.__suppress_context__


def test_a_custom_output_policy_cannot_rewrite_the_reply() -> None:
    gate = Gate([CustomPolicySpec(name="shout")], stage="output", custom={"shout": shout})
    assert gate.run("quiet").report.decision == "allow"
    with pytest.raises(GatePolicyError) as caught:
        gate.run("loud!")
    assert caught.value.code == "invalid_result"


def test_retry_is_a_valid_custom_verdict_on_output() -> None:
    run = run_gate(
        "x",
        [CustomPolicySpec(name="again")],
        stage="output",
        custom={"again": lambda t: Retry("custom.again")},
    )
    assert (run.report.decision, run.report.reason_code) == ("retry", "custom.again")


def test_an_unregistered_custom_policy_fails_when_the_gate_is_built() -> None:
    with pytest.raises(GatePolicyError) as caught:
        Gate([CustomPolicySpec(name="missing")], stage="input")
    assert caught.value.code == "not_registered"


def test_gates_refuse_duplicate_names_and_too_many_policies() -> None:
    with pytest.raises(ConfigurationError, match="unique"):
        Gate([LengthPolicySpec(max_chars=1), LengthPolicySpec(max_chars=2)], stage="input")
    many = [LengthPolicySpec(name=f"l{n}", max_chars=1) for n in range(MAX_POLICIES + 1)]
    with pytest.raises(ConfigurationError, match="at most"):
        Gate(many, stage="input")
    with pytest.raises(ValidationError):
        LengthPolicySpec(name="Has Spaces", max_chars=1)


def test_specs_and_reports_round_trip_through_json() -> None:
    specs: list[PolicySpec] = [
        PiiPolicySpec(phone_region="DE"),
        DENY,
        LengthPolicySpec(max_chars=9),
        CustomPolicySpec(name="shout"),
    ]
    adapter = TypeAdapter(list[PolicySpec])
    assert adapter.validate_json(adapter.dump_json(specs)) == specs
    report = run_gate(CONTACT, specs[:1], stage="input").report
    assert GateReport.model_validate_json(report.model_dump_json()) == report


def test_the_same_text_and_specs_give_the_same_run() -> None:
    gate = Gate(
        [PiiPolicySpec(phone_region="US"), DENY.model_copy(update={"mode": "mask"})], stage="input"
    )
    assert gate.run(CONTACT + " class") == gate.run(CONTACT + " class")
