"""The producer API: one transaction per notification, the plan's key, adopt or conflict, and
bad input refused with nothing written (the function, and the `notify` command)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from channels.config.loading import load_config
from channels.notifications import producing, records
from channels.notifications.producing import NotificationRefused, NotifySpec
from state.database import Database
from tests.channels.telegram.helpers import (
    channel_id_of,
    configure_telegram_profile,
    db_rows,
    db_value,
    run_cli,
)

COUNTED = ("notifications", "effects", "runs", "blobs", "resources", "events")


def _counts(db: Database) -> dict[str, int]:
    return {t: int(db.conn.execute(f"SELECT count(*) FROM {t}").get) for t in COUNTED}


def _notify(db: Database, **kwargs: object) -> producing.Notified:
    spec = NotifySpec(**{"kind": "progress", "text": "step 1", **kwargs})  # type: ignore[arg-type]
    return producing.notify(db, spec, load_config(), "host:test:1:x")


def test_a_one_off_notification_writes_its_run_row_blob_and_effects_in_one_go(
        db: Database, home: Path) -> None:
    configure_telegram_profile(home, "http://127.0.0.1:9")
    done = _notify(db, kind="final", text="All 12 migrations applied.")
    n = done.notification
    assert not done.adopted and n.notification_index == 0 and n.notification_type == "final"
    assert db.conn.execute("SELECT workflow_ref, status FROM runs WHERE run_id = ?",
                           (n.run_id,)).fetchone() == ("piw-channels.notify", "completed")
    assert records.get(db.conn, n.notification_id) == n
    rows = db.conn.execute(
        "SELECT effect_type, idempotency_key, status FROM effects WHERE source_resource_id = ?"
        " ORDER BY effect_type", (f"run:{n.run_id}",)).fetchall()
    # No Pi session to tell: the row's own effect is settled at once; Telegram's waits.
    assert rows == [("pi.notify", f"none:{n.notification_id}", "cancelled"),
                    ("telegram.notify", f"{channel_id_of()}:{n.notification_id}", "pending")]
    assert db.conn.execute("SELECT effect_id FROM notifications").get == \
        db.conn.execute("SELECT effect_id FROM effects WHERE effect_type = 'pi.notify'").get


def test_the_same_index_and_text_adopts_and_another_text_is_a_conflict(db: Database) -> None:
    first = _notify(db, kind="progress", text="step 1")
    run = first.notification.run_id
    again = _notify(db, run_id=run, index=0, text="step 1")
    assert again.adopted and again.notification == first.notification
    before = _counts(db)
    with pytest.raises(NotificationRefused, match="another text"):
        _notify(db, run_id=run, index=0, text="step one")
    with pytest.raises(NotificationRefused, match="another type"):
        _notify(db, run_id=run, index=0, kind="final", text="step 1")
    assert _counts(db) == before
    nxt = _notify(db, run_id=run, text="step 2")  # no --index: the next one
    assert nxt.notification.notification_index == 1
    assert [x.text for x in records.for_run(db.conn, run)] == ["step 1", "step 2"]


def test_a_session_target_keeps_the_pi_effect_pending(db: Database) -> None:
    done = _notify(db, session_id="session-abc")
    assert done.notification.target_session_id == "session-abc"
    assert db.conn.execute("SELECT status, idempotency_key FROM effects WHERE effect_type ="
                           " 'pi.notify'").fetchone() == \
        ("pending", f"session-abc:{done.notification.notification_id}")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"text": ""}, "empty"),
    ({"text": " \n\t"}, "empty"),
    ({"text": "bell\x07"}, "control character"),
    ({"text": "esc\x1b[31m"}, "control character"),
    ({"text": "x" * (producing.MAX_TEXT_CODE_UNITS + 1)}, "the limit is"),
    ({"run_id": "run-that-is-not-there"}, "not known"),
    ({"run_id": "bad id!"}, "not a valid run id"),
    ({"audience": "nobody"}, "not configured"),
    ({"index": -1}, "--index"),
    ({"session_id": " "}, "--session"),
])
def test_bad_input_is_refused_and_nothing_is_written(db: Database, kwargs: dict[str, object],
                                                     message: str) -> None:
    before = _counts(db)
    with pytest.raises(NotificationRefused, match=message) as caught:
        _notify(db, **kwargs)
    assert caught.value.exit_code == 2
    assert _counts(db) == before


def test_the_command_prints_the_run_and_refuses_in_one_line(home: Path) -> None:
    made = run_cli(home, "notify", "--progress", "Migrating 3 of 12")
    assert made.returncode == 0 and made.stderr == ""
    run = made.stdout.strip()
    assert run.startswith("notify-")
    again = run_cli(home, "notify", "--run", run, "--index", "0", "--progress",
                    "Migrating 3 of 12", "--json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["adopted"] is True and doc["run_id"] == run and doc["index"] == 0
    assert doc["channels"] == ["pi"] and doc["created_at_iso"].endswith("Z")
    conflict = run_cli(home, "notify", "--run", run, "--index", "0", "--progress", "other")
    assert conflict.returncode == 2 and conflict.stdout == ""
    assert conflict.stderr.count("\n") == 1 and conflict.stderr.startswith("Error: ")
    for bad in (["--final", ""], ["--final", "a\x01b"], ["--final", "x", "--run", "nope"],
                ["--final", "x", "--audience", "ops"], ["--progress", "--final", "x"],
                ["--final", "x", "--index", "two"], ["x"]):
        result = run_cli(home, "notify", *bad)
        assert result.returncode == 2, (bad, result.stderr)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: "), bad
    assert db_value("SELECT count(*) FROM notifications") == 1
    assert db_rows("SELECT notification_type FROM notifications") == [("progress",)]


def test_bad_input_never_creates_the_database(home: Path) -> None:
    bad = run_cli(home, "notify", "--final", "")
    assert bad.returncode == 2
    assert not (home / ".pi" / "agent" / "workflows" / "state.sqlite").exists()
