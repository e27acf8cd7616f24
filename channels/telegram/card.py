"""The decision card as a person reads it on a phone: the Telegram messages of one decision.

Title first (bold), then the body, the choices (numbered, so a reply can name one), one context
line (project · session · host), a readable deadline, and last `Decision <fingerprint>`. Formatting
is sent as message entities with UTF-16 offsets, never as parse-mode markup, so no text needs
escaping. A card longer than one message is cut at paragraph, then line, then word boundaries;
the parts are marked `1/3`, only the first one notifies, and the keyboard goes on the last.

The ids, digests and callback tokens follow the reference byte for byte; this text does not
(the reference's `Part n/N` layout was for the reference's own renderer). Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from channels.decisions import context
from channels.decisions.errors import TooManyParts
from channels.decisions.presentation import Block, fingerprint
from channels.telegram.limits import MAX_TELEGRAM_PARTS, TELEGRAM_TEXT_LIMIT
from channels.telegram.time_left import deadline_line
from channels.telegram.units import from_units, to_units
from channels.text import operator_safe_text

__all__ = ["CardPart", "card_parts", "note_parts"]


# What the deadline phrase may grow by between two renderings ("in 9 min" -> "in 23 h 59 min"),
# kept free in the last part so that the cut never depends on the moment of sending.
_DEADLINE_SLACK = 24
_MARKER_ROOM = len("\n\n20/20")
_SEPARATORS = ("\n\n", "\n", " ")


@dataclass(frozen=True, slots=True)
class _Span:
    """A run of text with one style (None for plain), in UTF-16 units (see `to_units`)."""

    units: str
    style: str | None = None
    language: str | None = None


@dataclass(frozen=True, slots=True)
class CardPart:
    """One Telegram message of a card."""

    text: str
    entities: tuple[dict[str, Any], ...]
    silent: bool  # sent with disable_notification: only one part of a card notifies
    last: bool  # carries the keyboard


@dataclass(frozen=True, slots=True)
class _Styled:
    """Text in UTF-16 units with entity spans (start, end, style, language) over it."""

    units: str
    spans: tuple[tuple[int, int, str, str | None], ...]


def card_parts(request: Mapping[str, Any], now_ms: int,
               limit: int = TELEGRAM_TEXT_LIMIT) -> list[CardPart]:
    """The messages of a decision card, each within `limit` UTF-16 code units."""
    body = _join([_title(request), *_body_blocks(request), [_choices(request["choices"])]])
    tail = _join([_tail(request, now_ms)])
    whole = _concat(body, _Styled("\n\n", ()), tail)
    if len(whole.units) <= limit:
        return [_part(whole, silent=False, last=True)]
    capacity = limit - _MARKER_ROOM
    last_capacity = capacity - len(tail.units) - 2 - _DEADLINE_SLACK
    if last_capacity < 1:
        raise ValueError("Telegram text limit is too small for a decision card")
    pieces = _cut(body, capacity, last_capacity)
    if len(pieces) > MAX_TELEGRAM_PARTS:
        raise TooManyParts(f"Decision presentation renders as {len(pieces)} Telegram parts; "
                           f"limit is {MAX_TELEGRAM_PARTS}")
    total = len(pieces)
    parts = []
    for number, piece in enumerate(pieces, start=1):
        if number == 1:
            styled = _concat(piece, _Styled(f"\n\n1/{total}", ()))
        else:
            styled = _concat(_Styled(f"{number}/{total}\n", ()), piece)
        if number == total:
            styled = _concat(styled, _Styled("\n\n", ()), tail)
        parts.append(_part(styled, silent=number > 1, last=number == total))
    return parts


def note_parts(title: str, body: str, tail: Sequence[tuple[str, str | None]], *,
               silent: bool, single: bool, limit: int = TELEGRAM_TEXT_LIMIT) -> list[CardPart]:
    """A notification in the card's layout: the title in bold, the body, then the tail lines
    ((text, style): the context line, the time). `single` (a status card, edited in place)
    shortens the body with "…" to fit one message; otherwise a long body is cut into marked
    parts as a card is, only the first notifying (none when `silent`)."""
    head = [_Span(_safe(title.strip()), "bold")]
    text = _safe(body.strip())
    lines = [_Span(_safe(line), style) for line, style in tail if line]
    end = _styled([span for n, line in enumerate(lines)
                   for span in ([_Span("\n")] if n else []) + [line]])
    room = limit - len(head[0].units) - len(end.units) - 4
    if single and len(text) > room:
        cut = max(room - 1, 0)
        if cut and 0xD800 <= ord(text[cut - 1]) <= 0xDBFF:
            cut -= 1
        text = text[:cut] + "…"
    whole = _join([head, [_Span(text)]] if text else [head])
    done = _concat(whole, _Styled("\n\n", ()), end) if end.units else whole
    if len(done.units) <= limit:
        return [_part(done, silent=silent, last=True)]
    capacity = limit - _MARKER_ROOM
    pieces = _cut(whole, capacity, capacity - len(end.units) - 2)
    total, parts = len(pieces), []
    for number, piece in enumerate(pieces, start=1):
        styled = _concat(piece, _Styled(f"\n\n1/{total}", ())) if number == 1 else \
            _concat(_Styled(f"{number}/{total}\n", ()), piece)
        if number == total and end.units:
            styled = _concat(styled, _Styled("\n\n", ()), end)
        parts.append(_part(styled, silent=silent or number > 1, last=number == total))
    return parts


def _card_text(request: Mapping[str, Any], now_ms: int) -> str:
    """The whole card as one text (what a transcript or a log shows)."""
    return "\n\n".join(part.text for part in card_parts(request, now_ms, limit=10**9))


# -- content -----------------------------------------------------------------------------------


def _title(request: Mapping[str, Any]) -> list[_Span]:
    return [_Span(_safe(str(request["title"]).strip()), "bold")]


def _body_blocks(request: Mapping[str, Any]) -> list[list[_Span]]:
    presentation = request["presentation"]
    blocks, _ = context.split_context(presentation["blocks"])
    summary = presentation["summary"]
    found = [] if summary.strip() == str(request["title"]).strip() else [[_Span(_safe(summary))]]
    return [*found, *(_block(block) for block in blocks)]


def _block(block: Block) -> list[_Span]:
    if block["kind"] == "paragraph":
        return [_Span(_safe(block["text"].strip("\n")))]
    if block["kind"] == "preformatted":
        text = _safe(block["text"].strip("\n"))
        return [_Span(text, "pre", "diff" if _looks_like_diff(text) else None)]
    if block["kind"] == "section":
        return [_Span(_safe(block["title"]), "bold")]
    if block["kind"] == "bullets":
        return [_Span(_safe("\n".join(f"• {item}" for item in block["items"])))]
    spans: list[_Span] = []
    for index, item in enumerate(block["items"]):
        spans += [_Span("\n" if index else ""), _Span(_safe(item["label"]), "bold"),
                  _Span(_safe(f": {item['value']}"))]
    return spans


def _choices(choices: Mapping[str, Mapping[str, Any]]) -> _Span:
    lines = []
    for number, choice in enumerate(choices.values(), start=1):
        text_input = choice.get("input")
        asks = "" if text_input is None else f" (then asks: {text_input['prompt']})"
        lines.append(f"{number}. {choice['label']}{asks}")
    return _Span(_safe("\n".join(lines)))


def _tail(request: Mapping[str, Any], now_ms: int) -> list[_Span]:
    _, found = context.split_context(request["presentation"]["blocks"])
    spans = [] if found is None else [_Span(_safe(found.line()), "italic"), _Span("\n")]
    default = request.get("defaultResponse")
    label = None
    if default is not None:
        chosen = request["choices"].get(default["choice"])
        label = chosen["label"] if chosen is not None else default["choice"]
    spans += [_Span(_safe(deadline_line(request.get("expiresAt"), label, now_ms))), _Span("\n"),
              _Span("Decision "), _Span(to_units(fingerprint(request["presentationDigest"])),
                                      "code")]
    return spans


def _looks_like_diff(text: str) -> bool:
    lines = text.split("\n", 40)[:40]
    return any(line.startswith("@@ ") for line in lines) and \
        any(line.startswith(("+", "-")) for line in lines)


def _safe(text: str) -> str:
    return to_units(operator_safe_text(text))


# -- styled text -------------------------------------------------------------------------------


def _styled(spans: Sequence[_Span]) -> _Styled:
    units, found, at = [], [], 0
    for span in spans:
        units.append(span.units)
        if span.style is not None and span.units:
            found.append((at, at + len(span.units), span.style, span.language))
        at += len(span.units)
    return _Styled("".join(units), tuple(found))


def _join(blocks: Sequence[Sequence[_Span]]) -> _Styled:
    styled = [_styled(block) for block in blocks]
    result = _Styled("", ())
    for index, block in enumerate(item for item in styled if item.units):
        result = _concat(result, _Styled("\n\n" if index else "", ()), block)
    return result


def _concat(*items: _Styled) -> _Styled:
    units, spans, at = [], [], 0
    for item in items:
        units.append(item.units)
        spans += [(start + at, end + at, style, lang) for start, end, style, lang in item.spans]
        at += len(item.units)
    return _Styled("".join(units), tuple(spans))


def _slice(styled: _Styled, start: int, end: int) -> _Styled:
    spans = tuple((max(s, start) - start, min(e, end) - start, style, lang)
                  for s, e, style, lang in styled.spans if s < end and e > start)
    return _Styled(styled.units[start:end], spans)


def _part(styled: _Styled, *, silent: bool, last: bool) -> CardPart:
    entities = []
    for start, end, style, language in styled.spans:
        entity: dict[str, Any] = {"type": style, "offset": start, "length": end - start}
        if language is not None:
            entity["language"] = language
        entities.append(entity)
    return CardPart(from_units(styled.units), tuple(entities), silent, last)


# -- cutting -----------------------------------------------------------------------------------


def _cut(body: _Styled, capacity: int, last_capacity: int) -> list[_Styled]:
    """Pieces of at most `capacity` units, the last of at most `last_capacity`, cut at the
    best boundary; the whitespace at a cut is dropped, nothing else."""
    pieces: list[_Styled] = []
    units, start = body.units, 0
    while True:
        start = _skip_space(units, start)
        rest = len(units) - start
        if rest <= last_capacity:
            pieces.append(_trimmed(body, start, len(units)))
            return pieces
        end, resume = _boundary(units, start, min(capacity, rest - 1) if rest <= capacity
                                else capacity)
        pieces.append(_trimmed(body, start, end))
        start = resume


def _boundary(units: str, start: int, capacity: int) -> tuple[int, int]:
    """Where a piece starting at `start` ends (exclusive) and where the next one starts."""
    limit = start + capacity
    floor = start + capacity // 3  # no boundary before this: it would make a tiny part
    for separator in _SEPARATORS:
        found = units.rfind(separator, floor, limit + len(separator))
        if found > start:
            return found, found + len(separator)
    end = limit
    if 0xD800 <= ord(units[end - 1]) <= 0xDBFF:
        end -= 1  # never between the halves of a surrogate pair
    return end, end


def _skip_space(units: str, at: int) -> int:
    """Past the blank lines at a cut (a line's indentation is kept: it may be code)."""
    while at < len(units) and units[at] == "\n":
        at += 1
    return at


def _trimmed(body: _Styled, start: int, end: int) -> _Styled:
    while end > start and body.units[end - 1] in " \n\t":
        end -= 1  # Telegram trims a message's trailing whitespace; entities must stay inside
    return _slice(body, start, end)
