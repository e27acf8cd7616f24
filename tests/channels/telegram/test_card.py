"""The decision card as a person reads it: layout, entities, splitting (pure functions).

The card's text is ours to design; it is not held to the reference's `Part n/N` layout (the
ids, digests and callback tokens are, and keep their vectors in tests/channels/decisions).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels.decisions import context
from channels.decisions.dates import ms_from_iso
from channels.decisions.errors import TooManyParts
from channels.decisions.request import OnTimeout, build_request
from channels.telegram.card import card_parts
from channels.telegram.time_left import deadline_line, remaining
from channels.text import utf16_len
from tests.channels.decisions.test_presentation import (
    CHOICES,
    CREATED_MS,
    paragraph,
    readable_request,
    vector_request,
)


def entity_text(text: str, entity: dict[str, Any]) -> str:
    """The text an entity covers, sliced in UTF-16 code units as Telegram does."""
    data = text.encode("utf-16-le")
    start, end = entity["offset"] * 2, (entity["offset"] + entity["length"]) * 2
    return data[start:end].decode("utf-16-le")


def styled(part: Any, style: str) -> list[str]:
    return [entity_text(part.text, e) for e in part.entities if e["type"] == style]


def words(text: str) -> list[str]:
    return text.split()


def test_a_short_card_reads_title_body_choices_deadline_and_its_id_last() -> None:
    [part] = card_parts(vector_request().document, CREATED_MS)
    assert part.text == (
        "Approve\n\nReview this decision.\n\n1. Continue\n2. Replan (then asks: What should"
        " change?)\n\nNo deadline\nDecision a315f80663f4")
    assert styled(part, "bold") == ["Approve"]
    assert styled(part, "code") == ["a315f80663f4"]
    assert (part.silent, part.last) == (False, True)


def test_the_context_line_comes_from_the_presentation_and_is_italic() -> None:
    document = context.with_context(
        {"schema": "pi-workflows.decision-presentation.v1", "summary": "Deploy?", "blocks": []},
        context.Context("web-app", "deploy-review", "laptop"))
    request = build_request(run_id="r", workflow_name="w", node_id="n", attempt_id="a",
                            audience="operator", choices=CHOICES, title="Deploy?",
                            subject={}, presentation=document, created_at_ms=CREATED_MS)
    [part] = card_parts(request.document, CREATED_MS)
    assert styled(part, "italic") == ["web-app · deploy-review · laptop"]
    assert "Project" not in part.text  # shown as the context line, not as fields
    assert part.text.index("web-app") > part.text.index("2. Replan")


def test_a_deadline_reads_as_a_clock_time_and_a_countdown() -> None:
    request = build_request(run_id="r", workflow_name="w", node_id="n", attempt_id="a",
                            audience="operator", choices=CHOICES, title="Deploy?", subject={},
                            presentation={"schema": "pi-workflows.decision-presentation.v1",
                                          "summary": "Deploy?", "blocks": []},
                            on_timeout=OnTimeout(15 * 60_000, {"choice": "continue"}),
                            created_at_ms=ms_from_iso("2026-08-19T16:07:04.656Z"))
    [part] = card_parts(request.document, ms_from_iso("2026-08-19T16:07:05.000Z"))
    assert "Answer by 16:22 UTC, in 15 min; then: Continue" in part.text
    assert "T16:22" not in part.text and "If no answer" not in part.text


def test_deadline_lines() -> None:
    now = ms_from_iso("2026-12-01T16:00:00.000Z")
    assert deadline_line(None, None, now) == "No deadline"
    assert deadline_line("2026-12-01T17:30:00.000Z", None, now) == \
        "Answer by 17:30 UTC, in 1 h 30 min; then it expires"
    assert deadline_line("2026-12-03T09:00:00.000Z", "Stop", now) == \
        "Answer by Thu 3 Dec 09:00 UTC, in 1 day 17 h; then: Stop"
    assert deadline_line("2026-12-01T15:00:00.000Z", "Stop", now) == \
        "The deadline passed at 15:00 UTC; then: Stop"
    assert [remaining(ms) for ms in (1, 60_000, 3_600_000, 90_000_000, 900_000_000)] == \
        ["in under a minute", "in 1 min", "in 1 h", "in 1 day 1 h", "in 10 days"]


def test_markdown_and_html_characters_are_sent_as_they_are() -> None:
    text = "Use *bold*, _it_, `code`, [link](x) <b>tag</b> & 1 < 2 > 0 \\ ~~ || #tag"
    [part] = card_parts(readable_request(paragraph(text)).document, CREATED_MS)
    assert text in part.text  # entities carry the formatting: nothing is escaped or parsed


def test_entities_count_utf16_units_with_emoji_and_right_to_left_text() -> None:
    title = "🚀 موافقة على النشر؟ 👩‍💻"
    code = "rm -rf build/ 🙂\nשלום"
    request = readable_request(paragraph("טקסט מימין לשמאל 🙂 " * 3),
                               {"kind": "preformatted", "text": code}, title=title)
    [part] = card_parts(request.document, CREATED_MS)
    assert styled(part, "bold") == [title]
    assert styled(part, "pre") == [code]
    assert styled(part, "code") == [re.findall(r"Decision (\w+)", part.text)[0]]


def test_a_diff_is_a_code_block_tagged_as_a_diff() -> None:
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-old\n+new"
    [part] = card_parts(readable_request({"kind": "preformatted", "text": diff}).document,
                        CREATED_MS)
    [pre] = [e for e in part.entities if e["type"] == "pre"]
    assert pre["language"] == "diff" and entity_text(part.text, pre) == diff


def test_a_10000_character_body_splits_at_paragraphs_without_losing_or_cutting_a_word() -> None:
    paragraphs = [" ".join(f"word{p}x{w}" for w in range(60)) for p in range(24)]
    body = "\n\n".join(paragraphs)
    assert len(body) > 10_000
    parts = card_parts(readable_request(paragraph(body)).document, CREATED_MS)
    n = len(parts)
    assert n in (3, 4)
    assert all(utf16_len(p.text) <= 4096 for p in parts)
    assert [p.text.split("\n")[0] for p in parts] == \
        ["Approve readable plan", *(f"{k}/{n}" for k in range(2, n + 1))]
    assert parts[0].text.endswith(f"\n\n1/{n}")
    assert [(p.silent, p.last) for p in parts] == \
        [(False, False), *((True, False) for _ in range(n - 2)), (True, True)]
    # Nothing lost, no word cut: the words of the parts, less the markers, are the card's.
    sent = [w for p in parts for w in words(p.text) if not re.fullmatch(rf"\d/{n}", w)]
    whole = words(card_parts(readable_request(paragraph(body)).document, CREATED_MS,
                             limit=10**9)[0].text)
    assert sent == whole
    # Cut at paragraph boundaries: each part but the last ends with a whole paragraph.
    assert all(any(p.text.removesuffix(f"\n\n1/{n}").endswith(paragraph_) for paragraph_
                   in paragraphs) for p in parts[:-1])


def test_a_4000_line_diff_is_split_into_code_blocks_at_line_ends() -> None:
    lines = [f"{'+-'[i % 2]}line {i:04d}" for i in range(4000)]
    blocks = [{"kind": "preformatted", "text": "\n".join(lines[i:i + 1000])}
              for i in range(0, 4000, 1000)]
    parts = card_parts(readable_request(*blocks).document, CREATED_MS)
    assert 10 < len(parts) <= 20 and all(utf16_len(p.text) <= 4096 for p in parts)
    code = [line for p in parts for piece in styled(p, "pre") for line in piece.split("\n")]
    assert code == lines  # every line, whole, in order, inside code blocks
    assert sum(1 for p in parts if not p.silent) == 1 and parts[-1].last


def test_more_than_20_parts_is_a_clear_error() -> None:
    request = readable_request(*(paragraph("x " * 7_500) for _ in range(4)))
    with pytest.raises(TooManyParts, match=r"^Decision presentation renders as \d+ Telegram"
                                           r" parts; limit is 20$"):
        card_parts(request.document, CREATED_MS, limit=2_000)


def test_the_cut_does_not_move_with_the_moment_of_sending() -> None:
    request = build_request(run_id="r", workflow_name="w", node_id="n", attempt_id="a",
                            audience="operator", choices=CHOICES, title="T", subject={},
                            presentation={"schema": "pi-workflows.decision-presentation.v1",
                                          "summary": "S", "blocks": [paragraph("y " * 5_000)]},
                            on_timeout=OnTimeout(30 * 3_600_000, {"choice": "continue"}),
                            created_at_ms=CREATED_MS)
    early = card_parts(request.document, CREATED_MS)
    late = card_parts(request.document, CREATED_MS + 30 * 3_600_000 - 30_000)
    assert [p.text for p in early[:-1]] == [p.text for p in late[:-1]]
    assert len(early) == len(late)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["x", "y ", "\n", "🙂", "é", " ", "\n\n", "שלום",
                                          "\t", "word "]), min_size=1, max_size=3_000)
                .map("".join).filter(lambda t: t.strip() != ""), min_size=1, max_size=3))
def test_parts_fit_keep_every_word_and_never_break_a_pair(texts: list[str]) -> None:
    request = readable_request(*(paragraph(text) for text in texts))
    parts = card_parts(request.document, CREATED_MS)
    assert all(0 < utf16_len(p.text) <= 4096 for p in parts)
    assert all(p.text == p.text.strip() for p in parts)  # Telegram trims; entities stay inside
    for p in parts:
        for e in p.entities:
            assert e["offset"] >= 0 and e["offset"] + e["length"] <= utf16_len(p.text)
    marker = re.compile(rf"\d+/{len(parts)}") if len(parts) > 1 else None
    sent = [w for p in parts for w in words(p.text) if not (marker and marker.fullmatch(w))]
    assert sent == words(card_parts(request.document, CREATED_MS, limit=10**9)[0].text)
