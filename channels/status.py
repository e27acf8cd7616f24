"""The `status` report: database health and per-channel transport state, no private ids."""

from __future__ import annotations

from typing import Any

from state import maintenance
from state.database import Database


def status_report(db: Database) -> dict[str, Any]:
    """Build the report from one read snapshot."""
    with db.snapshot():
        diag = maintenance.diagnostics(db, full_checks=False)
    return {"database": diag.to_json()}


def render_status(report: dict[str, Any]) -> str:
    """Human-readable form of `status_report`."""
    d = report["database"]
    lines = [
        f"database: {d['path']} ({d['size_bytes']} bytes), schema {d['schema']}",
        f"open decisions: {d['open_decisions']}",
        "active leases: " + _counts(d["active_leases"]),
        "unsettled effects: " + _counts(d["unsettled_effects"]),
    ]
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
