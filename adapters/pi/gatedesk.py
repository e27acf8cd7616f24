"""The bridge's side of the tool-call gate: judge a call, ask a person, hold the run until the
first answer, and tell the extension who decided and how.

    extension -> bridge                         bridge -> extension
    gate {event_id, tool, input, cwd,           gated {event_id, action: allow|block|ask,
          session_name?, ui, session_gate?}            reason, rule, decision?, ask_here,
                                                       sandbox? (allow and ask)}
    gate_cancel {event_id, decision_id}         gate_result {decision_id, allow, choice,
                                                             message}

An `ask` opens a decision in a run bound to the session (`piw-channels.gate`: its answer goes
to the waiting call, not to a deferred turn) and keeps the run's lease for as long as the call
waits: this bridge applies the deadline (the default is `deny`) as soon as it passes, and
cancels the decision when the person presses Escape, both as the run owner the resolution
function requires. When the bridge stops, every call still waiting is cancelled.

Every call that may run carries its Confinement (`sandbox`): the bubblewrap arguments its bash
runs under, or why there are none, and the fence the extension applies when read, write, edit
and grep run (channels.gate.confinement).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.pi.framing import LineWriter, ProtocolError, identifier_field, text_field
from channels.config import loading
from channels.config.gate import GatePolicy
from channels.config.model import PI_CHANNEL, ChannelsConfig, audience_routes
from channels.decisions import records, views, workflows
from channels.decisions.errors import DecisionRefused
from channels.errors import ChannelsError
from channels.gate import confinement, judging
from channels.gate.confinement import Confinement, Probe
from channels.pi import gate_decisions
from channels.pi.answers import load_open
from channels.pi.gating import GatedCall
from state.database import Database
from state.errors import StateError

__all__ = ["ESCAPE", "GateDesk"]


ESCAPE = "cancelled in Pi (Escape)"
_CLOSED = "Pi closed before an answer came"
_TOLD = {ESCAPE: "you pressed Escape", _CLOSED: _CLOSED}


@dataclass
class _Waiting:
    """A gated call waiting for its decision, with the hold on its run."""

    event_id: str
    decision_id: str
    hold: workflows.RunHold
    deadline_at: int
    timeout_minutes: float


@dataclass
class GateDesk:
    """The gate's state in one bridge; every database step is its own short transaction."""

    db: Database
    out: LineWriter
    owner_id: str
    config_dir: Callable[[], Path] = loading.resolve_config_dir
    waiting: dict[str, _Waiting] | None = None
    probed: Probe | None = None  # bubblewrap, tried once per bridge

    def __post_init__(self) -> None:
        self.waiting = {}

    def _probe(self) -> Probe:
        if self.probed is None:
            self.probed = confinement.probe()
        return self.probed

    # -- a call to judge -----------------------------------------------------------------------

    def gate(self, message: dict[str, Any], session_id: str, config: ChannelsConfig | None,
             *, problem: str | None = None, here: bool = True) -> None:
        """Judge one call; `problem` is why the channel config cannot be used (then nobody can
        be asked), `here` whether this bridge can take answers from Pi's dialog."""
        event_id = identifier_field(message, "event_id")
        tool = text_field(message, "tool")
        cwd = text_field(message, "cwd")
        tool_input = message.get("input")
        if not isinstance(tool_input, dict):
            raise ProtocolError("malformed", "gate.input must be an object")
        session_gate = message.get("session_gate")
        if session_gate not in (None, "on", "off"):
            raise ProtocolError("malformed", "gate.session_gate must be on, off or null")
        call = GatedCall(tool, tool_input, cwd)
        # The guard, the policy (this session's `/gate on|off` overrides its `enabled`),
        # then the sandbox (channels.gate.judging).
        judged = judging.judge_call(
            call.tool, call.input, Path(call.cwd), config_dir=self.config_dir(),
            home=Path.home(), session_gate=session_gate, sandbox=self._probe())
        found, policy, sandbox = judged.found, judged.policy, judged.confinement
        assert sandbox is not None  # given a probe, every call is confined
        if found.action == "allow":
            # The model is told nothing extra; the extension learns where the call runs.
            self._reply(event_id, "allow", None, None, sandbox)
            return
        if found.action != "ask" or policy is None:
            self._reply(event_id, "block", found.reason, found.rule)
            return
        if problem is not None:
            self._reply(event_id, "block", f"Denied: nobody can be asked ({problem})",
                        found.rule)
            return
        self._ask(event_id, call, found.rule, policy, sandbox, session_id, message, config,
                  here)

    def _ask(self, event_id: str, call: GatedCall, rule: str | None, policy: GatePolicy,
             sandbox: Confinement, session_id: str, message: dict[str, Any],
             config: ChannelsConfig | None, here: bool) -> None:
        granted = gate_decisions.session_grant(self.db, session_id, call)
        if granted is not None:
            self._reply(event_id, "allow", "Allowed: this exact input was allowed for this"
                        f" session (decision {granted.fingerprint})", rule, sandbox)
            return
        routes = audience_routes(config, policy.audience)
        ask_here = here and bool(message.get("ui")) and PI_CHANNEL in routes
        if not ask_here and all(route == PI_CHANNEL for route in routes):
            self._reply(event_id, "block", f"Denied: nobody can be asked (audience"
                        f" {policy.audience!r} routes to no Telegram chat, and this Pi has no"
                        " dialog it can use)", rule)
            return
        name = message.get("session_name")
        minutes = float(policy.timeout_minutes)
        handle = gate_decisions.open_decision(
            self.db, call, shown=call, rule=rule, audience=policy.audience,
            timeout_minutes=minutes, session_id=session_id,
            session_label=name if isinstance(name, str) and name.strip() else session_id,
            owner_id=self.owner_id, agent_is_pi=True)
        if isinstance(handle, gate_decisions.Refusal):
            self._reply(event_id, "block", handle.message, rule)
            return
        assert self.waiting is not None and handle.request.expires_at_ms is not None
        self.waiting[handle.decision_id] = _Waiting(
            event_id, handle.decision_id,
            workflows.RunHold(self.db, handle.decision_id, handle.run.lease),
            handle.request.expires_at_ms, minutes)
        shown = self.db.read(lambda c: load_open(c, handle.decision_id))
        fingerprint = self.db.read(lambda c: views.fingerprint_of(c, handle.decision_id))
        self.out.send({"type": "gated", "event_id": event_id, "action": "ask", "reason": None,
                       "rule": rule, "ask_here": ask_here, "fingerprint": fingerprint,
                       "delivered_to": [r for r in routes if r != PI_CHANNEL],
                       "decision": shown.to_json(), "sandbox": sandbox.to_json()})

    def _reply(self, event_id: str, action: str, reason: str | None, rule: str | None,
               sandbox: Confinement | None = None) -> None:
        reply: dict[str, Any] = {"type": "gated", "event_id": event_id, "action": action,
                                 "reason": reason, "rule": rule}
        if sandbox is not None:
            reply["sandbox"] = sandbox.to_json()
        self.out.send(reply)

    def state(self, message: dict[str, Any], session_id: str) -> None:
        """For `/gate`: the policy's state and the inputs allowed for this session."""
        event_id = identifier_field(message, "event_id")
        found = judging.gate_state(self.config_dir(), self._probe())
        policy, problem = found.policy, found.problem
        allowed = gate_decisions.session_grants(self.db, session_id)
        self.out.send({"type": "gate_state", "event_id": event_id, "enabled": policy.enabled,
                       "problem": None if problem is None else str(problem),
                       "audience": policy.audience, "timeout_minutes": policy.timeout_minutes,
                       "file": str(found.path), "allowed": allowed, "sandbox": found.sandbox})

    # -- waiting -------------------------------------------------------------------------------

    def cancel(self, message: dict[str, Any]) -> None:
        """Escape: cancel the decision as its run owner (an answer that won first stands)."""
        decision_id = identifier_field(message, "decision_id")
        assert self.waiting is not None
        waiting = self.waiting.get(decision_id)
        if waiting is None:
            return  # already decided (its result is on its way) or not ours
        self._cancel(waiting, ESCAPE)
        self.tick()

    def _cancel(self, waiting: _Waiting, reason: str) -> None:
        with contextlib.suppress(DecisionRefused):  # an answer won first
            waiting.hold.cancel(self.owner_id, reason)

    def tick(self) -> None:
        """Renew the runs' leases, apply due deadlines, and report every decided call."""
        assert self.waiting is not None
        for waiting in list(self.waiting.values()):
            try:
                self._step(waiting)
            except (StateError, ChannelsError) as exc:
                self.out.send({"type": "error", "code": exc.code, "message": str(exc)})

    def _step(self, waiting: _Waiting) -> None:
        now = self.db.clock.now_ms()
        decided = self.db.read(lambda c: records.resolution_of(c, waiting.decision_id))
        if decided is None and now >= waiting.deadline_at:
            waiting.hold.apply_deadline()
            decided = self.db.read(lambda c: records.resolution_of(c, waiting.decision_id))
        if decided is None:
            if waiting.hold.lease.needs_renewal(now):
                waiting.hold.renew()
            return
        waiting.hold.finish()
        with contextlib.suppress(StateError):
            waiting.hold.release()
        assert self.waiting is not None
        del self.waiting[waiting.decision_id]
        told = gate_decisions.told(self.db, waiting.decision_id, waiting.timeout_minutes, _TOLD)
        assert told is not None  # resolved above: a resolution is never removed
        self.out.send({"type": "gate_result", "event_id": waiting.event_id,
                       "decision_id": waiting.decision_id, "allow": told.allow,
                       "choice": told.choice, "message": told.message})

    def close(self) -> None:
        """Pi is going away: no call waits any more; cancel what is still open."""
        assert self.waiting is not None
        for waiting in list(self.waiting.values()):
            with contextlib.suppress(StateError, ChannelsError):
                self._cancel(waiting, _CLOSED)
        with contextlib.suppress(StateError, ChannelsError):
            self.tick()
        for waiting in list(self.waiting.values()):  # could not finish: do not block others
            with contextlib.suppress(StateError):
                waiting.hold.release()
