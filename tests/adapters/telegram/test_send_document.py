"""sendDocument over real loopback HTTP: the client uploads a file (multipart), the fake keeps
exactly what arrived, refuses what Telegram refuses, and the token never leaks from an upload."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from adapters.telegram.client import TelegramClient
from adapters.telegram.fake import FakeBotApi, Fault, unused_port_url
from adapters.telegram.fake.transcript import render
from adapters.telegram.fake.wire import uploaded
from adapters.telegram.results import CallOutcome, CallResult

TOKEN = "7000000001:AAH-fakeTokenForClientTests_abcdef01"
CHAT = 5123456789
# Every byte that could trip a multipart body: CR LF, a boundary-like line, NUL, non-ASCII.
DATA = ("cat <<'EOF'\r\n--boundary\r\n\x00 Größe 🚀\n" + "x" * 200_000 + "\nEOF\n").encode()


@pytest.fixture
def server() -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN) as fake:
        yield fake


def run(base_url: str, call: Callable[[TelegramClient], Awaitable[CallResult]],
        **options: Any) -> CallResult:
    async def main() -> CallResult:
        async def no_sleep(seconds: float) -> None:
            pass
        async with TelegramClient(TOKEN, api_base_url=base_url, read_timeout=2.0,
                                  sleep=no_sleep, **options) as client:
            return await call(client)
    return asyncio.run(main())


def upload(data: bytes = DATA, caption: str | None = "input.txt: the whole input",
           ) -> Callable[[TelegramClient], Awaitable[CallResult]]:
    return lambda c: c.send_document(CHAT, "input.txt", data, caption=caption,
                                     disable_notification=True)


def test_a_document_arrives_byte_for_byte_as_a_document_message(server: FakeBotApi) -> None:
    result = run(server.base_url, upload())
    assert result.outcome is CallOutcome.OK and result.message_id == 1
    [wire] = server.requests("sendDocument")
    assert wire.content_type.startswith("multipart/form-data; boundary=")
    assert uploaded(wire.params) == DATA
    assert wire.params["document"]["file_name"] == "input.txt"
    assert wire.params["document"]["mime_type"] == "text/plain; charset=utf-8"
    assert wire.fields == {"chat_id": str(CHAT), "caption": "input.txt: the whole input",
                           "disable_notification": "true"}
    [held] = server.sent_messages(CHAT)
    assert held["document"]["file_name"] == "input.txt"
    assert held["document"]["file_size"] == len(DATA)
    assert held["caption"] == "input.txt: the whole input" and "text" not in held
    [head, caption] = render(server.requests("sendDocument"))
    assert head.endswith(" Bot sent a file, input.txt:")
    assert caption.strip() == "input.txt: the whole input"


@pytest.mark.parametrize(("data", "caption", "code", "description"), [
    (b"", None, 400, "Bad Request: file must be non-empty"),
    (b"x", "c" * 1025, 400, "Bad Request: message caption is too long"),
])
def test_the_fake_refuses_what_telegram_refuses(server: FakeBotApi, data: bytes,
                                                caption: str | None, code: int,
                                                description: str) -> None:
    result = run(server.base_url, upload(data, caption))
    assert (result.outcome, result.error_code, result.description) == (
        CallOutcome.REJECTED, code, description)
    assert server.sent_messages(CHAT) == []


def test_a_413_is_a_refusal_even_as_the_proxys_html_page(server: FakeBotApi) -> None:
    server.inject("sendDocument", Fault.non_json(
        b"<html><head><title>413 Request Entity Too Large</title></head></html>", 413))
    server.inject("sendDocument", Fault.error(413, "Request Entity Too Large"))
    for _ in range(2):
        result = run(server.base_url, upload())
        assert (result.outcome, result.error_code, result.attempts) == (
            CallOutcome.REJECTED, 413, 1)
    assert len(server.requests("sendDocument")) == 2 and server.sent_messages(CHAT) == []


def test_a_lost_upload_response_is_ambiguous_and_not_retried(server: FakeBotApi) -> None:
    server.inject("sendDocument", Fault.lose())
    result = run(server.base_url, upload())
    assert (result.outcome, result.attempts) == (CallOutcome.AMBIGUOUS, 1)
    assert len(server.requests("sendDocument")) == 1
    assert len(server.sent_messages(CHAT)) == 1  # it did arrive: never sent again blindly


@pytest.mark.parametrize("fault", [Fault.reset(), Fault.drop(),
                                   Fault.error(400, f"Bad Request: POST /bot{TOKEN}/sendDocument")])
def test_the_token_never_leaks_from_a_failed_upload(server: FakeBotApi, fault: Fault,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.inject("sendDocument", fault)
    result = run(server.base_url, upload())
    assert result.outcome is not CallOutcome.OK
    secret = TOKEN.split(":", 1)[1]
    for text in (repr(result), str(result.description), caplog.text):
        assert secret not in text


def test_an_upload_to_nowhere_is_not_sent_and_names_no_token() -> None:
    result = run(unused_port_url(), upload(), max_attempts=2)
    assert (result.outcome, result.attempts) == (CallOutcome.NOT_SENT, 2)
    assert TOKEN.split(":", 1)[1] not in repr(result)
