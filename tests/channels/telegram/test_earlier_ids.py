"""A database written by an earlier version, whose ids were longer (messages: 40 hex digits;
effects: `effect-` and 24 hex digits; runs `ask-` and 24 hex digits, attempts `attempt-` and
24; a channel's delivery and settlement keyed by its whole channel id), goes on with its own
rows: a card delivered then is settled on its message, one whose send was left ambiguous is
never sent again blindly, and a settlement left due is done by the next version."""

from __future__ import annotations

import hashlib

import pytest

from adapters.telegram.fake import Fault
from channels import messages
from channels.decisions import records, runs
from channels.telegram import reservations
from state import effects
from tests.channels.telegram.test_channel import CHANNEL, CHAT, Flow, flow  # noqa: F401
from tests.shifted_clock import ShiftedClock


def as_earlier_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids as an earlier version made them (a monkeypatch of its own: undoing it must not undo
    the fixtures' HOME)."""
    monkeypatch.setattr(messages, "ID_HEX", 40)
    monkeypatch.setattr(effects, "effect_id_for", lambda s, t, k: "effect-" + hashlib.sha256(
        f"{s}\0{t}\0{k}".encode()).hexdigest()[:24])
    monkeypatch.setattr(effects, "scoped_key", lambda scope: scope)
    monkeypatch.setattr(runs, "new_run_id", lambda prefix, entropy: f"{prefix}-"
                        + entropy.token_bytes(12).hex())
    monkeypatch.setattr(runs, "attempt_id_for", lambda r, n, number=1: "attempt-" + hashlib.sha256(
        f"{r}\0{n}\0{number}".encode()).hexdigest()[:24])


def delivery_rows(flow: Flow) -> list[tuple[str, str]]:  # noqa: F811
    return [(str(m), str(s)) for m, s in flow.rows(
        "SELECT message_id, status FROM channel_messages WHERE purpose = 'delivery'")]


def test_a_card_delivered_under_earlier_ids_is_settled_on_its_own_rows(
        flow: Flow) -> None:  # noqa: F811
    handle = flow.ask()
    with pytest.MonkeyPatch.context() as earlier_version:
        as_earlier_version(earlier_version)
        flow.poll()
    [(earlier, status)] = delivery_rows(flow)
    assert status == "confirmed"
    assert len(earlier) == len("delivery-") + 40
    assert earlier.startswith(messages.message_id_for(CHANNEL, "delivery", handle.decision_id))
    card = int(flow.server.sent_messages(CHAT)[-1]["message_id"])
    flow.press(handle, "continue", message_id=card)
    flow.poll()
    assert flow.view(handle).status == "accepted"
    assert delivery_rows(flow) == [(earlier, "confirmed")]  # no second row for the card
    assert flow.rows("SELECT count(*) FROM effects WHERE effect_type = ?", reservations.DELIVER) \
        == [(1,)]
    assert [int(r.params["message_id"]) for r in flow.server.requests("editMessageReplyMarkup")] == [
        card]
    assert flow.effect_statuses(reservations.SETTLE) == ["applied"]


def test_a_send_left_ambiguous_under_earlier_ids_is_never_sent_again(
        flow: Flow) -> None:  # noqa: F811
    handle = flow.ask()
    with pytest.MonkeyPatch.context() as earlier_version:
        as_earlier_version(earlier_version)
        flow.server.inject("sendMessage", Fault.lose())
        flow.poll()
    [(earlier, status)] = delivery_rows(flow)
    assert status == "ambiguous"
    sent = len(flow.sends())
    flow.poll()
    flow.poll()
    assert len(flow.sends()) == sent  # its intent row is found under the earlier id
    resource = records.decision_resource(handle.decision_id)
    assert flow.db.read(lambda c: reservations.ambiguous_chats(
        c, CHANNEL, handle.decision_id, resource)) == [str(CHAT)]
    # A press on the message that did arrive records it on that same row, and settles it.
    lost = int(flow.server.sent_messages(CHAT)[-1]["message_id"])
    flow.press(handle, "continue", message_id=lost)
    flow.poll()
    assert flow.rows("SELECT message_id, external_message_ref FROM channel_message_parts"
                     " WHERE message_id = ?", earlier) == [(earlier, str(lost))]
    assert [int(r.params["message_id"]) for r in flow.server.requests("editMessageReplyMarkup")] == [
        lost]


def test_a_settlement_left_due_under_earlier_keys_and_ids_is_done_by_this_version(
        flow: Flow) -> None:  # noqa: F811
    with pytest.MonkeyPatch.context() as earlier_version:
        as_earlier_version(earlier_version)
        handle = flow.ask()
        flow.poll()
        card = int(flow.server.sent_messages(CHAT)[-1]["message_id"])
        flow.press(handle, "continue", message_id=card)
        flow.server.inject("editMessageReplyMarkup", Fault.error(500, "Internal Server Error"))
        flow.poll()
    assert handle.run.run_id.startswith("ask-") and len(handle.run.run_id) == 4 + 24
    assert handle.run.attempt_id.startswith("attempt-")
    assert flow.view(handle).status == "accepted"
    # Both effects keyed by the whole channel id; the settlement is due again (a 5xx).
    assert flow.rows("SELECT effect_type, idempotency_key, status FROM effects"
                     " WHERE effect_type IN (?, ?) ORDER BY effect_type", reservations.DELIVER,
                     reservations.SETTLE) == [(reservations.DELIVER, CHANNEL, "applied"),
                                            (reservations.SETTLE, CHANNEL, "pending")]
    assert isinstance(flow.db.clock, ShiftedClock)
    flow.db.clock.offset_ms += 60_000  # past the retry's backoff
    flow.poll()
    # This version finds both under their earlier keys: no second delivery reserved, the
    # keyboard removed and the outcome posted once, the run finished under its earlier id.
    assert flow.rows("SELECT effect_type, idempotency_key, status FROM effects"
                     " WHERE effect_type IN (?, ?) ORDER BY effect_type", reservations.DELIVER,
                     reservations.SETTLE) == [(reservations.DELIVER, CHANNEL, "applied"),
                                            (reservations.SETTLE, CHANNEL, "applied")]
    assert [int(r.params["message_id"]) for r in flow.server.requests("editMessageReplyMarkup")
            ][-1] == card
    assert len([m for m in flow.sends() if "reply_markup" not in m]) == 1  # one outcome post
    assert flow.rows("SELECT run_id, status FROM runs") == [(handle.run.run_id, "completed")]
    assert flow.rows("SELECT attempt_id, status FROM node_attempts") == [
        (handle.run.attempt_id, "completed")]
    # A decision asked now gets the short forms, beside the earlier rows.
    fresh = flow.ask(title="New?")
    flow.poll()
    assert len(fresh.run.run_id) == 4 + 16 and fresh.run.attempt_id.startswith("a")
    assert flow.rows("SELECT idempotency_key FROM effects WHERE effect_type = ?"
                     " ORDER BY created_at", reservations.DELIVER) == [
        (CHANNEL,), (effects.scoped_key(CHANNEL),)]
