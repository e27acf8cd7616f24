"""The Pi session bridge: a child of one Pi session's extension, speaking JSON lines.

Framing is strict JSON lines: one compact JSON object per line, LF only (a trailing CR is
stripped), written ASCII-only so U+2028/U+2029 never reach a reader that splits on them.

    extension -> bridge: hello {secret, session_id, session_file, pi_version, mode},
        delivered, answer, ask, turned, gate, gate_cancel, gate_state, notified, post,
        notify_state, bye
    bridge -> extension: error; deliver, settle, result, asked, turn
        (adapters.pi.decisiondesk); gated, gate_result, gate_state (adapters.pi.gatedesk);
        notify, posted, notify_state (adapters.pi.notifying)
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

from adapters.pi.binding import Binding
from adapters.pi.decisiondesk import DecisionDesk
from adapters.pi.framing import (
    LineWriter,
    ProtocolError,
    identifier_field,
    parse_line,
    text_field,
)
from adapters.pi.gatedesk import GateDesk
from adapters.pi.notifying import NoteDesk
from adapters.pi.session_file import check_session
from channels.config import loading
from channels.config.errors import ConfigError
from channels.config.model import ChannelsConfig
from channels.decisions import workflows
from channels.errors import ChannelsError
from channels.pi.owner import PiSession, SessionOwner
from state.database import Database
from state.errors import StaleLease, StateError
from state.leases import Lease

__all__ = ["Bridge", "ConfigLoader"]


_RESYNC_SECONDS = 5.0

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
    session: PiSession | None = None  # set by `hello`
    session_id: str | None = None
    channel_id: str | None = None
    hello: dict[str, str] = field(default_factory=dict)
    registered: bool = False  # the session's channel row exists (it is made when needed)
    lease: Lease | None = None
    waiting_announced: bool = False
    config_problem: str | None = None
    seen_version: int = -1
    last_sync: float = 0.0
    desk: GateDesk | None = None  # the tool-call gate's waiting calls
    decisions: DecisionDesk = field(init=False)  # the decisions shown in the session
    notes: NoteDesk = field(init=False)  # the notifications shown in the session, its posts
    # Set by `bye`: the extension said why it stops. None: stdin closed without a word.
    leaving_for: str | None = None

    def __post_init__(self) -> None:
        self.desk = GateDesk(self.db, self.out, self.owner_id)
        self.decisions = DecisionDesk(self.db, self.out, self.owner_id)
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
                        "gate_state", "notified", "post", "notify_state"):
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
        if kind == "notify_state":  # a reading of the config: no channel needed
            self.notes.state(message, self._config_of)
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
            self.notes.handle(message, self._owner(), self._config_of)
        elif kind == "delivered":
            self.decisions.delivered(message, self._owner())
        elif kind == "turned":
            self.decisions.turned(message, self._owner())
        else:
            if kind == "ask":
                self.decisions.ask(message, self._owner().session_id, self._config_of)
            else:
                self.decisions.answer(message, self._owner(), self.hello, self._config_of)
            self.sync()  # our own commit does not move data_version: settle right away

    def _hello(self, message: dict[str, Any]) -> None:
        session_id = identifier_field(message, "session_id")
        if self.session_id is not None:
            if session_id != self.session_id:
                raise ProtocolError("session_mismatch",
                                    "this bridge serves another Pi session; start a new bridge")
            return
        session, checked = self._verify(message, session_id)
        hello = {"pi_version": text_field(message, "pi_version"),
                 "mode": text_field(message, "mode"), "session": checked}
        # The channel row (and its resource and lease) is written only once the session needs
        # it: a `pi --no-session` start that never sees a decision leaves nothing behind.
        self.session, self.channel_id = session, session.channel_id
        self.session_id, self.hello = session_id, hello
        self._try_claim()

    def _verify(self, message: dict[str, Any], session_id: str) -> tuple[PiSession, str]:
        """Only the extension that spawned this bridge may speak for a Pi session, and only
        for a session Pi has: nothing is registered (no channel, no deliveries, no answers)
        for anyone else. Returns the session and how it was checked."""
        if self.binding.secret is None:
            raise ProtocolError("unverified", "this bridge was not started by the Pi extension"
                                f" ({self.binding.problem}); nothing is accepted")
        if not self.binding.accepts(message.get("secret")):
            raise ProtocolError("unverified", "hello.secret does not match the secret on the"
                                " extension's pipe; nothing is accepted")
        session = PiSession.of(session_id)
        if session is None:
            raise ProtocolError("unverified", "hello.session_id is not a Pi session id")
        if "session_file" not in message:
            raise ProtocolError("unverified", "hello.session_file is missing (the session's"
                                " file, or null for a session Pi keeps in memory)")
        checked = check_session(session_id, message["session_file"])
        if checked.problem is not None:
            raise ProtocolError("unverified", f"{checked.problem}; nothing is accepted")
        return session, checked.kind

    # -- lease ---------------------------------------------------------------------------------


    def _desk(self) -> GateDesk:
        assert self.desk is not None
        return self.desk

    def _owner(self) -> SessionOwner:
        assert self.lease is not None and self.channel_id and self.session_id
        return SessionOwner(self.lease, self.channel_id, self.session_id)

    def _try_claim(self, *, needed: bool = False) -> None:
        session = self.session
        assert session is not None
        if not self.registered:
            if not needed and not self._needs_channel():
                return
            session.register(self.db)
            self.registered = True
        owner = session.claim(self.db, self.owner_id, self._may_take_over)
        self.lease = None if owner is None else owner.lease
        if owner is None:
            if not self.waiting_announced:
                self.waiting_announced = True
                self.error("lease_held", "another bridge serves this Pi session; waiting for it")
            return
        self.waiting_announced = False
        self.notes.recover(owner)
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
        session = self.session
        assert session is not None
        self.seen_version, self.last_sync = self._data_version(), time.monotonic()
        usable, config = self._config()
        self.registered = session.registered(self.db)
        return self.registered or session.has_work(self.db, config if usable else None,
                                                   deliver=usable)

    def _renew(self) -> None:
        lease = self.lease
        if lease is None or not lease.needs_renewal(self._now()):
            return
        self.lease = self.db.write(lambda c: lease.renew(c, self._now()))

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
            self.db.write(lambda c: lease.release(c, self._now()))
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
        """Apply the due deadlines of decisions shown here, then settle right away."""
        failed = self.decisions.apply_deadlines()
        if failed is None:
            return
        for decision_id, exc in failed:  # each fails alone; the others are settled
            self.error("deadline_failed", f"{decision_id}: its deadline cannot be applied:"
                       f" {type(exc).__name__}: {exc}"[:300])
        self.sync()

    def _changed(self) -> bool:
        return (self._data_version() != self.seen_version
                or time.monotonic() - self.last_sync >= _RESYNC_SECONDS)

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
        owner = self._owner()
        if usable:
            self.decisions.deliver(owner, config)
        self.decisions.settle(owner)
        self.decisions.offer_turns(owner)
        self.notes.offer(owner)

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

    def _config_of(self) -> tuple[bool, ChannelsConfig | None, str | None]:
        usable, config = self._config()
        return usable, config, self.config_problem

    # -- helpers -------------------------------------------------------------------------------

    def error(self, code: str, message: str, event_id: str | None = None) -> None:
        """Send `error {code, message}` (with the answer's `event_id` when it has one)."""
        line: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if event_id is not None:
            line["event_id"] = event_id
        self.out.send(line)

    def _now(self) -> int:
        return self.db.clock.now_ms()
