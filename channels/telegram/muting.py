"""`/mute 1h` in a chat: the notifications' progress cards stay out of that chat for that long
(final results still come). Kept in the channel's own state, one cursor row: chat -> until
(epoch ms), pruned of what has ended whenever it is written.
"""

from __future__ import annotations

import json
import re

import apsw

from channels import store
from channels.decisions.deadline import clock_time
from state.leases import Lease

__all__ = ["MUTE_USAGE", "muted_chats", "parse_mute", "set_mute"]


_MUTE_CURSOR = "progress_muted"
_DEFAULT_MUTE_MS = 3_600_000
_MAX_MUTE_MS = 7 * 86_400_000
_DURATION = re.compile(r"(\d{1,4})\s*(m|min|h|d)?")
_SCALE = {"m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_mute(args: str) -> int | None:
    """How long `/mute ARGS` mutes, in ms (0: `off`, unmute); None when it cannot be read.
    A bare number is hours; nothing at all is an hour."""
    said = args.strip().casefold()
    if not said:
        return _DEFAULT_MUTE_MS
    if said in ("off", "0"):
        return 0
    found = _DURATION.fullmatch(said)
    if found is None:
        return None
    ms = int(found.group(1)) * _SCALE[found.group(2) or "h"]
    return ms if 0 < ms <= _MAX_MUTE_MS else None


def _mutes(conn: apsw.Connection, channel_id: str) -> dict[str, int]:
    raw = store.cursor(conn, channel_id, _MUTE_CURSOR)
    try:
        listed = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return {str(k): int(v) for k, v in listed.items() if isinstance(v, int)} \
        if isinstance(listed, dict) else {}


def muted_chats(conn: apsw.Connection, channel_id: str, now: int) -> frozenset[str]:
    """The chats whose progress cards are muted right now."""
    return frozenset(chat for chat, until in _mutes(conn, channel_id).items() if until > now)


def set_mute(conn: apsw.Connection, lease: Lease, channel_id: str, chat: str, ms: int,
             now: int) -> str:
    """Mute (or, with 0, unmute) one chat's progress cards; the reply the chat gets."""
    kept = {c: until for c, until in _mutes(conn, channel_id).items() if until > now and c != chat}
    if ms > 0:
        kept[chat] = now + ms
    store.set_cursor(conn, lease, channel_id, _MUTE_CURSOR,
                     json.dumps(kept, sort_keys=True, separators=(",", ":")), now)
    if ms == 0:
        return "Progress cards are on again in this chat."
    return (f"Progress cards muted in this chat until {clock_time(now + ms, now)}; results still"
            " come. /mute off turns them on again.")


MUTE_USAGE = "Use /mute 1h (or 30m, 2h, 1d), or /mute off."
