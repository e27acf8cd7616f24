"""`status` as a health check: every condition that needs a person, each with the exit code
`poll` (or the command concerned) would give it, so that `status` exits with the highest of
them and 0 only when nothing needs attention.

The conditions: the configuration cannot be read; a profile's poller is dead or stale (no
finished pass for more than 3 minutes, or none yet); whatever the last pass of a channel
reported, and what the open decisions need (ambiguous or failed deliveries, refused or
migrated chats); effects left ambiguous (an outcome post or a prompt whose answer was lost);
and the database's own state (corrupt, or on a full disk), which the command line adds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from channels.telegram.alerts import Alert
from state.exit_codes import ExitCode

__all__ = ["conditions", "exit_code"]


_STALE_PASS_MS: Final = 180_000  # cron runs every minute: three minutes without a pass is one


def conditions(report: Mapping[str, Any], profiles: Sequence[str],
               config_problem: tuple[str, int] | None) -> list[dict[str, Any]]:
    """The `needs_attention` items of a status report, each with its `exit_code`; the
    config's first (every poll fails on it)."""
    now = int(report["now"])
    items: list[dict[str, Any]] = []
    if config_problem is not None:
        items.append({"kind": "config", "exit_code": config_problem[1],
                      "message": config_problem[0]})
    items += _stale_pollers(report, profiles, now)
    expiries: set[str] = set()  # a decision's failed deadline, as every profile recorded it
    for item in report.get("needs_attention") or []:
        alert = Alert(item["key"], item["kind"], item["since"], item["since"], item["facts"])
        if alert.kind == "expiry":
            if alert.key in expiries:
                continue
            expiries.add(alert.key)
        items.append({**item, "exit_code": alert.exit_code})
    items += _ambiguous_effects(report)
    return items


def exit_code(items: Sequence[Mapping[str, Any]]) -> int:
    """The highest exit code of the conditions (0: nothing needs attention)."""
    return max((int(i["exit_code"]) for i in items), default=ExitCode.OK)


def _stale_pollers(report: Mapping[str, Any], profiles: Sequence[str],
                   now: int) -> list[dict[str, Any]]:
    passes = {c.get("profile"): c.get("last_pass") for c in report["channels"]
              if c["adapter"] == "telegram"}
    found = []
    for profile in profiles:
        last = passes.get(profile)
        if last is None:
            found.append({"kind": "stale", "profile": profile, "exit_code": ExitCode.TEMPORARY,
                          "since": None, "message": f"telegram:{profile}: never polled; add"
                          " the cron line (README: Set up Telegram), or run: piw-channels"
                          f" poll --once -v --profile {profile}"})
        elif now - int(last["at"]) > _STALE_PASS_MS:
            found.append({"kind": "stale", "profile": profile, "exit_code": ExitCode.TEMPORARY,
                          "since": int(last["at"]), "message": None})
    return found


def _ambiguous_effects(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Ambiguous effects other than deliveries (those are listed by their decision): an
    outcome post or a prompt that may or may not have arrived, for a day after it happened
    (there is nothing to resend: it is never posted twice; check the chat)."""
    return [{"kind": "ambiguous_effect", "exit_code": ExitCode.TEMPORARY, "message": None, **e}
            for e in report.get("ambiguous_effects") or []]
