"""`piw-channels ask` and the decision commands end to end, in real subprocesses."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from channels.decisions import records, resolution, views
from channels.decisions.resolution import HumanAnswer
from state.database import Database
from state.files import default_path
from tests.cli import CLI, piw
from tests.conftest import child_env
from tests.paths import ROOT


def cli(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return piw(home, *args, timeout=timeout)


def wait_for_open_decision(timeout: float = 30) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if default_path().exists():
            try:
                with Database.open_reader() as db:
                    ids = db.read(views.open_decision_ids)
                if ids:
                    return ids[0]
            except Exception:  # the database may still be initialising
                pass
        time.sleep(0.05)
    raise AssertionError("no decision appeared")


def test_ask_wait_returns_the_answer_of_a_concurrent_submission(home: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "ask", "--title", "Ship it?", "--choice", "yes=Yes",
         "--text-choice", "no=No=Why not?", "--wait", "--json"],
        cwd=ROOT, env=child_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    decision_id = wait_for_open_decision()
    with Database.open_writer() as db:
        request = db.read(lambda c: records.load(c, decision_id)).request
        outcome = db.write(lambda c: resolution.resolve(c, HumanAnswer(
            decision_id, request.request_digest, {"choice": "no", "input": {"text": "tests fail"}},
            "pi", "local:1000", "e1", "pi:e1"), db.clock.now_ms()))
    assert outcome.result.value == "won"
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"decision_id": decision_id, "choice": "no",
                               "input": {"text": "tests fail"}, "provenance": "human"}
    with Database.open_reader() as db:
        assert db.conn.execute("SELECT status FROM runs").get == "completed"
        assert db.conn.execute("SELECT owner_type FROM leases l JOIN resources r"
                               " USING (resource_id) WHERE r.resource_type='run'").get is None


def test_ask_wait_expires_into_its_default(home: Path) -> None:
    result = cli(home, "ask", "--title", "Deploy?", "--choice", "go=Go", "--choice",
                 "hold=Hold", "--timeout", "1s", "--default", "hold", "--wait", "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert (answer["choice"], answer["provenance"]) == ("hold", "timeout_policy")


def test_ask_wait_without_default_expires_with_exit_3(home: Path) -> None:
    result = cli(home, "ask", "--title", "Deploy?", "--choice", "go=Go", "--timeout", "1s",
                 "--wait")
    assert result.returncode == 3
    assert "cancelled: expired" in result.stderr


def test_ask_without_wait_prints_the_id_and_expire_settles_it_later(home: Path) -> None:
    result = cli(home, "ask", "--title", "Later?", "--choice", "ok=OK", "--timeout", "1s",
                 "--default", "ok")
    assert result.returncode == 0 and result.stdout.strip().startswith("decision-")
    decision_id = result.stdout.strip()
    time.sleep(1.1)
    expire = cli(home, "expire")
    assert expire.returncode == 0 and expire.stdout == ""  # quiet for cron
    listing = json.loads(cli(home, "decisions", "--all", "--json").stdout)
    assert [(d["decision_id"], d["status"], d["provenance"], d["continuation"])
            for d in listing] == [(decision_id, "accepted", "timeout_policy", "applied")]


def test_show_and_cancel_by_prefix(home: Path) -> None:
    decision_id = cli(home, "ask", "--title", "Cancel me", "--choice", "a=A").stdout.strip()
    shown = cli(home, "show", decision_id[:16])
    assert shown.returncode == 0
    assert "Cancel me" in shown.stdout and "status: open" in shown.stdout
    assert "submissions: none" in shown.stdout
    cancelled = cli(home, "cancel", decision_id[:16], "--reason", "obsolete")
    assert cancelled.returncode == 0 and "obsolete" in cancelled.stdout
    again = cli(home, "cancel", decision_id, "--reason", "other")
    assert again.returncode == 0 and "already cancelled (reason: obsolete)" in again.stdout
    data = json.loads(cli(home, "show", decision_id, "--json").stdout)
    assert (data["status"], data["reason"], data["continuation"]) == (
        "cancelled", "obsolete", "applied")


def test_bad_ask_input_names_the_field_and_writes_nothing(home: Path) -> None:
    cases = [
        (["--title", "x", "--choice", "a=A", "--choice", "b=A"], "duplicated"),
        (["--title", "x\x07", "--choice", "a=A"], "control character"),
        (["--title", "x", "--choice", "a=A", "--timeout", "1s", "--default", "zz"],
         "not available"),
        (["--title", "x", "--choice", "a=A", "--default", "a"], "--default needs --timeout"),
        (["--title", "x", "--choice", "a=A", "--timeout=0s"], "positive duration"),
        (["--title", "x"], "at least one"),
        (["--title", "x", "--choice", "bad id=A"], "choice"),
    ]
    for args, message in cases:
        result = cli(home, "ask", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
    if default_path().exists():
        with Database.open_reader() as db:
            assert db.conn.execute("SELECT count(*) FROM human_decisions").get == 0


def test_oversize_presentation_is_refused(home: Path, tmp_path: Path) -> None:
    doc = {"schema": "pi-workflows.decision-presentation.v1", "summary": "s",
           "blocks": [{"kind": "paragraph", "text": "x" * 16_001}]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    result = cli(home, "ask", "--title", "x", "--choice", "a=A", "--presentation", str(path))
    assert result.returncode == 2
    assert "limit is 16000" in result.stderr


def test_unknown_decision_is_a_usage_error(home: Path) -> None:
    cli(home, "init")
    result = cli(home, "show", "decision-nope")
    assert result.returncode == 2 and "no decision" in result.stderr


def test_ask_wait_interrupted_releases_the_run_for_others(home: Path) -> None:
    import signal

    proc = subprocess.Popen(
        [*CLI, "ask", "--title", "Wait?", "--choice", "a=A", "--wait"],
        cwd=ROOT, env=child_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_open_decision()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    with Database.open_reader() as db:
        assert db.conn.execute(
            "SELECT count(*) FROM leases l JOIN resources r USING (resource_id)"
            " WHERE r.resource_type = 'run' AND l.owner_type IS NOT NULL").get == 0


def test_decisions_all_says_which_channel_won(home: Path) -> None:
    # D10: the listing did not say where a decision was decided.
    answered = cli(home, "ask", "--title", "Ship?", "--choice", "go=Go").stdout.strip()
    cancelled = cli(home, "ask", "--title", "Drop?", "--choice", "a=A").stdout.strip()
    with Database.open_writer() as db:
        digest = db.read(lambda c: records.load(c, answered)).request.request_digest
        db.write(lambda c: resolution.resolve(c, HumanAnswer(
            answered, digest, {"choice": "go"}, "telegram:default", "telegram-user:42",
            "callback:1", "callback:1"), db.clock.now_ms(),
            allowed_channels=("pi", "telegram:default")))
    assert cli(home, "cancel", cancelled, "--reason", "obsolete").returncode == 0
    lines = cli(home, "decisions", "--all").stdout.splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert re.search(r"\bGo\s+telegram:default\s", rows[answered[:17]]), lines
    assert re.search(r"\bobsolete\s+cancel command\s", rows[cancelled[:17]]), lines
    listing = {d["decision_id"]: d for d in json.loads(
        cli(home, "decisions", "--all", "--json").stdout)}
    assert listing[answered]["decided_by"] == "telegram:default"
    assert "telegram-user:42" not in json.dumps(listing)  # actor ids stay private
    assert "through telegram:default" in cli(home, "show", answered).stdout
