"""The human form of `status`: plain words, times as "how long ago" and UTC clock times, and
the exact command for everything that needs a person. Storage details (lease generations,
cursors, effect counts) stay in `--json`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.cli.alerts import describe, duration
from channels.telegram.alerts import Alert

__all__ = ["ago", "attention_lines", "clock_time", "render_status", "with_iso"]


_STALE_PASS_MS = 180_000  # cron runs every minute: three minutes without a pass is a problem


def clock_time(ms: int) -> str:
    """`2026-12-01 08:52:10 UTC`."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(ms: int) -> str:
    """ISO-8601 in UTC with milliseconds, as the `--json` outputs print beside epoch ms."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def ago(ms: int, now: int) -> str:
    return f"{duration(now - ms)} ago ({clock_time(ms)})"


def render_status(report: dict[str, Any], config_dir: str,
                  attention: list[dict[str, Any]] | None = None) -> str:
    """The whole report as lines a person reads; `attention` is what needs a person (see
    `channels.reports.health.conditions`; the report's own list when not given)."""
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
    lines += _notification_lines(report.get("notifications") or [])
    return "\n".join(lines + attention_lines(
        report.get("needs_attention") or [] if attention is None else attention, now,
        config_dir))


def _notification_lines(notes: list[dict[str, Any]]) -> list[str]:
    """The notifications of the last day: run, index, type, and where each one got to."""
    if not notes:
        return []
    lines = [f"Notifications of the last day: {len(notes)}"]
    for n in notes[:20]:
        where = ", ".join(f"{d['target']} {d['status']}" for d in n["deliveries"]) or "nowhere"
        lines.append(f"  {clock_time(int(n['created_at']))}  {n['run_id']} #{n['index']}"
                     f" {n['type']}: {where}")
    if len(notes) > 20:
        lines.append(f"  ... and {len(notes) - 20} more (piw-channels status --json)")
    return lines


def attention_lines(attention: list[dict[str, Any]], now: int, config_dir: str) -> list[str]:
    """"Needs attention:" and one line per condition, with the command that fixes it."""
    if not attention:
        return ["Nothing needs attention."]
    return ["Needs attention:", *(f"  {_condition(item, now, config_dir)}" for item in attention)]


def _condition(item: dict[str, Any], now: int, config_dir: str) -> str:
    kind = item["kind"]
    if kind == "config":  # every poll fails on it, so it comes first
        return f"Configuration: {item['message']}"
    if item.get("message"):
        return str(item["message"])
    who = f"telegram:{item.get('profile')}"
    if kind == "stale":
        return (f"{who}: no poll pass for {duration(now - int(item['since']))} (the last"
                f" ended {clock_time(int(item['since']))}); is the cron job running? Check"
                " `crontab -l` and cron's mail, or run: piw-channels poll --once -v --profile"
                f" {item.get('profile')}")
    if kind == "ambiguous_effect":
        what = "its outcome post" if item["effect_type"].endswith("settle") else \
            "the prompt for a typed answer"
        return (f"{who}: Decision {item['fingerprint']}: {what} may not have arrived (a send's"
                " outcome is unknown; it is never sent twice): check the chat")
    alert = Alert(item["key"], kind, item["since"], item["since"], item["facts"])
    return describe(alert, str(item["profile"]), now, config_dir)


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
        if not polling and now - int(last["at"]) > _STALE_PASS_MS:
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
            out[f"{key}_iso"] = _iso(item)
    return out
