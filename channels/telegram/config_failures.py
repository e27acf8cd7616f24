"""A configuration that cannot be read, remembered for its `Recovered:` line.

A broken configuration stops every `poll` before any channel pass (it is printed on every
pass), so no pass state can hold it. `poll` notes it instead as an event of each Telegram
channel the database knows (once, while it lasts); the first pass that reads the configuration
again, and so reaches the channel, finds that event after its last pass and says the
configuration is readable again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import apsw

from channels import store
from state import blobs, resources
from state.resources import Actor

__all__ = ["note", "unreported"]


_FAILED: Final = "channel.config_failed"
_RELEASED: Final = "channel.lease_released"  # a finished pass (channels.telegram.alerts)


def note(conn: apsw.Connection, description: str, exit_code: int, actor: Actor,
         now: int) -> None:
    """Record the failure on every Telegram channel that has not recorded it since its last
    pass (a failure that lasts writes nothing more)."""
    for channel_id, adapter, _ in store.all_channels(conn):
        if adapter != "telegram" or unreported(conn, channel_id) is not None:
            continue
        resources.bump_current(conn, store.channel_resource(channel_id), _FAILED, actor, now,
                               payload={"description": description, "exitCode": exit_code})


def unreported(conn: apsw.Connection, channel_id: str) -> tuple[int, Mapping[str, Any]] | None:
    """(when, facts) of a configuration failure noted after the channel's last pass."""
    row = conn.execute(
        "SELECT event_type, payload_hash, recorded_at FROM events WHERE resource_id = ? AND"
        " event_type IN (?, ?) ORDER BY resource_revision DESC LIMIT 1",
        (store.channel_resource(channel_id), _FAILED, _RELEASED)).fetchone()
    if row is None or row[0] != _FAILED:
        return None
    facts = {} if row[1] is None else blobs.get_json(conn, bytes(row[1]))
    return int(row[2]), dict(facts)
