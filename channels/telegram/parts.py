"""Splitting a rendered decision into Telegram messages: at most 20 parts of 4096 UTF-16
code units, each after the first headed `Part n/N`. Pure functions (reference section 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from channels.decisions.presentation import decision_segments, fingerprint
from channels.errors import TooManyParts
from channels.telegram.limits import MAX_TELEGRAM_PARTS, TELEGRAM_TEXT_LIMIT
from channels.text import from_units, operator_safe_text, to_units, utf16_len


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
        for piece in _split_units(to_units(segment), capacity):
            candidate = f"{current}\n\n{piece}" if current else piece
            if len(candidate) <= capacity:
                current = candidate
                continue
            if current:
                bodies.append(from_units(current))
            current = piece
    if current:
        bodies.append(from_units(current))
    return bodies or ["Decision"]


def split_segment(text: str, capacity: int) -> list[str]:
    """Cut one segment into pieces of at most `capacity` code units; joined they give `text`."""
    return [from_units(piece) for piece in _split_units(to_units(text), capacity)]


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
