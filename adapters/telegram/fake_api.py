"""A loopback fake of the Telegram Bot API, for tests and for the ``demo`` command.

It speaks the real wire format over real HTTP on 127.0.0.1 (stdlib only:
``http.server`` with one thread per connection):

* ``POST|GET /bot<token>/<method>`` with form-encoded (what python-telegram-bot
  sends; nested objects are JSON strings), JSON or query-string parameters.
  A wrong token gets ``401 Unauthorized``; the token is never logged.
* ``getMe``, ``sendMessage``, ``editMessageReplyMarkup``, ``answerCallbackQuery``,
  ``deleteWebhook``, ``getWebhookInfo`` answer like the Bot API does, including a
  field python-telegram-bot does not know, so clients prove they tolerate one.
* ``getUpdates`` serves a queue the test pushes into (``push_update``,
  ``push_fixture``), honouring ``offset`` (confirmation), ``limit``, long-poll
  ``timeout`` and ``allowed_updates``. A second ``getUpdates`` while one is in
  flight is recorded as an overlap and terminates the earlier one with 409, as
  Telegram does.
* Every request is recorded (``requests("sendMessage")``) and can be awaited
  (``wait_received``). Faults are queued per method (``inject``): canned error
  responses (429, 409, 400, 403, migrate...), ``ok`` with a wrong result, a
  non-JSON body, dropping the connection after the request, a TCP reset, a hang
  until ``release()``, a delay. ``refuse_connections()`` closes the listening
  socket so new connections are refused (the only honest "not sent" a live
  server can produce); ``unused_port_url()`` is a URL nobody listens on.

Out of process, ``python -m adapters.telegram.fake_api --port 0 --token-file F
--fixtures DIR`` prints its base URL as the first stdout line and accepts the
same controls as JSON under ``/_control/`` (see ``RemoteFakeBotApi`` and
``FakeBotApiProcess``).

Fixture files hold recorded Bot API response bodies; ``load_fixture`` reads
one and fills ``{{placeholder}}`` strings, which is how the demo builds a
button press for a message it just sent.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import hmac
import json
import logging
import re
import select
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Protocol, Self, cast
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from adapters.telegram.errors import FixtureError

__all__ = [
    "ANY_METHOD",
    "DEFAULT_ALLOWED_UPDATES",
    "FakeBotApi",
    "FakeBotApiProcess",
    "Fault",
    "FaultKind",
    "Overlap",
    "RecordedRequest",
    "RemoteFakeBotApi",
    "demo_fixture_names",
    "fixture_updates",
    "load_demo_fixture",
    "load_fixture",
    "main",
    "unused_port_url",
]

_LOG = logging.getLogger(__name__)

ANY_METHOD: Final = "*"
CONTROL_PREFIX: Final = "/_control/"
LONG_POLL_MAX_TIMEOUT: Final = 50.0
MAX_TEXT_LENGTH: Final = 4096
FIRST_UPDATE_ID: Final = 873_400_001
CALLBACK_ID_BASE: Final = 4_410_371_836_592_000_000  # callback query ids are large decimals
# Fields the Bot API expects as JSON inside a form field.
NESTED_FIELDS: Final = frozenset(
    {"reply_markup", "allowed_updates", "reply_parameters", "entities", "link_preview_options"}
)
# getUpdates' default when allowed_updates is empty or never set [facts A1].
DEFAULT_ALLOWED_UPDATES: Final = frozenset(
    {
        "message", "edited_message", "channel_post", "edited_channel_post",
        "business_connection", "business_message", "edited_business_message",
        "deleted_business_messages", "inline_query", "chosen_inline_result",
        "callback_query", "shipping_query", "pre_checkout_query", "purchased_paid_media",
        "poll", "poll_answer", "my_chat_member", "chat_join_request", "chat_boost",
        "removed_chat_boost",
    }
)  # fmt: skip
ALL_UPDATE_TYPES: Final = DEFAULT_ALLOWED_UPDATES | {
    "chat_member",
    "message_reaction",
    "message_reaction_count",
}
# A field no Bot API version defines: proves clients keep unknown fields.
UNKNOWN_FIELD: Final = "x_future_field"

# Exact descriptions from the Bot API server [facts A8].
DESC_UNAUTHORIZED: Final = "Unauthorized"
DESC_NOT_FOUND: Final = "Not Found"
DESC_METHOD_NOT_FOUND: Final = "Not Found: method not found"
DESC_TOO_MANY_REQUESTS: Final = "Too Many Requests: retry after {}"
DESC_CONFLICT_POLL: Final = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
DESC_CONFLICT_WEBHOOK: Final = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)
DESC_NOT_MODIFIED: Final = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)
DESC_EDIT_NOT_FOUND: Final = "Bad Request: message to edit not found"
DESC_CHAT_NOT_FOUND: Final = "Bad Request: chat not found"
DESC_QUERY_TOO_OLD: Final = (
    "Bad Request: query is too old and response timeout expired or query ID is invalid"
)
DESC_MIGRATED: Final = "Bad Request: group chat was upgraded to a supergroup chat"
DESC_BLOCKED: Final = "Forbidden: bot was blocked by the user"
DESC_TEXT_EMPTY: Final = "Bad Request: message text is empty"
DESC_TEXT_TOO_LONG: Final = "Bad Request: message is too long"
DESC_CHAT_ID_EMPTY: Final = "Bad Request: chat_id is empty"
DESC_BAD_MARKUP: Final = "Bad Request: can't parse reply keyboard markup JSON object"
DESC_BAD_BODY: Final = "Bad Request: can't parse request body"

_API_PATH: Final = re.compile(r"/bot(?P<token>[^/]*)/(?P<method>[A-Za-z_]+)")
_PLACEHOLDER: Final = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")
_REDACTED: Final = "<redacted>"
_BOT_SEGMENT: Final = re.compile(r"/bot[^/\s]*")


def _dumps(value: object) -> bytes:
    """Encode JSON the way the Bot API does: compact, non-ASCII escaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _redact(text: str, token: str) -> str:
    """Remove the token (raw and URL-quoted) from text meant for a log."""
    if not token:
        return text
    return text.replace(token, _REDACTED).replace(quote(token, safe=""), _REDACTED)


# --------------------------------------------------------------------------- fixtures


def _fill(value: Any, values: Mapping[str, object]) -> Any:
    """Replace ``{{name}}`` placeholders in every string of a parsed JSON value.

    A string that is exactly one placeholder becomes the value itself (so a
    number stays a number); a placeholder inside a longer string is formatted in.
    """
    if isinstance(value, dict):
        return {key: _fill(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, values) for item in value]
    if not isinstance(value, str):
        return value
    whole = _PLACEHOLDER.fullmatch(value)
    if whole is not None and whole[1] in values:
        return values[whole[1]]
    return _PLACEHOLDER.sub(lambda m: str(values[m[1]]) if m[1] in values else m[0], value)


def _unfilled(value: Any) -> set[str]:
    """Names of placeholders still present anywhere in a parsed JSON value."""
    if isinstance(value, dict):
        return set().union(*(_unfilled(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(_unfilled(item) for item in value))
    if isinstance(value, str):
        return set(_PLACEHOLDER.findall(value))
    return set()


def parse_fixture(text: str, values: Mapping[str, object] | None, origin: str) -> Any:
    """Parse fixture text and fill its placeholders; every placeholder must be filled."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FixtureError(f"Telegram fixture {origin} is not valid JSON: {exc}") from None
    filled = _fill(data, values or {})
    missing = _unfilled(filled)
    if missing:
        names = ", ".join(sorted(missing))
        raise FixtureError(f"Telegram fixture {origin} has unfilled placeholders: {names}")
    return filled


def load_fixture(path: str | Path, values: Mapping[str, object] | None = None) -> Any:
    """Load a recorded fixture file, filling ``{{placeholder}}`` strings from values."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise FixtureError(f"cannot read Telegram fixture {source}: {exc.strerror}") from None
    return parse_fixture(text, values, str(source))


def demo_fixture_names() -> list[str]:
    """File names of the fixture templates shipped for the demo."""
    folder = resources.files(__package__ or "adapters.telegram") / "demo_fixtures"
    return sorted(item.name for item in folder.iterdir() if item.name.endswith(".json"))


def load_demo_fixture(name: str, values: Mapping[str, object] | None = None) -> Any:
    """Load a packaged demo fixture template (``demo_fixtures/<name>``) and fill it."""
    if name not in demo_fixture_names():
        raise FixtureError(f"no demo fixture named {name!r}")
    folder = resources.files(__package__ or "adapters.telegram") / "demo_fixtures"
    return parse_fixture((folder / name).read_text(encoding="utf-8"), values, f"demo:{name}")


def updates_of(data: Any, origin: str) -> list[dict[str, Any]]:
    """The updates in a parsed fixture: a getUpdates response, one update, or a list."""
    if isinstance(data, dict) and isinstance(data.get("result"), list):
        items: Any = data["result"]
    elif isinstance(data, dict):
        items = [data]
    else:
        items = data
    if not isinstance(items, list) or not all(_is_update(item) for item in items):
        raise FixtureError(f"Telegram fixture {origin} does not hold updates")
    return [dict(item) for item in items]


def _is_update(item: object) -> bool:
    return isinstance(item, dict) and isinstance(item.get("update_id"), int)


def fixture_updates(
    path: str | Path, values: Mapping[str, object] | None = None
) -> list[dict[str, Any]]:
    """Load the updates recorded in a fixture file (see ``updates_of``)."""
    return updates_of(load_fixture(path, values), str(path))


# --------------------------------------------------------------------------- faults


class FaultKind(StrEnum):
    """What the server does instead of (or before) answering normally."""

    RESPOND = "respond"  # send the canned status and body
    DROP = "drop"  # read the whole request, then close without a response
    RESET = "reset"  # close with a TCP reset before reading the body
    HANG = "hang"  # hold the request until release() or shutdown, then answer normally
    DELAY = "delay"  # answer normally after `seconds`


@dataclass(frozen=True, slots=True)
class Fault:
    """One programmed misbehaviour, applied to the next ``times`` matching requests."""

    kind: FaultKind
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    seconds: float = 0.0
    times: int = 1

    @classmethod
    def error(
        cls,
        error_code: int,
        description: str,
        parameters: Mapping[str, object] | None = None,
        *,
        times: int = 1,
    ) -> Fault:
        """An error response exactly as the Bot API shapes it."""
        payload: dict[str, object] = {
            "ok": False,
            "error_code": error_code,
            "description": description,
        }
        if parameters:
            payload["parameters"] = dict(parameters)
        return cls(FaultKind.RESPOND, status=error_code, body=_dumps(payload), times=times)

    @classmethod
    def too_many_requests(cls, retry_after: int = 1, *, times: int = 1) -> Fault:
        """429 with ``parameters.retry_after``."""
        desc = DESC_TOO_MANY_REQUESTS.format(retry_after)
        return cls.error(429, desc, {"retry_after": retry_after}, times=times)

    @classmethod
    def conflict(cls, *, times: int = 1) -> Fault:
        """409: another getUpdates poller terminated this one."""
        return cls.error(409, DESC_CONFLICT_POLL, times=times)

    @classmethod
    def webhook_conflict(cls, *, times: int = 1) -> Fault:
        """409: getUpdates while a webhook is set."""
        return cls.error(409, DESC_CONFLICT_WEBHOOK, times=times)

    @classmethod
    def chat_not_found(cls, *, times: int = 1) -> Fault:
        """400 chat not found."""
        return cls.error(400, DESC_CHAT_NOT_FOUND, times=times)

    @classmethod
    def not_modified(cls, *, times: int = 1) -> Fault:
        """400 message is not modified (treated as success by settlement)."""
        return cls.error(400, DESC_NOT_MODIFIED, times=times)

    @classmethod
    def edit_not_found(cls, *, times: int = 1) -> Fault:
        """400 message to edit not found."""
        return cls.error(400, DESC_EDIT_NOT_FOUND, times=times)

    @classmethod
    def query_too_old(cls, *, times: int = 1) -> Fault:
        """400 for a late answerCallbackQuery."""
        return cls.error(400, DESC_QUERY_TOO_OLD, times=times)

    @classmethod
    def blocked(cls, *, times: int = 1) -> Fault:
        """403 bot was blocked by the user."""
        return cls.error(403, DESC_BLOCKED, times=times)

    @classmethod
    def unauthorized(cls, *, times: int = 1) -> Fault:
        """401 as for a revoked token."""
        return cls.error(401, DESC_UNAUTHORIZED, times=times)

    @classmethod
    def migrated(cls, migrate_to_chat_id: int, *, times: int = 1) -> Fault:
        """400 group upgraded to a supergroup, with ``parameters.migrate_to_chat_id``."""
        params = {"migrate_to_chat_id": migrate_to_chat_id}
        return cls.error(400, DESC_MIGRATED, params, times=times)

    @classmethod
    def ok_result(cls, result: object, *, times: int = 1) -> Fault:
        """``ok: true`` with the given (typically wrong or empty) result."""
        body = _dumps({"ok": True, "result": result})
        return cls(FaultKind.RESPOND, body=body, times=times)

    @classmethod
    def ok_without_result(cls, *, times: int = 1) -> Fault:
        """``ok: true`` and no result field at all."""
        return cls(FaultKind.RESPOND, body=_dumps({"ok": True}), times=times)

    @classmethod
    def non_json(
        cls, body: bytes = b"<html><body>502 Bad Gateway</body></html>", status: int = 200,
        *, times: int = 1,
    ) -> Fault:  # fmt: skip
        """A body that is not JSON (a proxy's error page, a truncated answer)."""
        return cls(FaultKind.RESPOND, status, body, "text/html", times=times)

    @classmethod
    def drop(cls, *, times: int = 1) -> Fault:
        """Read the request, then close the connection without any response."""
        return cls(FaultKind.DROP, times=times)

    @classmethod
    def reset(cls, *, times: int = 1) -> Fault:
        """Reset the connection (RST) right after the request head."""
        return cls(FaultKind.RESET, times=times)

    @classmethod
    def hang(cls, *, times: int = 1) -> Fault:
        """Hold the request until ``release()``, then answer it normally."""
        return cls(FaultKind.HANG, times=times)

    @classmethod
    def delay(cls, seconds: float, *, times: int = 1) -> Fault:
        """Answer normally, but only after ``seconds``."""
        return cls(FaultKind.DELAY, seconds=seconds, times=times)

    def to_json(self) -> dict[str, object]:
        """Plain JSON form, for the control endpoint."""
        data = dataclasses.asdict(self)
        data["kind"] = self.kind.value
        data["body"] = base64.b64encode(self.body).decode("ascii")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fault:
        """Inverse of ``to_json``."""
        return cls(
            kind=FaultKind(data["kind"]),
            status=int(data.get("status", 200)),
            body=base64.b64decode(data.get("body", "")),
            content_type=str(data.get("content_type", "application/json")),
            seconds=float(data.get("seconds", 0.0)),
            times=int(data.get("times", 1)),
        )


@dataclass(slots=True)
class _Armed:
    """A queued fault and how many more requests it applies to."""

    fault: Fault
    remaining: int


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as it arrived on the wire (the token is never kept)."""

    seq: int
    method: str
    http_method: str
    content_type: str
    body: bytes
    fields: dict[str, str]  # exact wire values (form/query strings)
    params: dict[str, Any]  # fields with the nested JSON ones decoded
    token_ok: bool
    fault: str | None
    started_at: float
    ended_at: float | None  # None while in flight, or if it never finished
    status: int | None  # HTTP status sent; None when no response was sent

    def to_json(self) -> dict[str, object]:
        """Plain JSON form, for the control endpoint."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["body"] = base64.b64encode(self.body).decode("ascii")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedRequest:
        """Inverse of ``to_json``."""
        values = dict(data)
        values["body"] = base64.b64decode(values["body"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Overlap:
    """A getUpdates that arrived while an earlier one was still being answered."""

    earlier_seq: int
    later_seq: int
    at: float


@dataclass(slots=True)
class _Entry:
    """Mutable bookkeeping behind a RecordedRequest."""

    seq: int
    method: str
    http_method: str
    content_type: str
    body: bytes
    fields: dict[str, str]
    params: dict[str, Any]
    token_ok: bool
    fault: str | None
    started_at: float
    ended_at: float | None = None
    status: int | None = None

    def snapshot(self) -> RecordedRequest:
        return RecordedRequest(
            self.seq, self.method, self.http_method, self.content_type, self.body,
            dict(self.fields), dict(self.params), self.token_ok, self.fault,
            self.started_at, self.ended_at, self.status,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Reply:
    """A response to write: status, body and content type."""

    status: int
    body: bytes
    content_type: str = "application/json"


def _ok(result: object) -> _Reply:
    return _Reply(200, _dumps({"ok": True, "result": result}))


def _error(code: int, description: str, parameters: Mapping[str, object] | None = None) -> _Reply:
    payload: dict[str, object] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        payload["parameters"] = dict(parameters)
    return _Reply(code, _dumps(payload))


class _Exchange(Protocol):
    """The connection-level operations the server logic needs from a handler."""

    def read_body(self) -> bytes: ...
    def client_gone(self) -> bool: ...


# --------------------------------------------------------------------------- parsing


def _decode_params(
    body: bytes, content_type: str, query: str
) -> tuple[dict[str, str], dict[str, Any]]:
    """Wire fields and decoded params from a query string plus a form or JSON body."""
    fields = dict(parse_qsl(query, keep_blank_values=True))
    if body and content_type.startswith("application/json"):
        loaded = json.loads(body.decode("utf-8"))
        if not isinstance(loaded, dict):
            raise ValueError("JSON body is not an object")
        params: dict[str, Any] = {**fields, **loaded}
        fields |= {k: v if isinstance(v, str) else _dumps(v).decode() for k, v in loaded.items()}
        return fields, params
    if body:
        fields |= dict(
            parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        )
    return fields, {key: _decode_nested(key, value) for key, value in fields.items()}


def _decode_nested(key: str, value: str) -> Any:
    if key not in NESTED_FIELDS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # kept raw; the method handler reports the parse error


def _as_int(value: object) -> int | None:
    """An integer parameter as the Bot API accepts it (number or decimal text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value)
    return None


def _as_float(value: object, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return default
    return default


def _update_type(update: Mapping[str, Any]) -> str | None:
    kinds = [key for key in update if key != "update_id"]
    return kinds[0] if kinds else None


def _update_chat_messages(update: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Messages carried by an update (for message-id bookkeeping)."""
    found = []
    for key in ("message", "edited_message", "channel_post", "edited_channel_post"):
        if isinstance(update.get(key), dict):
            found.append(update[key])
    callback = update.get("callback_query")
    if isinstance(callback, dict) and isinstance(callback.get("message"), dict):
        found.append(callback["message"])
    return found


# --------------------------------------------------------------------------- server


class _HttpServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its FakeBotApi and can reset connections."""

    request_queue_size = 64
    fake: FakeBotApi

    def __init__(self, address: tuple[str, int], fake: FakeBotApi) -> None:
        self.fake = fake
        self.reset_on_close: set[socket.socket] = set()
        self._reset_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup; loopback needs none.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def mark_reset(self, conn: socket.socket) -> None:
        with self._reset_lock:
            self.reset_on_close.add(conn)

    def shutdown_request(self, request: Any) -> None:
        with self._reset_lock:
            reset = request in self.reset_on_close
            self.reset_on_close.discard(request)
        if not reset:
            super().shutdown_request(request)
            return
        # SO_LINGER 0 makes close() send RST instead of FIN.
        request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_request(request)


class FakeBotApi:
    """The fake Bot API server; usable as ``with FakeBotApi(token=...) as server:``."""

    def __init__(
        self,
        token: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        fixtures_dir: str | Path | None = None,
        bot_user: Mapping[str, Any] | None = None,
    ) -> None:
        if not token:
            raise ValueError("the fake Bot API needs a non-empty token")
        self._token = token
        self._host = host
        self._port = port
        self._fixtures_dir = Path(fixtures_dir) if fixtures_dir else None
        self._bot_user = dict(bot_user) if bot_user else _default_bot_user(token)
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._closing = False
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._lifecycle = threading.Lock()
        self._reset_state()

    def _reset_state(self) -> None:
        self._seq = 0
        self._entries: list[_Entry] = []
        self._faults: dict[str, deque[_Armed]] = {}
        self._updates: list[dict[str, Any]] = []
        self._next_update_id = FIRST_UPDATE_ID
        self._allowed: frozenset[str] = DEFAULT_ALLOWED_UPDATES
        self._polls: dict[int, _Exchange] = {}
        self._poll_owner: int | None = None
        self._overlaps: list[Overlap] = []
        self._release_generation = 0
        self._messages: dict[int, dict[int, dict[str, Any]]] = {}
        self._last_message_id: dict[int, int] = {}
        self._callback_ids: set[str] = set()
        self._answered: list[str] = []

    # ---- lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self.close()

    def __repr__(self) -> str:
        return f"FakeBotApi(base_url={self.base_url!r})"

    def start(self) -> None:
        """Bind 127.0.0.1 (an ephemeral port unless one was given) and serve."""
        with self._lifecycle:
            if self._httpd is None and not self._closing:
                self._listen()

    def _listen(self) -> None:
        httpd = _HttpServer((self._host, self._port), self)
        self._port = httpd.server_port
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"fake-bot-api:{self._port}", daemon=True,
        )  # fmt: skip
        self._thread.start()

    def _unlisten(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join()

    def close(self) -> None:
        """Stop serving: held and long-polling requests end, new connections are refused."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        with self._lifecycle:
            self._unlisten()
        self._closed.set()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Block until ``close()`` ran (the CLI waits here)."""
        return self._closed.wait(timeout)

    def refuse_connections(self) -> None:
        """Close the listening socket, so new connections are refused (ECONNREFUSED).

        Requests already accepted carry on. The port is kept and reused by
        ``accept_connections``.
        """
        with self._lifecycle:
            self._unlisten()

    def accept_connections(self) -> None:
        """Listen again on the same port after ``refuse_connections``."""
        with self._lifecycle:
            if self._httpd is None and not self._closing:
                self._listen()

    def refuse_for(self, seconds: float) -> None:
        """Refuse connections now and accept them again after ``seconds``."""
        self.refuse_connections()
        timer = threading.Timer(seconds, self.accept_connections)
        timer.daemon = True
        timer.start()

    @contextlib.contextmanager
    def refusing(self) -> Iterator[None]:
        """Refuse connections inside the block."""
        self.refuse_connections()
        try:
            yield
        finally:
            self.accept_connections()

    @property
    def port(self) -> int:
        """The TCP port (stable across refuse/accept)."""
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the client's ``api_base_url``."""
        return f"http://{self._host}:{self._port}"

    def method_url(self, method: str) -> str:
        """Full URL of a Bot API method, token included (for tests only)."""
        return f"{self.base_url}/bot{self._token}/{method}"

    @property
    def bot_user(self) -> dict[str, Any]:
        """The User object getMe returns."""
        return dict(self._bot_user)

    # ---- test controls

    def push_update(self, update: Mapping[str, Any]) -> int:
        """Queue an update for getUpdates; assigns the next update_id when absent."""
        with self._cond:
            given = _as_int(update.get("update_id"))
            update_id = self._next_update_id if given is None else given
            # update_id leads, as on the wire.
            item = {"update_id": update_id} | {k: v for k, v in update.items() if k != "update_id"}
            self._next_update_id = max(self._next_update_id, update_id + 1)
            self._updates = sorted(
                [u for u in self._updates if u["update_id"] != update_id] + [item],
                key=lambda u: int(u["update_id"]),
            )
            self._note_update(item)
            self._cond.notify_all()
            return update_id

    def _note_update(self, update: Mapping[str, Any]) -> None:
        """Track message ids and callback ids an update introduces."""
        for message in _update_chat_messages(update):
            chat_id = _as_int((message.get("chat") or {}).get("id"))
            message_id = _as_int(message.get("message_id"))
            if chat_id is not None and message_id is not None:
                last = self._last_message_id.get(chat_id, 0)
                self._last_message_id[chat_id] = max(last, message_id)
        callback = update.get("callback_query")
        if isinstance(callback, dict) and isinstance(callback.get("id"), str):
            self._callback_ids.add(callback["id"])

    def push_fixture(
        self, name: str | Path, values: Mapping[str, object] | None = None,
        *, renumber: bool = True,
    ) -> list[int]:  # fmt: skip
        """Queue the updates of a fixture (a path, a name in ``fixtures_dir``, or a
        demo template name).

        Placeholders ``update_id``, ``date``, ``callback_query_id``, ``bot_id`` and
        ``bot_username`` default to the next id, now, a fresh query id and this
        fake's bot. With ``renumber`` recorded update ids are replaced by fresh
        ones, so fixtures can be pushed in any order.
        """
        with self._cond:
            defaults: dict[str, object] = {
                "update_id": self._next_update_id,
                "date": int(time.time()),
                "callback_query_id": str(CALLBACK_ID_BASE + self._next_update_id),
                "bot_id": self._bot_user["id"],
                "bot_username": self._bot_user["username"],
            }
        data = self._load_named_fixture(name, {**defaults, **(values or {})})
        ids = []
        for update in updates_of(data, str(name)):
            if renumber:
                update.pop("update_id")
            ids.append(self.push_update(update))
        return ids

    def _load_named_fixture(self, name: str | Path, values: Mapping[str, object]) -> Any:
        plain = str(name)
        if isinstance(name, Path) or "/" in plain or "\\" in plain:
            return load_fixture(name, values)
        if self._fixtures_dir is not None and (self._fixtures_dir / plain).is_file():
            return load_fixture(self._fixtures_dir / plain, values)
        return load_demo_fixture(plain, values)

    def inject(self, method: str, fault: Fault) -> None:
        """Queue a fault for the next ``fault.times`` requests of ``method`` (or ``ANY_METHOD``)."""
        if fault.times < 1:
            raise ValueError("a fault must apply at least once")
        with self._cond:
            queue = self._faults.setdefault(_canonical(method), deque())
            queue.append(_Armed(fault, fault.times))

    def clear_faults(self) -> None:
        """Forget every queued fault."""
        with self._cond:
            self._faults.clear()

    def release(self) -> None:
        """Let every request currently held by a ``hang`` fault proceed."""
        with self._cond:
            self._release_generation += 1
            self._cond.notify_all()

    def requests(self, method: str | None = None) -> list[RecordedRequest]:
        """Requests received so far (all, or those of one method), oldest first."""
        wanted = _canonical(method) if method else None
        with self._cond:
            return [e.snapshot() for e in self._entries if wanted in (None, e.method)]

    def overlaps(self) -> list[Overlap]:
        """Every time a getUpdates arrived while another was in flight."""
        with self._cond:
            return list(self._overlaps)

    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates queued and not yet confirmed by an offset."""
        with self._cond:
            return [dict(u) for u in self._updates]

    def answered_callbacks(self) -> list[str]:
        """callback_query ids answered with answerCallbackQuery, in order."""
        with self._cond:
            return list(self._answered)

    def sent_messages(self, chat_id: int) -> list[dict[str, Any]]:
        """Messages the fake has sent (and currently holds) in a chat."""
        with self._cond:
            return [dict(m) for m in self._messages.get(chat_id, {}).values()]

    def wait_received(self, method: str, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` requests of ``method`` have *arrived*."""
        wanted = _canonical(method)
        with self._cond:
            return self._cond.wait_for(
                lambda: sum(1 for e in self._entries if e.method == wanted) >= count, timeout
            )

    # ---- request handling (called from handler threads)

    def _take_fault(self, method: str) -> Fault | None:
        with self._cond:
            for key in (method, ANY_METHOD):
                queue = self._faults.get(key)
                if queue:
                    armed = queue[0]
                    armed.remaining -= 1
                    if armed.remaining <= 0:
                        queue.popleft()
                    return armed.fault
        return None

    def _record(
        self, method: str, http_method: str, content_type: str, body: bytes,
        wire: tuple[dict[str, str], dict[str, Any]], token_ok: bool, fault: Fault | None,
    ) -> _Entry:  # fmt: skip
        with self._cond:
            self._seq += 1
            entry = _Entry(
                self._seq, method, http_method, content_type, body, wire[0], wire[1],
                token_ok, fault.kind.value if fault else None, time.time(),
            )  # fmt: skip
            self._entries.append(entry)
            self._cond.notify_all()
            return entry

    def _finish(self, entry: _Entry, status: int | None) -> None:
        with self._cond:
            entry.ended_at = time.time()
            entry.status = status

    def _serve(self, handler: _Handler) -> None:
        """Handle one Bot API request from the wire to the response."""
        split = urlsplit(handler.path)
        match = _API_PATH.fullmatch(split.path)
        if match is None:
            handler.read_body()
            handler.send(_error(404, DESC_NOT_FOUND))
            return
        method = _canonical(match["method"])
        token_ok = hmac.compare_digest(unquote(match["token"]).encode(), self._token.encode())
        fault = self._take_fault(method) if token_ok else None
        if fault is not None and fault.kind is FaultKind.RESET:
            entry = self._record(method, handler.command, "", b"", ({}, {}), True, fault)
            handler.reset()
            self._finish(entry, None)
            return
        body = handler.read_body()
        content_type = handler.headers.get("Content-Type", "")
        try:
            wire, parsed = _decode_params(body, content_type, split.query), True
        except ValueError:
            wire, parsed = ({}, {}), False
        entry = self._record(method, handler.command, content_type, body, wire, token_ok, fault)
        if not token_ok:
            reply: _Reply | None = _error(401, DESC_UNAUTHORIZED)
        elif not parsed:
            reply = _error(400, DESC_BAD_BODY)
        else:
            reply = self._reply(entry, fault, handler)
        # No reply means: close without a response (FIN after the request was read).
        self._finish(entry, handler.send(reply) if reply is not None else None)

    def _reply(self, entry: _Entry, fault: Fault | None, ex: _Exchange) -> _Reply | None:
        """The response for a recorded request: the fault's, or the normal one."""
        if fault is None:
            return self._call(entry, ex)
        if fault.kind is FaultKind.RESPOND:
            return _Reply(fault.status, fault.body, fault.content_type)
        if fault.kind is FaultKind.DROP:
            return None
        if fault.kind is FaultKind.HANG and not self._hold():
            return None
        if fault.kind is FaultKind.DELAY and not self._pause(fault.seconds):
            return None
        return self._call(entry, ex)

    def _hold(self) -> bool:
        """Wait for release(); False if the server closed meanwhile."""
        with self._cond:
            generation = self._release_generation
            self._cond.wait_for(lambda: self._closing or self._release_generation != generation)
            return not self._closing

    def _pause(self, seconds: float) -> bool:
        with self._cond:
            self._cond.wait_for(lambda: self._closing, seconds)
            return not self._closing

    def _call(self, entry: _Entry, ex: _Exchange) -> _Reply | None:
        handlers: dict[str, Callable[[dict[str, Any], int, _Exchange], _Reply | None]] = {
            "getMe": lambda p, s, e: _ok(self._bot_user),
            "getUpdates": self._get_updates,
            "sendMessage": lambda p, s, e: self._send_message(p),
            "editMessageReplyMarkup": lambda p, s, e: self._edit_reply_markup(p),
            "answerCallbackQuery": lambda p, s, e: self._answer_callback(p),
            "deleteWebhook": lambda p, s, e: _ok(True),
            "getWebhookInfo": lambda p, s, e: self._webhook_info(),
        }
        handler = handlers.get(entry.method)
        if handler is None:
            return _error(404, DESC_METHOD_NOT_FOUND)
        return handler(entry.params, entry.seq, ex)

    # ---- Bot API methods

    def _webhook_info(self) -> _Reply:
        with self._cond:
            pending = len(self._updates)
        return _ok({"url": "", "has_custom_certificate": False, "pending_update_count": pending})

    def _get_updates(self, params: dict[str, Any], seq: int, ex: _Exchange) -> _Reply | None:
        """Long-poll the queue; a newer getUpdates ends this one with 409."""
        limit = min(max(_as_int(params.get("limit")) or 100, 1), 100)
        timeout = min(max(_as_float(params.get("timeout"), 0.0), 0.0), LONG_POLL_MAX_TIMEOUT)
        with self._cond:
            self._confirm(_as_int(params.get("offset")))
            self._set_allowed(params.get("allowed_updates"))
            self._note_overlaps(seq)
            self._polls[seq] = ex
            self._poll_owner = seq
            try:
                return self._poll(seq, ex, limit, time.monotonic() + timeout)
            finally:
                del self._polls[seq]

    def _poll(self, seq: int, ex: _Exchange, limit: int, deadline: float) -> _Reply | None:
        """Wait (lock held) until updates, timeout, a newer poll, shutdown or hang-up."""
        while True:
            if self._poll_owner != seq:
                return _error(409, DESC_CONFLICT_POLL)
            batch = [u for u in self._updates if _update_type(u) in self._allowed][:limit]
            remaining = deadline - time.monotonic()
            if batch or self._closing or remaining <= 0:
                return _ok(batch)
            # Short slices so a client that hung up is noticed and not counted as
            # overlapping the next poll.
            self._cond.wait(min(remaining, 0.05))
            if ex.client_gone():
                return None

    def _confirm(self, offset: int | None) -> None:
        if offset is None or offset == 0:
            return
        if offset > 0:
            self._updates = [u for u in self._updates if int(u["update_id"]) >= offset]
        else:
            self._updates = self._updates[offset:]

    def _set_allowed(self, value: object) -> None:
        # Missing or unparseable keeps the previous mask; unknown names are ignored [A1].
        if not isinstance(value, list):
            return
        known = frozenset(v for v in value if isinstance(v, str)) & ALL_UPDATE_TYPES
        if known:
            self._allowed = known
        else:
            self._allowed = DEFAULT_ALLOWED_UPDATES

    def _note_overlaps(self, seq: int) -> None:
        for earlier, exchange in list(self._polls.items()):
            if not exchange.client_gone():
                self._overlaps.append(Overlap(earlier, seq, time.time()))

    def _send_message(self, params: dict[str, Any]) -> _Reply:
        chat_id = _as_int(params.get("chat_id"))
        text = params.get("text")
        markup = params.get("reply_markup")
        if params.get("chat_id") in (None, ""):
            return _error(400, DESC_CHAT_ID_EMPTY)
        if chat_id is None:
            return _error(400, DESC_CHAT_NOT_FOUND)
        if not isinstance(text, str) or not text.strip():
            return _error(400, DESC_TEXT_EMPTY)
        if len(text) > MAX_TEXT_LENGTH:
            return _error(400, DESC_TEXT_TOO_LONG)
        if markup is not None and not isinstance(markup, dict):
            return _error(400, DESC_BAD_MARKUP)
        thread_id = _as_int(params.get("message_thread_id"))
        with self._cond:
            message_id = self._last_message_id.get(chat_id, 0) + 1
            self._last_message_id[chat_id] = message_id
            message = self._build_message(message_id, chat_id, text, markup, thread_id)
            self._messages.setdefault(chat_id, {})[message_id] = message
        return _ok(message)

    def _build_message(
        self, message_id: int, chat_id: int, text: str,
        markup: dict[str, Any] | None, thread_id: int | None,
    ) -> dict[str, Any]:  # fmt: skip
        message: dict[str, Any] = {"message_id": message_id}
        if thread_id is not None:
            message |= {"message_thread_id": thread_id}
        message |= {
            "from": {k: self._bot_user[k] for k in ("id", "is_bot", "first_name", "username")},
            "chat": _chat(chat_id, forum=thread_id is not None),
            "date": int(time.time()),
        }
        if thread_id is not None:
            message["is_topic_message"] = True
        message["text"] = text
        # Telegram echoes inline keyboards only, never ForceReply.
        if markup and markup.get("inline_keyboard"):
            message["reply_markup"] = {"inline_keyboard": markup["inline_keyboard"]}
        message[UNKNOWN_FIELD] = {"note": "a field python-telegram-bot does not know"}
        return message

    def _edit_reply_markup(self, params: dict[str, Any]) -> _Reply:
        """Replace a sent message's keyboard; unknown messages and no-ops fail as on Telegram."""
        if params.get("inline_message_id"):
            return _ok(True)
        chat_id = _as_int(params.get("chat_id"))
        message_id = _as_int(params.get("message_id"))
        markup = params.get("reply_markup")
        if markup is not None and not isinstance(markup, dict):
            return _error(400, DESC_BAD_MARKUP)
        keyboard = (markup or {}).get("inline_keyboard") or []
        with self._cond:
            stored = self._messages.get(chat_id or 0, {}).get(message_id or 0)
            if stored is None:
                return _error(400, DESC_EDIT_NOT_FOUND)
            current = (stored.get("reply_markup") or {}).get("inline_keyboard") or []
            if current == keyboard:
                return _error(400, DESC_NOT_MODIFIED)
            stored.pop("reply_markup", None)
            if keyboard:
                stored["reply_markup"] = {"inline_keyboard": keyboard}
            stored["edit_date"] = int(time.time())
            return _ok(dict(stored))

    def _answer_callback(self, params: dict[str, Any]) -> _Reply:
        query_id = params.get("callback_query_id")
        with self._cond:
            if not isinstance(query_id, str) or query_id not in self._callback_ids:
                return _error(400, DESC_QUERY_TOO_OLD)
            self._answered.append(query_id)
        return _ok(True)

    # ---- control endpoint (out-of-process tests)

    def _control(self, handler: _Handler) -> None:
        """Serve ``/_control/<action>``: a JSON interface to the test controls."""
        split = urlsplit(handler.path)
        action = split.path[len(CONTROL_PREFIX) :]
        query = dict(parse_qsl(split.query))
        try:
            raw = handler.read_body()
            body = json.loads(raw) if raw else {}
            result = self._control_action(action, body, query)
        except (ValueError, KeyError, TypeError) as exc:
            handler.send(_Reply(400, _dumps({"ok": False, "description": str(exc)})))
            return
        if result is None:
            handler.send(_Reply(404, _dumps({"ok": False, "description": "unknown control"})))
            return
        handler.send(_Reply(200, _dumps({"ok": True, **result})))
        if action == "shutdown":
            threading.Thread(target=self.close, daemon=True).start()

    def _control_action(
        self, action: str, body: Any, query: Mapping[str, str]
    ) -> dict[str, object] | None:
        if action == "push_update":
            return {"update_id": self.push_update(body)}
        if action == "push_fixture":
            return {"update_ids": self.push_fixture(body["name"], body.get("values"))}
        if action == "inject":
            self.inject(body["method"], Fault.from_json(body["fault"]))
            return {}
        if action == "release":
            self.release()
            return {}
        if action == "refuse":
            self.refuse_for(float(body["seconds"]))
            return {}
        if action == "requests":
            found = self.requests(query.get("method") or body.get("method"))
            return {"requests": [r.to_json() for r in found]}
        if action == "overlaps":
            return {"overlaps": [dataclasses.asdict(o) for o in self.overlaps()]}
        if action == "wait_received":
            args = (str(body["method"]), int(body.get("count", 1)), float(body.get("timeout", 5)))
            return {"received": self.wait_received(*args)}
        if action == "status":
            return {"pending_updates": len(self.pending_updates())}
        if action == "shutdown":
            return {}
        return None


def _canonical(method: str) -> str:
    """Bot API method names are case-insensitive; record them in their documented case."""
    return _KNOWN_METHODS.get(method.lower(), method)


_KNOWN_METHODS: Final = {
    name.lower(): name
    for name in (
        "getMe", "getUpdates", "sendMessage", "editMessageReplyMarkup",
        "answerCallbackQuery", "deleteWebhook", "getWebhookInfo",
    )
}  # fmt: skip


def _default_bot_user(token: str) -> dict[str, Any]:
    prefix = token.split(":", 1)[0]
    bot_id = int(prefix) if prefix.isdigit() else 7_000_000_001
    return {
        "id": bot_id,
        "is_bot": True,
        "first_name": "PiW Decisions",
        "username": "piw_decisions_bot",
        "can_join_groups": True,
        "can_read_all_group_messages": False,
        "supports_inline_queries": False,
        "can_connect_to_business": False,
        "has_main_web_app": False,
    }


def _chat(chat_id: int, *, forum: bool) -> dict[str, Any]:
    """A plausible Chat object for an id: private (>0), supergroup (-100...) or group."""
    if chat_id > 0:
        return {"id": chat_id, "first_name": "Ada", "username": "ada_ops", "type": "private"}
    if str(chat_id).startswith("-100"):
        chat: dict[str, Any] = {"id": chat_id, "title": "PiW Ops", "type": "supergroup"}
        if forum:
            chat["is_forum"] = True
        return chat
    return {"id": chat_id, "title": "PiW Ops", "type": "group"}


class _Handler(BaseHTTPRequestHandler):
    """Connection plumbing; all decisions are made by FakeBotApi."""

    protocol_version = "HTTP/1.1"
    server_version = "nginx/1.18.0"  # what api.telegram.org announces
    sys_version = ""
    # Bounds a read from a client that promised a body and stalled.
    timeout = 30

    @property
    def _fake(self) -> FakeBotApi:
        return cast(_HttpServer, self.server).fake

    def do_POST(self) -> None:
        self._dispatch()

    def do_GET(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        # Every response closes the connection, so each request opens a new one
        # and refuse_connections() affects the very next request.
        self.close_connection = True
        if self.path.startswith(CONTROL_PREFIX):
            self._fake._control(self)
        else:
            self._fake._serve(self)

    def read_body(self) -> bytes:
        length = _as_int(self.headers.get("Content-Length")) or 0
        return self.rfile.read(length) if length > 0 else b""

    def send(self, reply: _Reply) -> int | None:
        """Write a response; None if the client had already gone."""
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
        except OSError:
            return None
        return reply.status

    def reset(self) -> None:
        cast(_HttpServer, self.server).mark_reset(self.connection)

    def client_gone(self) -> bool:
        """True once the client closed or reset its side of the connection."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except (OSError, ValueError):
            return True

    def log_message(self, format: str, *args: Any) -> None:
        # The request line holds a token (right or wrong); never let it reach a log.
        line = _BOT_SEGMENT.sub("/bot" + _REDACTED, format % args)
        _LOG.debug("%s %s", self.address_string(), _redact(line, self._fake._token))


# --------------------------------------------------------------------------- helpers


def unused_port_url(host: str = "127.0.0.1") -> str:
    """A base URL where nothing listens (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    return f"http://{host}:{port}"


class RemoteFakeBotApi:
    """Drives a fake running in another process through its ``/_control/`` endpoint."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"RemoteFakeBotApi(base_url={self.base_url!r})"

    def _call(self, action: str, body: object = None, timeout: float | None = None) -> Any:
        data = _dumps(body if body is not None else {})
        request = urllib.request.Request(
            f"{self.base_url}{CONTROL_PREFIX}{action}", data=data, method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=timeout or self._timeout) as response:
            return json.loads(response.read())

    def push_update(self, update: Mapping[str, Any]) -> int:
        """See ``FakeBotApi.push_update``."""
        return int(self._call("push_update", dict(update))["update_id"])

    def push_fixture(self, name: str, values: Mapping[str, object] | None = None) -> list[int]:
        """See ``FakeBotApi.push_fixture`` (name in ``--fixtures`` or a demo template)."""
        reply = self._call("push_fixture", {"name": name, "values": dict(values or {})})
        return [int(i) for i in reply["update_ids"]]

    def inject(self, method: str, fault: Fault) -> None:
        """See ``FakeBotApi.inject``."""
        self._call("inject", {"method": method, "fault": fault.to_json()})

    def release(self) -> None:
        """See ``FakeBotApi.release``."""
        self._call("release")

    def refuse_for(self, seconds: float) -> None:
        """See ``FakeBotApi.refuse_for`` (the only refusal a remote caller can undo)."""
        self._call("refuse", {"seconds": seconds})

    def requests(self, method: str | None = None) -> list[RecordedRequest]:
        """See ``FakeBotApi.requests``."""
        reply = self._call("requests", {"method": method} if method else {})
        return [RecordedRequest.from_json(r) for r in reply["requests"]]

    def overlaps(self) -> list[Overlap]:
        """See ``FakeBotApi.overlaps``."""
        return [Overlap(**o) for o in self._call("overlaps")["overlaps"]]

    def wait_received(self, method: str, count: int = 1, timeout: float = 5.0) -> bool:
        """See ``FakeBotApi.wait_received``."""
        body = {"method": method, "count": count, "timeout": timeout}
        return bool(self._call("wait_received", body, timeout=timeout + 5)["received"])

    def shutdown(self) -> None:
        """Stop the remote server."""
        self._call("shutdown")


class FakeBotApiProcess:
    """Runs the fake in a child process, so it outlives a SIGKILLed worker."""

    def __init__(
        self,
        token_file: str | Path,
        *,
        fixtures_dir: str | Path | None = None,
        push: Sequence[str] = (),
        python: str = sys.executable,
        start_timeout: float = 10.0,
    ) -> None:
        self._argv = [python, "-m", "adapters.telegram.fake_api", "--port", "0"]
        self._argv += ["--token-file", str(token_file)]
        if fixtures_dir is not None:
            self._argv += ["--fixtures", str(fixtures_dir)]
        for name in push:
            self._argv += ["--push", name]
        self._start_timeout = start_timeout
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self.stop()

    @property
    def pid(self) -> int:
        """The child's process id."""
        if self._process is None:
            raise RuntimeError("the fake Bot API process is not running")
        return self._process.pid

    @property
    def control(self) -> RemoteFakeBotApi:
        """A control client for the child."""
        return RemoteFakeBotApi(self.base_url)

    def start(self) -> str:
        """Start the child and return its base URL (its first stdout line)."""
        self._process = subprocess.Popen(self._argv, stdout=subprocess.PIPE, text=True)
        stdout = self._process.stdout
        assert stdout is not None  # PIPE was requested
        ready, _, _ = select.select([stdout], [], [], self._start_timeout)
        line = stdout.readline().strip() if ready else ""
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError("the fake Bot API process did not report its URL")
        self.base_url = line
        return line

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the child to shut down; kill it if it does not."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None and self.base_url:
            with contextlib.suppress(OSError, urllib.error.URLError):
                RemoteFakeBotApi(self.base_url, timeout=timeout).shutdown()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


# --------------------------------------------------------------------------- CLI


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m adapters.telegram.fake_api",
        description="Loopback fake Telegram Bot API. Prints its base URL on the first line.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback)")
    parser.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    parser.add_argument("--token-file", required=True, help="file holding the bot token")
    parser.add_argument("--fixtures", help="directory of fixture files for push_fixture")
    parser.add_argument(
        "--push", action="append", default=[], metavar="NAME",
        help="fixture to queue at start (repeatable)",
    )  # fmt: skip
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: object) -> None:
    # Closing from inside a signal handler could deadlock on a lock the main
    # thread holds; unwind the main loop instead.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fake until SIGTERM/SIGINT or ``POST /_control/shutdown``."""
    args = _parse_args(argv)
    try:
        token = Path(args.token_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        print(f"Error: cannot read the token file: {exc.strerror}", file=sys.stderr)
        return 2
    if not token:
        print("Error: the token file is empty", file=sys.stderr)
        return 2
    server = FakeBotApi(token, host=args.host, port=args.port, fixtures_dir=args.fixtures)
    server.start()
    try:
        for name in args.push:
            server.push_fixture(name)
    except FixtureError as exc:
        server.close()
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    print(server.base_url, flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        while not server.wait_closed(0.2):
            pass
    except KeyboardInterrupt:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
