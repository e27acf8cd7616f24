"""Pi channels: one for the local operator view (profile `local`) and one per Pi session.

Channel ids are `pi-` + 40 hex of SHA-256(session id or `local`).
"""

from __future__ import annotations

import re
import time

import apsw

from channels import store
from channels.config.model import PI_CHANNEL, ChannelsConfig, audience_routes
from channels.store import AdapterType, hex40
from state.database import Database
from state.errors import LeaseHeld
from state.leases import Lease

__all__ = [
    "LOCAL_PROFILE", "PI_SESSION_ID", "claim_channel", "local_channel_id", "pi_channel_id",
    "register_session", "routes_to_pi", "session_channel_id",
]


def pi_channel_id(session_id: str | None) -> str:
    """`pi-` + 40 hex of SHA-256(session id, or `local` for the operator view)."""
    return "pi-" + hex40(session_id or "local")


LOCAL_PROFILE = "local"
# Pi names sessions with UUIDs (v7 since 0.70); anything else in a hello is not a Pi session.
PI_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def local_channel_id() -> str:
    """The operator view's channel: `pi-` + hash of `local`."""
    return pi_channel_id(None)


def session_channel_id(session_id: str) -> str:
    """A Pi session's channel: `pi-` + hash of the session id."""
    return pi_channel_id(session_id)


def routes_to_pi(config: ChannelsConfig | None, audience: str) -> bool:
    """True when the audience's routes include the Pi channel (no config: always)."""
    return PI_CHANNEL in audience_routes(config, audience)


def claim_channel(
    db: Database, channel_id: str, profile_key: str, owner_id: str, *, wait_seconds: float
) -> Lease:
    """Register the Pi channel if needed and claim its lease, waiting up to `wait_seconds`
    for a live owner to finish (then LeaseHeld, exit 75)."""
    if db.read(lambda c: store.channel_row(c, channel_id)) is None:
        db.write(lambda c: store.ensure_channel(c, channel_id, AdapterType.PI, profile_key,
                                                db.clock.now_ms()))
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return db.write(lambda c: store.claim(c, channel_id, owner_id, db.clock.now_ms(),
                                                  db.entropy))
        except LeaseHeld:
            if time.monotonic() >= deadline:
                raise LeaseHeld("another process is answering through this Pi channel;"
                                " try again shortly") from None
            time.sleep(0.1)


def register_session(conn: apsw.Connection, session_id: str, now: int) -> str:
    """Register a Pi session's channel (idempotent); returns its channel id."""
    channel_id = session_channel_id(session_id)
    store.ensure_channel(conn, channel_id, AdapterType.PI, session_id, now)
    return channel_id
