"""The Pi session bridge: a child of one Pi session's extension, speaking JSON lines.

Framing is strict JSON lines: one compact JSON object per line, LF only (a trailing CR is
stripped), written ASCII-only so U+2028/U+2029 never reach a reader that splits on them.

    extension -> bridge: hello {secret, session_id, session_file, pi_version, mode},
        delivered, answer, ask, turned, gate, gate_cancel, gate_state, notified, post, bye
    bridge -> extension: deliver, settle, result, asked, turn, error; gated, gate_result,
        gate_state (adapters.pi.gatedesk); notify, posted (adapters.pi.notifying)
    (every field: the protocol table of adapters/pi/README.md)

After `hello` the bridge claims the lease of the session's channel (`pi-` + hash of the
session id), registering the channel first once the session needs one (a decision to show,
an `ask`, a waiting turn; until then it writes nothing); while another live bridge holds
it, this one says so once (`error lease_held`) and waits. As owner it delivers open
decisions routed to `pi` (the session's own runs first), records each delivery with the Pi
entry id the extension reports, accepts answers only with `source: "interactive"` (others
are recorded and rejected), dedupes them by `<session_id>:<event_id>`, and sends `settle`
for every decision it showed once it is resolved anywhere. `ask` opens a decision in a
waiting run bound to the session (`run_bindings`); once it is resolved, the session gets a
`turn` (a `turn_intents` row) until the extension reports the Pi entry that received it
(`turned`); a notification for the session is shown until its entry is reported (`notified`).
Malformed lines get an `error` reply and are never fatal. It notices other writers through
`PRAGMA data_version`. The process around it (stdin, ticks, signals) is `adapters.pi.serving`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adapters.pi import asking
from adapters.pi.binding import Binding
from adapters.pi.framing import (
    LineWriter,
    ProtocolError,
    identifier_field,
    parse_line,
    text_field,
)
from adapters.pi.gatedesk import GateDesk
from adapters.pi.lines import deliver_message, settle_message
from adapters.pi.notifying import NoteDesk
from adapters.pi.session_file import check_session
from channels import store
from channels.config import loading
from channels.config.errors import ConfigError
from channels.config.model import ChannelsConfig
from channels.decisions import views, workflows
from channels.errors import ChannelsError
from channels.pi import answers, deliveries, sessions, settlement, turns
from channels.pi.answers import AnswerEvent
from channels.pi.settlement import Settlement
from state import leases
from state.database import Database
from state.errors import LeaseHeld, StaleLease, StateError, WriteRejected
from state.leases import Lease, OwnerType

RESYNC_SECONDS = 5.0
INTERACTIVE = "interactive"

ConfigLoader = Callable[[], ChannelsConfig | None]


# -- the bridge --------------------------------------------------------------------------------


@dataclass
class Bridge:
    """One Pi session's side of the protocol; every database step is a short transaction."""

    db: Database
    out: LineWriter
    owner_id: str
    load_config: ConfigLoader = loading.load_config
    binding: Binding = field(default_factory=lambda: Binding(None, "no secret descriptor"))
    session_id: str | None = None
    channel_id: str | None = None
    hello: dict[str, str] = field(default_factory=dict)
    registered: bool = False  # the session's channel row exists (it is made when needed)
    lease: Lease | None = None
    sent: set[str] = field(default_factory=set)  # decisions this process delivered
    offered: set[str] = field(default_factory=set)  # turn intents this process sent
    deadlines: dict[str, int] = field(default_factory=dict)  # shown decisions' deadlines
    waiting_announced: bool = False
    config_problem: str | None = None
    seen_version: int = -1
    last_sync: float = 0.0
    desk: GateDesk | None = None  # the tool-call gate's waiting calls
    notes: NoteDesk = field(init=False)  # the notifications shown in the session, its posts
    # Set by `bye`: the extension said why it stops. None: stdin closed without a word.
    leaving_for: str | None = None

    def __post_init__(self) -> None:
        self.desk = GateDesk(self.db, self.out, self.owner_id)
        self.notes = NoteDesk(self.db, self.out, self.owner_id)

    # -- inbound lines -------------------------------------------------------------------------

    def handle_line(self, raw: bytes) -> None:
        """Act on one line; every failure becomes an `error` reply."""
        if not raw.strip():
            return  # a blank line carries nothing to act on
        event_id: str | None = None
        try:
            message = parse_line(raw)
            # An answer's error names its event, so the extension stops waiting for a result.
            event_id = message.get("event_id") if isinstance(message.get("event_id"), str) \
                else None
            self._dispatch(message)
        except ProtocolError as exc:
            self.error(exc.code, exc.message, event_id)
        except StaleLease:
            self._lost()
            self.error("not_ready", "this bridge lost the session's lease", event_id)
        except (StateError, ChannelsError) as exc:
            self.error(exc.code, str(exc), event_id)
        except Exception as exc:  # a bug must not take the session's channel down with it
            print(f"piw-channels pi bridge: {exc!r}", file=sys.stderr)
            self.error("internal", f"the bridge could not handle this line: {exc}", event_id)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "hello":
            self._hello(message)
            return
        if kind == "bye":
            reason = message.get("reason")
            self.leaving_for = reason if isinstance(reason, str) and reason else "quit"
            return
        if kind not in ("delivered", "answer", "ask", "turned", "gate", "gate_cancel",
                        "gate_state", "notified", "post"):
            raise ProtocolError("unknown_type", f"unknown message type {kind!r}")
        if self.session_id is None:
            raise ProtocolError("hello_required", "send hello {session_id, pi_version, mode} first")
        if self.lease is None and kind in ("ask", "gate", "post"):
            self._try_claim(needed=True)  # a session that asks needs its channel now
        if kind == "gate_cancel":  # the run's lease is the desk's, not the channel's
            self._desk().cancel(message)
            self.sync()
            return
        if kind == "gate_state":
            self._desk().state(message, self.session_id)
            return
        if kind == "gate":
            # Judged without the session's channel too (a second window of the session): its
            # decision then goes to Telegram only, since this bridge cannot take Pi answers.
            usable, config = self._config()
            self._desk().gate(message, self.session_id, config,
                              problem=None if usable else self.config_problem,
                              here=self.lease is not None)
            self.sync()
            return
        if self.lease is None:
            raise ProtocolError("not_ready", "another bridge still serves this Pi session")
        if kind in ("notified", "post"):
            self.notes.handle(message, self._owner(), lambda: (*self._config(),
                                                                 self.config_problem))
        elif kind == "delivered":
            self._delivered(message)
        elif kind == "ask":
            self._ask(message)
        elif kind == "turned":
            self._turned(message)
        else:
            self._answer(message)

    def _hello(self, message: dict[str, Any]) -> None:
        session_id = identifier_field(message, "session_id")
        if self.session_id is not None:
            if session_id != self.session_id:
                raise ProtocolError("session_mismatch",
                                    "this bridge serves another Pi session; start a new bridge")
            return
        checked = self._verify(message, session_id)
        hello = {"pi_version": text_field(message, "pi_version"),
                 "mode": text_field(message, "mode"), "session": checked}
        # The channel row (and its resource and lease) is written only once the session needs
        # it: a `pi --no-session` start that never sees a decision leaves nothing behind.
        self.channel_id = sessions.session_channel_id(session_id)
        self.session_id, self.hello = session_id, hello
        self._try_claim()

    def _verify(self, message: dict[str, Any], session_id: str) -> str:
        """Only the extension that spawned this bridge may speak for a Pi session, and only
        for a session Pi has: nothing is registered (no channel, no deliveries, no answers)
        for anyone else. Returns how the session was checked."""
        if self.binding.secret is None:
            raise ProtocolError("unverified", "this bridge was not started by the Pi extension"
                                f" ({self.binding.problem}); nothing is accepted")
        if not self.binding.accepts(message.get("secret")):
            raise ProtocolError("unverified", "hello.secret does not match the secret on the"
                                " extension's pipe; nothing is accepted")
        if sessions.PI_SESSION_ID.fullmatch(session_id) is None:
            raise ProtocolError("unverified", "hello.session_id is not a Pi session id")
        if "session_file" not in message:
            raise ProtocolError("unverified", "hello.session_file is missing (the session's"
                                " file, or null for a session Pi keeps in memory)")
        checked = check_session(session_id, message["session_file"])
        if checked.problem is not None:
            raise ProtocolError("unverified", f"{checked.problem}; nothing is accepted")
        return checked.kind

    def _delivered(self, message: dict[str, Any]) -> None:
        message_id = identifier_field(message, "message_id")
        entry_id = identifier_field(message, "entry_id")
        lease, channel_id, session_id = self._owner()
        try:
            self.db.write(lambda c: deliveries.confirm_delivery(
                c, lease, channel_id, session_id, message_id, entry_id, self._now()))
        except StaleLease:
            raise
        except WriteRejected as exc:  # not a delivery of this session
            raise ProtocolError("unknown_message", str(exc)) from None

    def _answer(self, message: dict[str, Any]) -> None:
        entered = message.get("input")
        if entered is not None and not isinstance(entered, str | dict):
            raise ProtocolError("malformed", "answer.input must be null, text or an object")
        source = text_field(message, "source")
        event_id = identifier_field(message, "event_id")
        lease, channel_id, session_id = self._owner()
        event = AnswerEvent(
            decision_id=identifier_field(message, "decision_id"),
            request_digest=text_field(message, "request_digest"),
            choice=text_field(message, "choice"),
            entered=entered,
            actor_id=session_id,
            event_key=f"{session_id}:{event_id}",
            # Only a person answering Pi's own dialogs is a human candidate; the resolution
            # function records any other source and rejects it.
            origin="human" if source == INTERACTIVE else f"pi:{source}",
            details={"source": source, **self.hello},
        )
        usable, config = self._config()
        if not usable:
            raise ProtocolError("config_invalid", f"cannot route answers: {self.config_problem}")
        report = self.db.write(lambda c: answers.submit_answer(
            c, lease, channel_id, event, self._now(), config))
        self.out.send({"type": "result", "event_id": event_id, **report.to_json(),
                       "duplicate": report.duplicate})
        self.sync()  # our own commit does not move data_version: settle right away

    def _ask(self, message: dict[str, Any]) -> None:
        event_id = identifier_field(message, "event_id")
        _, _, session_id = self._owner()
        spec = asking.ask_spec(message, session_id)
        usable, config = self._config()
        if not usable:
            raise ProtocolError("config_invalid", f"cannot route decisions: {self.config_problem}")
        handle = workflows.create_ask(self.db, spec, self.owner_id)
        # Like `ask` without --wait: the run waits with no live owner, so the deadline and the
        # continuation are applied by whoever runs the expiry step next.
        workflows.release_run(self.db, handle.run.lease)
        fingerprint = self.db.read(lambda c: views.fingerprint_of(c, handle.decision_id))
        self.out.send({"type": "asked", "event_id": event_id, "decision_id": handle.decision_id,
                       "fingerprint": fingerprint,
                       "delivered_to": asking.delivered_to(config, spec.audience)})
        self.sync()

    def _turned(self, message: dict[str, Any]) -> None:
        turn_intent_id = identifier_field(message, "turn_intent_id")
        entry_id = identifier_field(message, "entry_id")
        lease, channel_id, session_id = self._owner()
        try:
            self.db.write(lambda c: turns.confirm_turn(
                c, lease, channel_id, session_id, turn_intent_id, entry_id, self._now()))
        except KeyError:
            raise ProtocolError("unknown_turn",
                                f"{turn_intent_id} is not a turn of this Pi session") from None

    # -- lease ---------------------------------------------------------------------------------


    def _desk(self) -> GateDesk:
        assert self.desk is not None
        return self.desk

    def _owner(self) -> tuple[Lease, str, str]:
        assert self.lease is not None and self.channel_id and self.session_id
        return self.lease, self.channel_id, self.session_id

    def _try_claim(self, *, needed: bool = False) -> None:
        assert self.channel_id is not None and self.session_id is not None
        channel_id, session_id = self.channel_id, self.session_id
        if not self.registered:
            if not needed and not self._needs_channel():
                return
            self.db.write(lambda c: sessions.register_session(c, session_id, self._now()))
            self.registered = True
        resource = store.channel_resource(channel_id)
        held = self.db.read(lambda c: leases.read(c, resource))
        try:
            if held is None or not held.is_live(self._now()):
                self.lease = self.db.write(lambda c: store.claim(
                    c, channel_id, self.owner_id, self._now(), self.db.entropy))
            elif held.owner_id and self._may_take_over(held.owner_id):
                dead = held.owner_id
                self.lease = self.db.write(lambda c: leases.take_over(
                    c, resource, dead, OwnerType.CHANNEL, self.owner_id, self._now(),
                    self.db.entropy))
        except LeaseHeld:  # another bridge won the race
            self.lease = None
        if self.lease is None:
            if not self.waiting_announced:
                self.waiting_announced = True
                self.error("lease_held", "another bridge serves this Pi session; waiting for it")
            return
        self.waiting_announced = False
        lease = self.lease
        self.db.write(lambda c: settlement.recover_settlements(c, lease, channel_id, self._now()))
        self.notes.recover(lease, channel_id, session_id)
        self.sync()

    def _may_take_over(self, owner: str) -> bool:
        """A live lease is taken over from a bridge whose process is gone (killed, or the old
        one of a /reload, which kept the lease for its window's next bridge: do not wait out
        its TTL), unless it served another Pi window that still lives: a second window on the
        session waits until the first has gone, and never takes its answers or its turns."""
        window = workflows.owner_window(owner)
        if window is not None and window != workflows.owner_window(self.owner_id) and \
                not workflows.process_gone(window):
            return False
        return workflows.owner_process_gone(owner)

    def _needs_channel(self) -> bool:
        """Does this session need its channel: it has one already (it was opened before), or
        a decision routed to `pi` is open for it, or an answer waits for it?"""
        assert self.session_id is not None and self.channel_id is not None
        channel_id, session_id = self.channel_id, self.session_id
        self.seen_version, self.last_sync = self._data_version(), time.monotonic()
        usable, config = self._config()
        self.registered = self.db.read(lambda c: store.channel_row(c, channel_id)) is not None
        return self.registered or self.db.read(lambda c: deliveries.has_work(
            c, session_id, config if usable else None, self._now(), deliver=usable))

    def _renew(self) -> None:
        lease = self.lease
        if lease is None or lease.expires_at - self._now() > leases.RENEW_WHEN_LEFT_MS:
            return
        self.lease = self.db.write(lambda c: leases.renew(c, lease, self._now()))

    def _lost(self) -> None:
        # Suspended past the TTL and another bridge took over: wait like a newcomer.
        self.lease = None
        self.notes.forget()
        self.error("lease_lost", "this bridge lost the session's lease; waiting for it")

    def close(self) -> None:
        """Cancel the calls still waiting, then release the lease (a missing or stolen one
        is not an error at exit)."""
        self._desk().close()
        if self.lease is not None:
            with contextlib.suppress(StateError, ChannelsError):
                self.sync()  # settle the cancelled calls' decisions in Pi
        lease, self.lease = self.lease, None
        if lease is None or self._window_keeps_the_lease():
            return  # our Pi lives (a /reload): its next bridge takes the lease over, no other
        try:
            self.db.write(lambda c: leases.release(c, lease, self._now()))
        except StateError as exc:
            print(f"piw-channels pi bridge: could not release the lease: {exc}", file=sys.stderr)

    def _window_keeps_the_lease(self) -> bool:
        # Only a /reload keeps the session in this window. Pi says so in `bye`; without one
        # (an older extension, a crash) a parent still alive is taken to be a reload.
        if self.leaving_for is not None:
            return self.leaving_for == "reload"
        window = workflows.owner_window(self.owner_id)
        return window is not None and window == os.getppid()

    # -- periodic work -------------------------------------------------------------------------

    def tick(self) -> None:
        """Claim or renew the lease; sync when the database changed (or now and then)."""
        if self.session_id is None:
            return
        try:
            self._desk().tick()
            if self.lease is None:
                if self.registered or self._changed():  # an idle session reads little
                    self._try_claim()
                return
            self._renew()
            if self.lease is None:
                return
            self.notes.tick()
            self._apply_deadlines()
            if self._changed():
                self.sync()
        except StaleLease:
            self._lost()
        except (StateError, ChannelsError) as exc:
            self.error(exc.code, str(exc))

    def _apply_deadlines(self) -> None:
        """A decision shown here must not look answerable past its deadline until cron runs:
        apply due deadlines (and finish ask runs) as `poll` does, then settle right away."""
        now = self._now()
        if not any(at <= now for at in self.deadlines.values()):
            return
        self.deadlines = {d: at for d, at in self.deadlines.items() if at > now}
        report = workflows.expire_overdue(self.db, self.owner_id)
        for decision_id, exc in report.failed:  # each fails alone; the others are settled
            self.error("deadline_failed", f"{decision_id}: its deadline cannot be applied:"
                       f" {type(exc).__name__}: {exc}"[:300])
        self.sync()

    def _changed(self) -> bool:
        return (self._data_version() != self.seen_version
                or time.monotonic() - self.last_sync >= RESYNC_SECONDS)

    def _data_version(self) -> int:
        # Changes whenever another connection commits; our own commits leave it alone.
        return int(self.db.conn.execute("PRAGMA data_version").get)

    def sync(self) -> None:
        """Deliver what is new, then settle what is due."""
        if self.lease is None:
            return
        self.seen_version = self._data_version()
        self.last_sync = time.monotonic()
        usable, config = self._config()
        self._desk().tick()
        if usable:
            self._deliver(config)
        self._settle()
        self._offer_turns()
        self.notes.offer(*self._owner())

    def _deliver(self, config: ChannelsConfig | None) -> None:
        lease, channel_id, session_id = self._owner()
        skip = frozenset(self.sent)
        found = self.db.read(lambda c: deliveries.undelivered(
            c, channel_id, session_id, config, skip, now=self._now(), include_confirmed=True))
        if not found:
            return
        recorded = self.db.write(lambda c: deliveries.record_deliveries(
            c, lease, channel_id, found, self._now()))
        for item in recorded:
            self.sent.add(item.decision.decision_id)
            if item.decision.deadline_at is not None:
                self.deadlines[item.decision.decision_id] = item.decision.deadline_at
            self.out.send(deliver_message(item))

    def _settle(self) -> None:
        lease, channel_id, _ = self._owner()
        due = self.db.read(lambda c: settlement.due_settlements(c, channel_id, self._now()))
        for item in due:
            self._settle_one(lease, channel_id, item)

    def _offer_turns(self) -> None:
        # Offered until the extension reports the entry: it looks in the session first, so
        # offering again (a new bridge, a lost line) never adds a second turn.
        _, _, session_id = self._owner()
        for item in self.db.read(lambda c: turns.due_turns(c, session_id, self._now())):
            if item.turn_intent_id not in self.offered:
                self.offered.add(item.turn_intent_id)
                self.out.send({"type": "turn", "turn_intent_id": item.turn_intent_id,
                               "decision_id": item.decision_id, "content": item.content,
                               "by_person": item.by_person})

    def _settle_one(self, lease: Lease, channel_id: str, item: Settlement) -> None:
        # Three steps so that no transaction is open while the line is written.
        attempt = self.db.write(lambda c: settlement.begin_settlement(
            c, lease, channel_id, item.effect_id, self._now(), self.db.entropy))
        sent = self.out.send(settle_message(item))
        self.db.write(lambda c: settlement.finish_settlement(c, attempt, sent, self._now()))

    def _config(self) -> tuple[bool, ChannelsConfig | None]:
        """(usable, config): a broken private config is reported once, then nothing is
        delivered or answered until it is fixed (settlements still go out)."""
        try:
            config = self.load_config()
        except ConfigError as exc:
            if self.config_problem != str(exc):
                self.config_problem = str(exc)
                self.error(exc.code, str(exc))
            return False, None
        self.config_problem = None
        return True, config

    # -- helpers -------------------------------------------------------------------------------

    def error(self, code: str, message: str, event_id: str | None = None) -> None:
        """Send `error {code, message}` (with the answer's `event_id` when it has one)."""
        line: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if event_id is not None:
            line["event_id"] = event_id
        self.out.send(line)

    def _now(self) -> int:
        return self.db.clock.now_ms()

