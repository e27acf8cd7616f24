"""The fake's wire format: JSON encoding, replies, request parameters and method names."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl

__all__ = [
    "RAW_ITEM", "Exchange", "Reply", "as_float", "as_int", "canonical", "decode_params",
    "dumps", "error_body", "error_reply", "ok_reply", "updates_reply", "uploaded",
]


# Fields the Bot API expects as JSON inside a form field.
_NESTED_FIELDS: Final = frozenset(
    {"reply_markup", "allowed_updates", "reply_parameters", "entities", "link_preview_options",
     "commands", "reaction"}
)
_KNOWN_METHODS: Final = {
    name.lower(): name
    for name in (
        "getMe", "getUpdates", "sendMessage", "sendDocument", "editMessageReplyMarkup",
        "answerCallbackQuery", "deleteWebhook", "getWebhookInfo", "setMyCommands",
        "setWebhook", "setMessageReaction",
    )
}  # fmt: skip


def dumps(value: object) -> bytes:
    """Encode JSON the way the Bot API does: compact, non-ASCII escaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


@dataclass(frozen=True, slots=True)
class Reply:
    """A response to write: status, body and content type."""

    status: int
    body: bytes
    content_type: str = "application/json"


# The key under which the queue holds a batch item pushed as raw text (see updates_reply).
RAW_ITEM: Final = "\x00raw"


def updates_reply(batch: list[dict[str, Any]]) -> Reply:
    """``ok: true`` with a batch of updates; raw items are spliced in byte for byte."""
    items = [u[RAW_ITEM].encode("utf-8", "surrogatepass") if RAW_ITEM in u else dumps(u)
             for u in batch]
    return Reply(200, b'{"ok":true,"result":[' + b",".join(items) + b"]}")


def ok_reply(result: object) -> Reply:
    """``ok: true`` with a result."""
    return Reply(200, dumps({"ok": True, "result": result}))


def error_reply(
    code: int, description: str, parameters: Mapping[str, object] | None = None
) -> Reply:
    """An error exactly as the Bot API shapes it."""
    return Reply(code, error_body(code, description, parameters))


def error_body(
    code: int, description: str, parameters: Mapping[str, object] | None = None
) -> bytes:
    """The JSON body of a Bot API error."""
    payload: dict[str, object] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        payload["parameters"] = dict(parameters)
    return dumps(payload)


class Exchange(Protocol):
    """The connection-level operations the server logic needs from a handler."""

    def read_body(self) -> bytes: ...
    def client_gone(self) -> bool: ...


def canonical(method: str) -> str:
    """Bot API method names are case-insensitive; record them in their documented case."""
    return _KNOWN_METHODS.get(method.lower(), method)


def decode_params(
    body: bytes, content_type: str, query: str
) -> tuple[dict[str, str], dict[str, Any]]:
    """Wire fields and decoded params from a query string plus a form or JSON body."""
    fields = dict(parse_qsl(query, keep_blank_values=True))
    if content_type.startswith("multipart/form-data"):
        return _multipart(body, content_type, fields)
    if body and content_type.startswith("application/json"):
        loaded = json.loads(body.decode("utf-8"))
        if not isinstance(loaded, dict):
            raise ValueError("JSON body is not an object")
        params: dict[str, Any] = {**fields, **loaded}
        fields |= {k: v if isinstance(v, str) else dumps(v).decode() for k, v in loaded.items()}
        return fields, params
    if body:
        fields |= dict(
            parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        )
    return fields, {key: _decode_nested(key, value) for key, value in fields.items()}


def _multipart(body: bytes, content_type: str,
               fields: dict[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
    """A multipart/form-data body: text fields as a form's; an uploaded file as
    `{"file_name", "mime_type", "data"}` (data base64, so a record stays JSON), exactly as
    uploaded. Raises ValueError for a body that is not well formed."""
    found = re.search(r'boundary="?([^";]+)"?', content_type)
    if found is None:
        raise ValueError("multipart body without a boundary")
    delimiter = b"\r\n--" + found[1].encode("latin-1")
    sections = (b"\r\n" + body).split(delimiter)
    if len(sections) < 2 or sections[0] or not sections[-1].startswith(b"--"):
        raise ValueError("multipart body is not well formed")
    files: dict[str, Any] = {}
    for section in sections[1:-1]:
        head, blank, data = section.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (
            line.partition(":") for line in head.decode("utf-8").split("\r\n"))}
        disposition = headers.get("content-disposition", "")
        name = re.search(r'\bname="([^"]*)"', disposition)
        if not blank or name is None:
            raise ValueError("multipart section without a name")
        file_name = re.search(r'\bfilename="([^"]*)"', disposition)
        if file_name is None:
            fields[name[1]] = data.decode("utf-8")
        else:
            files[name[1]] = {"file_name": file_name[1], "data": base64.b64encode(data).decode(),
                              "mime_type": headers.get("content-type", "")}
    return fields, {**{k: _decode_nested(k, v) for k, v in fields.items()}, **files}


def uploaded(params: Mapping[str, Any], name: str = "document") -> bytes | None:
    """The bytes of a file uploaded as `name` (see `_multipart`), or None."""
    found = params.get(name)
    return base64.b64decode(found["data"]) if isinstance(found, dict) and "data" in found \
        else None


def _decode_nested(key: str, value: str) -> Any:
    if key not in _NESTED_FIELDS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # kept raw; the method handler reports the parse error


def as_int(value: object) -> int | None:
    """An integer parameter as the Bot API accepts it (number or decimal text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value)
    return None


def as_float(value: object, default: float) -> float:
    """A number parameter (number or decimal text), else ``default``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return default
    return default
