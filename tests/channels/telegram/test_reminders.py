"""Reminders: a waiting decision brought back to the top of the chat, before its deadline or
once it has waited long, never after it is settled, and never in the audience's quiet hours.
The real poll cycle against the loopback fake Bot API, with an injected clock.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi
from channels.config.quiet_hours import QuietHours
from channels.telegram.reminders import next_reminder, schedule
from channels.telegram.time_left import DAY_MS, HOUR_MS, MINUTE_MS
from state.clock import ManualClock
from state.database import Database
from tests.channels.telegram.test_channel import CHAT, TOKEN, Flow, _configure

T0 = 1_796_000_000_000 - 1_796_000_000_000 % DAY_MS + 9 * HOUR_MS  # a day's 09:00 UTC


# -- the schedule (pure) -----------------------------------------------------------------------


def test_a_deadline_of_an_hour_or_more_gets_two_reminders() -> None:
    assert schedule(T0, T0 + 2 * HOUR_MS) == [T0 + HOUR_MS, T0 + 2 * HOUR_MS - 10 * MINUTE_MS]
    assert schedule(T0, T0 + 59 * MINUTE_MS) == []


def test_no_deadline_means_after_an_hour_then_once_a_day() -> None:
    assert schedule(T0, None)[:3] == [T0 + HOUR_MS, T0 + HOUR_MS + DAY_MS,
                                      T0 + HOUR_MS + 2 * DAY_MS]


def test_the_next_reminder_skips_those_already_past() -> None:
    assert next_reminder(T0, T0 + 2 * HOUR_MS, T0 + HOUR_MS) == T0 + 110 * MINUTE_MS
    assert next_reminder(T0, T0 + 2 * HOUR_MS, T0 + 2 * HOUR_MS) is None


def test_quiet_hours_move_a_reminder_to_their_end_unless_the_deadline_is_nearer() -> None:
    night = QuietHours.parse("22:00-07:00")
    evening = T0 + 13 * HOUR_MS  # 22:00
    assert next_reminder(evening - HOUR_MS, None, evening - HOUR_MS, night) == T0 + DAY_MS - 2 * HOUR_MS
    # A deadline at 23:30: the 22:40 and 23:20 reminders fall in the night; both are dropped.
    assert next_reminder(evening - 80 * MINUTE_MS + 40 * MINUTE_MS, evening + 90 * MINUTE_MS,
                         evening, night) is None
    with pytest.raises(ValueError, match="HH:MM-HH:MM"):
        QuietHours.parse("22-07")


# -- through the poll cycle --------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(now=int(time.time() * 1000))


@pytest.fixture
def flow(home: Path, clock: ManualClock) -> Iterator[Flow]:
    with FakeBotApi(token=TOKEN) as server:
        _configure(home, server.base_url, [str(CHAT)])
        with Database.open_writer(clock=clock) as db:
            yield Flow(home, server, db)


def reminders_sent(flow: Flow) -> list[dict[str, object]]:
    return [s for s in flow.sends() if str(s["text"]).startswith(("Reminder:", "Still waiting"))]


def test_a_reminder_replies_to_the_card_at_half_the_window(flow: Flow, clock: ManualClock) -> None:
    handle = flow.ask(timeout_ms=2 * HOUR_MS)
    flow.poll()
    flow.poll()
    assert reminders_sent(flow) == []  # not yet
    clock.advance(HOUR_MS + 1)
    flow.poll()
    [reminder] = reminders_sent(flow)
    card = int(flow.server.sent_messages(CHAT)[0]["message_id"])
    assert reminder["reply_parameters"] == {"message_id": card, "allow_sending_without_reply": True}
    # The clock is the real one; near midnight the deadline names its day ("Wed 2 Dec 00:03").
    assert re.fullmatch(r"Reminder: answer by (\w{3} \d{1,2} \w{3} )?\d\d:\d\d UTC, in 1 h; "
                        r"then it expires\nApprove\?\n"
                        r"Decision \w{12}", str(reminder["text"]))
    flow.poll()
    assert len(reminders_sent(flow)) == 1  # one at a time: the next waits for its time
    # and is reserved only once it is due: nothing is recorded for it before
    assert flow.effect_statuses("telegram.remind") == ["applied"]
    clock.advance(50 * MINUTE_MS)  # 10 minutes before the deadline
    flow.poll()
    assert len(reminders_sent(flow)) == 2
    assert flow.effect_statuses("telegram.remind") == ["applied", "applied"]
    del handle


def test_a_reminder_is_never_sent_once_the_decision_is_settled(flow: Flow,
                                                               clock: ManualClock) -> None:
    handle = flow.ask(timeout_ms=2 * HOUR_MS)
    flow.poll()
    flow.press(handle, "continue")
    flow.poll()
    clock.advance(3 * HOUR_MS)
    flow.poll()
    assert reminders_sent(flow) == []
    # Answered before its first reminder was due: none was ever reserved (no effect, no
    # resource, no events for it).
    assert flow.effect_statuses("telegram.remind") == []


def test_a_decision_without_a_deadline_is_still_waiting_after_an_hour(flow: Flow,
                                                                     clock: ManualClock) -> None:
    flow.ask()
    flow.poll()
    clock.advance(HOUR_MS + 1)
    flow.poll()
    [reminder] = reminders_sent(flow)
    assert str(reminder["text"]).startswith("Still waiting for an answer (asked 1 h ago)\n")
    clock.advance(DAY_MS)
    flow.poll()
    assert len(reminders_sent(flow)) == 2


def test_an_audience_may_turn_reminders_off_or_keep_quiet_hours(flow: Flow, home: Path,
                                                               clock: ManualClock) -> None:
    path = home / ".config/pi-workflows/channels.json"
    document = json.loads(path.read_text())
    hour = time.gmtime(clock.now // 1000).tm_hour
    start, end = (hour + 1) % 24, (hour + 3) % 24  # the reminder at +1 h falls in them
    document["audiences"]["operator"]["reminders"] = {"quietHours": f"{start:02d}:00-{end:02d}:00"}
    path.write_text(json.dumps(document))
    flow.ask()
    flow.poll()
    clock.advance(HOUR_MS + 1)
    flow.poll()
    assert reminders_sent(flow) == []  # quiet
    clock.advance(2 * HOUR_MS)
    flow.poll()
    assert len(reminders_sent(flow)) == 1
    document["audiences"]["operator"]["reminders"] = {"enabled": False}
    path.write_text(json.dumps(document))
    flow.ask(title="Second?")
    flow.poll()
    clock.advance(2 * HOUR_MS)
    flow.poll()
    assert [s for s in reminders_sent(flow) if "Second?" in str(s["text"])] == []


@pytest.mark.parametrize(("value", "rule"), [
    ({"quietHours": "22-07"}, "must be HH:MM-HH:MM"),
    ({"quietHours": "07:00-07:00"}, "must not start and end at the same time"),
    ({"enabled": "yes"}, "must be true or false"),
    ({"every": "1h"}, "is not a known field"),
])
def test_a_bad_reminders_setting_is_one_line_naming_the_field(home: Path, value: object,
                                                              rule: str) -> None:
    from channels.config.errors import ConfigError
    from channels.config.loading import load_config

    _configure(home, "http://127.0.0.1:9", [str(CHAT)])
    path = home / ".config/pi-workflows/channels.json"
    document = json.loads(path.read_text())
    document["audiences"]["operator"]["reminders"] = value
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError) as raised:
        load_config()
    assert "audiences.operator.reminders" in str(raised.value) and rule in str(raised.value)
    assert "\n" not in str(raised.value)
