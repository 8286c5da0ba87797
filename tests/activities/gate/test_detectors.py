"""Each PII detector on tables of texts it must find, and of look-alikes it must leave."""

from __future__ import annotations

import pytest
from stdnum import iban, luhn

from activities.gate import PiiPolicy
from contracts.gate import PhoneLeniency, PiiKind, PiiPolicySpec, PiiRule


def found(
    text: str, kind: PiiKind, *, region: str | None = None, leniency: PhoneLeniency = "valid"
) -> list[str]:
    spec = PiiPolicySpec(rules=(PiiRule(kind=kind),), phone_region=region, phone_leniency=leniency)
    return [text[span.start : span.end] for span in PiiPolicy(spec).find(text)]


EMAILS = {
    "plain": ("write to john.doe@example.com today", "john.doe@example.com"),
    "subdomains": ("a.b@mail.eu.example.co.uk.", "a.b@mail.eu.example.co.uk"),
    "plus_tag": ("<name+tag@example.com>", "name+tag@example.com"),
    "hyphens_underscores": (
        "first_last-1@sub-domain.example.org",
        "first_last-1@sub-domain.example.org",
    ),
    "unicode_domain": ("jürgen@bücher.de schrieb", "jürgen@bücher.de"),
    "unicode_everything": ("用户@例子.广告", "用户@例子.广告"),
    "punycode_tld": ("mail user@xn--e1afmkfd.xn--p1ai", "user@xn--e1afmkfd.xn--p1ai"),
    "leading_dots_left_out": ("see ...john@example.com", "john@example.com"),
    "in_parentheses": ("(ops@example.io)", "ops@example.io"),
    "uppercase": ("JOHN@EXAMPLE.COM", "JOHN@EXAMPLE.COM"),
    "digits_after_tld_left_out": ("john@example.com2024", "john@example.com"),
}


@pytest.mark.parametrize(("text", "address"), EMAILS.values(), ids=EMAILS.keys())
def test_email_addresses_are_found(text: str, address: str) -> None:
    assert found(text, "email") == [address]


NOT_EMAILS = {
    "obfuscated": "name at example dot com",
    "bracketed_at": "name [at] example.com",
    "no_tld": "user@localhost",
    "version": "pkg@1.2.3",
    "handle": "thanks @john.doe!",
    "one_letter_tld": "a@b.c",
    "space_after_at": "john@ example.com",
    "quoted_local_part": '"john doe"@example.com',
    "ip_literal": "user@[10.0.0.1]",
}


@pytest.mark.parametrize("text", NOT_EMAILS.values(), ids=NOT_EMAILS.keys())
def test_email_look_alikes_are_not_found(text: str) -> None:
    assert found(text, "email") == []


def test_two_addresses_sharing_an_at_run_are_found_once_each() -> None:
    assert found("a@b.com, c@d.org", "email") == ["a@b.com", "c@d.org"]
    assert found("a@b.com@c.org", "email") == ["a@b.com"]


CARDS = {
    "visa_unbroken": "4111111111111111",
    "visa_spaced": "4111 1111 1111 1111",
    "mastercard_hyphens": "5500-0000-0000-0004",
    "amex_4_6_5": "3782 822463 10005",
    "discover": "6011 1111 1111 1117",
    "jcb": "3530 1113 3330 0000",
    "diners_14": "3056 930902 5904",
    "visa_13": "4222222222222",
    "maestro_16": "6759 6498 2643 8453",
}


@pytest.mark.parametrize("number", CARDS.values(), ids=CARDS.keys())
def test_luhn_valid_card_numbers_are_found(number: str) -> None:
    assert luhn.is_valid(number.replace(" ", "").replace("-", ""))
    assert found(f"card: {number}, exp 12/26", "card") == [number]


NOT_CARDS = {
    "luhn_invalid_visa": "4111 1111 1111 1112",
    "luhn_invalid_order_number": "1234 5678 9012 3456",
    "too_short": "4111 1111 111",
    "too_long": "4111 1111 1111 1111 1111",
    "leading_zero": "0000 0000 0000 0000",
    "inside_longer_digits": "94111111111111111118",
    "dot_separated": "4111.1111.1111.1111",
    "two_spaces": "4111  1111  1111  1111",
    "two_digit_groups": "41 11 11 11 11 11 11 11",
    "followed_by_a_group": "4111 1111 1111 1111 123",
}


@pytest.mark.parametrize("text", NOT_CARDS.values(), ids=NOT_CARDS.keys())
def test_card_look_alikes_are_not_found(text: str) -> None:
    assert found(f"ref {text} end", "card") == []


def test_the_order_number_case_fails_luhn_and_a_short_group_ends_the_run() -> None:
    assert not luhn.is_valid("1234567890123456")
    assert found("4111 1111 1111 1111 12/26", "card") == ["4111 1111 1111 1111"]


IBANS = {
    "de_grouped": "DE89 3704 0044 0532 0130 00",
    "de_compact": "DE89370400440532013000",
    "gb_letters_in_bban": "GB82 WEST 1234 5698 7654 32",
    "fr_letter_inside": "FR14 2004 1010 0505 0001 3M02 606",
    "nl": "NL91ABNA0417164300",
    "be_16": "BE68 5390 0754 7034",
    "no_15_shortest": "NO93 8601 1117 947",
    "ch": "CH93 0076 2011 6238 5295 7",
    "es": "ES91 2100 0418 4502 0005 1332",
    "it": "IT60 X054 2811 1010 0000 0123 456",
    "pl": "PL61 1090 1014 0000 0712 1981 2874",
    "br_29": "BR18 0036 0305 0000 1000 9795 493C 1",
    "lowercase": "de89 3704 0044 0532 0130 00",
}


@pytest.mark.parametrize("number", IBANS.values(), ids=IBANS.keys())
def test_valid_ibans_of_several_countries_are_found(number: str) -> None:
    assert iban.is_valid(number, check_country=False)
    assert found(f"IBAN: {number}. Thanks", "iban") == [number]


NOT_IBANS = {
    "de_check_digit_typo": "DE89 3704 0044 0532 0130 01",
    "gb_last_digit_typo": "GB82 WEST 1234 5698 7654 33",
    "de_one_short": "DE89 3704 0044 0532 0130 0",
    "unknown_country": "XX89 3704 0044 0532 0130 00",
    "hyphenated": "DE89-3704-0044-0532-0130-00",
}


@pytest.mark.parametrize("text", NOT_IBANS.values(), ids=NOT_IBANS.keys())
def test_iban_look_alikes_are_not_found(text: str) -> None:
    assert found(f"IBAN {text} end", "iban") == []


def test_an_iban_glued_to_other_characters_is_still_found() -> None:
    assert found("ref:ABCDE89370400440532013000XYZ", "iban") == ["DE89370400440532013000"]


def test_an_iban_followed_by_words_ends_at_its_registered_length() -> None:
    assert found("DE89 3704 0044 0532 0130 00 please pay", "iban") == [
        "DE89 3704 0044 0532 0130 00"
    ]


PHONES = {
    "us_international": ("+1 650-253-0000", None),
    "us_parentheses": ("+1 (650) 253-0000", None),
    "uk_international": ("+44 20 7946 0958", None),
    "de_international": ("+49 30 901820", None),
    "de_trunk_prefix_in_parentheses": ("+49 (0)30 901820", None),
    "fr_international": ("+33 1 42 68 53 00", None),
    "jp_international": ("+81 3-1234-5678", None),
    "au_international": ("+61 2 9374 4000", None),
    "in_international": ("+91 98765 43210", None),
    "us_national": ("(650) 253-0000", "US"),
    "us_dots": ("650.253.0000", "US"),
    "us_compact": ("6502530000", "US"),
    "uk_national": ("020 7946 0958", "GB"),
    "de_national": ("030 901820", "DE"),
    "fr_national_pairs": ("06 12 34 56 78", "FR"),
    "nl_national": ("0612345678", "NL"),
    "international_with_other_region": ("+1 650 253 0000", "DE"),
}


@pytest.mark.parametrize(("number", "region"), PHONES.values(), ids=PHONES.keys())
def test_phone_numbers_are_found(number: str, region: str | None) -> None:
    assert found(f"call {number} today", "phone", region=region) == [number]


NOT_PHONES = {
    "national_without_region": ("(650) 253-0000", None),
    "national_of_another_region": ("020 7946 0958", "US"),
    "date": ("12/05/2024", "US"),
    "iso_date": ("2024-01-15", "US"),
    "time": ("12:30", "US"),
    "page_range": ("pages 123-125", "US"),
    "version": ("version 1.2.3", "US"),
    "short_order_number": ("order 12345", "US"),
    "unassigned_number_at_valid": ("555 123 4567", "US"),
    "fiction_range_at_valid": ("07700 900123", "GB"),
    "vanity": ("1-800-FLOWERS", "US"),
    "glued_to_letters": ("call6502530000", "US"),
}


@pytest.mark.parametrize(("text", "region"), NOT_PHONES.values(), ids=NOT_PHONES.keys())
def test_phone_look_alikes_are_not_found(text: str, region: str | None) -> None:
    assert found(text, "phone", region=region) == []


def test_possible_leniency_finds_unassigned_numbers_that_valid_leaves() -> None:
    assert found("555 123 4567", "phone", region="US", leniency="possible") == ["555 123 4567"]


def test_detectors_never_share_a_span_and_keep_text_order() -> None:
    text = "x@example.com DE89370400440532013000 4111111111111111 +1 650-253-0000"
    spans = PiiPolicy(PiiPolicySpec(phone_region="US")).find(text)
    assert [span.kind for span in spans] == ["email", "iban", "card", "phone"]
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))
