"""A gated tool call whose input is too long for the card's parts (issue 17 item 2): the card
shows its first lines and says what is attached, and the whole input goes as one document,
byte for byte, through real `poll` processes against the fake Bot API. The document is a part
of the delivery like any other: a lost response is never resent blindly, a refusal is an alert.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi, Fault, RecordedRequest
from adapters.telegram.fake.wire import uploaded
from channels.decisions import context, records, workflows
from channels.decisions.digests import digest_canonical
from channels.decisions.presentation import fingerprint
from channels.decisions.request import channel_request_document
from channels.pi import gating
from channels.pi.gating import GatedCall
from channels.telegram import documents
from channels.telegram.card import card_parts
from state.database import Database
from tests.channels.telegram.helpers import (
    AUDIENCE,
    TOKEN,
    USER,
    configure_telegram_profile,
    effect_statuses,
    live_keyboards,
    message_parts,
    message_statuses,
    press_button,
    run_cli,
)

DELIVER = "telegram.deliver"
SESSION = "0b6f7a52-9c1e-4c55-8f6e-2f4b1c9d7e10"
WHERE = context.Context("web-app", "deploy-review", "laptop")
# A 100,000-character heredoc (CR, tabs, an escape sequence and a 4-byte character included).
HEREDOC = "cat > data.csv <<'EOF'\n" + "".join(
    f"{i:05d},\tvalue {i} \x1b[1m😀\r\n" for i in range(100_000 // 24)) + "EOF"
HEREDOC = HEREDOC + "#" * (100_000 - len(HEREDOC))
EDIT = GatedCall("edit", {"path": "src/big.py", "edits": [{
    "oldText": "\n".join(f"old_{i} = {i}" for i in range(2_000)),
    "newText": "\n".join(f"new_{i} = {i} * 2" for i in range(1_998))}]}, "/w/app")


@dataclass
class Bot:
    home: Path
    fake: FakeBotApi

    def poll(self) -> tuple[int, str]:
        done = run_cli(self.home, "poll", "--once")
        return done.returncode, done.stderr


@pytest.fixture
def bot(home: Path) -> Iterator[Bot]:
    with FakeBotApi(TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        yield Bot(home, fake)


def gate(call: GatedCall) -> workflows.AskHandle:
    with Database.open_writer() as db:
        spec = workflows.AskSpec(
            title=gating.title(call), presentation=gating.presentation(call, "bash: cat", WHERE),
            choices=gating.CHOICES, audience=AUDIENCE, timeout_ms=600_000,
            default_choice=gating.DENY, origin_session_id=SESSION, subject=call.subject,
            workflow=workflows.GATE_WORKFLOW,
            run_id=gating.run_id(SESSION, call, db.entropy.token_bytes(8).hex()))
        handle = workflows.create_ask(db, spec, "bridge-1")
        workflows.release_run(db, handle.run.lease)
        return handle


def sends(fake: FakeBotApi) -> list[RecordedRequest]:
    return [r for r in fake.requests() if r.method in ("sendMessage", "sendDocument")]


def expected_diff() -> str:
    old = [f"-old_{i} = {i}" for i in range(2_000)]
    new = [f"+new_{i} = {i} * 2" for i in range(1_998)]
    return "\n".join(["--- src/big.py", "+++ src/big.py", "@@ change 1 of 1 @@", *old, *new])


@pytest.mark.parametrize(("call", "name", "whole"), [
    (GatedCall("bash", {"command": HEREDOC}, "/w/app"), "input.txt", HEREDOC),
    (EDIT, "edit.diff", expected_diff()),
], ids=["bash-heredoc", "edit-4000-lines"])
def test_a_long_gated_input_reaches_the_chat_as_card_parts_and_one_exact_document(
    bot: Bot, call: GatedCall, name: str, whole: str,
) -> None:
    assert len(whole) >= 100_000 or whole.count("\n") >= 3_999
    handle = gate(call)
    assert bot.poll()[0] == 0
    sent = sends(bot.fake)
    [document] = [r for r in sent if r.method == "sendDocument"]
    assert uploaded(document.params) == whole.encode("utf-8")  # the input, byte for byte
    assert document.params["document"]["file_name"] == name
    lines, size = whole.count("\n") + 1, len(whole.encode())
    assert document.params["caption"] == (
        f"{name}: {lines:,} lines, {size:,} bytes (UTF-8): the whole input of decision"
        f" {fingerprint(handle.request.presentation_digest)}")
    assert document.fields.get("disable_notification") == "true"
    # The card: its parts as rendered, the document just before the last (keyboard) part.
    texts = [p.text for p in card_parts(channel_request_document(handle.request),
                                        int(time.time() * 1000))]
    messages = [r for r in sent if r.method == "sendMessage"]
    assert [r.params["text"] for r in messages] == texts
    assert [r.method for r in sent] == [*(["sendMessage"] * (len(texts) - 1)), "sendDocument",
                                        "sendMessage"]
    assert "inline_keyboard" in messages[-1].params["reply_markup"]
    card = "\n".join(texts)
    assert f"Attached: {name}: {lines:,} lines, {size:,} bytes (UTF-8)" in card
    assert gating.shown_input(call).split("\n")[0] in card  # the first lines are shown
    assert len(card) < 10_000  # not the whole input again
    # One part row per send, all confirmed; the delivery is applied.
    assert [(p.part, p.message_ref is not None) for p in message_parts(handle.decision_id)] \
        == [(index, True) for index in range(len(sent))]
    assert effect_statuses(handle.decision_id, DELIVER) == ["applied"]
    assert bot.poll()[0] == 0 and len(sends(bot.fake)) == len(sent)  # never sent twice

    # The answer binds to the whole input: the subject digest is that of the exact input.
    assert handle.request.subject_digest == digest_canonical(call.subject)
    last = messages[-1].result["message_id"]
    press_button(bot.fake, handle, gating.ALLOW, last)
    assert bot.poll()[0] == 0
    with Database.open_reader() as db:
        stored = db.read(lambda c: records.load(c, handle.decision_id))
        won = db.read(lambda c: records.resolution_of(c, handle.decision_id))
    assert stored.request.document["subject"] == call.subject
    assert won is not None and won.outcome == "accepted"
    assert won.response is not None and won.response["choice"] == gating.ALLOW


def test_a_lost_send_document_response_is_ambiguous_and_never_resent(bot: Bot) -> None:
    handle = gate(GatedCall("bash", {"command": HEREDOC}, "/w/app"))
    bot.fake.inject("sendDocument", Fault.lose())
    code, err = bot.poll()
    assert code == 75 and "may not have arrived" in err, err
    for _ in range(2):
        assert bot.poll()[0] == 75
    assert len(bot.fake.requests("sendDocument")) == 1  # never again blindly
    assert effect_statuses(handle.decision_id, DELIVER) == ["ambiguous"]
    assert message_statuses(handle.decision_id) == ["ambiguous"]
    parts = message_parts(handle.decision_id)
    assert parts[-1].message_ref is None  # the document's intent stays: it may have arrived
    assert all(p.message_ref is not None for p in parts[:-1])


@pytest.mark.parametrize("fault", [
    Fault.error(413, "Request Entity Too Large"),
    Fault.non_json(b"<html><title>413 Request Entity Too Large</title></html>", 413),
    Fault.error(400, "Bad Request: file must be non-empty"),
], ids=["413", "413-proxy-page", "400"])
def test_a_refused_upload_is_an_alert_not_a_silent_success(bot: Bot, fault: Fault) -> None:
    handle = gate(GatedCall("bash", {"command": HEREDOC}, "/w/app"))
    bot.fake.inject("sendDocument", fault)
    code, err = bot.poll()
    assert code == 78, (code, err)  # ExitCode.CONFIG, as for any refused recipient
    error = "HTTP 400: Bad Request: file must be non-empty" if fault.status == 400 else \
        "HTTP 413: Request Entity Too Large"
    assert f"its attached file was refused for chat {USER} ({error})" in err, err
    assert effect_statuses(handle.decision_id, DELIVER) == ["rejected"]
    assert message_statuses(handle.decision_id) == ["failed"]
    # The document's intent is gone (refused, not sent); the keyboard part never went.
    assert all(p.message_ref is not None for p in message_parts(handle.decision_id))
    assert [r.method for r in sends(bot.fake)][-1] == "sendDocument"


def test_an_input_that_fits_the_parts_attaches_nothing_and_one_too_big_is_refused() -> None:
    fits = GatedCall("bash", {"command": "echo hi\n" * 7_000}, "/w")  # 56,000 units
    assert fits.attachment() is None
    assert documents.with_document(["a", "b"], None) == ["a", "b"]  # type: ignore[list-item]
    big = GatedCall("write", {"path": "x.bin", "content": "x" * (gating.MAX_ATTACHED_BYTES + 1)},
                    "/w")
    with pytest.raises(gating.TooLong, match="more than a decision attaches"):
        gating.presentation(big, None, WHERE)


def test_the_whole_input_keeps_control_characters_while_the_card_shows_them_visibly() -> None:
    call = GatedCall("bash", {"command": HEREDOC}, "/w/app")
    attached = call.attachment()
    assert attached is not None and attached.data == HEREDOC.encode()
    assert "\x1b" not in gating.preview_of(gating.shown_input(call))
    assert "\\x1b" in gating.preview_of(gating.shown_input(call))


def test_a_press_on_a_card_whose_last_part_was_lost_confirms_that_part_not_the_file(
        bot: Bot) -> None:
    handle = gate(GatedCall("bash", {"command": HEREDOC}, "/w/app"))
    bot.fake.inject("sendMessage", Fault.lose())  # the card is one part: the keyboard's
    assert bot.poll()[0] == 75
    assert [r.method for r in sends(bot.fake)] == ["sendDocument", "sendMessage"]
    [card] = [m for m in bot.fake.sent_messages(USER) if "reply_markup" in m]
    press_button(bot.fake, handle, gating.DENY, card["message_id"])
    assert bot.poll()[0] == 0  # the press proves the card arrived
    document_ref = str(bot.fake.requests("sendDocument")[0].result["message_id"])
    assert [(p.part, p.message_ref) for p in message_parts(handle.decision_id)] == [
        (0, document_ref), (1, str(card["message_id"]))]
    assert live_keyboards(bot.fake.keyboards()) == []  # settled: no button answers
