"""Field checks shared by the request contract's validators."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from channels.decisions.errors import InvalidRequest
from channels.text import has_control_character, is_blank
from state.canonical import CanonicalJsonError, canonical_json

__all__ = [
    "CHANNEL_RE", "NAME_RE", "as_integer", "is_number", "js_json", "json_copy", "name_error",
    "require_name", "require_presentable", "require_string",
]


NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")  # choice ids, audiences, input names
_NAME_RULE = ("use letters, digits, '_' or '-', starting with a letter or '_'"
              " (at most 128 characters)")

CHANNEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")


def js_json(value: object) -> str:
    """How `JSON.stringify` shows a value inside an error message."""
    try:
        return canonical_json(value)
    except CanonicalJsonError:
        return repr(value)


def require_string(value: object, label: str) -> str:
    if not isinstance(value, str) or is_blank(value):
        raise InvalidRequest(f"{label} must be a non-empty string")
    return value


def name_error(value: object) -> str | None:
    """What a caller's own message says when `value` is not a name (a choice id, an
    audience, an input name): the rule; None for a name."""
    return None if isinstance(value, str) and NAME_RE.fullmatch(value) else _NAME_RULE


def require_name(value: object, label: str) -> str:
    text = require_string(value, label)
    if NAME_RE.fullmatch(text) is None:
        raise InvalidRequest(f"{label} is invalid")
    return text


def require_presentable(value: str, label: str) -> None:
    if has_control_character(value):
        raise InvalidRequest(f"{label} contains a control character")


def as_integer(value: object) -> int | None:
    """The value as an int when JavaScript's `Number.isInteger` would accept it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data as dicts and lists, keeping key order."""
    if isinstance(value, Mapping):
        return {key: json_copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_copy(item) for item in value]
    return value
