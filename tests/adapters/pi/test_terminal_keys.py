"""The operator view's pure parts: keys, the menu, the one-line results."""

from __future__ import annotations

import pytest

from adapters.pi.operator import Key, menu_step, parse_key, split_keys
from channels.pi.answers import AnswerReport


@pytest.mark.parametrize(("data", "keys"), [
    (b"\x1b[B\r", [b"\x1b[B", b"\r"]),
    (b"\x1bOA2", [b"\x1bOA", b"2"]),
    (b"\x1b", [b"\x1b"]),
    (b"jjq", [b"j", b"j", b"q"]),
])
def test_one_read_splits_into_key_presses(data: bytes, keys: list[bytes]) -> None:
    assert split_keys(data) == keys


@pytest.mark.parametrize(("data", "key"), [
    (b"\x1b[A", "up"), (b"k", "up"), (b"\x1b[B", "down"), (b"j", "down"), (b"\n", "enter"),
    (b"q", "cancel"), (b"\x1b", "cancel"), (b"\x04", "cancel"), (b"3", 3), (b"0", "other"),
    (b"x", "other"),
])
def test_keys(data: bytes, key: Key) -> None:
    assert parse_key(data) == key


@pytest.mark.parametrize(("index", "key", "expected"), [
    (0, "up", (2, False, None)),
    (2, "down", (0, False, None)),
    (1, "enter", (1, True, 1)),
    (1, "cancel", (1, True, None)),
    (0, 3, (2, True, 2)),
    (0, 4, (0, False, None)),  # no fourth row
    (1, "other", (1, False, None)),
])
def test_menu_moves_picks_and_cancels(index: int, key: Key,
                                      expected: tuple[int, bool, int | None]) -> None:
    step = menu_step(index, 3, key)
    assert (step.index, step.done, step.chosen) == expected


@pytest.mark.parametrize(("report", "line"), [
    (AnswerReport("d", "won", "accepted", "accepted", "go", "Go"), "accepted: Go"),
    (AnswerReport("d", "adopted", "x", "accepted", "go", "Go"),
     "accepted: Go (this answer was already recorded)"),
    (AnswerReport("d", "already_resolved", "x", "accepted", "stop", "Stop"),
     "already decided: Stop"),
    (AnswerReport("d", "already_resolved", "x", "cancelled", reason="expired"),
     "already decided: cancelled (expired)"),
    (AnswerReport("d", "stale", "Human decision request has expired"),
     "stale: Human decision request has expired"),
    (AnswerReport("d", "rejected", "bad input"), "rejected: bad input"),
    (AnswerReport("d", "ignored", "unknown decision"), "rejected: unknown decision"),
])
def test_results_read_as_one_line(report: AnswerReport, line: str) -> None:
    assert report.describe() == line
