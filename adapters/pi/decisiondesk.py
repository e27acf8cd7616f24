"""The decisions a Pi session's bridge shows: each open decision routed to `pi` delivered into
the session, the answers of Pi's own dialogs, `ask` and the turn that carries its answer back,
and a `settle` for every decision shown here once it is resolved anywhere.

    bridge -> extension: deliver, settle, result, asked, turn
    extension -> bridge: delivered, answer, ask, turned

The bridge (`adapters.pi.bridge`) routes the lines and holds the session channel's lease
(passed in as `SessionOwner`); every database step is a short transaction, and no line is
written while one is open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adapters.pi import asking
from adapters.pi.framing import LineWriter, ProtocolError, identifier_field, text_field
from channels.config.model import ChannelsConfig
from channels.decisions import turn_intents, views, workflows
from channels.pi.answers import AnswerEvent
from channels.pi.owner import SessionOwner
from state.database import Database
from state.errors import StaleLease, WriteRejected

__all__ = ["ConfigOf", "DecisionDesk"]


_INTERACTIVE = "interactive"

# (usable, config, problem): a broken private config is usable for nothing but settlements.
ConfigOf = Callable[[], tuple[bool, ChannelsConfig | None, str | None]]


@dataclass
class DecisionDesk:
    """The decisions of one session's bridge: what this process delivered and offered."""

    db: Database
    out: LineWriter
    owner_id: str
    sent: set[str] = field(default_factory=set)  # decisions this process delivered
    offered: set[str] = field(default_factory=set)  # turn intents this process sent
    deadlines: dict[str, int] = field(default_factory=dict)  # shown decisions' deadlines

    def _now(self) -> int:
        return self.db.clock.now_ms()

    # -- the extension's lines -----------------------------------------------------------------

    def delivered(self, message: dict[str, Any], owner: SessionOwner) -> None:
        """The receipt of a delivery: the Pi entry that shows the decision."""
        message_id = identifier_field(message, "message_id")
        entry_id = identifier_field(message, "entry_id")
        try:
            owner.confirm_delivery(self.db, message_id, entry_id)
        except StaleLease:
            raise
        except WriteRejected as exc:  # not a delivery of this session
            raise ProtocolError("unknown_message", str(exc)) from None

    def answer(self, message: dict[str, Any], owner: SessionOwner, hello: dict[str, str],
               config_of: ConfigOf) -> None:
        """An answer from the session: submitted, and its result sent back."""
        entered = message.get("input")
        if entered is not None and not isinstance(entered, str | dict):
            raise ProtocolError("malformed", "answer.input must be null, text or an object")
        source = text_field(message, "source")
        event_id = identifier_field(message, "event_id")
        session_id = owner.session_id
        event = AnswerEvent(
            decision_id=identifier_field(message, "decision_id"),
            request_digest=text_field(message, "request_digest"),
            choice=text_field(message, "choice"),
            entered=entered,
            actor_id=session_id,
            event_key=f"{session_id}:{event_id}",
            # Only a person answering Pi's own dialogs is a human candidate; the resolution
            # function records any other source and rejects it.
            origin="human" if source == _INTERACTIVE else f"pi:{source}",
            details={"source": source, **hello},
        )
        usable, config, problem = config_of()
        if not usable:
            raise ProtocolError("config_invalid", f"cannot route answers: {problem}")
        report = owner.submit(self.db, event, config)
        self.out.send({"type": "result", "event_id": event_id, **report.to_json(),
                       "duplicate": report.duplicate})

    def ask(self, message: dict[str, Any], session_id: str, config_of: ConfigOf) -> None:
        """Open a decision in a waiting run bound to the session; say where it went."""
        event_id = identifier_field(message, "event_id")
        spec = asking.ask_spec(message, session_id)
        usable, config, problem = config_of()
        if not usable:
            raise ProtocolError("config_invalid", f"cannot route decisions: {problem}")
        handle = workflows.create_ask(self.db, spec, self.owner_id)
        # Like `ask` without --wait: the run waits with no live owner, so the deadline and the
        # continuation are applied by whoever runs the expiry step next.
        handle.release(self.db)
        fingerprint = self.db.read(lambda c: views.fingerprint_of(c, handle.decision_id))
        self.out.send({"type": "asked", "event_id": event_id, "decision_id": handle.decision_id,
                       "fingerprint": fingerprint,
                       "delivered_to": asking.delivered_to(config, spec.audience)})

    def turned(self, message: dict[str, Any], owner: SessionOwner) -> None:
        """The receipt of a turn: the Pi entry that received the answer."""
        turn_intent_id = identifier_field(message, "turn_intent_id")
        entry_id = identifier_field(message, "entry_id")
        try:
            owner.confirm_turn(self.db, turn_intent_id, entry_id)
        except KeyError:
            raise ProtocolError("unknown_turn",
                                f"{turn_intent_id} is not a turn of this Pi session") from None

    # -- what goes to the extension ------------------------------------------------------------

    def deliver(self, owner: SessionOwner, config: ChannelsConfig | None) -> None:
        """Deliver the open decisions routed to `pi` that this process has not sent."""
        for item in owner.deliver(self.db, config, frozenset(self.sent)):
            self.sent.add(item.decision.decision_id)
            if item.decision.deadline_at is not None:
                self.deadlines[item.decision.decision_id] = item.decision.deadline_at
            self.out.send({"type": "deliver", **item.to_json()})

    def settle(self, owner: SessionOwner) -> None:
        """Send `settle` for each decision shown here that is resolved now."""
        owner.settle(self.db, lambda item: self.out.send({"type": "settle", **item.to_json()}))

    def offer_turns(self, owner: SessionOwner) -> None:
        """Offer each answer that waits for the session as a turn."""
        # Offered until the extension reports the entry: it looks in the session first, so
        # offering again (a new bridge, a lost line) never adds a second turn.
        session_id = owner.session_id
        for item in self.db.read(lambda c: turn_intents.due_turns(c, session_id, self._now())):
            if item.turn_intent_id not in self.offered:
                self.offered.add(item.turn_intent_id)
                self.out.send({"type": "turn", "turn_intent_id": item.turn_intent_id,
                               "decision_id": item.decision_id, "content": item.content,
                               "by_person": item.by_person})

    def apply_deadlines(self) -> list[tuple[str, Exception]] | None:
        """A decision shown here must not look answerable past its deadline until cron runs:
        apply due deadlines (and finish ask runs) as `poll` does. None when none of the shown
        decisions is due; else the decisions whose deadline failed (each fails alone)."""
        now = self._now()
        if not any(at <= now for at in self.deadlines.values()):
            return None
        self.deadlines = {d: at for d, at in self.deadlines.items() if at > now}
        return list(workflows.expire_overdue(self.db, self.owner_id).failed)
