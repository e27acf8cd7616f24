"""The local operator view in real processes: on a pty like a person, and refused without one."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from channels import store
from channels.decisions import records, resolution, views
from channels.decisions.resolution import HumanAnswer
from channels.pi import sessions
from state.clock import ManualClock
from state.database import Database
from tests.adapters.pi.helpers import PtyCli, ask, cli, count

DOWN = b"\x1b[B"


def local_inbox(db: Database) -> list[tuple[str, str]]:
    return [(str(a), str(b)) for a, b in db.conn.execute(
        "SELECT external_event_id, event_type FROM channel_inbox WHERE channel_id = ?",
        (sessions.local_channel_id(),))]


def snapshot(db: Database) -> tuple[int, ...]:
    return tuple(count(db, f"SELECT count(*) FROM {table}") for table in (
        "events", "channels", "channel_inbox", "human_decision_submissions", "leases"))


def test_interactive_view_answers_with_arrow_keys_and_checks_the_text(
        db: Database, home: Path) -> None:
    ask(db, "First question")
    assert isinstance(db.clock, ManualClock)
    db.clock.advance(1)  # listed oldest first; at one instant the order would be the ids'
    second = ask(db, "Second question")
    term = PtyCli(home, "pi")
    term.expect("Open decisions:")
    term.expect("First question")
    term.send(DOWN)
    term.send(b"\r")
    shown = term.expect("Your answer:")
    assert "Second question" in shown and "Choices" in shown
    term.send(b"2")  # continue, replan, stop: the number picks Replan at once
    term.expect("What should change? (1-20 characters): ")
    term.send(b"this is far too long for it\r")
    term.expect("length must be 1 through 20")
    term.send(b"kleiner planen\r")
    term.expect("accepted: Replan")
    assert term.finish() == 0
    winner = db.read(lambda c: records.resolution_of(c, second.decision_id))
    assert winner is not None
    assert winner.response == {"choice": "replan", "input": {"text": "kleiner planen"}}
    row = db.conn.execute("SELECT channel, actor_id, idempotency_key FROM"
                          " human_decision_resolutions").fetchone()
    assert row[:2] == ("pi", f"local:{os.getuid()}")
    [(event_id, event_type)] = local_inbox(db)
    assert (event_id, event_type) == (row[2], "answer")
    assert event_id.startswith("pi:") and len(event_id) == 3 + 32


def test_interactive_view_cancelled_writes_no_answer(db: Database, home: Path) -> None:
    ask(db)
    term = PtyCli(home, "pi")
    term.expect("Open decisions:")
    term.send(b"1")
    term.expect("Your answer:")
    term.send(b"q")
    term.expect("nothing answered")
    assert term.finish() == 0
    assert local_inbox(db) == []


def test_interactive_view_with_nothing_open(home: Path) -> None:
    term = PtyCli(home, "pi")
    term.expect("no open decisions")
    assert term.finish() == 0


def test_answer_on_a_terminal_is_accepted(db: Database, home: Path) -> None:
    handle = ask(db)
    term = PtyCli(home, "pi", "answer", handle.decision_id[:20], "continue")
    term.expect("accepted: Continue")
    assert term.finish() == 0
    assert db.read(lambda c: views.view(c, handle.decision_id)).choice == "continue"


def test_answer_after_another_channel_won_names_the_winner(db: Database, home: Path) -> None:
    handle = ask(db)
    db.write(lambda c: resolution.resolve(c, HumanAnswer(
        handle.decision_id, handle.request.request_digest, {"choice": "stop"}, "pi", "other",
        "e1", "pi:e1"), db.clock.now_ms()))
    term = PtyCli(home, "pi", "answer", handle.decision_id, "1")
    term.expect("already decided: Stop")
    assert term.finish() == 3
    assert count(db, "SELECT count(*) FROM human_decision_submissions WHERE result ="
                 " 'already_resolved'") == 1


def test_answer_after_the_deadline_is_stale(home: Path) -> None:
    with Database.open_writer(clock=ManualClock(1_600_000_000_000)) as old:
        handle = ask(old, timeout_ms=1000)
    assert cli(home, "pi", "list", "--json").stdout.strip() == "[]"  # it can only be stale
    term = PtyCli(home, "pi", "answer", handle.decision_id, "continue")
    term.expect("stale: Human decision request has expired")
    assert term.finish() == 3


def test_answer_with_invalid_text_is_rejected_with_the_reason(
        db: Database, home: Path, tmp_path: Path) -> None:
    handle = ask(db)
    long_text = tmp_path / "why.txt"
    long_text.write_text("x" * 21 + "\n")
    term = PtyCli(home, "pi", "answer", handle.decision_id, "replan", "--text-file",
                  str(long_text))
    term.expect("rejected: Human decision choice replan input length must be 1 through 20")
    assert term.finish() == 3
    term = PtyCli(home, "pi", "answer", handle.decision_id, "stop", "--text", "why")
    term.expect("rejected: Human decision choice stop does not accept input")
    assert term.finish() == 3
    assert db.read(lambda c: records.resolution_of(c, handle.decision_id)) is None


def test_a_text_choice_without_text_is_a_usage_error(db: Database, home: Path) -> None:
    handle = ask(db)
    term = PtyCli(home, "pi", "answer", handle.decision_id, "replan")
    term.expect("choice replan asks for text")
    assert term.finish() == 2
    assert local_inbox(db) == []


def test_no_terminal_is_refused_and_nothing_is_written(db: Database, home: Path) -> None:
    handle = ask(db)
    before = snapshot(db)
    for args in (["pi", "answer", handle.decision_id, "continue"], ["pi"]):
        result = cli(home, *args, stdin=subprocess.PIPE)
        assert result.returncode == 77, result.stderr
        assert "needs a person at a terminal (stdin is not a terminal)" in result.stderr
        assert result.stdout == ""
    assert snapshot(db) == before


def test_a_tty_without_a_controlling_terminal_is_refused(db: Database, home: Path) -> None:
    handle = ask(db)
    before = snapshot(db)
    term = PtyCli(home, "pi", "answer", handle.decision_id, "continue", controlling=False)
    term.expect("/dev/tty cannot be opened")
    assert term.finish() == 77
    assert snapshot(db) == before


def test_list_and_show_need_no_terminal(db: Database, home: Path) -> None:
    handle = ask(db)
    listing = cli(home, "pi", "list", "--json")
    assert listing.returncode == 0, listing.stderr
    [item] = json.loads(listing.stdout)
    assert (item["decision_id"], item["request_digest"]) == (
        handle.decision_id, handle.request.request_digest)
    assert [c["id"] for c in item["choices"]] == ["continue", "replan", "stop"]
    assert item["choices"][1]["input"] == {"name": "text", "prompt": "What should change?",
                                           "min_length": 1, "max_length": 20}
    plain = cli(home, "pi", "list")
    assert plain.stdout.startswith(f"{handle.decision_id}  Approve the plan?  [continue=")
    shown = cli(home, "pi", "show", handle.decision_id[:16])
    assert shown.returncode == 0
    assert "2. replan: Replan  (asks for text)" in shown.stdout
    assert "status: open" in shown.stdout
    assert store.channel_row(db.conn, sessions.local_channel_id()) is None


def test_list_without_a_database(home: Path) -> None:
    result = cli(home, "pi", "list", "--json")
    assert (result.returncode, result.stdout.strip()) == (0, "[]")


def test_extension_path_names_the_shipped_file(home: Path) -> None:
    result = cli(home, "pi", "extension-path")
    path = Path(result.stdout.strip())
    assert result.returncode == 0 and path.name == "piw-channels.ts" and path.is_file()
