"""The `decisions` table fits the terminal, shows each deadline and marks overdue decisions;
`show` prints the typed reply. Real CLI children; their clocks read noon, and time moves with
them (tests/shifted_clock.py)."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from adapters.cli.decision_table import cut, display_width
from channels.decisions import records, resolution
from channels.decisions.resolution import HumanAnswer
from state.database import Database
from tests.cli import piw
from tests.shifted_clock import ShiftedClock

MINUTE = 60_000
DAY = 1440 * MINUTE
# Every child's clock reads 12:00 UTC of today's date (plus the minutes a test lets pass): with
# the real clock, a deadline past midnight names its day and widens the deadline column.
NOON = (DAY // 2 - datetime.now(UTC).timestamp() * 1000 % DAY) // MINUTE * MINUTE


def cli(home: Path, *args: str, columns: int | None = None,
        minutes: int = 0) -> subprocess.CompletedProcess[str]:
    env = {} if columns is None else {"COLUMNS": str(columns)}
    done = piw(home, *args, env=env, offset_ms=int(NOON + minutes * MINUTE))
    assert done.returncode == 0, done.stderr
    return done


def ask(home: Path, title: str, *extra: str) -> dict[str, object]:
    opened: dict[str, object] = json.loads(cli(home, "ask", "--title", title, "--choice",
                                               "go=Go", *extra, "--json").stdout)
    return opened


def test_at_60_columns_no_row_is_wider_and_a_10000_character_title_is_cut(home: Path) -> None:
    long = ask(home, "Ship " * 2000, "--timeout", "15m")
    wide = ask(home, "デプロイしますか 🚀 " * 10)
    plain = ask(home, "Short")
    lines = cli(home, "decisions", columns=60).stdout.splitlines()
    assert [display_width(line) <= 60 for line in lines] == [True] * 4, lines
    assert lines[0].split() == ["FINGERPRINT", "STATUS", "DEADLINE", "TITLE"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {long["fingerprint"], wide["fingerprint"], plain["fingerprint"]}
    assert rows[str(long["fingerprint"])].endswith("Ship Ship…")
    assert display_width(rows[str(long["fingerprint"])]) == 60
    assert rows[str(wide["fingerprint"])].endswith("…")
    assert rows[str(plain["fingerprint"])].endswith("  Short")

    # In a pipe, every column stays and only the title is cut: no 10,000-column row either.
    piped = cli(home, "decisions").stdout.splitlines()
    assert piped[0].split()[:3] == ["ID", "FINGERPRINT", "AGE"]
    assert max(len(line) for line in piped) < 250
    assert ("Ship " * 20).strip()[:99] + "…" in piped[1]


def test_the_deadline_column_says_when_and_how_long_and_overdue_replaces_open(
    home: Path,
) -> None:
    timed = ask(home, "Timed?", "--timeout", "30m", "--default", "go")
    untimed = ask(home, "Untimed?")
    at = datetime.fromtimestamp(int(str(timed["deadline_at"])) / 1000, UTC).strftime("%H:%M")
    rows = {line.split()[1]: line for line in cli(home, "decisions").stdout.splitlines()[1:]}
    assert re.search(rf"\sopen\s+—\s+—\s+—\s+{at} UTC \(in (29|30) min\)\s+Timed\?$",
                     rows[str(timed["fingerprint"])])
    assert re.search(r"\sopen\s+—\s+—\s+—\s+—\s+Untimed\?$", rows[str(untimed["fingerprint"])])

    later = {line.split()[1]: line for line in
             cli(home, "decisions", minutes=40).stdout.splitlines()[1:]}
    assert re.search(rf"\soverdue\s+—\s+—\s+—\s+{at} UTC \((9|10) min ago\)\s+Timed\?$",
                     later[str(timed["fingerprint"])])
    assert re.search(r"\sopen\s", later[str(untimed["fingerprint"])])
    shown = cli(home, "show", str(timed["decision_id"]), minutes=40).stdout.splitlines()
    assert "status: overdue" in shown
    # The next day's deadline carries its date.
    tomorrow = ask(home, "Tomorrow?", "--timeout", "30h")
    day = datetime.fromtimestamp(int(str(tomorrow["deadline_at"])) / 1000, UTC)
    listed = cli(home, "decisions").stdout
    assert f"{day:%b} {day.day} {day:%H:%M} UTC (in 29 h)" in listed or \
        f"{day:%b} {day.day} {day:%H:%M} UTC (in 30 h)" in listed


def test_show_prints_the_typed_reply_of_the_accepted_choice(home: Path) -> None:
    opened = json.loads(cli(home, "ask", "--title", "Replan?", "--choice", "go=Go",
                            "--text-choice", "replan=Replan=What should change?",
                            "--json").stdout)
    decision_id = opened["decision_id"]
    typed = "use the staging db\n  and keep   the spacing"
    with Database.open_writer(clock=ShiftedClock(int(NOON))) as db:
        digest = db.read(lambda c: records.load(c, decision_id)).request.request_digest
        db.write(lambda c: resolution.resolve(c, HumanAnswer(
            decision_id, digest, {"choice": "replan", "input": {"text": typed}},
            "telegram:default", "telegram-user:42", "reply:1", "reply:1"),
            db.clock.now_ms(), allowed_channels=("pi", "telegram:default")))
    shown = cli(home, "show", decision_id).stdout.splitlines()
    status = next(i for i, line in enumerate(shown) if line.startswith("status: "))
    assert shown[status].startswith("status: accepted (continuation pending) (Replan), answered")
    assert shown[status + 1:status + 4] == [
        "typed reply (text):", "  use the staging db", "    and keep   the spacing"]
    assert shown[status + 4].startswith("submissions: ")


def test_cut_counts_terminal_columns_and_never_splits_past_the_width() -> None:
    assert cut("abcdef", 4) == "abc…"
    assert cut("abc", 3) == "abc"
    assert cut("日本語です", 5) == "日本…"
    assert display_width(cut("🚀🚀🚀", 4)) <= 4
    assert cut("ab…cdef", 4) == "ab…"  # never two ellipses
