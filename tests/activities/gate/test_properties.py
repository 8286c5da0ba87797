"""Properties of the gate on generated text: idempotent masks, exact counts, no content out.

Texts are built from real findings (addresses, valid cards and IBANs, phone numbers), their
look-alikes, mask tokens, separators and arbitrary Unicode including lone surrogates, so
findings sit next to each other and to noise. `CRUX_FUZZ_EXAMPLES` sets the example count.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from activities.gate import Allow, Constraints, Gate, Transform, Verdict
from contracts.gate import (
    ConstraintReport,
    ConstraintViolation,
    CustomPolicySpec,
    DenyListPolicySpec,
    ForbiddenConstraint,
    GateReport,
    LengthConstraint,
    LengthPolicySpec,
    PatternConstraint,
    PiiPolicySpec,
    PiiRule,
    PolicyOutcome,
    PolicySpec,
    PolicyStage,
    RequiredConstraint,
)
from tests.hostile import examples

FINDINGS = [
    "john.doe@example.com",
    "name+tag@mail.example.co.uk",
    "jürgen@bücher.de",
    "用户@例子.广告",
    "4111 1111 1111 1111",
    "5500-0000-0000-0004",
    "378282246310005",
    "DE89 3704 0044 0532 0130 00",
    "GB82WEST12345698765432",
    "NO9386011117947",
    "+1 650-253-0000",
    "(650) 253-0000",
    "+44 20 7946 0958",
]
LOOK_ALIKES = [
    "1234 5678 9012 3456",
    "4111 1111 1111 1112",
    "DE89 3704 0044 0532 0130 01",
    "name at example dot com",
    "user@localhost",
    "2024-01-15",
    "[email]",
    "[card ****1234]",
    "[phone]",
    "[iban]",
    "[card]",
    "class",
    "Bad  Word",
    "c++",
]
SEPARATORS = [" ", "\n", "-", "@", ".", "+", "[", "]", "*", "\x00", ",", "(", ")"]

fragments = st.one_of(
    st.sampled_from(FINDINGS),
    st.sampled_from(LOOK_ALIKES),
    st.sampled_from(SEPARATORS),
    st.text(alphabet="0123456789 -+@.()[]*abcdeXYZ", max_size=14),
    st.text(alphabet=st.characters(exclude_categories=()), max_size=6),  # surrogates too
)
texts = st.lists(fragments, max_size=24).map("".join)

FUZZ = settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

PII_SPECS = {
    "international_only": PiiPolicySpec(),
    "us_last4": PiiPolicySpec(
        rules=(
            PiiRule(kind="email"),
            PiiRule(kind="phone"),
            PiiRule(kind="card", keep_last4=True),
            PiiRule(kind="iban", token="[bank account]"),
        ),
        phone_region="US",
    ),
    "de_possible": PiiPolicySpec(phone_region="DE", phone_leniency="possible"),
}
TOKENS = {"email": "[email]", "phone": "[phone]", "card": "[card", "iban": "["}


@pytest.mark.parametrize("spec", PII_SPECS.values(), ids=PII_SPECS.keys())
@FUZZ
@given(text=texts)
def test_masking_masked_text_changes_nothing(spec: PiiPolicySpec, text: str) -> None:
    gate = Gate([spec], stage="input")
    once = gate.run(text)
    twice = gate.run(once.text)
    assert twice.text == once.text
    assert twice.report.decision == "allow"


@FUZZ
@given(text=texts)
def test_masking_deny_listed_words_twice_changes_nothing(text: str) -> None:
    gate = Gate(
        [DenyListPolicySpec(words=("class", "bad word", "c++"), mode="mask")], stage="input"
    )
    once = gate.run(text)
    assert gate.run(once.text).text == once.text


def _occurrences(text: str, spec: PiiPolicySpec) -> dict[str, int]:
    found: dict[str, int] = {}
    for rule in spec.rules:
        token = rule.mask_token
        pattern = re.escape(token[:-1]) + (r" \*{4}\d{4}\]" if rule.keep_last4 else r"\]")
        found[rule.kind] = len(re.findall(pattern, text))
    return found


@pytest.mark.parametrize("spec", PII_SPECS.values(), ids=PII_SPECS.keys())
@FUZZ
@given(text=texts)
def test_counts_equal_the_masks_inserted(spec: PiiPolicySpec, text: str) -> None:
    run = Gate([spec], stage="input").run(text)
    counts = run.report.outcomes[0].counts
    before, after = _occurrences(text, spec), _occurrences(run.text, spec)
    assert {kind: after[kind] - before[kind] for kind in before} == {
        kind: counts.get(kind, 0) for kind in before
    }


def squeeze(text: str) -> Verdict:
    return (
        Transform(text.replace("  ", " "), reason_code="custom.squeeze")
        if "  " in text
        else Allow()
    )


def two_per_char(text: str) -> int:
    return 2 * len(text)


CONTENT_GATE: list[PolicySpec] = [
    CustomPolicySpec(name="squeeze"),
    PII_SPECS["us_last4"],
    DenyListPolicySpec(words=("class", "bad word"), patterns=(r"x\d++",), mode="mask"),
    LengthPolicySpec(max_chars=400, max_tokens=700),
]
POLICY_VOCABULARY = {
    *GateReport.model_fields,
    *PolicyOutcome.model_fields,
    *ConstraintReport.model_fields,
    *ConstraintViolation.model_fields,
    "input", "output", "allow", "transform", "block", "retry",
    "pii", "length", "deny_list", "custom", "squeeze", "pattern", "required", "forbidden",
    "pii.email", "pii.phone", "pii.card", "pii.iban", "custom.squeeze",
    "deny_list.match", "deny_list.text_too_long", "length.exceeded",
    "length.too_short", "length.too_long", "pattern.no_match", "pattern.text_too_long",
    "required.missing", "forbidden.present",
    "email", "phone", "card", "iban", "matches", "chars", "max_chars", "tokens", "max_tokens",
    "minimum", "maximum", "missing", "present", "occurrences",
}  # fmt: skip
JSON_SYNTAX = set('{}[]":, 0123456789.-')
JSON_LITERALS = ("null", "true", "false")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in [str(key), *_strings(item)]]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def _assert_content_free(text: str, dumped: dict[str, object], encoded: str) -> None:
    assert set(_strings(dumped)) <= POLICY_VOCABULARY
    for start in range(len(text) - 3):
        window = text[start : start + 4]
        if set(window) <= JSON_SYNTAX:
            continue  # JSON punctuation and figures are the report's own vocabulary
        if window in encoded:
            # A JSON literal such as ``null`` is the encoding's own word, not the input's
            assert any(window in word for word in (*POLICY_VOCABULARY, *JSON_LITERALS)), window


@FUZZ
@given(text=texts)
@example(text="null")
@example(text="true false")
def test_reports_hold_only_their_own_vocabulary_never_input_text(text: str) -> None:
    gate = Gate(CONTENT_GATE, stage="input", custom={"squeeze": squeeze})
    report = gate.run(text, count_tokens=two_per_char).report
    _assert_content_free(text, report.model_dump(), report.model_dump_json())
    constraints = Constraints(
        [
            LengthConstraint(minimum=5, maximum=50),
            PatternConstraint(pattern=r"\d{3}"),
            RequiredConstraint(substrings=("class", "@")),
            ForbiddenConstraint(substrings=("card", " "), ignore_case=True),
        ]
    ).check(text)
    _assert_content_free(text, constraints.model_dump(), constraints.model_dump_json())


@FUZZ
@given(text=st.text(alphabet=st.characters(exclude_categories=()), max_size=200) | texts)
def test_no_policy_raises_on_arbitrary_unicode(text: str) -> None:
    gates: tuple[tuple[PolicyStage, list[PolicySpec]], ...] = (
        ("input", [*CONTENT_GATE, PII_SPECS["de_possible"].model_copy(update={"name": "pii_de"})]),
        (
            "output",
            [
                PiiPolicySpec(rules=(PiiRule(kind="card", mode="retry"),), phone_region="GB"),
                DenyListPolicySpec(words=("class",), mode="retry"),
                LengthPolicySpec(max_chars=100, on_exceed="retry"),
            ],
        ),
    )
    for stage, specs in gates:
        run = Gate(specs, stage=stage, custom={"squeeze": squeeze}).run(
            text, count_tokens=two_per_char
        )
        json.loads(run.report.model_dump_json())
        assert isinstance(run.text, str)
    Constraints(
        [
            PatternConstraint(pattern=r"\w+", full_match=True),
            LengthConstraint(unit="tokens", maximum=9),
        ]
    ).check(text, count_tokens=two_per_char)
