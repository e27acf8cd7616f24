"""The human decision request contract (reference-facts §1, §2 and §8)."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from channels import errors
from channels.decisions.choices import text_input, validate_choices, validate_response
from channels.decisions.dates import iso_from_ms, ms_from_iso
from channels.decisions.digests import digest_canonical, digest_plain
from channels.decisions.errors import (
    DecisionError,
    ExpiredRequest,
    IncompatibleRequest,
    InvalidPresentation,
    InvalidRequest,
    InvalidResponse,
    StaleAnswer,
)
from channels.decisions.request import (
    CHANNEL_SCHEMA,
    INCOMPATIBLE_MESSAGE,
    DecisionRequest,
    OnTimeout,
    answer_digest,
    build_request,
    channel_request_document,
    human_attempt_id,
    load_request,
    timeout_answer_digest,
    validate_source,
    validate_submission,
)

CREATED_MS = ms_from_iso("2026-08-19T00:00:00.000Z")
TIMEOUT_CREATED_MS = ms_from_iso("2099-01-01T00:00:00.000Z")
PRESENTATION: dict[str, Any] = {
    "schema": "pi-workflows.decision-presentation.v1",
    "summary": "Review this decision.",
    "blocks": [],
}
REPLAN_INPUT = {
    "kind": "text",
    "name": "instructions",
    "prompt": "What should change?",
    "minLength": 1,
    "maxLength": 4000,
}
CHOICES: dict[str, Any] = {
    "continue": {"label": "Continue"},
    "replan": {"label": "Replan", "input": REPLAN_INPUT},
}
SOURCE = {"channel": "telegram:approval", "actorId": "100", "eventId": "callback-1"}


def make(**overrides: Any) -> DecisionRequest:
    """The §8 vector request, with keyword overrides."""
    arguments: dict[str, Any] = {
        "run_id": "run-a",
        "workflow_name": "workflow-a",
        "node_id": "approve",
        "attempt_id": "attempt-a",
        "audience": "operator",
        "choices": CHOICES,
        "title": "Approve",
        "subject": {"plan": "a"},
        "presentation": PRESENTATION,
        "created_at_ms": CREATED_MS,
    }
    arguments.update(overrides)
    return build_request(**arguments)


def make_timeout() -> DecisionRequest:
    """The §8 timeout variant."""
    return make(
        run_id="run-timeout",
        attempt_id="attempt-timeout",
        choices={"continue": {"label": "Continue"}},
        created_at_ms=TIMEOUT_CREATED_MS,
        on_timeout=OnTimeout(after_ms=600_000, response={"choice": "continue"}),
    )


def exact(message: str) -> str:
    return f"^{re.escape(message)}$"


# --- Reference vectors ----------------------------------------------------------------------


def test_vector_request_has_the_reference_id_and_digests() -> None:
    request = make()
    assert request.decision_id == "decision-9c0b54a3a25899eeb84d5d01955f048a6586a94d"
    assert request.request_digest == (
        "sha256:515c5a772b6ede232eab7857b1e37d090dd5f265301424ef3e663e4aabf0ba97"
    )
    assert request.subject_digest == (
        "sha256:b12302086d7e05d2ff28e733e9d1a1ca447af9d245739026b79a5b82a80e4d13"
    )
    assert request.presentation_digest == (
        "sha256:a315f80663f4a4949f906cda09eff437ac7cc62753c1cef5ebf20c13ad6d610b"
    )


def test_the_text_input_helper_gives_the_reference_defaults() -> None:
    assert text_input("instructions", "What should change?") == REPLAN_INPUT
    choices: dict[str, Any] = {"continue": {"label": "Continue"}, "replan": {"label": "Replan"}}
    choices["replan"]["input"] = text_input("instructions", "What should change?")
    assert make(choices=choices).request_digest == make().request_digest


def test_vector_request_document_holds_every_contract_field() -> None:
    request = make()
    assert request.document == {
        "schema": "pi-workflows.human-decision-request.v1",
        "runId": "run-a",
        "workflowName": "workflow-a",
        "nodeId": "approve",
        "attemptId": "attempt-a",
        "audience": "operator",
        "title": "Approve",
        "choices": CHOICES,
        "subject": {"plan": "a"},
        "presentation": PRESENTATION,
        "revision": 1,
        "decisionId": request.decision_id,
        "requestDigest": request.request_digest,
        "subjectDigest": request.subject_digest,
        "presentationDigest": request.presentation_digest,
        "createdAt": "2026-08-19T00:00:00.000Z",
    }
    assert request.created_at_ms == 1_787_097_600_000
    assert request.expires_at_ms is None
    assert request.default_response is None


def test_timeout_variant_has_the_reference_id_digest_and_expiry() -> None:
    request = make_timeout()
    assert request.decision_id == "decision-afd77f0acfa7702fc828ecd59f74962543efb1fc"
    assert request.request_digest == (
        "sha256:40fb6e4eb03343533d9c1cc04f906394217a416ac403fc64a17d13e65d60e329"
    )
    assert request.document["expiresAt"] == "2099-01-01T00:10:00.000Z"
    assert request.document["defaultResponse"] == {"choice": "continue"}
    assert request.expires_at_ms == TIMEOUT_CREATED_MS + 600_000


def test_timeout_answer_digest_matches_the_reference() -> None:
    request = make_timeout()
    assert request.default_response is not None
    assert timeout_answer_digest(request.request_digest, request.default_response) == (
        "sha256:4b61eaeffec790e26c7bcda20162f8faffde338d957880f597707ca9729995f0"
    )


def test_human_answer_digest_is_the_plain_digest_of_response_and_source() -> None:
    response = validate_response(CHOICES, {"choice": "continue"})
    source = validate_source(SOURCE)
    assert answer_digest(response, source) == digest_plain({"response": response, "source": source})
    canonical = (
        b'{"response":{"choice":"continue"},"source":'
        b'{"actorId":"100","channel":"telegram:approval","eventId":"callback-1"}}'
    )
    assert answer_digest(response, source) == "sha256:" + hashlib.sha256(canonical).hexdigest()


def test_human_attempt_id_is_40_hex_of_the_plain_digest() -> None:
    attempt = human_attempt_id("decision-x", "telegram:approval:1")
    expected = digest_plain({"decisionId": "decision-x", "idempotencyKey": "telegram:approval:1"})
    assert attempt == expected.removeprefix("sha256:")[:40]


# --- Title, audience, revision and subject --------------------------------------------------


def test_title_is_stored_untrimmed() -> None:
    assert make(title="  Approve  ").document["title"] == "  Approve  "


@pytest.mark.parametrize(
    ("title", "message"),
    [
        ("", "Human decision title must be a non-empty string"),
        (" \t\u00a0\ufeff", "Human decision title must be a non-empty string"),
        (None, "Human decision title must be a non-empty string"),
        ("Approve\nnow", "Human decision title contains a control character"),
        ("Approve\x7f", "Human decision title contains a control character"),
    ],
)
def test_invalid_titles_are_rejected(title: Any, message: str) -> None:
    with pytest.raises(InvalidRequest, match=exact(message)):
        make(title=title)


@pytest.mark.parametrize(
    ("audience", "message"),
    [
        ("", "Human decision audience must be a non-empty string"),
        ("9ops", "Human decision audience is invalid"),
        ("ops team", "Human decision audience is invalid"),
        ("a" * 129, "Human decision audience is invalid"),
    ],
)
def test_audiences_must_match_the_name_pattern(audience: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=exact(message)):
        make(audience=audience)


def test_audience_accepts_underscore_dash_and_128_characters() -> None:
    assert make(audience="_ops-" + "a" * 123).document["audience"] == "_ops-" + "a" * 123


@pytest.mark.parametrize("revision", [0, -1, 1.5, True, "2"])
def test_revision_must_be_a_positive_integer(revision: Any) -> None:
    with pytest.raises(
        InvalidRequest, match=exact("Human decision revision must be a positive integer")
    ):
        make(revision=revision)


def test_revision_enters_the_request_digest() -> None:
    assert make(revision=2).document["revision"] == 2
    assert make(revision=2).request_digest != make().request_digest


@pytest.mark.parametrize("subject", [math.nan, math.inf, {"when": object()}, {1: "a"}])
def test_subject_must_be_json_serializable(subject: Any) -> None:
    with pytest.raises(
        InvalidRequest, match=exact("Human decision subject must be JSON-serializable")
    ):
        make(subject=subject)


def test_subject_is_copied_so_later_changes_do_not_alter_the_request() -> None:
    subject = {"plan": ["a"]}
    request = make(subject=subject)
    subject["plan"].append("b")
    assert request.document["subject"] == {"plan": ["a"]}


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("run_id", "Human decision runId must be a non-empty string"),
        ("attempt_id", "Human decision attemptId must be a non-empty string"),
    ],
)
def test_identity_fields_must_be_non_empty(field: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=exact(message)):
        make(**{field: ""})


# --- Choices --------------------------------------------------------------------------------


def test_choices_keep_insertion_order_and_extra_keys_enter_the_digest() -> None:
    choices = {"zeta": {"label": "Z"}, "alpha": {"label": "A", "hint": "extra"}}
    request = make(choices=choices)
    assert list(request.choices) == ["zeta", "alpha"]
    assert request.choices["alpha"] == {"label": "A", "hint": "extra"}
    plain = make(choices={"zeta": {"label": "Z"}, "alpha": {"label": "A"}})
    assert plain.request_digest != request.request_digest


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        ({}, "Human decision choices must not be empty"),
        ([], "Human decision choices must be an object"),
        ({"1st": {"label": "L"}}, 'Human decision choice "1st" is invalid'),
        ({"a b": {"label": "L"}}, 'Human decision choice "a b" is invalid'),
        ({"ok": "Continue"}, "Human decision choice ok must be an object"),
        ({"ok": {}}, "Human decision choice ok label must be a non-empty string"),
        ({"ok": {"label": "  "}}, "Human decision choice ok label must be a non-empty string"),
        ({"ok": {"label": "L\tx"}}, "Human decision choice ok label contains a control character"),
        (
            {"a": {"label": "Same"}, "b": {"label": "Same"}},
            'Human decision choice label "Same" is duplicated',
        ),
        ({"ok": {"label": "L", "input": None}}, "Human decision choice ok input must be an object"),
        (
            {"ok": {"label": "L", "input": {**REPLAN_INPUT, "kind": "number"}}},
            "Human decision choice ok input kind must be text",
        ),
        (
            {"ok": {"label": "L", "input": {**REPLAN_INPUT, "name": "bad name"}}},
            "Human decision choice ok input name is invalid",
        ),
        (
            {"ok": {"label": "L", "input": {**REPLAN_INPUT, "prompt": ""}}},
            "Human decision choice ok input prompt must be a non-empty string",
        ),
        (
            {"ok": {"label": "L", "input": {**REPLAN_INPUT, "prompt": "Why?\n"}}},
            "Human decision choice ok input prompt contains a control character",
        ),
        (
            {"ok": {"label": "L", "input": {**REPLAN_INPUT, "minLength": -1}}},
            "Human decision choice ok input minLength must be a non-negative integer",
        ),
        (
            {"ok": {"label": "L", "input": {**REPLAN_INPUT, "minLength": 5, "maxLength": 4}}},
            "Human decision choice ok input maxLength is invalid",
        ),
        (
            {"ok": {"label": "L", "input": {**REPLAN_INPUT, "minLength": 0, "maxLength": 0}}},
            "Human decision choice ok input maxLength is invalid",
        ),
    ],
)
def test_invalid_choices_are_rejected(choices: Any, message: str) -> None:
    with pytest.raises(InvalidRequest, match=exact(message)):
        validate_choices(choices)
    with pytest.raises(InvalidRequest, match=exact(message)):
        make(choices=choices)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"name": "1x", "prompt": "P"}, "Human decision text input name is invalid"),
        (
            {"name": "x", "prompt": " "},
            "Human decision text input prompt must be a non-empty string",
        ),
        (
            {"name": "x", "prompt": "P", "min_length": 1.5},
            "Human decision text input minLength must be a non-negative integer",
        ),
        (
            {"name": "x", "prompt": "P", "min_length": 10, "max_length": 9},
            "Human decision text input maxLength must be a positive integer at least minLength",
        ),
    ],
)
def test_text_input_helper_rejects_invalid_definitions(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=exact(message)):
        text_input(**arguments)


# --- Responses ------------------------------------------------------------------------------


def test_a_no_input_choice_normalizes_to_the_choice_alone() -> None:
    assert validate_response(CHOICES, {"choice": "continue", "note": "ignored"}) == {
        "choice": "continue"
    }


def test_input_text_is_kept_exactly() -> None:
    text = "  use the smaller option\nkeep this  "
    response = {"choice": "replan", "input": {"instructions": text}}
    assert validate_response(CHOICES, response) == response


@pytest.mark.parametrize(
    ("response", "message"),
    [
        ("continue", "Human decision response must be an object"),
        ({}, "Human decision choice undefined is not available"),
        ({"choice": "stop"}, 'Human decision choice "stop" is not available'),
        ({"choice": 3}, "Human decision choice 3 is not available"),
        ({"choice": None}, "Human decision choice null is not available"),
        (
            {"choice": "continue", "input": {"x": "y"}},
            "Human decision choice continue does not accept input",
        ),
        (
            {"choice": "continue", "input": None},
            "Human decision choice continue does not accept input",
        ),
        ({"choice": "replan"}, "Human decision choice replan input must be an object"),
        (
            {"choice": "replan", "input": {}},
            "Human decision choice replan input must contain only instructions",
        ),
        (
            {"choice": "replan", "input": {"instructions": "a", "extra": "b"}},
            "Human decision choice replan input must contain only instructions",
        ),
        (
            {"choice": "replan", "input": {"instructions": 5}},
            "Human decision choice replan input must be text",
        ),
        (
            {"choice": "replan", "input": {"instructions": ""}},
            "Human decision choice replan input length must be 1 through 4000",
        ),
        (
            {"choice": "replan", "input": {"instructions": "🙂" * 2_000 + "x"}},
            "Human decision choice replan input length must be 1 through 4000",
        ),
    ],
)
def test_invalid_responses_are_rejected_with_the_reference_message(
    response: Any, message: str
) -> None:
    with pytest.raises(InvalidResponse, match=exact(message)):
        validate_response(CHOICES, response)


@given(st.integers(min_value=0, max_value=12), st.integers(min_value=0, max_value=12))
def test_input_length_counts_utf16_code_units(emoji: int, letters: int) -> None:
    choices: dict[str, Any] = {
        "c": {"label": "C", "input": text_input("t", "P", min_length=3, max_length=10)}
    }
    text = "🙂" * emoji + "x" * letters
    length = 2 * emoji + letters
    response = {"choice": "c", "input": {"t": text}}
    if 3 <= length <= 10:
        assert validate_response(choices, response) == response
    else:
        with pytest.raises(InvalidResponse, match="input length must be 3 through 10"):
            validate_response(choices, response)


# --- Deadline -------------------------------------------------------------------------------


def test_a_request_without_deadline_waits_indefinitely() -> None:
    request = make()
    assert "expiresAt" not in request.document
    assert "defaultResponse" not in request.document


def test_an_explicit_expiry_is_normalized_to_iso_and_has_no_default() -> None:
    request = make(expires_at="2026-08-19T02:30:00+02:00")
    assert request.document["expiresAt"] == "2026-08-19T00:30:00.000Z"
    assert "defaultResponse" not in request.document
    assert request.expires_at_ms == CREATED_MS + 30 * 60_000


def test_a_timeout_default_with_input_is_validated_and_stored() -> None:
    default = {"choice": "replan", "input": {"instructions": "shrink it"}}
    request = make(on_timeout=OnTimeout(after_ms=1_000, response=default))
    assert request.document["defaultResponse"] == default
    assert request.document["expiresAt"] == "2026-08-19T00:00:01.000Z"


def test_a_fractional_timeout_is_truncated_like_a_javascript_date() -> None:
    request = make(on_timeout=OnTimeout(after_ms=1.9, response={"choice": "continue"}))
    assert request.document["expiresAt"] == "2026-08-19T00:00:00.001Z"


def test_a_json_timeout_object_becomes_an_on_timeout() -> None:
    on_timeout = OnTimeout.from_json({"afterMs": 600_000, "response": {"choice": "continue"}})
    assert on_timeout == OnTimeout(after_ms=600_000, response={"choice": "continue"})
    with pytest.raises(
        InvalidRequest,
        match=exact("Human decision onTimeout must be an object with afterMs and response"),
    ):
        OnTimeout.from_json({"afterMs": 1})


def test_deadline_forms_cannot_be_combined() -> None:
    with pytest.raises(
        InvalidRequest,
        match=exact("Human decision request cannot combine expiresAt with onTimeout"),
    ):
        make(
            expires_at="2026-08-20T00:00:00.000Z",
            on_timeout=OnTimeout(after_ms=1_000, response={"choice": "continue"}),
        )


@pytest.mark.parametrize("after_ms", [0, -5, math.inf, math.nan, True, "1000"])
def test_timeout_must_be_finite_and_positive(after_ms: Any) -> None:
    with pytest.raises(
        InvalidRequest,
        match=exact("Human decision onTimeout afterMs must be a finite positive number"),
    ):
        make(on_timeout=OnTimeout(after_ms=after_ms, response={"choice": "continue"}))


def test_an_unknown_default_choice_is_rejected() -> None:
    with pytest.raises(
        InvalidRequest, match=exact('Human decision choice "stop" is not available')
    ):
        make(on_timeout=OnTimeout(after_ms=1_000, response={"choice": "stop"}))


def test_a_timeout_beyond_the_javascript_date_range_is_rejected() -> None:
    with pytest.raises(InvalidRequest, match="afterMs is out of range"):
        make(on_timeout=OnTimeout(after_ms=1e300, response={"choice": "continue"}))


@pytest.mark.parametrize(
    "expires_at", ["tomorrow", "2026-08-19T01:00:00", "2026-02-30T00:00:00Z", "2026-13-01", ""]
)
def test_an_expiry_must_be_an_iso_timestamp(expires_at: str) -> None:
    with pytest.raises(
        InvalidRequest, match=exact("Human decision expiry must be an ISO timestamp")
    ):
        make(expires_at=expires_at)


@pytest.mark.parametrize("expires_at", ["2026-08-19T00:00:00.000Z", "2026-08-18T23:59:59.999Z"])
def test_an_expiry_at_or_before_creation_is_rejected(expires_at: str) -> None:
    with pytest.raises(InvalidRequest, match=exact("Human decision expiry must be after creation")):
        make(expires_at=expires_at)


# --- Presentation inside a request ----------------------------------------------------------


@pytest.mark.parametrize(
    ("presentation", "message"),
    [
        ({**PRESENTATION, "extra": True}, "Decision presentation has unknown field extra"),
        (
            {"schema": PRESENTATION["schema"], "blocks": []},
            "Decision presentation is missing summary",
        ),
        (
            {**PRESENTATION, "blocks": [{"kind": "paragraph", "text": "x" * 16_001}]},
            "Decision presentation block 1 text has 16001 UTF-16 code units; limit is 16000",
        ),
    ],
)
def test_an_invalid_presentation_makes_the_request_invalid(
    presentation: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidPresentation, match=exact(message)) as caught:
        make(presentation=presentation)
    assert isinstance(caught.value, InvalidRequest)


def test_the_stored_presentation_is_normalized() -> None:
    request = make(presentation={**PRESENTATION, "summary": "Cafe\u0301"})
    assert request.document["presentation"]["summary"] == "Café"
    assert request.presentation_digest == digest_canonical(request.document["presentation"])


# --- Reading stored requests ----------------------------------------------------------------


def test_a_stored_request_loads_back_to_the_same_record() -> None:
    for request in (make(), make_timeout()):
        assert load_request(request.document) == request


def test_a_tampered_subject_fails_the_read_check() -> None:
    document = {**make().document, "subject": {"plan": "b"}}
    with pytest.raises(
        IncompatibleRequest,
        match=exact("Human decision subject digest does not match its durable request"),
    ):
        load_request(document)


def test_a_tampered_title_fails_the_request_digest_check() -> None:
    document = {**make().document, "title": "Approve!"}
    with pytest.raises(
        IncompatibleRequest,
        match=exact("Human decision request digest does not match its durable request"),
    ):
        load_request(document)


def test_a_tampered_presentation_fails_the_presentation_digest_check() -> None:
    document = {**make().document, "presentation": {**PRESENTATION, "summary": "Other."}}
    with pytest.raises(
        IncompatibleRequest,
        match=exact("Human decision presentation digest does not match its durable request"),
    ):
        load_request(document)


@pytest.mark.parametrize("change", [{"schema": "pi-workflows.human-decision-request.v2"}, {}])
def test_a_wrong_schema_or_missing_field_is_an_incompatible_contract(
    change: dict[str, str],
) -> None:
    document = {**make().document, **change}
    if not change:
        del document["subjectDigest"]
    with pytest.raises(IncompatibleRequest, match=exact(INCOMPATIBLE_MESSAGE)):
        load_request(document)


def test_the_channel_request_omits_the_subject_and_names_its_source_schema() -> None:
    request = make_timeout()
    channel = channel_request_document(request)
    assert channel["schema"] == CHANNEL_SCHEMA
    assert channel["sourceSchema"] == "pi-workflows.human-decision-request.v1"
    assert "subject" not in channel
    assert "subjectDigest" not in channel
    assert channel["presentationDigest"] == request.presentation_digest
    assert channel["expiresAt"] == "2099-01-01T00:10:00.000Z"
    assert channel["defaultResponse"] == {"choice": "continue"}


# --- Submissions ----------------------------------------------------------------------------


def submit(request: DecisionRequest, **overrides: Any) -> Any:
    arguments: dict[str, Any] = {
        "decision_id": request.decision_id,
        "request_digest": request.request_digest,
        "response": {"choice": "continue"},
        "source": SOURCE,
        "idempotency_key": "telegram:approval:callback-1",
        "now_ms": TIMEOUT_CREATED_MS,
    }
    arguments.update(overrides)
    return validate_submission(request, **arguments)


def test_a_valid_submission_is_normalized() -> None:
    submission = submit(make_timeout())
    assert submission.response == {"choice": "continue"}
    assert submission.source == SOURCE
    assert submission.idempotency_key == "telegram:approval:callback-1"


@pytest.mark.parametrize("field", ["decision_id", "request_digest"])
def test_an_answer_for_another_request_is_stale(field: str) -> None:
    with pytest.raises(
        StaleAnswer, match=exact("Human decision answer is stale or belongs to another request")
    ):
        submit(make_timeout(), **{field: "other"})


def test_an_answer_at_the_expiry_instant_is_expired_even_with_a_default() -> None:
    request = make_timeout()
    assert request.expires_at_ms is not None
    submit(request, now_ms=request.expires_at_ms - 1)
    with pytest.raises(ExpiredRequest, match=exact("Human decision request has expired")):
        submit(request, now_ms=request.expires_at_ms)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"source": {**SOURCE, "channel": "tele gram"}}, "Human decision channel is invalid"),
        ({"source": {**SOURCE, "actorId": ""}}, "Human decision actor must be a non-empty string"),
        ({"source": {**SOURCE, "eventId": " "}}, "Human decision event must be a non-empty string"),
        ({"source": None}, "Human decision source must be an object"),
        ({"idempotency_key": ""}, "Human decision idempotency key must be a non-empty string"),
        ({"response": {"choice": "stop"}}, 'Human decision choice "stop" is not available'),
    ],
)
def test_invalid_submissions_are_rejected(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidResponse, match=exact(message)):
        submit(make_timeout(), **overrides)


# --- Time -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2026-08-19", "2026-08-19T00:00:00.000Z"),
        ("2026-08", "2026-08-01T00:00:00.000Z"),
        ("2024-02-29T23:59:59.9999Z", "2024-02-29T23:59:59.999Z"),
        ("2026-08-19T00:00-05:30", "2026-08-19T05:30:00.000Z"),
        ("2026-08-19T24:00:00Z", "2026-08-20T00:00:00.000Z"),
        ("+010000-01-01T00:00:00.000Z", "+010000-01-01T00:00:00.000Z"),
        ("-000001-12-31T00:00:00.000Z", "-000001-12-31T00:00:00.000Z"),
    ],
)
def test_iso_timestamps_parse_and_print_like_javascript_dates(text: str, iso: str) -> None:
    assert iso_from_ms(ms_from_iso(text)) == iso


@pytest.mark.parametrize(
    "text", ["2026-08-19T00:00:00", "2023-02-29", "2026-08-19T24:00:01Z", "-000000-01-01"]
)
def test_unparseable_or_local_timestamps_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match=r"ISO timestamp|valid date"):
        ms_from_iso(text)


@given(st.integers(min_value=-8_640_000_000_000_000, max_value=8_640_000_000_000_000))
def test_iso_round_trips_every_javascript_time_value(ms: int) -> None:
    assert ms_from_iso(iso_from_ms(ms)) == ms


# --- Errors ---------------------------------------------------------------------------------


def _subclasses(root: type[errors.ChannelsError]) -> list[type[errors.ChannelsError]]:
    found = [root]
    for child in root.__subclasses__():
        found.extend(_subclasses(child))
    return found


def test_every_error_class_has_a_unique_code_and_a_docstring() -> None:
    classes = _subclasses(errors.ChannelsError)
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes))
    assert all(cls.__doc__ for cls in classes)
    assert issubclass(DecisionError, ValueError)
