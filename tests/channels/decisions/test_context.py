"""The context line: carried as the presentation's last fields block, found again exactly."""

from __future__ import annotations

from pathlib import Path

from channels.decisions import context
from channels.decisions.presentation import normalize_presentation

BASE = {"schema": "pi-workflows.decision-presentation.v1", "summary": "Review it.",
        "blocks": [{"kind": "paragraph", "text": "Body"}]}


def test_the_context_block_round_trips_through_normalization() -> None:
    facts = context.Context("web-app", "deploy-review", "laptop")
    document = normalize_presentation(context.with_context(BASE, facts))
    blocks, found = context.split_context(document["blocks"])
    assert found == facts
    assert blocks == [{"kind": "paragraph", "text": "Body"}]
    assert facts.line() == "web-app · deploy-review · laptop"


def test_fields_with_other_labels_or_order_are_not_a_context() -> None:
    other = {"kind": "fields", "items": [{"label": "Host", "value": "a"},
                                         {"label": "Project", "value": "b"}]}
    blocks, found = context.split_context([other])  # type: ignore[list-item]
    assert found is None and blocks == [other]
    assert context.split_context([])[1] is None


def test_with_context_replaces_an_earlier_context_and_drops_an_empty_one() -> None:
    once = context.with_context(BASE, context.Context("a", "b", "c"))
    twice = context.with_context(once, context.Context(project="z"))
    assert twice["blocks"][-1] == {"kind": "fields", "items": [{"label": "Project", "value": "z"}]}
    assert context.with_context(once, context.Context())["blocks"] == BASE["blocks"]


def test_values_are_one_short_line() -> None:
    assert context.clean("a\tb\x1bc ") == "a b c"
    assert context.clean("  \u3000") is None
    long = context.clean("x" * 200)
    assert long is not None and len(long) == context.MAX_VALUE_CODE_UNITS and long.endswith("…")


def test_automatic_names_the_repository_not_the_subfolder(tmp_path: Path) -> None:
    repo = tmp_path / "web-app"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "deep").mkdir(parents=True)
    found = context.automatic(repo / "src" / "deep")
    assert found.project == "web-app" and found.session == "shell" and found.host
    assert context.automatic(tmp_path).project == tmp_path.name


def test_a_document_not_yet_normalized_is_looked_at_without_failing() -> None:
    for blocks in ([1], ["x"], [{"kind": "fields"}], [{"kind": "fields", "items": [1]}]):
        assert context.split_context(blocks) == (blocks, None)  # type: ignore[arg-type]
