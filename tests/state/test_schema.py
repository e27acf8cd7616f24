"""Schema tests: exact shape, identity refusals, modes, read-only connections, backup/restore."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import apsw
import pytest

from state import maintenance
from state.database import Database
from state.ddl import DDL
from state.errors import (
    DatabaseMissing,
    IncompatibleDatabase,
    PermissionProblem,
)
from state.files import default_path
from state.schema import APPLICATION_ID, DDL_DIGEST, expected_objects

PLAN_TABLES = {
    "schema_meta", "projects", "blobs", "resources", "leases", "events", "workflow_definitions",
    "runs", "run_bindings", "run_queue", "node_attempts", "workflow_updates", "session_segments",
    "session_entries", "session_events", "human_decisions", "human_decision_resolutions",
    "human_decision_submissions", "continuations", "controller_resources",
    "controller_finalizers", "controller_queue", "controller_workflows", "effects",
    "effect_attempts", "notifications", "turn_intents", "channels", "channel_cursors",
    "channel_inbox", "channel_messages", "channel_message_parts",
}


def raw(path: Path) -> apsw.Connection:
    """A connection that bypasses every check (to tamper like a foreign tool would)."""
    return apsw.Connection(str(path))


def file_bytes(path: Path) -> bytes:
    return path.read_bytes()


def test_init_creates_private_directory_and_file_with_every_plan_table(home: Path) -> None:
    with Database.open_writer() as db:
        tables = {r[0] for r in db.conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        assert tables == PLAN_TABLES
        for name in tables:
            sql = db.conn.execute(
                "SELECT sql FROM sqlite_schema WHERE name = ?", (name,)).get
            assert sql.rstrip().endswith("STRICT"), name
        assert db.conn.execute("PRAGMA application_id").get == APPLICATION_ID == 0x50495746
        assert db.conn.execute("PRAGMA user_version").get == 1
        meta = db.conn.execute(
            "SELECT schema_name, schema_version, schema_digest, app_version FROM schema_meta"
        ).fetchall()
        assert meta == [("pi-workflows-state", 1, hashlib.sha256(DDL.encode()).digest(), "0.1.0")]
    path = default_path()
    assert path == home / ".pi/agent/workflows/state.sqlite"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, suffix


def test_every_connection_gets_the_architecture_pragmas(db: Database) -> None:
    pragma = lambda name: db.conn.execute(f"PRAGMA {name}").get  # noqa: E731
    assert pragma("foreign_keys") == 1
    assert pragma("journal_mode") == "wal"
    assert pragma("synchronous") == 2  # FULL
    assert pragma("busy_timeout") == 5000
    assert pragma("wal_autocheckpoint") == 1000
    assert pragma("journal_size_limit") == 67108864
    reader = Database.open_reader()
    with reader:
        assert reader.conn.execute("PRAGMA query_only").get == 1
        assert reader.conn.execute("PRAGMA foreign_keys").get == 1
        assert reader.conn.execute("PRAGMA synchronous").get == 2


def test_ddl_digest_is_the_sha256_of_the_exact_ddl_text() -> None:
    assert DDL.startswith("\n") and DDL.endswith("\n")
    assert hashlib.sha256(DDL.encode("utf-8")).digest() == DDL_DIGEST


def test_static_object_list_matches_what_sqlite_builds() -> None:
    conn = apsw.Connection(":memory:")
    conn.execute(DDL)
    live = {
        name: (kind, table, sql)
        for kind, name, table, sql in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'")
    }
    assert live == expected_objects()


def test_closed_sets_booleans_counts_and_hashes_are_constrained(db: Database) -> None:
    conn = db.conn
    conn.execute("INSERT INTO resources VALUES ('r', 'run', 0, 0, 0)")
    bad_inserts = [
        "INSERT INTO resources VALUES ('x', 'bogus', 0, 0, 0)",
        "INSERT INTO resources VALUES ('y', 'run', -1, 0, 0)",
        "INSERT INTO blobs VALUES (x'00', 'text/plain', 0, x'', 0)",
        "INSERT INTO blobs VALUES (zeroblob(32), 'text/plain', 3, x'00', 0)",
        "INSERT INTO leases VALUES ('r', 1, 'channel', NULL, NULL, NULL, NULL, NULL)",
        "INSERT INTO leases VALUES ('r', 1, 'robot', 'o', zeroblob(32), 0, 0, 1)",
        "INSERT INTO leases VALUES ('r', -1, NULL, NULL, NULL, NULL, NULL, NULL)",
        "INSERT INTO channels VALUES ('c', 'r', 'sms', 'p', 0)",
        "INSERT INTO resources VALUES ('z', 'run', 'zero', 0, 0)",
    ]
    for sql in bad_inserts:
        with pytest.raises(apsw.ConstraintError):
            conn.execute(sql)
    conn.execute("INSERT INTO leases VALUES ('r', 0, NULL, NULL, NULL, NULL, NULL, NULL)")


def test_foreign_keys_are_enforced(db: Database) -> None:
    with pytest.raises(apsw.ConstraintError, match="FOREIGN KEY"):
        db.conn.execute("INSERT INTO leases VALUES ('nope', 0, NULL, NULL, NULL, NULL, NULL, NULL)")


def test_events_and_decision_requests_are_immutable(db: Database) -> None:
    conn = db.conn
    conn.execute("INSERT INTO resources VALUES ('r', 'run', 0, 0, 0)")
    conn.execute("UPDATE resources SET revision = 1 WHERE resource_id = 'r'")
    conn.execute("INSERT INTO events (event_id, resource_id, resource_revision, event_type,"
                 " actor_type, recorded_at) VALUES ('e', 'r', 1, 'run.created', 'system', 0)")
    with pytest.raises(apsw.ConstraintError, match="immutable"):
        conn.execute("UPDATE events SET event_type = 'run.changed'")
    with pytest.raises(apsw.ConstraintError, match="immutable"):
        conn.execute("DELETE FROM events")
    with pytest.raises(apsw.ConstraintError, match="exactly one"):
        conn.execute("UPDATE resources SET revision = 5 WHERE resource_id = 'r'")
    with pytest.raises(apsw.ConstraintError, match="cannot change"):
        conn.execute("UPDATE resources SET resource_type = 'channel' WHERE resource_id = 'r'")


def test_init_is_idempotent_and_keeps_data(home: Path) -> None:
    with Database.open_writer() as db:
        db.write(lambda c: c.execute("INSERT INTO projects VALUES ('p', '/x', 1)"))
    with Database.open_writer() as db:
        assert db.conn.execute("SELECT count(*) FROM projects").get == 1


def test_reader_never_creates_a_database(home: Path) -> None:
    with pytest.raises(DatabaseMissing, match="piw-channels init"):
        Database.open_reader()
    assert not default_path().exists()
    assert not default_path().parent.exists()


def test_read_only_connection_cannot_write(db: Database) -> None:
    with Database.open_reader() as reader:
        with pytest.raises(apsw.ReadOnlyError):
            reader.conn.execute("INSERT INTO projects VALUES ('p', '/x', 1)")
        with pytest.raises(PermissionProblem, match="read-only"):
            reader.write(lambda c: None)


# -- identity refusals: every failed open leaves the file untouched ------------------------------


def _tamper_and_expect(home: Path, tamper: str, match: str) -> None:
    Database.open_writer().close()
    path = default_path()
    conn = raw(path)
    conn.execute(tamper)
    conn.close()
    before = file_bytes(path)
    for opener in (Database.open_writer, Database.open_reader):
        with pytest.raises(IncompatibleDatabase, match=match) as info:
            opener()
        assert "Move or remove the old workflow state" in str(info.value)
    assert file_bytes(path) == before


@pytest.mark.parametrize(
    ("tamper", "match"),
    [
        ("PRAGMA application_id = 7", "application_id is 0x7"),
        ("PRAGMA user_version = 2", "user_version 2 is not supported"),
        ("DELETE FROM schema_meta", "schema_meta row is missing"),
        ("UPDATE schema_meta SET schema_digest = zeroblob(32)", "schema_meta row is missing or changed"),
        ("PRAGMA ignore_check_constraints = ON; UPDATE schema_meta SET schema_name = 'other'",
         "schema_meta row is missing or changed"),
        ("CREATE TABLE extra (x INTEGER) STRICT", "unexpected schema objects: extra"),
        ("CREATE INDEX extra_index ON blobs (created_at)", "unexpected schema objects: extra_index"),
        ("CREATE TRIGGER extra_trigger AFTER INSERT ON blobs BEGIN SELECT 1; END",
         "unexpected schema objects: extra_trigger"),
        ("DROP INDEX leases_owner", "missing schema objects: leases_owner"),
        ("DROP TABLE turn_intents", "missing schema objects: turn_intents"),
        ("ALTER TABLE projects ADD COLUMN extra TEXT", "changed schema objects: projects"),
        ("DROP TRIGGER events_are_immutable", "missing schema objects: events_are_immutable"),
    ],
)
def test_a_database_that_differs_from_the_compiled_ddl_is_refused_unchanged(
    home: Path, tamper: str, match: str
) -> None:
    _tamper_and_expect(home, tamper, match)


def test_a_foreign_sqlite_database_is_refused_unchanged(home: Path) -> None:
    path = default_path()
    path.parent.mkdir(parents=True, mode=0o700)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    conn = raw(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    before = file_bytes(path)
    with pytest.raises(IncompatibleDatabase, match="application_id is 0x0"):
        Database.open_writer()
    assert file_bytes(path) == before


def test_a_non_database_file_is_refused_unchanged(home: Path) -> None:
    path = default_path()
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 100)
    path.chmod(0o600)
    before = file_bytes(path)
    with pytest.raises(IncompatibleDatabase, match="not a SQLite database"):
        Database.open_writer()
    with pytest.raises(IncompatibleDatabase, match="not a SQLite database"):
        Database.open_reader()
    assert file_bytes(path) == before


@pytest.mark.parametrize(
    "old", ["runs", "decisions", "controllers", "../../../.config/pi-workflows/telegram-state.sqlite"]
)
def test_old_storage_without_state_sqlite_is_refused_and_left_alone(home: Path, old: str) -> None:
    workflows = home / ".pi/agent/workflows"
    target = (workflows / old).resolve()
    if old.endswith(".sqlite"):
        target.parent.mkdir(parents=True)
        target.write_bytes(b"old sidecar")
    else:
        (target / "run-1").mkdir(parents=True)
        (target / "run-1" / "state.json").write_text('{"old": true}')
    workflows.mkdir(parents=True, exist_ok=True)
    workflows.chmod(0o700)
    snapshot = {p: p.read_bytes() for p in target.rglob("*") if p.is_file()} if target.is_dir() \
        else {target: target.read_bytes()}
    with pytest.raises(IncompatibleDatabase, match="old workflow storage exists"):
        Database.open_writer()
    assert not default_path().exists()
    for p, content in snapshot.items():
        assert p.read_bytes() == content


# -- modes -----------------------------------------------------------------------------------------


def test_world_readable_directory_is_refused_with_the_fix(home: Path) -> None:
    Database.open_writer().close()
    directory = default_path().parent
    directory.chmod(0o755)
    with pytest.raises(PermissionProblem, match=f"chmod 700 {directory}"):
        Database.open_writer()
    with pytest.raises(PermissionProblem, match="mode 0755"):
        Database.open_reader()


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_group_or_world_accessible_database_files_are_refused(home: Path, suffix: str) -> None:
    db = Database.open_writer()  # keeps -wal and -shm present while we look
    target = Path(f"{default_path()}{suffix}")
    assert target.exists()
    target.chmod(0o640)
    with pytest.raises(PermissionProblem, match=f"chmod 600 {target}"):
        Database.open_reader()
    db.close()


def test_a_directory_at_the_database_path_is_refused(home: Path) -> None:
    default_path().mkdir(parents=True)
    default_path().parent.chmod(0o700)
    with pytest.raises(PermissionProblem, match="not a regular file"):
        Database.open_writer()


def test_an_unwritable_location_is_a_permission_problem(home: Path) -> None:
    # A regular file where the directory should be: creation fails with a clear message.
    (home / ".pi").write_text("not a directory")
    with pytest.raises(PermissionProblem, match="cannot create"):
        Database.open_writer()


# -- verify and backup -----------------------------------------------------------------------------


def test_verify_reports_integrity_and_foreign_key_status(db: Database) -> None:
    report = maintenance.verify()
    assert report.ok and report.integrity == "ok" and report.foreign_keys == "ok"
    conn = raw(default_path())
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("INSERT INTO leases VALUES ('ghost', 0, NULL, NULL, NULL, NULL, NULL, NULL)")
    conn.close()
    report = maintenance.verify()
    assert not report.ok
    assert report.foreign_keys == "leases rowid 1 -> resources"


def test_verify_detects_a_corrupted_page(home: Path) -> None:
    with Database.open_writer() as db:
        db.write(lambda c: [c.execute("INSERT INTO projects VALUES (?, ?, 1)", (f"p{i}", f"/{i}"))
                            for i in range(2000)])
    path = default_path()
    probe = raw(path)
    root = probe.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'projects'").get
    probe.close()
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    end = root * page_size
    data[end - 600: end] = b"\xff" * 600  # scramble the cells of the table's root page
    path.write_bytes(bytes(data))
    report = maintenance.verify()
    assert not report.ok
    assert report.integrity != "ok"


def test_backup_copies_into_a_new_private_verified_file_that_restores(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Database.open_writer() as db:
        db.write(lambda c: c.execute("INSERT INTO projects VALUES ('p', '/project', 5)"))
        dest = tmp_path / "backup.sqlite"
        report = maintenance.backup(dest)  # while a writer is open on the live file
    assert report.ok
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert not Path(f"{dest}-wal").exists()
    # Restore: place the copy into a fresh HOME and open it as the live database.
    new_home = tmp_path / "restored"
    new_home.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(new_home))
    default_path().parent.mkdir(parents=True, mode=0o700)
    default_path().write_bytes(dest.read_bytes())
    default_path().chmod(0o600)
    with Database.open_writer() as restored:
        assert restored.conn.execute("SELECT canonical_path FROM projects").get == "/project"
    assert maintenance.verify().ok


def test_backup_refuses_an_existing_destination(db: Database, tmp_path: Path) -> None:
    dest = tmp_path / "exists.sqlite"
    dest.write_text("keep me")
    with pytest.raises(PermissionProblem, match="already exists"):
        maintenance.backup(dest)
    assert dest.read_text() == "keep me"


def test_a_reader_meeting_a_database_still_being_created_finds_no_state_yet(home: Path) -> None:
    # A writer creates the file (0600), then its schema: a reader in between (`decisions` run
    # at the moment the first `ask` or hook creates the state) saw "incompatible".
    path = default_path()
    path.parent.mkdir(parents=True, mode=0o700)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    with pytest.raises(DatabaseMissing, match="is being created"):
        Database.open_reader()
    assert file_bytes(path) == b""
    Database.open_writer().close()  # and the writer still creates it
    Database.open_reader().close()
