"""Choices, text inputs and responses: their validation against the request contract."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, TypedDict

from channels.decisions.errors import InvalidRequest, InvalidResponse
from channels.decisions.fields import (
    NAME_RE,
    as_integer,
    js_json,
    json_copy,
    require_name,
    require_presentable,
    require_string,
)
from channels.text import utf16_len

__all__ = ["Choice", "Response", "text_input", "validate_choices", "validate_response"]


_DEFAULT_MIN_LENGTH = 1

_DEFAULT_MAX_LENGTH = 4_000


class _TextInput(TypedDict):
    """The free-text input a choice may ask for."""

    kind: Literal["text"]
    name: str
    prompt: str
    minLength: int
    maxLength: int


class Choice(TypedDict):
    """One choice: a unique label and an optional text input."""

    label: str
    input: NotRequired[_TextInput]


class Response(TypedDict):
    """A validated answer: the choice id and, for an input choice, `{name: text}`."""

    choice: str
    input: NotRequired[dict[str, str]]


def text_input(
    name: str,
    prompt: str,
    min_length: int = _DEFAULT_MIN_LENGTH,
    max_length: int = _DEFAULT_MAX_LENGTH,
) -> _TextInput:
    """A text input definition with the reference defaults (1 through 4000 code units)."""
    name = require_name(name, "Human decision text input name")
    prompt = require_string(prompt, "Human decision text input prompt")
    minimum, maximum = as_integer(min_length), as_integer(max_length)
    if minimum is None or minimum < 0:
        raise InvalidRequest("Human decision text input minLength must be a non-negative integer")
    if maximum is None or maximum < 1 or maximum < minimum:
        raise InvalidRequest(
            "Human decision text input maxLength must be a positive integer at least minLength"
        )
    return _TextInput(kind="text", name=name, prompt=prompt, minLength=minimum, maxLength=maximum)


def validate_choices(value: object) -> dict[str, Choice]:
    """A copy of a valid, non-empty, ordered choice map (extra choice keys are kept)."""
    if not isinstance(value, Mapping):
        raise InvalidRequest("Human decision choices must be an object")
    if len(value) == 0:
        raise InvalidRequest("Human decision choices must not be empty")
    labels: set[str] = set()
    for key, definition in value.items():
        if not isinstance(key, str) or NAME_RE.fullmatch(key) is None:
            raise InvalidRequest(f"Human decision choice {js_json(key)} is invalid")
        label = _validate_choice(definition, f"Human decision choice {key}")
        if label in labels:
            raise InvalidRequest(f"Human decision choice label {js_json(label)} is duplicated")
        labels.add(label)
    choices: dict[str, Choice] = json_copy(value)
    return choices


def _validate_choice(value: object, label: str) -> str:
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{label} must be an object")
    choice_label = require_string(value.get("label"), f"{label} label")
    require_presentable(choice_label, f"{label} label")
    if "input" in value:
        _validate_text_input(value["input"], f"{label} input")
    return choice_label


def _validate_text_input(value: object, label: str) -> None:
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{label} must be an object")
    if value.get("kind") != "text":
        raise InvalidRequest(f"{label} kind must be text")
    require_name(value.get("name"), f"{label} name")
    prompt = require_string(value.get("prompt"), f"{label} prompt")
    require_presentable(prompt, f"{label} prompt")
    minimum = as_integer(value.get("minLength"))
    maximum = as_integer(value.get("maxLength"))
    if minimum is None or minimum < 0:
        raise InvalidRequest(f"{label} minLength must be a non-negative integer")
    if maximum is None or maximum < 1 or maximum < minimum:
        raise InvalidRequest(f"{label} maxLength is invalid")


def validate_response(choices: Mapping[str, Choice], value: object) -> Response:
    """The normalized response for `choices`; input text is kept exactly as given."""
    if not isinstance(value, Mapping):
        raise InvalidResponse("Human decision response must be an object")
    selected = value.get("choice")
    if not isinstance(selected, str) or selected not in choices:
        shown = "undefined" if "choice" not in value else js_json(selected)
        raise InvalidResponse(f"Human decision choice {shown} is not available")
    definition = choices[selected].get("input")
    if definition is None:
        if "input" in value:
            raise InvalidResponse(f"Human decision choice {selected} does not accept input")
        return Response(choice=selected)
    text = _validate_input(value.get("input"), selected, definition)
    return Response(choice=selected, input={definition["name"]: text})


def _validate_input(value: object, selected: str, definition: _TextInput) -> str:
    label = f"Human decision choice {selected} input"
    if not isinstance(value, Mapping):
        raise InvalidResponse(f"{label} must be an object")
    name = definition["name"]
    if list(value) != [name]:
        raise InvalidResponse(f"{label} must contain only {name}")
    text = value[name]
    if not isinstance(text, str):
        raise InvalidResponse(f"{label} must be text")
    minimum, maximum = definition["minLength"], definition["maxLength"]
    if not minimum <= utf16_len(text) <= maximum:
        raise InvalidResponse(f"{label} length must be {minimum} through {maximum}")
    return text
