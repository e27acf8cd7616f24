"""What a 429 asked for, kept across passes: the channel's rate-limit holds.

A 429 holds one chat (a call bound to a chat) or the whole bot (a call bound to none) until
`retry_after` has passed. The holds live in the channel's own state, one `channel_cursors`
row (`telegram_holds`) whose value is a small JSON object, so the next pass (a new process)
honours a hold that outlasts this one; a hold that has ended is dropped when the row is next
written. No new table: the plan's cursor table is the adapter's own key-value state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import apsw

from channels import store
from state.leases import Lease

__all__ = ["BOT", "Hold", "describe_key", "load", "long_holds", "save"]


_HOLDS_CURSOR: Final = "telegram_holds"
BOT: Final = "*"  # the key of a hold on the whole bot
_LONG_HOLD_MS: Final = 3_600_000  # a hold this long ends the pass and needs a person to know


@dataclass(frozen=True, slots=True)
class Hold:
    """One hold: on a chat (or the bot), from `since` until `until` (epoch ms)."""

    since: int
    until: int

    @property
    def long(self) -> bool:
        return self.until - self.since > _LONG_HOLD_MS


_Holds = Mapping[str, Hold]


def _parse(text: str | None) -> dict[str, Hold]:
    """The holds a cursor value records; a value that cannot be read holds nothing (it is
    rewritten at the next 429)."""
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    found: dict[str, Hold] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, dict) and isinstance(value.get("until"), int) and \
                    isinstance(value.get("since"), int):
                found[str(key)] = Hold(int(value["since"]), int(value["until"]))
    return found


def _dumps(holds: _Holds, now: int) -> str:
    """The cursor value of the holds still in force at `now` (compact, keys sorted)."""
    live = {k: {"since": h.since, "until": h.until} for k, h in holds.items() if h.until > now}
    return json.dumps(live, separators=(",", ":"), sort_keys=True)


def load(conn: apsw.Connection, channel_id: str) -> dict[str, Hold]:
    """The channel's recorded holds (ended ones included; callers compare with now)."""
    return _parse(store.cursor(conn, channel_id, _HOLDS_CURSOR))


def save(conn: apsw.Connection, lease: Lease, channel_id: str, holds: _Holds, now: int) -> None:
    """Record the holds in force (the channel's lease owner only)."""
    value = _dumps(holds, now)
    if value == store.cursor(conn, channel_id, _HOLDS_CURSOR):
        return  # nothing changed: no write
    store.set_cursor(conn, lease, channel_id, _HOLDS_CURSOR, value, now)


def long_holds(conn: apsw.Connection, channel_id: str, now: int) -> dict[str, Hold]:
    """Holds over an hour that are still in force: each is a condition for a person."""
    return {k: h for k, h in load(conn, channel_id).items() if h.long and h.until > now}


def describe_key(key: str) -> dict[str, Any]:
    """A hold's key as alert facts: the chat it holds, or the whole bot."""
    return {"scope": "bot"} if key == BOT else {"scope": "chat", "chat": key}
