"""State-layer benchmark: command cost vs a raw durable commit, and open-time scaling.

Prints, in one run on this machine:
  (a) raw durable commits per second (one-row INSERT, `Database`'s pragmas, WAL already
      wrapped), timed in chunks alternating with (b) so both see the same load and WAL phase;
  (b) typical commands per second (expected-revision check, revision bump, event, blob,
      domain row, effect reservation) through `Database.write`, and the ratio (target <= 2x);
  (c) open + schema identity check on an empty database and on one holding 1,000,000 event
      rows (target < 10 ms, and within 20% of each other).

Run: python bench/state_bench.py [--commits N] [--events N]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import RawCommits
from state import blobs, effects, resources
from state.database import Database
from state.effects import OwnerScope
from state.resources import Actor, ActorType, ResourceType

HOST = Actor(ActorType.HOST, "bench")


def typical_commands(db: Database, n: int, raw: RawCommits | None = None, chunk: int = 100,
                     tag: str = "bench") -> float:
    """Commands per second; with `raw`, a chunk of raw commits is timed between chunks."""
    run = f"run:{tag}"
    db.write(lambda c: resources.create(c, run, ResourceType.RUN, HOST, 0))
    revision = 1

    def command(c: apsw.Connection, i: int, expected: int) -> int:
        now = db.clock.now_ms()
        new = resources.bump(c, run, expected, "run.progressed", HOST, now,
                             payload={"step": i})
        blob = blobs.put_text(c, f"output of step {i}", now)
        c.execute("INSERT INTO projects (project_id, canonical_path, created_at) VALUES (?, ?, ?)",
                  (f"p{tag}{i}", f"/{tag}/{i}", now))
        effects.reserve(c, source_resource_id=run, source_revision=new,
                        effect_type="run.continue", idempotency_key=f"k{i}",
                        payload={"blob": blob.hex()}, owner_scope=OwnerScope.RUN, actor=HOST,
                        now=now)
        return new

    elapsed = 0.0
    for first in range(0, n, chunk):
        if raw is not None:
            raw.chunk(chunk)
        start = time.perf_counter()
        for i in range(first, min(n, first + chunk)):
            revision = db.write(functools.partial(command, i=i, expected=revision))
        elapsed += time.perf_counter() - start
    return n / elapsed


def sql_floor(path: Path, n: int) -> float:
    """The same rows as the typical command, written by bare SQL with no checks and no Python
    logic: what the database alone costs for them (a floor, not a target)."""
    os.environ["HOME"] = str(path)
    db = Database.open_writer()
    conn = db.conn
    conn.execute("INSERT INTO resources VALUES ('run:floor', 'run', 0, 0, 0)")
    start = time.perf_counter()
    for i in range(n):
        digests = [hashlib.sha256(f"{k}{i}".encode()).digest() for k in "pox"]
        effect = digests[2].hex()[:40]
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE resources SET revision = revision + 1 WHERE resource_id = 'run:floor'")
        for k, digest in zip("pox", digests, strict=True):
            body = f"{k}{i}".encode()
            conn.execute("INSERT INTO blobs VALUES (?, 'application/json', ?, ?, 0)",
                         (digest, len(body), body))
        conn.execute(
            "INSERT INTO events (event_id, resource_id, resource_revision, event_type,"
            " actor_type, payload_hash, recorded_at) VALUES (?, 'run:floor', ?, 'run.step',"
            " 'host', ?, 0)", (f"evt-{i:012x}-run@{i + 1}", i + 1, digests[0]))
        conn.execute("INSERT INTO projects VALUES (?, ?, 0)", (f"f{i}", f"/floor/{i}"))
        conn.execute("INSERT INTO resources VALUES (?, 'effect', 1, 0, 0)", (f"effect:{effect}",))
        conn.execute(
            "INSERT INTO events (event_id, resource_id, resource_revision, event_type,"
            " actor_type, recorded_at) VALUES (?, ?, 1, 'effect.reserved', 'host', 0)",
            (f"evt-{i:012x}-effect@1", f"effect:{effect}"))
        conn.execute(
            "INSERT INTO effects (effect_id, resource_id, source_resource_id, source_revision,"
            " effect_type, idempotency_key, payload_hash, owner_scope, status, attempt_count,"
            " created_at, updated_at) VALUES (?, ?, 'run:floor', ?, 'run.continue', ?, ?, 'run',"
            " 'pending', 0, 0, 0)", (effect, f"effect:{effect}", i + 1, f"k{i}", digests[2]))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    return n / elapsed


def open_time_ms(home: Path, repeats: int = 15) -> float:
    os.environ["HOME"] = str(home)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        Database.open_writer().close()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def fill_events(home: Path, n: int) -> None:
    os.environ["HOME"] = str(home)
    Database.open_writer().close()
    conn = apsw.Connection(str(home / ".pi/agent/workflows/state.sqlite"))
    per = 1000
    conn.execute("BEGIN")
    for r in range(n // per):
        rid = f"run:r{r}"
        conn.execute("INSERT INTO resources VALUES (?, 'run', 0, 0, 0)", (rid,))
        conn.executemany(
            "INSERT INTO events (event_id, resource_id, resource_revision, event_type,"
            " actor_type, recorded_at) VALUES (?, ?, ?, 'run.progressed', 'system', 0)",
            ((f"{rid}@{k}", rid, k) for k in range(1, per + 1)),
        )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        baseline = RawCommits(base / "raw.sqlite")
        home = base / "cmd"
        home.mkdir(mode=0o700)
        os.environ["HOME"] = str(home)
        with Database.open_writer() as db:
            typical_commands(db, args.commits // 2, tag="warm")  # wrap the WAL before timing
            cmd = typical_commands(db, args.commits, baseline)
        raw = 1000 / baseline.ms
        baseline.close()
        floor_home = base / "floor"
        floor_home.mkdir(mode=0o700)
        floor = sql_floor(floor_home, args.commits)
        print(f"raw durable commits/s:     {raw:10.0f}")
        print(f"typical commands/s:        {cmd:10.0f}")
        print(f"command cost / raw commit: {raw / cmd:10.2f}x  (target <= 2.00x)")
        print(f"  the same rows by bare SQL (no checks, no Python logic): {raw / floor:.2f}x"
              " a raw commit: the floor this database and disk set")

        empty, large = base / "empty", base / "large"
        empty.mkdir(mode=0o700)
        large.mkdir(mode=0o700)
        fill_events(large, args.events)
        t_empty = open_time_ms(empty)
        t_large = open_time_ms(large)
        print(f"open + identity, empty:    {t_empty:10.2f} ms")
        print(f"open + identity, {args.events:,} events: {t_large:6.2f} ms  "
              f"(ratio {t_large / t_empty:.2f}; targets < 10 ms, within 20%)")


if __name__ == "__main__":
    main()
