"""`/mute 1h` in a chat: no progress card goes to that chat (neither sent nor edited) for that
long, results still come; through real `notify` and `poll` processes and the fake Bot API in
a process of its own (what goes on the wire is what the fake recorded)."""

from __future__ import annotations

from pathlib import Path

from adapters.telegram.fake import RemoteFakeBotApi
from adapters.telegram.fake.fixtures import load_fixture
from channels.telegram.muting import parse_mute
from tests.channels.telegram.helpers import FIXTURES, USER
from tests.channels.telegram.notification_flow import (
    notification_chat,
    notify,
    poll_once,
    sends,
)


def _say(fake: RemoteFakeBotApi, text: str, message_id: int) -> None:
    [update] = load_fixture(FIXTURES / "message_plain_text.json")["result"]
    update["message"]["text"] = text
    update["message"]["message_id"] = message_id
    update["message"]["from"]["id"] = update["message"]["chat"]["id"] = USER
    update.pop("update_id")
    fake.push_update(update)


def test_mute_1h_keeps_progress_cards_out_of_the_chat_and_lets_results_through(
        home: Path) -> None:
    with notification_chat(home) as fake:
        run = notify(home, "--progress", "Step 1 of 3: migrating the schema")
        poll_once(home)
        [card] = sends(fake)
        assert card["text"].startswith("In progress\n\nStep 1 of 3")
        card_id = fake.requests("sendMessage")[0].result["message_id"]

        _say(fake, "/mute 1h", 901)
        poll_once(home)
        [reply] = sends(fake)[1:]
        assert reply["chat_id"] == str(USER)
        assert reply["text"].startswith("Progress cards muted in this chat until ")
        assert "/mute off" in reply["text"]

        notify(home, "--run", run, "--progress", "Step 2 of 3: copying rows")
        poll_once(home, ahead_ms=15_000)
        notify(home, "--run", run, "--progress", "Step 3 of 3: checking")
        poll_once(home, ahead_ms=30_000)
        assert fake.requests("editMessageText") == []  # nothing on the wire for the card
        assert len(sends(fake)) == 2

        notify(home, "--run", run, "--final", "All 12 migrations applied.")
        poll_once(home, ahead_ms=45_000)
        final = sends(fake)[2]
        assert final["text"].startswith("Finished\n\nAll 12 migrations applied.")
        assert final["reply_parameters"]["message_id"] == card_id

        # An hour later the mute is over: a new run's card is sent again.
        later = notify(home, "--progress", "Nightly backup: 40%")
        poll_once(home, ahead_ms=3_700_000)
        assert len(sends(fake)) == 4
        assert sends(fake)[3]["text"].startswith("In progress\n\nNightly backup: 40%")
        assert later != run

        _say(fake, "/mute soon", 902)  # unreadable: a hint, nothing muted
        poll_once(home, ahead_ms=3_700_000)
        assert sends(fake)[4]["text"] == "Use /mute 1h (or 30m, 2h, 1d), or /mute off."


def test_mute_durations() -> None:
    assert parse_mute("") == parse_mute("1h") == parse_mute("1") == parse_mute("60m") == 3_600_000
    assert parse_mute("30m") == 1_800_000 and parse_mute("2 h") == 7_200_000
    assert parse_mute("1d") == 86_400_000
    assert parse_mute("off") == parse_mute("OFF") == parse_mute("0") == 0
    for bad in ("soon", "-1h", "8d", "1.5h", "1w", "0m"):
        assert parse_mute(bad) is None, bad
