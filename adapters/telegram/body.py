"""Reading a Bot API response body into JSON values, whatever bytes arrive.

Three things valid (or nearly valid) JSON can do that must not crash a poll:

* nest thousands of levels deep (Python's parser raises ``RecursionError``): values nested
  deeper than ``MAX_DEPTH`` are replaced by ``null``, so the items around them stay readable;
* carry bytes that are not UTF-8: they are kept as lone surrogates, which the update parser
  treats like any other text that cannot be sent back (data, not a crash);
* spell absurd numbers (``NaN``, 5,000-digit integers): they become ``null``.

Anything else that is not JSON raises ``ValueError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = ["MAX_DEPTH", "Scrub", "load_body"]


# Real updates nest about 10 levels; a reply to a reply to a message with a keyboard stays
# well below this.
MAX_DEPTH: Final = 64
_MAX_INT_DIGITS: Final = 40
# A JSON string (skipped whole, brackets inside it are text) or a bracket.
_TOKENS: Final = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _int_or_null(text: str) -> int | None:
    return int(text) if len(text) <= _MAX_INT_DIGITS else None


def _null(text: str) -> None:
    return None


Scrub = Callable[[str], str]


def _scrubbing(scrub: Scrub) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """An object hook that scrubs every string value (and strings in array values)."""
    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return scrub(value)
        if isinstance(value, list):
            return [scrub(v) if isinstance(v, str) else v for v in value]
        return value
    return lambda pairs: {key: clean(value) for key, value in pairs}


def _loads(text: str, scrub: Scrub | None) -> Any:
    hook = None if scrub is None else _scrubbing(scrub)
    return json.loads(text, parse_int=_int_or_null, parse_constant=_null,
                      object_pairs_hook=hook)


def load_body(payload: bytes, scrub: Scrub | None = None) -> Any:
    """The JSON value of a response body (see the module docstring); ValueError if not JSON.

    ``scrub`` rewrites every decoded string in an object (JSON escapes undone), so a secret
    spelled with escapes is still found.
    """
    text = payload.decode("utf-8", "surrogateescape")
    try:
        return _loads(text, scrub)
    except RecursionError:
        return _loads(_clip_depth(text, MAX_DEPTH), scrub)


def _clip_depth(text: str, max_depth: int) -> str:
    """JSON text with every array or object nested deeper than ``max_depth`` replaced by
    ``null`` (text that is not balanced JSON comes out still not JSON)."""
    pieces: list[str] = []
    depth, cut, last = 0, -1, 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth == max_depth + 1:
                cut = match.start()
        elif token in ("]", "}"):
            if depth == max_depth + 1 and cut >= 0:
                pieces += [text[last:cut], "null"]
                last, cut = match.end(), -1
            depth -= 1
    # An unclosed deep value is cut too: what remains is short, and still not JSON.
    pieces += [text[last:cut], "null"] if cut >= 0 else [text[last:]]
    return "".join(pieces)
