"""Bridge framing: strict JSON lines (one compact object, LF only, ASCII-only output)."""

from __future__ import annotations

import json
import math
import os
from typing import Any

__all__ = [
    "MAX_LINE_BYTES", "LineWriter", "ProtocolError", "identifier_field", "parse_line",
    "text_field",
]


MAX_LINE_BYTES = 1 << 20
_MAX_ID_LENGTH = 200


class ProtocolError(Exception):
    """A line the bridge cannot act on; answered with `error {code, message}`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- framing -----------------------------------------------------------------------------------


def _encode(message: dict[str, Any]) -> bytes:
    """One protocol line: compact, ASCII-only JSON and a single LF."""
    text = json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.encode("ascii") + b"\n"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    # JSON numbers must fit a JavaScript double: the database's canonical JSON needs that.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    _finite(text)
    return int(text)


def parse_line(raw: bytes) -> dict[str, Any]:
    """Decode one line (without its LF) into a message with a string `type`."""
    line = raw[:-1] if raw.endswith(b"\r") else raw
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_no_constant,
                           parse_float=_finite, parse_int=_bounded_int)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError("malformed", f"not a JSON line: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError("malformed", "a message is a JSON object with a string type")
    return value


class LineWriter:
    """Writes protocol lines to a descriptor; remembers when the reader has gone."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closed = False

    def send(self, message: dict[str, Any]) -> bool:
        """Write one line; False when the pipe is closed (the line was not delivered)."""
        if self.closed:
            return False
        data = _encode(message)
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:  # EPIPE or EBADF: the extension is gone
            self.closed = True
            return False
        return True


def text_field(message: dict[str, Any], name: str) -> str:
    value = message.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ProtocolError("malformed", f"{message['type']}.{name} must be a non-empty string")
    return value


def identifier_field(message: dict[str, Any], name: str) -> str:
    value = text_field(message, name)
    if len(value) > _MAX_ID_LENGTH or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ProtocolError("malformed", f"{message['type']}.{name} is not a valid identifier")
    return value
