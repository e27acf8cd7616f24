"""Presentation schema, decision text and the Telegram split (reference-facts §1, §3, §8)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from channels.decisions.choices import text_input
from channels.decisions.dates import ms_from_iso
from channels.decisions.errors import InvalidPresentation
from channels.decisions.presentation import (
    SCHEMA,
    decision_segments,
    fingerprint,
    normalize_presentation,
    presentation_code_units,
    render_decision_text,
    render_person_text,
)
from channels.decisions.request import DecisionRequest, OnTimeout, build_request
from channels.telegram.buttons import callback_token
from channels.text import operator_safe_text

CREATED_MS = ms_from_iso("2026-08-19T00:00:00.000Z")
CHOICES: dict[str, Any] = {
    "continue": {"label": "Continue"},
    "replan": {"label": "Replan", "input": text_input("instructions", "What should change?")},
}


def presentation(summary: str = "Review this decision.", *blocks: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "summary": summary, "blocks": list(blocks)}


def vector_request() -> DecisionRequest:
    return build_request(
        run_id="run-a",
        workflow_name="workflow-a",
        node_id="approve",
        attempt_id="attempt-a",
        audience="operator",
        choices=CHOICES,
        title="Approve",
        subject={"plan": "a"},
        presentation=presentation(),
        created_at_ms=CREATED_MS,
    )


def readable_request(*blocks: Any, title: str = "Approve readable plan") -> DecisionRequest:
    """The reference test's `presentedRequest` helper."""
    return build_request(
        run_id="run-readable",
        workflow_name="workflow-readable",
        node_id="approve",
        attempt_id="attempt-readable",
        audience="operator",
        choices=CHOICES,
        title=title,
        subject={"privateMachineField": "not-for-display"},
        presentation=presentation("Review this readable plan.", *blocks),
        created_at_ms=CREATED_MS,
    )


def paragraph(text: str) -> dict[str, str]:
    return {"kind": "paragraph", "text": text}


def body(part: str) -> str:
    return part.split("\n\n", 1)[1]


# --- Reference vectors ----------------------------------------------------------------------


def test_callback_tokens_match_the_reference() -> None:
    request = vector_request()
    tokens = [callback_token(request.decision_id, request.request_digest, c) for c in CHOICES]
    assert tokens == ["piw:bb71a7217a559dedb6a26f4e", "piw:1b88630ac41bd9b13c5af743"]
    assert all(len(token) == 28 for token in tokens)


def test_fingerprint_is_the_first_12_hex_of_the_presentation_digest() -> None:
    assert fingerprint(vector_request().presentation_digest) == "a315f80663f4"


def test_rendered_text_ends_with_the_decision_line_and_hides_the_subject() -> None:
    text = render_decision_text(readable_request(paragraph("Apply the safe change.")).document)
    assert text.startswith("Approve readable plan\n\nReview this readable plan.\n\n")
    assert "Apply the safe change." in text
    assert "What should change?" in text
    assert "privateMachineField" not in text
    assert "not-for-display" not in text
    assert text.endswith("\n\nDecision " + text[-12:])


# --- Normalization --------------------------------------------------------------------------


def test_normalization_turns_crlf_and_cr_into_lf_and_applies_nfc() -> None:
    value = presentation(
        "Cafe\u0301", paragraph("a\r\nb\rc"), {"kind": "section", "title": "e\u0301"}
    )
    normalized = normalize_presentation(value)
    assert normalized["summary"] == "Café"
    assert normalized["blocks"] == [
        {"kind": "paragraph", "text": "a\nb\nc"},
        {"kind": "section", "title": "é"},
    ]


def test_every_block_kind_normalizes_to_its_exact_shape() -> None:
    blocks = [
        paragraph("p"),
        {"kind": "section", "title": "s"},
        {"kind": "bullets", "items": ["one", "two"]},
        {"kind": "fields", "items": [{"label": "Plan", "value": "a"}]},
        {"kind": "preformatted", "text": "x\ty\n"},
    ]
    assert normalize_presentation(presentation("S", *blocks))["blocks"] == blocks


def test_paragraphs_keep_tab_and_lf() -> None:
    normalized = normalize_presentation(presentation("S", paragraph("a\tb\nc")))
    assert normalized["blocks"] == [paragraph("a\tb\nc")]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "Decision presentation must be an object"),
        ({"schema": SCHEMA, "summary": "S"}, "Decision presentation is missing blocks"),
        ({"schema": SCHEMA}, "Decision presentation is missing summary, blocks"),
        (
            {**presentation("S"), "extra": 1, "more": 2},
            "Decision presentation has unknown field extra, more",
        ),
        (
            {**presentation("S"), "schema": "v2"},
            "Decision presentation schema must be pi-workflows.decision-presentation.v1",
        ),
        (presentation(7), "Decision presentation summary must be a string"),  # type: ignore[arg-type]
        (presentation(" \t\u3000"), "Decision presentation summary must not be empty"),
        (presentation("line\nbreak"), "Decision presentation summary contains a control character"),
        (presentation("a\r\nb"), "Decision presentation summary contains a control character"),
        ({**presentation("S"), "blocks": {}}, "Decision presentation blocks must be an array"),
        (presentation("S", "text"), "Decision presentation block 1 must be an object"),
        (
            presentation("S", {"kind": "table"}),
            "Decision presentation block 1 kind is not supported",
        ),
        (presentation("S", {"text": "x"}), "Decision presentation block 1 kind is not supported"),
        (presentation("S", {"kind": "paragraph"}), "Decision presentation block 1 is missing text"),
        (
            presentation("S", {"kind": "paragraph", "text": "x", "title": "y"}),
            "Decision presentation block 1 has unknown field title",
        ),
        (
            presentation("S", paragraph("ok"), paragraph("bell\a")),
            "Decision presentation block 2 text contains a terminal control character",
        ),
        (
            presentation("S", {"kind": "preformatted", "text": "esc\x1b[0m"}),
            "Decision presentation block 1 text contains a terminal control character",
        ),
        (
            presentation("S", {"kind": "section", "title": "a\tb"}),
            "Decision presentation block 1 title contains a control character",
        ),
        (
            presentation("S", {"kind": "bullets", "items": []}),
            "Decision presentation block 1 items must be a non-empty array",
        ),
        (
            presentation("S", {"kind": "bullets", "items": ["ok", "del\x7f"]}),
            "Decision presentation block 1 items item 2 contains a control character",
        ),
        (
            presentation("S", {"kind": "fields", "items": [{"label": "L"}]}),
            "Decision presentation block 1 items item 1 is missing value",
        ),
        (
            presentation("S", {"kind": "fields", "items": [{"label": "L", "value": "a\nb"}]}),
            "Decision presentation block 1 items item 1 value contains a control character",
        ),
        (
            presentation("S", {"kind": "fields", "items": [{"label": " ", "value": "v"}]}),
            "Decision presentation block 1 items item 1 label must not be empty",
        ),
    ],
)
def test_invalid_presentations_are_rejected_with_the_reference_message(
    value: Any, message: str
) -> None:
    with pytest.raises(InvalidPresentation, match=f"^{re.escape(message)}$"):
        normalize_presentation(value)


def test_a_string_over_16000_code_units_is_rejected_counting_emoji_as_two() -> None:
    normalize_presentation(presentation("S", paragraph("🙂" * 8_000)))
    with pytest.raises(
        InvalidPresentation,
        match=r"^Decision presentation block 1 text has 16002 UTF-16 code units; limit is 16000$",
    ):
        normalize_presentation(presentation("S", paragraph("🙂" * 8_001)))


def test_more_than_256_blocks_are_rejected() -> None:
    normalize_presentation(presentation("S", *[paragraph("x")] * 256))
    with pytest.raises(
        InvalidPresentation, match=r"^Decision presentation has 257 blocks; limit is 256$"
    ):
        normalize_presentation(presentation("S", *[paragraph("x")] * 257))


def test_more_than_256_items_in_a_block_are_rejected() -> None:
    normalize_presentation(presentation("S", {"kind": "bullets", "items": ["x"] * 256}))
    with pytest.raises(
        InvalidPresentation,
        match=r"^Decision presentation block 1 items has 257 items; limit is 256$",
    ):
        normalize_presentation(presentation("S", {"kind": "bullets", "items": ["x"] * 257}))


def test_a_presentation_over_64000_code_units_in_total_is_rejected() -> None:
    blocks = [paragraph("x" * 16_000)] * 4
    with pytest.raises(
        InvalidPresentation,
        match=r"^Decision presentation has 64001 UTF-16 code units; limit is 64000$",
    ):
        normalize_presentation(presentation("S", *blocks))


def test_the_total_counts_summary_texts_titles_items_labels_and_values() -> None:
    normalized = normalize_presentation(
        presentation(
            "12345",
            paragraph("ab"),
            {"kind": "section", "title": "abc"},
            {"kind": "bullets", "items": ["a", "🙂"]},
            {"kind": "fields", "items": [{"label": "ab", "value": "c"}]},
        )
    )
    assert presentation_code_units(normalized) == 5 + 2 + 3 + 3 + 3


# --- Segments and operator-safe text --------------------------------------------------------


def test_operator_safe_text_replaces_terminal_controls_and_keeps_tab_lf_and_c1() -> None:
    assert operator_safe_text("a\r\nb\rc\td\x00e\x0bf\x1bg\x7fh\x85i") == (
        "a\nb\nc\td\ufffde\ufffdf\ufffdg\ufffdh\x85i"
    )


def test_segments_render_bullets_fields_and_the_timeout_notice() -> None:
    request = build_request(
        run_id="run-s",
        workflow_name="workflow-s",
        node_id="approve",
        attempt_id="attempt-s",
        audience="operator",
        choices=CHOICES,
        title="Title",
        subject=None,
        presentation=presentation(
            "Summary",
            {"kind": "section", "title": "Heading"},
            {"kind": "bullets", "items": ["one", "two"]},
            {
                "kind": "fields",
                "items": [{"label": "Plan", "value": "a"}, {"label": "B", "value": "c"}],
            },
            {"kind": "preformatted", "text": "  code"},
        ),
        created_at_ms=CREATED_MS,
        on_timeout=OnTimeout(after_ms=60_000, response={"choice": "continue"}),
    )
    assert [(s.kind, s.text) for s in decision_segments(request.document)] == [
        ("title", "Title"),
        ("summary", "Summary"),
        ("section", "Heading"),
        ("bullets", "• one\n• two"),
        ("fields", "Plan: a\nB: c"),
        ("preformatted", "  code"),
        (
            "paragraph",
            "If no answer is accepted by 2026-08-19T00:01:00.000Z, "
            "this decision continues automatically with: Continue.",
        ),
        ("choices", "Choices\n• Continue\n• Replan\n  What should change?"),
    ]


def test_the_person_reads_a_dated_deadline_where_the_contract_text_has_a_timestamp() -> None:
    timed = build_request(
        run_id="run-p", workflow_name="workflow-p", node_id="approve", attempt_id="attempt-p",
        audience="operator", choices=CHOICES, title="Title", subject=None,
        presentation=presentation(summary="Summary"), created_at_ms=CREATED_MS,
        on_timeout=OnTimeout(after_ms=60_000, response={"choice": "continue"}))
    text = render_person_text(timed.document)
    assert "2026-08-19T00:01:00.000Z" in render_decision_text(timed.document)
    assert "If no answer is accepted" not in text and "T00:01" not in text
    # Dated always: it stays in Pi's transcript, where "in 1 min" would soon be wrong.
    assert text.split("\n\n")[2:] == [
        "Answer by Wed 19 Aug 00:01 UTC; then: Continue",
        "Choices\n• Continue\n• Replan\n  What should change?",
        f"Decision {fingerprint(timed.document['presentationDigest'])}"]
    untimed = render_person_text(vector_request().document)
    assert "No deadline" in untimed.split("\n\n")


def test_rendered_text_makes_control_characters_in_the_title_safe() -> None:
    document = {**vector_request().document, "title": "Bad\x1btitle"}
    assert render_decision_text(document).startswith("Bad\ufffdtitle\n\n")
