"""Decision presentation (`pi-workflows.decision-presentation.v1`) and its text rendering.

Normalization and limits follow reference-facts.md sections 1 and 3. Pure functions.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypedDict, TypeVar

from channels.decisions.deadline import dated_deadline_line
from channels.decisions.errors import InvalidPresentation
from channels.text import (
    has_control_character,
    is_blank,
    operator_safe_text,
    utf16_len,
)

__all__ = [
    "FINGERPRINT_LENGTH", "MAX_BLOCKS", "MAX_CODE_UNITS", "MAX_STRING_CODE_UNITS", "SCHEMA",
    "Block", "FieldItem", "FieldsBlock", "Presentation", "decision_segments", "fingerprint",
    "normalize_presentation", "presentation_code_units", "render_decision_text",
    "render_person_text",
]


SCHEMA = "pi-workflows.decision-presentation.v1"

MAX_STRING_CODE_UNITS = 16_000

MAX_BLOCKS = 256

_MAX_ITEMS = 256

MAX_CODE_UNITS = 64_000

FINGERPRINT_LENGTH = 12

_T = TypeVar("_T")


class _ParagraphBlock(TypedDict):
    """Free text; TAB and LF allowed."""

    kind: Literal["paragraph"]
    text: str


class _SectionBlock(TypedDict):
    """A one-line heading."""

    kind: Literal["section"]
    title: str


class _BulletsBlock(TypedDict):
    """One to 256 one-line items."""

    kind: Literal["bullets"]
    items: list[str]


class FieldItem(TypedDict):
    """One `label: value` line."""

    label: str
    value: str


class FieldsBlock(TypedDict):
    """One to 256 label/value lines."""

    kind: Literal["fields"]
    items: list[FieldItem]


class _PreformattedBlock(TypedDict):
    """Verbatim text; TAB and LF allowed."""

    kind: Literal["preformatted"]
    text: str


Block: TypeAlias = (
    _ParagraphBlock | _SectionBlock | _BulletsBlock | FieldsBlock | _PreformattedBlock
)


class Presentation(TypedDict):
    """A normalized presentation document."""

    schema: str
    summary: str
    blocks: list[Block]


_SegmentKind = Literal[
    "title", "summary", "paragraph", "section", "bullets", "fields", "preformatted", "choices"
]


@dataclass(frozen=True, slots=True)
class _Segment:
    """One piece of the rendered decision document, before transport safety."""

    kind: _SegmentKind
    text: str


def normalize_presentation(value: object) -> Presentation:
    """Validate a presentation and return its normalized form (LF line ends, NFC)."""
    presentation = _require_record(value, "Decision presentation")
    _require_exact_keys(presentation, ("schema", "summary", "blocks"), "Decision presentation")
    if presentation["schema"] != SCHEMA:
        raise InvalidPresentation(f"Decision presentation schema must be {SCHEMA}")
    summary = _display_string(presentation["summary"], "Decision presentation summary")
    raw_blocks = presentation["blocks"]
    if not isinstance(raw_blocks, list | tuple):
        raise InvalidPresentation("Decision presentation blocks must be an array")
    if len(raw_blocks) > MAX_BLOCKS:
        raise InvalidPresentation(
            f"Decision presentation has {len(raw_blocks)} blocks; limit is {MAX_BLOCKS}"
        )
    blocks = [
        _normalize_block(block, f"Decision presentation block {index}")
        for index, block in enumerate(raw_blocks, start=1)
    ]
    normalized = Presentation(schema=SCHEMA, summary=summary, blocks=blocks)
    total = presentation_code_units(normalized)
    if total > MAX_CODE_UNITS:
        raise InvalidPresentation(
            f"Decision presentation has {total} UTF-16 code units; limit is {MAX_CODE_UNITS}"
        )
    return normalized


def presentation_code_units(presentation: Presentation) -> int:
    """Total UTF-16 code units counted against the 64,000 limit (the title is not counted)."""
    return utf16_len(presentation["summary"]) + sum(
        _block_code_units(block) for block in presentation["blocks"]
    )


def _block_code_units(block: Block) -> int:
    if block["kind"] == "paragraph" or block["kind"] == "preformatted":
        return utf16_len(block["text"])
    if block["kind"] == "section":
        return utf16_len(block["title"])
    if block["kind"] == "bullets":
        return sum(utf16_len(item) for item in block["items"])
    return sum(utf16_len(item["label"]) + utf16_len(item["value"]) for item in block["items"])


def _normalize_block(value: object, label: str) -> Block:
    block = _require_record(value, label)
    kind = block.get("kind")
    if kind == "paragraph" or kind == "preformatted":
        _require_exact_keys(block, ("kind", "text"), label)
        text = _multiline_string(block["text"], f"{label} text")
        if kind == "paragraph":
            return _ParagraphBlock(kind="paragraph", text=text)
        return _PreformattedBlock(kind="preformatted", text=text)
    if kind == "section":
        _require_exact_keys(block, ("kind", "title"), label)
        title = _display_string(block["title"], f"{label} title")
        return _SectionBlock(kind="section", title=title)
    if kind == "bullets":
        _require_exact_keys(block, ("kind", "items"), label)
        return _BulletsBlock(
            kind="bullets",
            items=_normalize_items(block["items"], f"{label} items", _display_string),
        )
    if kind == "fields":
        _require_exact_keys(block, ("kind", "items"), label)
        return FieldsBlock(
            kind="fields", items=_normalize_items(block["items"], f"{label} items", _field_item)
        )
    raise InvalidPresentation(f"{label} kind is not supported")


def _field_item(value: object, label: str) -> FieldItem:
    item = _require_record(value, label)
    _require_exact_keys(item, ("label", "value"), label)
    return FieldItem(
        label=_display_string(item["label"], f"{label} label"),
        value=_display_string(item["value"], f"{label} value"),
    )


def _normalize_items(value: object, label: str, normalize: Callable[[object, str], _T]) -> list[_T]:
    if not isinstance(value, list | tuple) or len(value) == 0:
        raise InvalidPresentation(f"{label} must be a non-empty array")
    if len(value) > _MAX_ITEMS:
        raise InvalidPresentation(f"{label} has {len(value)} items; limit is {_MAX_ITEMS}")
    return [normalize(item, f"{label} item {index}") for index, item in enumerate(value, start=1)]


def _display_string(value: object, label: str) -> str:
    text = _normalize_string(value, label)
    if has_control_character(text):
        raise InvalidPresentation(f"{label} contains a control character")
    return text


def _multiline_string(value: object, label: str) -> str:
    text = _normalize_string(value, label)
    if has_control_character(text, multiline=True):
        raise InvalidPresentation(f"{label} contains a terminal control character")
    return text


def _normalize_string(value: object, label: str) -> str:
    if not isinstance(value, str):
        raise InvalidPresentation(f"{label} must be a string")
    text = unicodedata.normalize("NFC", value.replace("\r\n", "\n").replace("\r", "\n"))
    if is_blank(text):
        raise InvalidPresentation(f"{label} must not be empty")
    length = utf16_len(text)
    if length > MAX_STRING_CODE_UNITS:
        raise InvalidPresentation(
            f"{label} has {length} UTF-16 code units; limit is {MAX_STRING_CODE_UNITS}"
        )
    return text


def _require_record(value: object, label: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidPresentation(f"{label} must be an object")
    return value


def _require_exact_keys(value: Mapping[str, Any], allowed: tuple[str, ...], label: str) -> None:
    missing = [key for key in allowed if key not in value]
    if missing:
        raise InvalidPresentation(f"{label} is missing {', '.join(missing)}")
    extras = [str(key) for key in value if key not in allowed]
    if extras:
        raise InvalidPresentation(f"{label} has unknown field {', '.join(extras)}")


def decision_segments(request: Mapping[str, Any]) -> list[_Segment]:
    """The document segments of a request or channel-request document, in display order."""
    presentation: Presentation = request["presentation"]
    # A summary that only repeats the title (`ask` without --summary) is not shown twice.
    summary = [] if presentation["summary"] == request["title"] else [
        _Segment("summary", presentation["summary"])]
    segments = [
        _Segment("title", request["title"]),
        *summary,
        *(_block_segment(block) for block in presentation["blocks"]),
    ]
    default = _default_notice(request)
    if default is not None:
        segments.append(_Segment("paragraph", default))
    segments.append(_Segment("choices", _choices_text(request["choices"])))
    return segments


def _block_segment(block: Block) -> _Segment:
    if block["kind"] == "paragraph" or block["kind"] == "preformatted":
        return _Segment(block["kind"], block["text"])
    if block["kind"] == "section":
        return _Segment("section", block["title"])
    if block["kind"] == "bullets":
        return _Segment("bullets", "\n".join(f"• {item}" for item in block["items"]))
    lines = (f"{item['label']}: {item['value']}" for item in block["items"])
    return _Segment("fields", "\n".join(lines))


def _default_notice(request: Mapping[str, Any]) -> str | None:
    expires_at = request.get("expiresAt")
    default = request.get("defaultResponse")
    if expires_at is None or default is None:
        return None
    label = _choice_label(request["choices"], default["choice"])
    return (
        f"If no answer is accepted by {expires_at}, "
        f"this decision continues automatically with: {label}."
    )


def _choices_text(choices: Mapping[str, Mapping[str, Any]]) -> str:
    lines = []
    for choice in choices.values():
        text_input = choice.get("input")
        line = f"• {choice['label']}"
        lines.append(line if text_input is None else f"{line}\n  {text_input['prompt']}")
    return "Choices\n" + "\n".join(lines)


def fingerprint(presentation_digest: str) -> str:
    """The first 12 hex digits of a presentation digest, shown to operators."""
    start = len("sha256:")
    return presentation_digest[start : start + FINGERPRINT_LENGTH]


def render_person_text(request: Mapping[str, Any]) -> str:
    """The decision as a person reads it in Pi: the contract's text with its deadline notice
    (an ISO timestamp) replaced by a readable, dated deadline line."""
    segments = [s for s in decision_segments(request) if s.text != _default_notice(request)]
    default = request.get("defaultResponse")
    label = None if default is None else \
        _choice_label(request["choices"], default["choice"])
    segments.insert(-1, _Segment("paragraph", dated_deadline_line(request.get("expiresAt"), label)))
    content = "\n\n".join(operator_safe_text(s.text) for s in segments)
    return f"{content}\n\nDecision {fingerprint(request['presentationDigest'])}"


def _choice_label(choices: Mapping[str, Mapping[str, Any]], choice_id: str) -> str:
    selected = choices.get(choice_id)
    return str(selected["label"]) if selected is not None else choice_id


def render_decision_text(request: Mapping[str, Any], *, once: bool = False) -> str:
    """The whole decision as one operator-safe text, ending with its `Decision <fp>` line.
    `once` leaves out a summary that only repeats the title (a terminal, not the contract)."""
    segments = decision_segments(request)
    if once and segments[1].text == segments[0].text:
        del segments[1]
    content = "\n\n".join(operator_safe_text(s.text) for s in segments)
    return f"{content}\n\nDecision {fingerprint(request['presentationDigest'])}"
