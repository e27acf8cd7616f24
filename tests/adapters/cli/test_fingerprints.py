"""The `Decision 2a06a17d99d4` fingerprint every message shows, and any unique prefix of it or
of the decision id, is accepted wherever a decision id is (show, cancel, resend, pi answer);
an ambiguous one lists its candidates. Real CLI child processes."""

from __future__ import annotations

from pathlib import Path

from adapters.telegram.fake import BotError, FakeBotApi, Fault
from channels.decisions import views
from state.database import Database
from tests.adapters.cli.test_decisions_cli import cli
from tests.adapters.pi.helpers import PtyCli
from tests.adapters.pi.helpers import ask as pi_ask
from tests.channels.telegram.helpers import (
    PROFILE,
    TOKEN,
    configure_telegram_profile,
    effect_statuses,
    open_decision_now,
)


def fingerprint(decision_id: str) -> str:
    with Database.open_reader() as db:
        return views.fingerprint_of(db.conn, decision_id)


def ask(home: Path, title: str) -> str:
    done = cli(home, "ask", "--title", title, "--choice", "a=A")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_show_and_cancel_accept_the_fingerprint_and_any_unique_prefix(home: Path) -> None:
    first, second = ask(home, "Ship release one?"), ask(home, "Ship release two?")
    fp = fingerprint(first)
    assert fp != fingerprint(second)[:4]
    shown = cli(home, "show", f"Decision {fp}")  # pasted from the message
    assert shown.returncode == 0 and shown.stdout.startswith("Ship release one?")
    for text in (fp, fp[:6], first[len("decision-"):][:10], first[:14]):
        again = cli(home, "show", text, "--json")
        assert again.returncode == 0, (text, again.stderr)
        assert f'"decision_id": "{first}"' in again.stdout
    cancelled = cli(home, "cancel", fp[:8])
    assert cancelled.stdout == f"cancelled {first} (reason: cancelled)\n"
    unknown = cli(home, "show", "ffffffffffff")
    assert (unknown.returncode, unknown.stderr) == (
        2, "Error: no decision matches 'ffffffffffff'\n")


def test_an_ambiguous_fingerprint_lists_the_candidates(home: Path) -> None:
    # The fingerprint is of the presentation: two decisions that look alike share it.
    first, second = ask(home, "Approve?"), ask(home, "Approve?")
    fp = fingerprint(first)
    assert fingerprint(second) == fp
    result = cli(home, "cancel", fp)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"Error: '{fp}' matches more than one decision: {first} (Decision {fp}: Approve?);"
        f" {second} (Decision {fp}: Approve?); give more of the decision id"]
    assert cli(home, "cancel", first[:20]).returncode == 0  # the id settles it


def test_resend_accepts_the_fingerprint(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        handle = open_decision_now()
        fake.inject("sendMessage", Fault.canned(BotError.BLOCKED))
        assert cli(home, "poll", "--once").returncode == 78
        resend = cli(home, "resend", fingerprint(handle.decision_id), "--profile", PROFILE)
        assert resend.returncode == 0, resend.stderr
        assert resend.stdout == f"resend of {handle.decision_id} on telegram:{PROFILE} reserved\n"
        assert effect_statuses(handle.decision_id, "telegram.deliver") == ["rejected", "applied"]


def test_pi_answer_accepts_the_fingerprint(db: Database, home: Path) -> None:
    handle = pi_ask(db)
    term = PtyCli(home, "pi", "answer", fingerprint(handle.decision_id), "continue")
    term.expect("accepted: Continue")
    assert term.finish() == 0
    assert db.read(lambda c: views.view(c, handle.decision_id)).choice == "continue"
