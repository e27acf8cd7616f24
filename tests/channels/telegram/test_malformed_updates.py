"""No update, however malformed, stops a channel (issue 12, F1-F4 and the batch rule).

Each test runs real `piw-channels poll` processes against the out-of-process fake Bot API,
which serves the malformed items byte for byte. The rule: a batch is either stored (every item
an inbox row, malformed ones processed as `ignored:<reason>`) with the cursor advanced past it,
or refused as a whole with one `Error:` line and exit 75; never stuck silently on the same bytes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram.fake import Fault, RemoteFakeBotApi
from channels.decisions.workflows import AskHandle
from tests.channels.telegram.helpers import (
    PROFILE,
    configure_telegram_profile,
    cursor_value,
    inbox_results,
    message_parts,
    open_decision_now,
    out_of_process_fake,
    press_update,
    resolutions,
    run_cli,
    write_token_file,
)

DEEP = 3000


@dataclass
class Bot:
    home: Path
    fake: RemoteFakeBotApi
    handle: AskHandle
    message_id: int  # the delivered decision message (it carries the keyboard)

    def poll(self) -> tuple[int, str]:
        result = run_cli(self.home, "poll", "--once")
        assert result.stdout == ""
        return result.returncode, result.stderr

    def press(self, choice: str = "continue", **changes: Any) -> dict[str, Any]:
        """A valid press of this decision's button, as a dict to alter."""
        update_id = self.fake.push_raw_update("{}")  # reserve the next id, then replace it
        update = press_update(self.handle, choice, self.message_id, update_id=update_id)
        query = update["callback_query"]
        query.update(changes)
        self.fake.push_raw_update(json.dumps(update, ensure_ascii=True), update_id)
        return update

    def answered(self) -> Counter[str]:
        return Counter(str(r.params.get("callback_query_id"))
                       for r in self.fake.requests("answerCallbackQuery"))


@pytest.fixture
def bot(home: Path) -> Iterator[Bot]:
    token_file = write_token_file(home)
    with out_of_process_fake(token_file) as server:
        configure_telegram_profile(home, server.base_url)
        handle = open_decision_now()
        result = run_cli(home, "poll", "--once")
        assert result.returncode == 0, result.stderr
        ref = message_parts(handle.decision_id)[-1].message_ref
        assert ref is not None
        yield Bot(home, server.control, handle, int(ref))


def test_a_lone_surrogate_in_callback_data_is_ignored_and_the_press_behind_it_counts(
    bot: Bot,
) -> None:
    bad = bot.press(data="\udc00\ud800")  # valid JSON ("\\udc00\\ud800"), not valid Unicode
    good = bot.press()
    assert bot.poll() == (0, "")
    assert inbox_results() == [(bad["update_id"], "callback", "ignored:unknown_button"),
                               (good["update_id"], "callback", "won")]
    assert cursor_value() == good["update_id"] + 1
    assert resolutions(bot.handle.decision_id) == [("accepted", "human",
                                                    str(good["update_id"]))]
    assert bot.answered() == Counter({f"cb-{bad['update_id']}": 1,
                                      f"cb-{good['update_id']}": 1})


def test_a_lone_surrogate_in_the_callback_id_still_counts_the_press_and_is_never_answered(
    bot: Bot,
) -> None:
    press = bot.press(id="\ud800x")
    assert bot.poll() == (0, "")
    assert inbox_results() == [(press["update_id"], "callback", "won")]
    assert cursor_value() == press["update_id"] + 1
    assert bot.answered() == Counter()  # an id that is not text cannot be answered


def _deep(where: str) -> str:
    return "[" * DEEP + json.dumps(where) + "]" * DEEP


def test_a_value_nested_3000_levels_deep_is_data_and_the_press_still_counts(bot: Bot) -> None:
    update_id = bot.fake.push_raw_update("{}")
    press = press_update(bot.handle, "continue", bot.message_id, update_id=update_id)
    press["callback_query"]["x_deep"] = "DEEP"
    text = json.dumps(press).replace('"DEEP"', _deep("bottom"))
    bot.fake.push_raw_update(text, update_id)
    deep_message = bot.fake.push_raw_update(
        f'{{"update_id":{update_id + 1},"message":{_deep("m")}}}', update_id + 1)
    assert bot.poll() == (0, "")
    assert inbox_results() == [(update_id, "callback", "won"),
                               (deep_message, "other", "ignored:plain_message")]
    assert cursor_value() == deep_message + 1


@pytest.mark.parametrize(("item", "reason"), [
    ('{"update_id":"%d","callback_query":{}}', "bad_update_id"),
    ('{"update_id":%d.5,"message":{}}', "bad_update_id"),
    ('{"update_id":true,"message":{"n":%d}}', "bad_update_id"),
    ('{"update_id":18446744073709551623,"message":{"n":%d}}', "bad_update_id"),  # 2**64 + 7
    ('{"update_id":-5,"message":{"n":%d}}', "bad_update_id"),
    ('[%d]', "not_an_object"),
    ('"update %d"', "not_an_object"),
    ('null', "not_an_object"),
])
def test_an_item_without_a_usable_update_id_is_ignored_and_the_cursor_passes_it(
    bot: Bot, item: str, reason: str,
) -> None:
    position = bot.fake.push_raw_update("{}")
    bot.fake.push_raw_update(item % position if "%d" in item else item, position)
    press = bot.press()
    assert bot.poll() == (0, "")
    assert inbox_results() == [(-1, "other", f"ignored:{reason}"),
                               (press["update_id"], "callback", "won")]
    assert cursor_value() == press["update_id"] + 1  # never 2**64 + 8
    assert bot.poll() == (0, "")  # its getUpdates confirms the whole batch
    assert bot.fake.requests("getUpdates")[-1].params["offset"] == str(press["update_id"] + 1)
    assert len(inbox_results()) == 2


def test_a_batch_that_cannot_be_confirmed_is_stored_once_refused_loudly_and_passed_later(
    bot: Bot,
) -> None:
    cursor = cursor_value()
    bot.fake.push_raw_update('{"update_id":"x","message":{}}')
    for _ in range(2):
        code, err = bot.poll()
        assert code == 75
        assert err == (f"Error: telegram:{PROFILE}: getUpdates returned 1 update(s) without a usable"
                       " update_id past the cursor; they were recorded as ignored, and the"
                       " cursor moves on when a later update arrives\n")
        assert inbox_results() == [(-1, "other", "ignored:bad_update_id")]  # stored once
        assert cursor_value() == cursor
    press = bot.press()
    assert bot.poll() == (0, "")
    assert inbox_results() == [(-1, "other", "ignored:bad_update_id"),
                               (press["update_id"], "callback", "won")]
    assert cursor_value() == press["update_id"] + 1


@pytest.mark.parametrize("fault", [Fault.ok_result({"update_id": 1}), Fault.ok_without_result(),
                                   Fault.non_json(b"[" * DEEP), Fault.non_json(b"\xff{")])
def test_a_getupdates_answer_that_is_not_a_batch_is_refused_as_a_whole(
    bot: Bot, fault: Fault,
) -> None:
    cursor = cursor_value()
    press = bot.press()
    bot.fake.inject("getUpdates", fault)
    code, err = bot.poll()
    assert code == 75
    assert err.startswith(f"Error: telegram:{PROFILE}: getUpdates returned a response that is not a"
                          " batch of updates (")
    where = "the start" if cursor is None else cursor
    assert err.endswith(f"); nothing was stored and the cursor stays at {where}\n")
    assert err.count("\n") == 1
    assert inbox_results() == [] and cursor_value() == cursor
    assert bot.poll() == (0, "")  # the next answer is a batch again
    assert inbox_results() == [(press["update_id"], "callback", "won")]
