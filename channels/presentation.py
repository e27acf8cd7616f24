"""Decision presentations: validation, text rendering and the Telegram split.

The presentation schema `pi-workflows.decision-presentation.v1` is what an operator reads
before answering. Every length here is counted in UTF-16 code units, as JavaScript's
`.length` counts it, because the reference computed the limits and the Telegram parts that
way; non-BMP characters count 2 and are never cut in half. Everything is pure.
"""

from __future__ import annotations

import re
import struct
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypedDict, TypeVar

from channels.digests import text_sha256_hex
from channels.errors import InvalidPresentation, TooManyParts

SCHEMA = "pi-workflows.decision-presentation.v1"
MAX_STRING_CODE_UNITS = 16_000
MAX_BLOCKS = 256
MAX_ITEMS = 256
MAX_CODE_UNITS = 64_000
MAX_TELEGRAM_PARTS = 20
TELEGRAM_TEXT_LIMIT = 4_096
FINGERPRINT_LENGTH = 12
CALLBACK_TOKEN_PREFIX = "piw:"

_T = TypeVar("_T")


class ParagraphBlock(TypedDict):
    """Free text; TAB and LF allowed."""

    kind: Literal["paragraph"]
    text: str


class SectionBlock(TypedDict):
    """A one-line heading."""

    kind: Literal["section"]
    title: str


class BulletsBlock(TypedDict):
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


class PreformattedBlock(TypedDict):
    """Verbatim text; TAB and LF allowed."""

    kind: Literal["preformatted"]
    text: str


Block: TypeAlias = ParagraphBlock | SectionBlock | BulletsBlock | FieldsBlock | PreformattedBlock


class Presentation(TypedDict):
    """A normalized presentation document."""

    schema: str
    summary: str
    blocks: list[Block]


SegmentKind = Literal[
    "title", "summary", "paragraph", "section", "bullets", "fields", "preformatted", "choices"
]


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of the rendered decision document, before transport safety."""

    kind: SegmentKind
    text: str


# JavaScript's String.prototype.trim set: WhiteSpace, LineTerminator and the Zs category.
_JS_WHITESPACE = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_CONTROL_RE = re.compile("[\x00-\x1f\x7f]")
_TERMINAL_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_NON_BMP_RE = re.compile("[\U00010000-\U0010ffff]")


# --- UTF-16 helpers -------------------------------------------------------------------------


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (JavaScript `.length`)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _to_units(text: str) -> str:
    """A string with one character per UTF-16 code unit, so slicing behaves as in JavaScript."""
    if _NON_BMP_RE.search(text) is None:
        return text
    data = text.encode("utf-16-le", "surrogatepass")
    return "".join(map(chr, struct.unpack(f"<{len(data) // 2}H", data)))


def _from_units(units: str) -> str:
    """Undo `_to_units`: rejoin surrogate pairs into single characters."""
    return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def is_blank(text: str) -> bool:
    """Whether `text` is empty after JavaScript's `trim()`."""
    return all(ch in _JS_WHITESPACE for ch in text)


def has_control_character(text: str) -> bool:
    """Whether `text` has a code point at or below 31, or 127."""
    return _CONTROL_RE.search(text) is not None


# --- Normalization --------------------------------------------------------------------------


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
            return ParagraphBlock(kind="paragraph", text=text)
        return PreformattedBlock(kind="preformatted", text=text)
    if kind == "section":
        _require_exact_keys(block, ("kind", "title"), label)
        return SectionBlock(kind="section", title=_display_string(block["title"], f"{label} title"))
    if kind == "bullets":
        _require_exact_keys(block, ("kind", "items"), label)
        return BulletsBlock(
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
    if len(value) > MAX_ITEMS:
        raise InvalidPresentation(f"{label} has {len(value)} items; limit is {MAX_ITEMS}")
    return [normalize(item, f"{label} item {index}") for index, item in enumerate(value, start=1)]


def _display_string(value: object, label: str) -> str:
    text = _normalize_string(value, label)
    if has_control_character(text):
        raise InvalidPresentation(f"{label} contains a control character")
    return text


def _multiline_string(value: object, label: str) -> str:
    text = _normalize_string(value, label)
    if _TERMINAL_CONTROL_RE.search(text) is not None:
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


# --- Rendering ------------------------------------------------------------------------------


def operator_safe_text(text: str) -> str:
    """Line ends to LF and terminal control characters to U+FFFD (TAB, LF and C1 kept)."""
    return _TERMINAL_CONTROL_RE.sub("\ufffd", text.replace("\r\n", "\n").replace("\r", "\n"))


def decision_segments(request: Mapping[str, Any]) -> list[Segment]:
    """The document segments of a request or channel-request document, in display order."""
    presentation: Presentation = request["presentation"]
    segments = [
        Segment("title", request["title"]),
        Segment("summary", presentation["summary"]),
        *(_block_segment(block) for block in presentation["blocks"]),
    ]
    default = _default_notice(request)
    if default is not None:
        segments.append(Segment("paragraph", default))
    segments.append(Segment("choices", _choices_text(request["choices"])))
    return segments


def _block_segment(block: Block) -> Segment:
    if block["kind"] == "paragraph" or block["kind"] == "preformatted":
        return Segment(block["kind"], block["text"])
    if block["kind"] == "section":
        return Segment("section", block["title"])
    if block["kind"] == "bullets":
        return Segment("bullets", "\n".join(f"• {item}" for item in block["items"]))
    lines = (f"{item['label']}: {item['value']}" for item in block["items"])
    return Segment("fields", "\n".join(lines))


def _default_notice(request: Mapping[str, Any]) -> str | None:
    expires_at = request.get("expiresAt")
    default = request.get("defaultResponse")
    if expires_at is None or default is None:
        return None
    choice_id = default["choice"]
    selected = request["choices"].get(choice_id)
    label = selected["label"] if selected is not None else choice_id
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


def render_decision_text(request: Mapping[str, Any]) -> str:
    """The whole decision as one operator-safe text, ending with its `Decision <fp>` line."""
    content = "\n\n".join(operator_safe_text(s.text) for s in decision_segments(request))
    return f"{content}\n\nDecision {fingerprint(request['presentationDigest'])}"


# --- Telegram parts -------------------------------------------------------------------------


def part_header(part: int, total: int, fp: str) -> str:
    """The header that starts every Telegram part."""
    return f"Part {part}/{total}\nDecision {fp}\n\n"


def split_parts(request: Mapping[str, Any], text_limit: int = TELEGRAM_TEXT_LIMIT) -> list[str]:
    """The Telegram message texts for a request, each within `text_limit` UTF-16 code units."""
    fp = fingerprint(request["presentationDigest"])
    # Capacity is fixed by the widest header, so packing never depends on the final count.
    capacity = text_limit - utf16_len(part_header(MAX_TELEGRAM_PARTS, MAX_TELEGRAM_PARTS, fp))
    if capacity < 1:
        raise ValueError("Telegram decision text limit is too small for its part header")
    segments = [operator_safe_text(s.text) for s in decision_segments(request)]
    bodies = pack_segments(segments, capacity)
    if len(bodies) > MAX_TELEGRAM_PARTS:
        raise TooManyParts(
            f"Decision presentation renders as {len(bodies)} Telegram parts; "
            f"limit is {MAX_TELEGRAM_PARTS}"
        )
    return [part_header(i, len(bodies), fp) + body for i, body in enumerate(bodies, start=1)]


def pack_segments(segments: Sequence[str], capacity: int) -> list[str]:
    """Part bodies: pieces joined by a blank line while they fit; a piece never back-fills."""
    bodies: list[str] = []
    current = ""
    for segment in segments:
        for piece in _split_units(_to_units(segment), capacity):
            candidate = f"{current}\n\n{piece}" if current else piece
            if len(candidate) <= capacity:
                current = candidate
                continue
            if current:
                bodies.append(_from_units(current))
            current = piece
    if current:
        bodies.append(_from_units(current))
    return bodies or ["Decision"]


def split_segment(text: str, capacity: int) -> list[str]:
    """Cut one segment into pieces of at most `capacity` code units; joined they give `text`."""
    return [_from_units(piece) for piece in _split_units(_to_units(text), capacity)]


def _split_units(units: str, capacity: int) -> list[str]:
    pieces: list[str] = []
    while len(units) > capacity:
        end = _cut_index(units, capacity)
        pieces.append(units[:end])
        units = units[end:]
    if units:
        pieces.append(units)
    return pieces


def _cut_index(units: str, capacity: int) -> int:
    end = capacity
    if 0xD800 <= ord(units[end - 1]) <= 0xDBFF:
        end -= 1
    end = max(1, end)
    # JavaScript lastIndexOf("\n", end) also finds an LF at `end`; it then starts the next piece.
    newline = units.rfind("\n", 0, end + 1)
    return newline if newline > 0 else end


def callback_token(decision_id: str, request_digest: str, choice_id: str) -> str:
    """The 28-character Telegram callback_data for one choice of one request."""
    digest = text_sha256_hex(f"{decision_id}\0{request_digest}\0{choice_id}")
    return CALLBACK_TOKEN_PREFIX + digest[:24]
