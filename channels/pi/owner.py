"""A Pi session as its bridge meets it: the session and its channel (PiSession), and the
channel's owner (SessionOwner), the bridge that holds its lease, with the writes it makes for
the session through that lease (deliveries and their receipts, answers, turn receipts,
settlements).

Each operation is its own short transaction (or a few), and a line the bridge writes to the
extension goes out between them through the `send` it passes in, never inside one: the
Pi I/O stays in `adapters.pi`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from channels import store
from channels.config.model import ChannelsConfig
from channels.pi import answers, deliveries, sessions, settle_view, turns
from channels.pi.answers import AnswerEvent, AnswerReport
from channels.pi.deliveries import Delivery
from channels.pi.settle_view import Settlement
from state import leases
from state.database import Database
from state.errors import LeaseHeld
from state.leases import Lease, OwnerType

__all__ = ["PiSession", "SessionOwner"]


@dataclass(frozen=True, slots=True)
class PiSession:
    """A Pi session a bridge speaks for, with its channel (registered once it is needed)."""

    session_id: str
    channel_id: str

    @classmethod
    def of(cls, session_id: str) -> PiSession | None:
        """The session of `session_id`; None when that is not a Pi session id."""
        if sessions.PI_SESSION_ID.fullmatch(session_id) is None:
            return None
        return cls(session_id, sessions.session_channel_id(session_id))

    def registered(self, db: Database) -> bool:
        """Does the session's channel row exist (the session was opened before)?"""
        return db.read(lambda c: store.channel_row(c, self.channel_id)) is not None

    def has_work(self, db: Database, config: ChannelsConfig | None, *, deliver: bool) -> bool:
        """Anything to show or to receive (`deliveries.has_work`): then it needs its channel."""
        return db.read(lambda c: deliveries.has_work(
            c, self.session_id, config, db.clock.now_ms(), deliver=deliver))

    def register(self, db: Database) -> None:
        """Write the session's channel row (idempotent)."""
        db.write(lambda c: sessions.register_session(c, self.session_id, db.clock.now_ms()))

    def claim(self, db: Database, owner_id: str,
              may_take_over: Callable[[str], bool]) -> SessionOwner | None:
        """Claim the channel's lease, or take it over from a live owner `may_take_over`
        accepts; then reopen the settlements a dead bridge left applying. None while another
        owner keeps it."""
        channel_id = self.channel_id
        resource = store.channel_resource(channel_id)
        held = db.read(lambda c: leases.read(c, resource))
        try:
            if held is None or not held.is_live(db.clock.now_ms()):
                lease = db.write(lambda c: store.claim(
                    c, channel_id, owner_id, db.clock.now_ms(), db.entropy))
            elif held.owner_id and may_take_over(held.owner_id):
                dead = held.owner_id
                lease = db.write(lambda c: leases.claim(
                    c, resource, OwnerType.CHANNEL, owner_id, db.clock.now_ms(), db.entropy,
                    dead_owner_id=dead))
            else:
                return None
        except LeaseHeld:  # another bridge won the race
            return None
        db.write(lambda c: settle_view.recover_settlements(c, lease, channel_id,
                                                           db.clock.now_ms()))
        return SessionOwner(lease, channel_id, self.session_id)


@dataclass(frozen=True, slots=True)
class SessionOwner:
    """The lease of one Pi session's channel, with the channel and the session it is for."""

    lease: Lease
    channel_id: str
    session_id: str

    def deliver(self, db: Database, config: ChannelsConfig | None,
                skip: frozenset[str]) -> list[Delivery]:
        """The open decisions routed to `pi` to send now (not in `skip`, the ones this bridge
        sent), each with its message row written first (the intent)."""
        found = db.read(lambda c: deliveries.undelivered(
            c, self.channel_id, self.session_id, config, skip, now=db.clock.now_ms(),
            include_confirmed=True))
        if not found:
            return []
        return db.write(lambda c: deliveries.record_deliveries(
            c, self.lease, self.channel_id, found, db.clock.now_ms()))

    def confirm_delivery(self, db: Database, message_id: str, entry_id: str) -> int:
        """The delivery's receipt, the Pi entry id (`deliveries.confirm_delivery`)."""
        return db.write(lambda c: deliveries.confirm_delivery(
            c, self.lease, self.channel_id, self.session_id, message_id, entry_id,
            db.clock.now_ms()))

    def confirm_turn(self, db: Database, turn_intent_id: str, entry_id: str) -> bool:
        """The turn's receipt, the Pi entry id (`turns.confirm_turn`)."""
        return db.write(lambda c: turns.confirm_turn(
            c, self.lease, self.channel_id, self.session_id, turn_intent_id, entry_id,
            db.clock.now_ms()))

    def submit(self, db: Database, event: AnswerEvent,
               config: ChannelsConfig | None) -> AnswerReport:
        """An answer from the session, in one transaction (`answers.submit_answer`)."""
        return db.write(lambda c: answers.submit_answer(
            c, self.lease, self.channel_id, event, db.clock.now_ms(), config))

    def settle(self, db: Database, send: Callable[[Settlement], bool]) -> None:
        """Send each due settlement of the channel: its attempt begun, the line sent, then
        finished (pending again when `send` says the line provably did not go out)."""
        due = db.read(lambda c: settle_view.due_settlements(c, self.channel_id,
                                                            db.clock.now_ms()))
        for item in due:
            self._settle_one(db, item, send)

    def _settle_one(self, db: Database, item: Settlement,
                    send: Callable[[Settlement], bool]) -> None:
        # Three steps so that no transaction is open while the line is written.
        attempt = db.write(lambda c: settle_view.begin_settlement(
            c, self.lease, self.channel_id, item.effect_id, db.clock.now_ms(), db.entropy))
        sent = send(item)
        db.write(lambda c: settle_view.finish_settlement(c, attempt, sent, db.clock.now_ms()))
