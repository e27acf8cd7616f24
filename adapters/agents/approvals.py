"""One gated tool call of an agent other than Pi, approved or refused by a person.

    judge_call  guard + policy -> a Judgement (and the policy it was judged by)
    open_call   judge; a Verdict at once (allowed, blocked, granted for the session, nobody
                to ask), or a decision opened for the call (Opened)
    allowed_just_now  a person allowed this exact call moments ago (the agent's own approval
                prompt that follows its PreToolUse hook is not asked twice)
    Opened.wait   hold the run's lease until the decision resolves (or its deadline passes,
                which denies), then the Verdict; None when `until_ms` came first
    Opened.cancel the agent gave up waiting: cancel the decision (an answer that won stands)

Other agents (Claude Code, Codex, MCP clients) have no sandbox: we do not run their bash, so
the judgement is the guard and the policy alone (Pi's bridge adds the sandbox,
adapters.pi.gatedesk). The decision is the gate's own (`piw-channels.gate` runs, named by the
session and the subject, whose subject is the call's exact input with its agent and host), so
`poll` carries its card and a person's answer reaches the waiting call, exactly as for Pi.
Every database step is its own short transaction; nothing waits inside one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from channels.config import loading
from channels.config.errors import ConfigError
from channels.config.gate import GatePolicy
from channels.config.model import PI_CHANNEL, audience_routes
from channels.decisions import records, runs, workflows
from channels.errors import ChannelsError
from channels.gate import judging
from channels.gate.policy import Judgement
from channels.pi import gate_decisions
from channels.pi.gating import GatedCall
from state import leases
from state.database import Database
from state.errors import LeaseHeld, StateError

__all__ = ["Opened", "Verdict", "allowed_just_now", "judge_call", "nobody_to_ask",
           "open_call"]


# How long a person's "Allow once" of a call also answers the agent's own approval prompt for
# the same call (Codex asks its PermissionRequest hook right after its PreToolUse hook).
_JUST_NOW_MS: Final = 120_000
_POLL_SECONDS = 0.1  # how often a waiting call looks for an answer (no lock, no write)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the agent is told about its call."""

    allow: bool
    message: str  # what gate_decisions.told says, or the judge's reason
    choice: str | None  # the person's choice id; None when nobody chose (policy, timeout)
    decision_id: str | None  # None when no decision was opened (the policy decided)
    rule: str | None


@dataclass(frozen=True, slots=True)
class Opened:
    """A decision opened for a call, its answer not yet in."""

    decision_id: str
    handle: workflows.AskHandle
    timeout_minutes: float
    rule: str | None = None  # the policy's rule that asked

    def wait(self, db: Database, *, until_ms: int | None = None) -> Verdict | None:
        """Hold the run's lease until the decision resolves, applying its deadline (the default
        is deny) as soon as it passes; then finish the run and say who decided. None when
        `until_ms` (the database clock's ms) passes first: the lease is let go (the deadline
        still applies, `poll` settles it), and a later `wait` holds it again."""
        decision_id = self.decision_id
        deadline = self.handle.request.expires_at_ms
        hold = _hold(db, self)
        seen = -1
        decided: records.Resolution | None = None
        try:
            while True:
                if hold is None:
                    hold = _hold(db, self)  # someone held it briefly (poll's expiry pass)
                version = int(db.conn.execute("PRAGMA data_version").get)
                if version != seen:  # another writer committed: look (else no read at all)
                    seen = version
                    decided = db.read(lambda c: records.resolution_of(c, decision_id))
                now = db.clock.now_ms()
                if decided is None and hold is not None and deadline is not None \
                        and now >= deadline:
                    hold.apply_deadline()
                    decided = db.read(lambda c: records.resolution_of(c, decision_id))
                if decided is not None:
                    break
                if until_ms is not None and now >= until_ms:
                    return None
                if hold is not None:
                    hold.renew()
                time.sleep(_POLL_SECONDS)
            if hold is not None:
                hold.finish()
        finally:
            if hold is not None:  # also on Ctrl-C: a waiter that stops must not block others
                with contextlib.suppress(StateError):
                    hold.release()
        return _verdict(db, self)

    def cancel(self, db: Database, reason: str, owner_id: str) -> Verdict:
        """The agent stopped waiting (Claude Code gave up on its hook): cancel the decision, so
        its card settles; an answer that won first stands, and is what comes back."""
        with contextlib.suppress(StateError, ChannelsError):  # decided first, or the disk failed
            workflows.cancel_decision(db, self.decision_id, reason, owner_id)
        return _verdict(db, self)


def judge_call(call: GatedCall, *, config_dir: Path, home: Path
               ) -> tuple[Judgement, GatePolicy | None]:
    """The guard, then the policy (no sandbox: see above); a broken policy file fails closed
    inside `judge` and comes back as None, and then nothing is asked: what it would ask about
    is blocked."""
    judged = judging.judge_call(call.tool, call.input, Path(call.cwd), config_dir=config_dir,
                                home=home)
    return judged.found, judged.policy


def open_call(db: Database, call: GatedCall, *, session_id: str, owner_id: str,
              config_dir: Path, judged: GatedCall | None = None,
              always_ask: bool = False) -> Verdict | Opened:
    """Judge `call` and open its decision when a person must answer. `judged` is the call as
    the policy and the card read it (an agent's own tool names and fields put in the policy's
    terms), `call` what the subject binds: the exact input the agent will run. `always_ask`:
    the agent itself asks for a person's approval (its own prompt), so what the policy would
    let through is asked too; the guard still blocks first."""
    shown = judged or call
    found, policy = judge_call(shown, config_dir=config_dir, home=Path.home())
    if always_ask and found.action == "allow" and policy is not None:
        found = dataclasses.replace(found, action="ask")
    if found.action == "allow":
        return Verdict(True, "Allowed by the gate policy: " + found.reason, None, None,
                       found.rule)
    if found.action != "ask" or policy is None:
        return Verdict(False, found.reason, None, None, found.rule)
    granted = gate_decisions.session_grant(db, session_id, call)
    if granted is not None:
        return Verdict(True, "Allowed: this exact input was allowed for this session"
                       f" (decision {granted.fingerprint})", granted.choice, granted.decision_id,
                       found.rule)
    nobody = nobody_to_ask(config_dir, policy.audience)
    if nobody is not None:
        return Verdict(False, f"Denied: nobody can be asked ({nobody})", None, None, found.rule)
    return _open(db, call, shown, found.rule, policy, session_id, owner_id)


def allowed_just_now(db: Database, call: GatedCall, session_id: str) -> Verdict | None:
    """An allow when a person allowed exactly `call` (once or for the session) in this
    session within the last _JUST_NOW_MS; None otherwise."""
    found = gate_decisions.recent_allow(db, session_id, call, db.clock.now_ms() - _JUST_NOW_MS)
    if found is None:
        return None
    return Verdict(True, f"Allowed on Telegram moments ago (decision {found.fingerprint})",
                   found.choice, found.decision_id, None)


def nobody_to_ask(config_dir: Path, audience: str) -> str | None:
    """Why no person can be asked (a broken channel config, no Telegram route), or None. An
    agent other than Pi has no dialog of ours: only a chat can answer."""
    try:
        config = loading.load_config(config_dir)
    except ConfigError as exc:
        return " ".join(str(exc).split())
    if all(route == PI_CHANNEL for route in audience_routes(config, audience)):
        return f"audience {audience!r} routes to no Telegram chat"
    return None


def _open(db: Database, call: GatedCall, shown: GatedCall, rule: str | None,
          policy: GatePolicy, session_id: str, owner_id: str) -> Verdict | Opened:
    minutes = float(policy.timeout_minutes)
    handle = gate_decisions.open_decision(
        db, call, shown=shown, rule=rule, audience=policy.audience, timeout_minutes=minutes,
        session_id=session_id, session_label=session_id, owner_id=owner_id, agent_is_pi=False)
    if isinstance(handle, gate_decisions.Refusal):
        return Verdict(False, handle.message, None, None, rule)
    return Opened(handle.decision_id, handle, minutes, rule)


def _hold(db: Database, opened: Opened) -> workflows.RunHold | None:
    """The hold on the run, with the lease `open_call` took while it is still ours, else
    claimed again; None while another live owner holds it (poll's expiry pass, a moment)."""
    lease = opened.handle.run.lease
    resource = runs.run_resource(opened.handle.run.run_id)
    state = db.read(lambda c: leases.read(c, resource))
    now = db.clock.now_ms()
    if state is not None and state.expires_at is not None and state.is_live(now) \
            and state.owner_id == lease.owner_id and state.generation == lease.generation:
        return workflows.RunHold(db, opened.decision_id,
                                 dataclasses.replace(lease, expires_at=state.expires_at))
    try:
        claimed = db.write(lambda c: leases.claim(c, resource, leases.OwnerType.HOST,
                                                  lease.owner_id, db.clock.now_ms(), db.entropy))
    except LeaseHeld:
        return None
    return workflows.RunHold(db, opened.decision_id, claimed)


def _verdict(db: Database, opened: Opened) -> Verdict:
    decision_id = opened.decision_id
    told = gate_decisions.told(db, decision_id, opened.timeout_minutes)
    if told is None:  # a cancel that could not be written: still never an allow
        return Verdict(False, "Denied: the wait for an answer stopped", None, decision_id,
                       opened.rule)
    return Verdict(told.allow, told.message, told.choice if told.by_person else None,
                   decision_id, opened.rule)
