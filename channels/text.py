"""Text measured as JavaScript does (UTF-16 code units) and checks for what a channel may show."""

from __future__ import annotations

import re

__all__ = [
    "has_control_character", "is_blank", "operator_safe_text", "utf16_len",
]


# JavaScript's String.prototype.trim set: WhiteSpace, LineTerminator and the Zs category.
_JS_WHITESPACE = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_CONTROL_RE = re.compile("[\x00-\x1f\x7f]")

_TERMINAL_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (JavaScript `.length`)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def is_blank(text: str) -> bool:
    """Whether `text` is empty after JavaScript's `trim()`."""
    return all(ch in _JS_WHITESPACE for ch in text)


def has_control_character(text: str, *, multiline: bool = False) -> bool:
    """Whether `text` has a code point at or below 31, or 127 (`multiline`: TAB and LF are
    text, not control characters)."""
    return (_TERMINAL_CONTROL_RE if multiline else _CONTROL_RE).search(text) is not None


def operator_safe_text(text: str) -> str:
    """Line ends to LF and terminal control characters to U+FFFD (TAB, LF and C1 kept)."""
    return _TERMINAL_CONTROL_RE.sub("\ufffd", text.replace("\r\n", "\n").replace("\r", "\n"))
