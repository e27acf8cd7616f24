"""The human form of `status`: plain words, times as "how long ago" and UTC clock times, and
the exact command for everything that needs a person. Storage details (lease generations,
cursors, effect counts) stay in `--json`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.cli.alerts import describe, duration
from channels.telegram.alerts import Alert

STALE_PASS_MS = 180_000  # cron runs every minute: three minutes without a pass is a problem


def clock_time(ms: int) -> str:
    """`2026-12-01 08:52:10 UTC`."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(ms: int) -> str:
    """ISO-8601 in UTC with milliseconds, as the `--json` outputs print beside epoch ms."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def ago(ms: int, now: int) -> str:
    return f"{duration(now - ms)} ago ({clock_time(ms)})"


def render_status(report: dict[str, Any], config_dir: str, profiles: list[str] | None = None,
                  config_problem: str | None = None) -> str:
    """The whole report as lines a person reads; `profiles` are the configured Telegram
    profiles (one that never ran a pass is named too)."""
    now = int(report["now"])
    d = report["database"]
    count = int(d["open_decisions"])
    lines = [f"Database {d['path']}: {_size(int(d['size_bytes']))}, schema {d['schema']},"
             f" {count} open decision{'' if count == 1 else 's'}."]
    closed = [c for c in report["channels"] if _closed_pi_session(c)]
    for channel in report["channels"]:
        if channel in closed:
            continue
        lines += _telegram(channel, now) if channel["adapter"] == "telegram" else _pi(channel)
    if closed:
        lines.append(f"Closed Pi sessions with nothing waiting: {len(closed)}.")
    polled = {c.get("profile") for c in report["channels"] if c["adapter"] == "telegram"}
    lines += [f"telegram:{p}: never polled; add the cron line (README: Set up Telegram)"
              for p in profiles or [] if p not in polled]
    attention = report.get("needs_attention") or []
    if attention or config_problem:
        lines.append("Needs attention:")
        if config_problem:  # every poll fails on it, so it comes first
            lines.append(f"  Configuration: {config_problem}")
        for item in attention:
            alert = Alert(item["key"], item["kind"], item["since"], item["since"], item["facts"])
            lines.append(f"  {describe(alert, item['profile'], now, config_dir)}")
    else:
        lines.append("Nothing needs attention.")
    return "\n".join(lines)


def _telegram(c: dict[str, Any], now: int) -> list[str]:
    name, last = c["channel"], c.get("last_pass")
    polling = c["lease"]["state"] == "held"
    if last is None:
        head = f"{name}: polling now (first pass)" if polling else f"{name}: never polled"
        lines = [head]
    else:
        ok = last.get("last_ok_at")
        reached = "never" if ok is None else ago(int(ok), now)
        state = "polling now; last pass ended" if polling else "last pass"
        lines = [f"{name}: {state} {ago(int(last['at']), now)}; last successful getUpdates"
                 f" {reached}"]
        if not polling and now - int(last["at"]) > STALE_PASS_MS:
            lines.append(f"  Warning: no poll pass for {duration(now - int(last['at']))}; is"
                         " the cron job running? Check `crontab -l` and cron's mail.")
    error = c.get("last_error")
    if error and c.get("error_current"):
        code = f" HTTP {error['code']}" if error.get("code") is not None else ""
        text = f": {error['description']}" if error.get("description") else ""
        lines.append(f"  Provider error {ago(int(error['at']), now)}: {error['method']}"
                     f"{code}{text}")
    lines.append("  " + _traffic(c))
    return lines


def _pi(c: dict[str, Any]) -> list[str]:
    connected = "a Pi session is connected" if c["lease"]["state"] == "held" else \
        "no Pi session connected"
    return [f"{c['channel']}: {connected}", "  " + _traffic(c)]


def _closed_pi_session(channel: dict[str, Any]) -> bool:
    """A Pi session no bridge serves now, with no backlog or pending delivery: every
    `pi --no-session` start leaves one, so they are counted, not listed."""
    return (str(channel["channel"]).startswith("pi:session:")
            and channel["lease"]["state"] != "held" and channel["inbox"]["backlog"] == 0
            and not channel["deliveries"].get("pending") and not channel.get("last_error"))


def _traffic(c: dict[str, Any]) -> str:
    sent = c["deliveries"]
    text = "Deliveries: " + (", ".join(f"{n} {k}" for k, n in sorted(sent.items())) or "none")
    backlog = int(c["inbox"]["backlog"])
    if backlog:
        text += f"; {backlog} received update{'' if backlog == 1 else 's'} not processed yet"
    return text + "."


def _size(size: int) -> str:
    if size < 10_000:
        return f"{size} bytes"
    if size < 10_000_000:
        return f"{size // 1000} kB"
    return f"{size // 1_000_000} MB"


def with_iso(value: Any) -> Any:
    """A JSON document with an `<name>_iso` ISO-8601 time beside every epoch-ms `<name>_at`
    (and `at`) field, recursively."""
    if isinstance(value, list):
        return [with_iso(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        out[key] = with_iso(item)
        timed = key == "at" or key.endswith("_at") or key in ("since", "now")
        if timed and isinstance(item, int) and not isinstance(item, bool):
            out[f"{key}_iso"] = iso(item)
    return out
