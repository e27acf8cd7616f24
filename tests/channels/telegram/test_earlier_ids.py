"""A database written by an earlier version, whose ids were longer (messages: 40 hex digits;
effects: `effect-` and 24 hex digits), goes on with its own rows: a card delivered then is
settled on its message, and one whose send was left ambiguous is never sent again blindly."""

from __future__ import annotations

import hashlib

import pytest

from adapters.telegram.fake import Fault
from channels import messages
from channels.decisions import records
from channels.telegram import deliveries
from state import effects
from tests.channels.telegram.test_channel import CHANNEL, CHAT, Flow, flow  # noqa: F401


def as_earlier_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids as an earlier version made them (a monkeypatch of its own: undoing it must not undo
    the fixtures' HOME)."""
    monkeypatch.setattr(messages, "ID_HEX", 40)
    monkeypatch.setattr(effects, "effect_id_for", lambda s, t, k: "effect-" + hashlib.sha256(
        f"{s}\0{t}\0{k}".encode()).hexdigest()[:24])


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
    assert flow.rows("SELECT count(*) FROM effects WHERE effect_type = ?", deliveries.DELIVER) \
        == [(1,)]
    assert [int(r.params["message_id"]) for r in flow.server.requests("editMessageReplyMarkup")] == [
        card]
    assert flow.effect_statuses(deliveries.SETTLE) == ["applied"]


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
    assert flow.db.read(lambda c: deliveries.ambiguous_chats(
        c, CHANNEL, handle.decision_id, resource)) == [str(CHAT)]
    # A press on the message that did arrive records it on that same row, and settles it.
    lost = int(flow.server.sent_messages(CHAT)[-1]["message_id"])
    flow.press(handle, "continue", message_id=lost)
    flow.poll()
    assert flow.rows("SELECT message_id, external_message_ref FROM channel_message_parts"
                     " WHERE message_id = ?", earlier) == [(earlier, str(lost))]
    assert [int(r.params["message_id"]) for r in flow.server.requests("editMessageReplyMarkup")] == [
        lost]
