"""Telegram text as the Bot API counts it, in UTF-16 code units: message entities' offsets and
lengths, and cuts that must land where a JavaScript string would (never inside a pair)."""

from __future__ import annotations

import re
import struct

__all__ = ["from_units", "to_units"]


_NON_BMP_RE = re.compile("[\U00010000-\U0010ffff]")


def to_units(text: str) -> str:
    """A string with one character per UTF-16 code unit, so slicing behaves as in JavaScript."""
    if _NON_BMP_RE.search(text) is None:
        return text
    data = text.encode("utf-16-le", "surrogatepass")
    return "".join(map(chr, struct.unpack(f"<{len(data) // 2}H", data)))


def from_units(units: str) -> str:
    """Undo `to_units`: rejoin surrogate pairs into single characters."""
    return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
