"""Bytes per settled decision: what the simple lifecycle (ask, deliver in one part, press,
settle) leaves in the database, through the real poll cycle against the loopback fake.

Opens --decisions decisions, delivers them, presses each and settles them (real `poll --once`
passes in process), then measures the growth over the same database before (both after a
checkpoint): file bytes (live, and of a `VACUUM INTO` copy: the rows without free space),
events, blobs (and their bytes), index entries, per decision; and
where the bytes go, by table and index (dbstat: pages and payload). Target: <= 10.2 KiB per
settled decision (issue 27: the plan's required records take about 10.1 KiB).

Run: python bench/bytes_bench.py [--decisions N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.telegram.fake import FakeBotApiProcess
from bench import piw
from bench.common import TOKEN, machine_load, unpaced
from state.database import Database

TARGET_BYTES = int(10.2 * 1024)
KINDS = ("table", "index")


def snapshot(db: Database) -> dict[str, Any]:
    """Counts and sizes of the database as it is now (after a checkpoint)."""
    c = db.conn
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = int(c.execute("PRAGMA page_size").get)
    kinds = {str(n): str(t) for n, t in c.execute(
        "SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'index')")}
    by_name: dict[str, dict[str, int]] = {}
    for name, pages, payload, cells in c.execute(
            "SELECT name, count(*), sum(payload), sum(ncell) FROM dbstat"
            " WHERE pagetype = 'leaf' GROUP BY name"):
        by_name[str(name)] = {"bytes": int(pages) * page_size, "payload": int(payload or 0),
                              "entries": int(cells or 0)}
    for name, pages in c.execute("SELECT name, count(*) FROM dbstat GROUP BY name"):
        by_name.setdefault(str(name), {"bytes": 0, "payload": 0, "entries": 0})
        by_name[str(name)]["bytes"] = int(pages) * page_size  # interior pages included
    index_entries = sum(v["entries"] for n, v in by_name.items()
                        if kinds.get(n) == "index" or n.startswith("sqlite_autoindex"))
    with tempfile.TemporaryDirectory() as tmp:
        compact = Path(tmp) / "vacuumed.sqlite"
        c.execute("VACUUM INTO ?", (str(compact),))  # the same content, no free space
        vacuumed = compact.stat().st_size
    return {
        "file": int(c.execute("PRAGMA page_count").get) * page_size,
        "vacuumed": vacuumed,
        "events": int(c.execute("SELECT count(*) FROM events").get),
        "blobs": int(c.execute("SELECT count(*) FROM blobs").get),
        "blob_bytes": int(c.execute("SELECT coalesce(sum(length(content)), 0) FROM blobs").get),
        "index_entries": index_entries,
        "by_name": by_name,
        "kinds": kinds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=500)
    args = parser.parse_args()
    n = args.decisions
    os.environ.pop("PI_WORKFLOWS_CONFIG_DIR", None)
    print(f"start: {machine_load()}")
    print(unpaced())
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        base.chmod(0o700)
        token_file = base / "fake.token"
        token_file.write_text(TOKEN)
        token_file.chmod(0o600)
        with FakeBotApiProcess(token_file) as fake:
            home = piw.make_home(base / "bytes", fake.base_url)
            os.environ["HOME"] = str(home)
            with Database.open_writer() as db:
                piw.poll_in_process(db)  # registers the channel: not a decision's bytes
                before = snapshot(db)
                done = 0
                while done < n:
                    batch = min(100, n - done)
                    handles = piw.open_decisions(db, batch, done)
                    piw.poll_in_process(db)  # delivered, one part each
                    piw.push_presses(fake.control, db, handles)
                    piw.poll_in_process(db)  # pressed, answered, settled, run finished
                    done += batch
                    piw.check_settled(db, done)
                after = snapshot(db)
    per = {k: (after[k] - before[k]) / n
           for k in ("file", "vacuumed", "events", "blobs", "blob_bytes", "index_entries")}
    met = "met" if per["file"] <= TARGET_BYTES else "NOT met"
    print(f"{n} settled decisions (ask, one-part delivery, press, settlement), per decision:")
    print(f"  file bytes:    {per['file']:9.0f} ({per['file'] / 1024:.2f} KiB; target <= 10.2 KiB:"
          f" {met})")
    print(f"  after VACUUM:  {per['vacuumed']:9.0f} ({per['vacuumed'] / 1024:.2f} KiB; the same"
          " rows with no free space in their pages: what the rows need, not what the live file"
          " grows by)")
    print(f"  events:        {per['events']:9.2f}")
    print(f"  blobs:         {per['blobs']:9.2f} ({per['blob_bytes']:.0f} bytes of content)")
    print(f"  index entries: {per['index_entries']:9.2f}")
    print("  where the bytes go (pages, per decision; payload bytes; entries):")
    grown = []
    for name, stats in after["by_name"].items():
        old = before["by_name"].get(name, {"bytes": 0, "payload": 0, "entries": 0})
        grown.append((name, (stats["bytes"] - old["bytes"]) / n,
                      (stats["payload"] - old["payload"]) / n,
                      (stats["entries"] - old["entries"]) / n))
    for name, size, payload, entries in sorted(grown, key=lambda g: -g[1]):
        if size <= 0 and entries <= 0:
            continue
        kind = after["kinds"].get(name, "index" if name.startswith("sqlite_autoindex")
                                  else "table")
        print(f"    {kind:5s} {name:48s} {size:8.0f} B  payload {payload:7.0f} B"
              f"  {entries:6.2f} entries")
    print(f"end: {machine_load()}")


if __name__ == "__main__":
    main()
