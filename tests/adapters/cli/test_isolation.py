"""No single bad thing stops the rest (issue 18, item 1): each profile's pass, each decision's
expiry, each inbox row and each effect fails alone, is told in one line with its exit code,
and a bug is never silent (a private crash report the line names; a press that hit one is
answered). Real `piw-channels` child processes against the loopback fake Bot API; a bug is
put in on purpose by `tests.injected_bugs` (the real program with one function broken).
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from adapters.telegram.fake import FakeBotApi
from channels.config.install import install_telegram_profile
from channels.decisions import workflows
from state import blobs
from state.database import Database
from state.files import default_path
from tests.channels.telegram.helpers import (
    PROFILE,
    TOKEN,
    USER,
    channel_id_of,
    config_dir,
    configure_telegram_profile,
    db_value,
    inbox_results,
    message_parts,
    open_decision,
    open_decision_now,
    press_button,
    resolutions,
    write_token_file,
)
from tests.cli import piw

MINUTE = 60_000
OTHER_TOKEN = "7987654321:AAH-otherBotSecret_q8Wm2ZxCvB7nLkJh4Rt"
SORRY = "Something went wrong; the operator has been told"
CRASH = re.compile(r"crash report: (\S+)$")


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        configure_telegram_profile(home, server.base_url)
        yield server


def refuse_request(decision_id: str) -> bytes:
    """Make a decision's stored request one this version refuses (as a request written by a
    newer component would be): its document names another schema. Returns the old hash."""
    with apsw.Connection(str(default_path())) as conn:
        trigger = conn.execute("SELECT sql FROM sqlite_schema WHERE name ="
                               " 'human_decisions_are_immutable'").get
        request_hash = conn.execute("SELECT request_hash FROM human_decisions WHERE"
                                    " decision_id = ?", (decision_id,)).get
        document = blobs.get_json(conn, bytes(request_hash))
        newer = {**document, "schema": "pi-workflows.human-decision-request.v9"}
        conn.execute("DROP TRIGGER human_decisions_are_immutable")
        conn.execute("UPDATE human_decisions SET request_hash = ? WHERE decision_id = ?",
                     (blobs.put_json(conn, newer, 0), decision_id))
        conn.execute(str(trigger))
    return bytes(request_hash)


def restore_request(decision_id: str, request_hash: bytes) -> None:
    with apsw.Connection(str(default_path())) as conn:
        trigger = conn.execute("SELECT sql FROM sqlite_schema WHERE name ="
                               " 'human_decisions_are_immutable'").get
        conn.execute("DROP TRIGGER human_decisions_are_immutable")
        conn.execute("UPDATE human_decisions SET request_hash = ? WHERE decision_id = ?",
                     (request_hash, decision_id))
        conn.execute(str(trigger))


def crash_report(line: str) -> Path:
    found = CRASH.search(line)
    assert found, line
    path = Path(found.group(1))
    assert path.parent == default_path().parent
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return path


def test_a_profile_whose_token_file_is_broken_fails_alone(home: Path, fake: FakeBotApi) -> None:
    broken = write_token_file(home, OTHER_TOKEN, name="botb.token")
    install_telegram_profile(config_dir(home), token_file=broken, user_ids=[str(USER)],
                             chat_ids=[str(USER)], profile="botb", audience="operator",
                             api_base_url=fake.base_url, credential="botb")
    broken.write_text("not a token\n")  # a slip of the editor, later
    handle = open_decision_now()
    done = piw(home, "poll", "--once")
    assert done.returncode == 78, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: telegram:botb: ") and str(broken) in line
    # The healthy profile polled and delivered all the same.
    assert [p.message_ref is not None for p in message_parts(handle.decision_id)] == [True]
    assert fake.requests("getUpdates")
    # Reported once: the next pass is quiet about it, but still exits 78; fixed, it recovers.
    again = piw(home, "poll", "--once")
    assert (again.returncode, again.stderr) == (78, "")
    broken.write_text(OTHER_TOKEN + "\n")
    with FakeBotApi(token=OTHER_TOKEN) as other:
        install_telegram_profile(config_dir(home), token_file=broken, user_ids=[str(USER)],
                                 chat_ids=[str(USER)], profile="botb", audience="operator",
                                 api_base_url=other.base_url, credential="botb")
        fixed = piw(home, "poll", "--once")
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stderr.startswith("Recovered: telegram:botb: "), fixed.stderr


def test_a_decision_whose_deadline_cannot_be_applied_fails_alone(
    home: Path, fake: FakeBotApi,
) -> None:
    with Database.open_writer() as db:
        owner = workflows.new_owner_id(db, "test")
        handles = []
        for title in ("Refused by this version?", "Healthy?"):
            spec = workflows.AskSpec(
                title=title, presentation={"schema": "pi-workflows.decision-presentation.v1",
                                           "summary": title, "blocks": []},
                choices={"yes": {"label": "Yes"}, "no": {"label": "No"}},
                timeout_ms=10 * MINUTE, default_choice="no")
            handle = workflows.create_ask(db, spec, owner)
            workflows.release_run(db, handle.run.lease)
            handles.append(handle)
    refused, healthy = handles
    original = refuse_request(refused.decision_id)
    done = piw(home, "poll", "--once", minutes=11)
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    [line] = lines  # said once, though the pass runs the expiry step twice
    assert refused.decision_id in line and "deadline" in line, lines
    # The healthy overdue decision got its timeout default, and the pass reached Telegram.
    assert [r[:2] for r in resolutions(healthy.decision_id)] == [("accepted", "timeout_policy")]
    assert fake.requests("getUpdates")
    expire = piw(home, "expire", minutes=12)
    assert expire.returncode == 2 and refused.decision_id in expire.stderr
    assert len(expire.stderr.splitlines()) == 1
    # An alert like any other: quiet on the next passes (still exit 2, listed by status) ...
    again = piw(home, "poll", "--once", minutes=13)
    assert (again.returncode, again.stderr) == (2, ""), again.stderr
    health = piw(home, "status", "--json", minutes=13)
    assert health.returncode == 2
    items = json.loads(health.stdout)["needs_attention"]
    assert [(i["kind"], i["facts"]["decisionId"]) for i in items] == [
        ("expiry", refused.decision_id)], items
    text = piw(home, "status", minutes=13).stdout
    assert f"decision {refused.decision_id}: its deadline cannot be applied" in text
    # ... and once more when it clears: the deadline is applied, and that is said.
    restore_request(refused.decision_id, original)
    fixed = piw(home, "poll", "--once", minutes=14)
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stderr.splitlines() == [
        f"Recovered: decision {refused.decision_id}: its deadline no longer fails (after 3 min)"]
    assert [r[:2] for r in resolutions(refused.decision_id)] == [("accepted", "timeout_policy")]


def test_a_press_that_hits_a_refused_request_is_answered_and_reported(
    home: Path, fake: FakeBotApi,
) -> None:
    handle = open_decision_now()
    assert piw(home, "poll", "--once").returncode == 0
    refuse_request(handle.decision_id)
    message = int(str(message_parts(handle.decision_id)[-1].message_ref))
    update_id = press_button(fake, handle, "continue", message)
    done = piw(home, "poll", "--once")
    assert done.returncode != 0
    assert any(f"update {update_id}" in line for line in done.stderr.splitlines()), done.stderr
    assert [r.params.get("text") for r in fake.requests("answerCallbackQuery")] == [SORRY]
    assert (update_id, "callback", "ignored:error") in inbox_results()


def test_a_press_that_hits_a_bug_is_answered_and_names_a_crash_report(
    home: Path, fake: FakeBotApi,
) -> None:
    with Database.open_writer() as db:
        handle = open_decision(db)
    assert piw(home, "poll", "--once").returncode == 0
    message = int(str(message_parts(handle.decision_id)[-1].message_ref))
    update_id = press_button(fake, handle, "stop", message)
    done = piw(home, "poll", "--once", bug="channels.telegram.inbound:_callback")
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: telegram:{PROFILE}: update {update_id}: internal error")
    report = crash_report(line).read_text()
    assert "RuntimeError: injected bug" in report and "Traceback" in report
    assert TOKEN.split(":")[1] not in report
    assert [r.params.get("text") for r in fake.requests("answerCallbackQuery")] == [SORRY]
    # The row is done (never retried forever); the next pass is clean.
    assert (update_id, "callback", "ignored:error") in inbox_results()
    assert piw(home, "poll", "--once").returncode == 0


def test_a_delivery_that_hits_a_bug_is_reported_and_listed(
    home: Path, fake: FakeBotApi,
) -> None:
    handle = open_decision_now()
    done = piw(home, "poll", "--once", bug="channels.telegram.outbound:Outbound._deliver")
    assert done.returncode == 1, done.stderr
    # What broke (naming its crash report), and what the decision needs now.
    bug, listed = done.stderr.splitlines()
    assert bug.startswith(f"Error: telegram:{PROFILE}: internal error while applying"
                          " telegram.deliver"), bug
    assert "RuntimeError: injected bug" in crash_report(bug).read_text()
    assert listed.startswith(f"Error: telegram:{PROFILE}: Decision ") and \
        "could not be delivered" in listed and "piw-channels resend" in listed
    assert not fake.requests("sendMessage")
    # Nothing was sent: the delivery failed for good (no blind retry of a bug every pass),
    # and it stays listed until an operator resends it.
    attention = json.loads(piw(home, "status", "--json").stdout)["needs_attention"]
    assert [(a["kind"], a["facts"]["decisionId"]) for a in attention] == [
        ("failed", handle.decision_id)]
    again = piw(home, "poll", "--once")
    assert (again.returncode, again.stderr) == (1, "")  # reported once; it still needs you
    assert not fake.requests("sendMessage")


def test_an_internal_error_of_a_command_names_its_crash_report(home: Path) -> None:
    open_decision_now()
    done = piw(home, "decisions", bug="channels.decisions.views:list_views")
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: internal error while running decisions: RuntimeError:"
                           " injected bug; crash report: "), line
    assert "Traceback" in crash_report(line).read_text()


def test_a_pass_that_hits_a_bug_names_a_crash_report_and_releases_its_lease(
    home: Path, fake: FakeBotApi,
) -> None:
    del fake
    done = piw(home, "poll", "--once", bug="channels.telegram.poll:ChannelPoll._cycle")
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: telegram:{PROFILE}: internal error while polling")
    crash_report(line)
    owner = db_value("SELECT owner_id FROM leases WHERE resource_id = ?",
                     f"channel:{channel_id_of()}")
    assert owner is None  # released: the next pass need not wait for it to expire
    again = piw(home, "poll", "--once")  # the bug is gone: a pass that works recovers it
    assert again.returncode == 0 and again.stderr.startswith(f"Recovered: telegram:{PROFILE}: ")
