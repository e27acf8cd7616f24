"""Canonical JSON that reproduces JavaScript's `JSON.stringify` over sorted keys.

Every digest in Pi Workflows was first computed by TypeScript, so the bytes must match what
Node writes: keys that are canonical array indexes ("0", "10") come first in numeric order
(JavaScript objects always enumerate them first), the other keys follow in UTF-16 code-unit
order, separators are compact, non-ASCII is written raw and numbers use JavaScript's
`Number.prototype.toString` form. NaN and the infinities are rejected.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

__all__ = [
    "CanonicalJsonError", "JsonValue", "canonical_bytes", "canonical_json", "js_key_order",
    "js_number", "sha256",
]


JsonValue = Any  # JSON-compatible Python values: dict[str, ...], list, str, int, float, bool, None

_MAX_ARRAY_INDEX = 2**32 - 2  # ECMAScript: an array index is an integer below 2**32 - 1
_MAX_SAFE_INTEGER = 2**53 - 1
_INDEX_RE = re.compile(r"0|[1-9][0-9]*")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


class CanonicalJsonError(ValueError):
    """A value that JSON cannot represent canonically (NaN, a non-string key, an object)."""


def _array_index(key: str) -> int | None:
    if _INDEX_RE.fullmatch(key) and int(key) <= _MAX_ARRAY_INDEX:
        return int(key)
    return None


def _utf16_units(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare like JavaScript's code-unit string order.
    return key.encode("utf-16-be", "surrogatepass")


def js_key_order(keys: list[str]) -> list[str]:
    """Return keys in the order a JavaScript object built from sorted keys enumerates them."""
    if all(k.isascii() and not k[:1].isdigit() for k in keys):
        return sorted(keys)  # the common case: ASCII order is code-unit order, no indexes
    indexes = sorted((idx, k) for k in keys if (idx := _array_index(k)) is not None)
    others = sorted((k for k in keys if _array_index(k) is None), key=_utf16_units)
    return [k for _, k in indexes] + others


def js_number(value: float | int) -> str:
    """Format a number as JavaScript's `Number.prototype.toString()` does."""
    if isinstance(value, int) and abs(value) <= _MAX_SAFE_INTEGER:
        return str(value)
    try:
        x = float(value)
    except OverflowError as exc:
        raise CanonicalJsonError(f"number {value} is out of range") from exc
    if not math.isfinite(x):
        raise CanonicalJsonError("NaN and Infinity are not JSON")
    if x == 0:
        return "0"  # JavaScript writes -0 as 0
    if x < 0:
        return "-" + js_number(-x)
    digits, n = _shortest_digits(x)
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    exponent = n - 1
    sign = "+" if exponent >= 0 else "-"
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{sign}{abs(exponent)}"


def _shortest_digits(x: float) -> tuple[str, int]:
    """Shortest round-trip digits `d` and exponent `n` with x = 0.d * 10**n (x > 0)."""
    mantissa, _, exp = repr(x).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    return stripped.rstrip("0"), n


def _string(value: str) -> str:
    text: str = encode_basestring(value)  # the C escaper json.dumps uses, without its overhead
    if value.isascii():
        return text
    # JSON.stringify escapes lone surrogates (well-formed stringify); Python leaves them raw.
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _encode(value: JsonValue, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int | float):
        out.append(js_number(value))
    elif isinstance(value, Mapping):
        _encode_object(value, out)
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise CanonicalJsonError(f"{type(value).__name__} is not a JSON value")


def _encode_object(value: Mapping[Any, JsonValue], out: list[str]) -> None:
    keys = list(value.keys())
    for key in keys:
        if not isinstance(key, str):
            raise CanonicalJsonError(f"object key {key!r} is not a string")
    out.append("{")
    for i, key in enumerate(js_key_order(keys)):
        if i:
            out.append(",")
        out.append(_string(key))
        out.append(":")
        _encode(value[key], out)
    out.append("}")


_FAST = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True,
                         allow_nan=False)


def _plain(value: JsonValue) -> bool:
    """True when the C encoder with sorted keys already writes the JavaScript form: no floats,
    only safe integers, ASCII keys that cannot be array indexes, no lone surrogates."""
    if value is None or value is True or value is False:
        return True
    if isinstance(value, str):
        return value.isascii() or not _SURROGATE_RE.search(value)
    if isinstance(value, int):
        return abs(value) <= _MAX_SAFE_INTEGER
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and k.isascii() and not k[:1].isdigit() and _plain(v)
            for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return False


def canonical_json(value: JsonValue) -> str:
    """Serialize `value` canonically (JavaScript key order and number form, compact)."""
    if _plain(value):
        return _FAST.encode(value)
    out: list[str] = []
    _encode(value, out)
    return "".join(out)


def canonical_bytes(value: JsonValue) -> bytes:
    """UTF-8 bytes of the canonical JSON text."""
    return canonical_json(value).encode("utf-8", "surrogatepass")


def sha256(data: bytes) -> bytes:
    """Raw 32-byte SHA-256."""
    return hashlib.sha256(data).digest()
