"""The fake Bot API's HTTP server: lifecycle, connections, and routing a request to its reply.

Real HTTP/1.1 on 127.0.0.1 (stdlib ``http.server``, one thread per connection).
Every response closes its connection, so ``refuse_connections()`` affects the
very next request. A wrong token gets ``401 Unauthorized``; the token is never
logged.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import re
import select
import socket
import socketserver
import struct
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, cast
from urllib.parse import quote, unquote, urlsplit

from adapters.telegram.fake.bot_state import BotState
from adapters.telegram.fake.constants import DESC_BAD_BODY, DESC_NOT_FOUND, DESC_UNAUTHORIZED
from adapters.telegram.fake.control import CONTROL_PREFIX, serve_control
from adapters.telegram.fake.faults import Fault, FaultKind
from adapters.telegram.fake.fixtures import load_named_fixture, updates_of
from adapters.telegram.fake.methods import BotMethods, default_bot_user
from adapters.telegram.fake.records import Entry, Overlap, PushedUpdate, RecordedRequest
from adapters.telegram.fake.wire import (
    Exchange,
    Reply,
    as_int,
    canonical,
    decode_params,
    error_reply,
)

__all__ = ["FakeBotApi", "unused_port_url"]


_LOG = logging.getLogger(__name__)

_API_PATH: Final = re.compile(r"/bot(?P<token>[^/]*)/(?P<method>[A-Za-z_]+)")
_REDACTED: Final = "<redacted>"
_BOT_SEGMENT: Final = re.compile(r"/bot[^/\s]*")


def _redact(text: str, token: str) -> str:
    """Remove the token (raw and URL-quoted) from text meant for a log."""
    if not token:
        return text
    return text.replace(token, _REDACTED).replace(quote(token, safe=""), _REDACTED)


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
        privacy_mode: bool = False,
        first_update_id: int | None = None,
    ) -> None:
        if not token:
            raise ValueError("the fake Bot API needs a non-empty token")
        self._token = token
        self._host = host
        self._port = port
        self._fixtures_dir = Path(fixtures_dir) if fixtures_dir else None
        self._state = BotState(dict(bot_user) if bot_user else default_bot_user(token),
                               privacy_mode=privacy_mode,
                               **({} if first_update_id is None
                                  else {"first_update_id": first_update_id}))
        self._methods = BotMethods(self._state)
        self._closed = threading.Event()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._lifecycle = threading.Lock()

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
            if self._httpd is None and not self._state.closing:
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
        self._state.close()
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
            if self._httpd is None and not self._state.closing:
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
        return dict(self._state.bot_user)

    # ---- test controls

    def push_update(self, update: Mapping[str, Any]) -> int:
        """Queue an update for getUpdates; assigns the next update_id when absent."""
        return self._state.push_update(update)

    def push_raw_update(self, text: str, update_id: int | None = None) -> int:
        """Queue one batch item as raw JSON text (see ``BotState.push_raw_update``)."""
        return self._state.push_raw_update(text, update_id)

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
        defaults = self._state.fixture_defaults()
        data = load_named_fixture(name, self._fixtures_dir, {**defaults, **(values or {})})
        ids = []
        for update in updates_of(data, str(name)):
            if renumber:
                update.pop("update_id")
            ids.append(self.push_update(update))
        return ids

    def set_webhook(self, url: str) -> None:
        """Set (or, with "", remove) the bot's webhook, as a ``setWebhook`` call would."""
        with self._state.cond:
            self._state.webhook_url = url

    @property
    def webhook_url(self) -> str:
        """The bot's webhook ("" when none is set)."""
        with self._state.cond:
            return self._state.webhook_url

    def inject(self, method: str, fault: Fault) -> None:
        """Queue a fault for the next ``fault.times`` requests of ``method`` (or ``ANY_METHOD``)."""
        self._state.faults.inject(method, fault)

    def clear_faults(self) -> None:
        """Forget every queued fault."""
        self._state.faults.clear()

    def release(self) -> None:
        """Let every request currently held by a ``hang`` fault proceed."""
        self._state.release()

    def requests(self, method: str | None = None) -> list[RecordedRequest]:
        """Requests received so far (all, or those of one method), oldest first."""
        return self._state.requests(method)

    def overlaps(self) -> list[Overlap]:
        """Every time a getUpdates arrived while another was in flight."""
        return self._state.overlaps()

    def pushed_updates(self) -> list[PushedUpdate]:
        """Every update pushed so far (what the person did), oldest first."""
        return self._state.pushed_updates()

    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates queued and not yet confirmed by an offset."""
        return self._state.pending_updates()

    def answered_callbacks(self) -> list[str]:
        """callback_query ids answered with answerCallbackQuery, in order."""
        return self._state.answered_callbacks()

    def sent_messages(self, chat_id: int) -> list[dict[str, Any]]:
        """Messages the fake has sent (and currently holds) in a chat."""
        return self._state.sent_messages(chat_id)

    def keyboards(self) -> list[dict[str, Any]]:
        """Held messages that still show an inline keyboard (what a person could press)."""
        return self._state.keyboards()

    def reactions(self) -> dict[tuple[int, int], list[str]]:
        """The bot's reaction on each message it reacted to: (chat, message) -> emoji."""
        return self._state.reactions()

    def wait_received(self, method: str, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` requests of ``method`` have *arrived*."""
        return self._state.wait_received(method, count, timeout)

    # ---- request handling (called from handler threads)

    def _serve(self, handler: _Handler) -> None:
        """Handle one Bot API request from the wire to the response."""
        split = urlsplit(handler.path)
        match = _API_PATH.fullmatch(split.path)
        if match is None:
            handler.read_body()
            handler.send(error_reply(404, DESC_NOT_FOUND))
            return
        method = canonical(match["method"])
        token_ok = hmac.compare_digest(unquote(match["token"]).encode(), self._token.encode())
        fault = self._state.faults.take(method) if token_ok else None
        if fault is not None and fault.kind is FaultKind.RESET:
            entry = self._state.record(method, handler.command, "", b"", ({}, {}), True, fault)
            handler.reset()
            self._state.finish(entry, None)
            return
        body = handler.read_body()
        content_type = handler.headers.get("Content-Type", "")
        try:
            wire, parsed = decode_params(body, content_type, split.query), True
        except ValueError:
            wire, parsed = ({}, {}), False
        entry = self._state.record(
            method, handler.command, content_type, body, wire, token_ok, fault
        )
        if not token_ok:
            reply: Reply | None = error_reply(401, DESC_UNAUTHORIZED)
        elif not parsed:
            reply = error_reply(400, DESC_BAD_BODY)
        else:
            reply = self._reply(entry, fault, handler)
        if reply is None:
            # Close without a response (FIN after the request was read).
            self._state.finish(entry, None)
            return
        # The end is recorded before the client can have the whole response, so a
        # request it sends next is never recorded as starting before this one ended.
        status = reply.status
        if handler.send(reply, before_last_byte=lambda: self._state.finish(entry, status)) is None:
            self._state.finish(entry, None)

    def _reply(self, entry: Entry, fault: Fault | None, ex: Exchange) -> Reply | None:
        """The response for a recorded request: the fault's, or the normal one."""
        if fault is None:
            return self._methods.call(entry, ex)
        if fault.kind is FaultKind.RESPOND:
            return Reply(fault.status, fault.body, fault.content_type)
        if fault.kind is FaultKind.DROP:
            return None
        if fault.kind is FaultKind.LOSE:
            self._methods.call(entry, ex)
            return None
        if fault.kind is FaultKind.HANG and not self._state.hold():
            return None
        if fault.kind is FaultKind.DELAY and not self._state.pause(fault.seconds):
            return None
        return self._methods.call(entry, ex)


def _nothing() -> None:
    pass


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
            serve_control(self._fake, self)
        else:
            self._fake._serve(self)

    def read_body(self) -> bytes:
        length = as_int(self.headers.get("Content-Length")) or 0
        return self.rfile.read(length) if length > 0 else b""

    def send(self, reply: Reply, before_last_byte: Callable[[], None] = _nothing) -> int | None:
        """Write a response; None if the client had already gone.

        ``before_last_byte`` runs when all but the response's final byte is written.
        """
        body, last = reply.body[:-1], reply.body[-1:]
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.send_header("Connection", "close")
            if not last:  # no body: the head's final byte ends the response
                before_last_byte()
            self.end_headers()  # the head is buffered until here
            self.wfile.write(body)
            if last:
                before_last_byte()
                self.wfile.write(last)
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


def unused_port_url(host: str = "127.0.0.1") -> str:
    """A base URL where nothing listens (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    return f"http://{host}:{port}"
