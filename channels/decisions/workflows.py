"""Decision workflows over a Database: `ask` runs, the expiry step, cancellation, waiting.

Each step is its own short write transaction; nothing here holds a transaction while it waits.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import apsw

from channels.decisions import follow_ups, records, runs, views
from channels.decisions.dates import iso_from_ms
from channels.decisions.errors import UnknownDecision
from channels.decisions.records import Resolution
from channels.decisions.request import DecisionRequest, OnTimeout, build_request
from state import leases
from state.database import Database, savepoint
from state.errors import LeaseHeld, StateError, WriteRejected
from state.leases import Lease, OwnerType

if TYPE_CHECKING:  # imported by the steps that resolve: an idle poll pass resolves nothing
    from channels.decisions.resolution import Verdict

__all__ = [
    "ASK_WORKFLOW", "GATE_WORKFLOW", "AskHandle", "AskSpec", "RunHold", "apply_continuation",
    "apply_deadline", "cancel_decision", "create_ask", "expire_overdue", "new_owner_id",
    "owner_process_gone", "owner_window", "presentation_for", "process_gone", "release_run",
    "renew_run", "resolve_id", "wait_for_resolution",
]


ASK_WORKFLOW = "piw-channels.ask"
GATE_WORKFLOW = runs.GATE_WORKFLOW  # a gated Pi tool call waiting on a person
_ASK_NODE = "decision"
# Runs this tool creates and finishes itself (the continuation is local).
_LOCAL_WORKFLOWS = (ASK_WORKFLOW, GATE_WORKFLOW)


def new_owner_id(db: Database, role: str, window: int | None = None) -> str:
    """A private, unique owner id for this process; `window`: the pid of the Pi process this
    one serves (a Pi bridge), kept in the id so other Pi windows wait while it lives."""
    tag = f"w{window}." if window else ""  # a dot: the id never looks like a bot token
    return f"{role}:{socket.gethostname()}:{os.getpid()}:{tag}{db.entropy.token_bytes(6).hex()}"


def owner_window(owner_id: str) -> int | None:
    """The Pi process an owner id (as `new_owner_id` makes it) serves, if it names one."""
    parts = owner_id.split(":")
    if len(parts) != 4 or parts[1] != socket.gethostname() or not parts[3].startswith("w"):
        return None
    pid = parts[3][1:].split(".", 1)[0]
    return int(pid) if pid.isdigit() else None


def process_gone(pid: int) -> bool:
    """True when no process `pid` exists on this host (unsure means False)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists (perhaps as another user's process)
    return False


def owner_process_gone(owner_id: str) -> bool:
    """True when `owner_id` (as `new_owner_id` makes it) names a process of this host that no
    longer exists: its lease may be taken over before it expires. Unsure means False."""
    parts = owner_id.split(":")
    if len(parts) != 4 or parts[1] != socket.gethostname() or not parts[2].isdigit():
        return False
    return process_gone(int(parts[2]))


# What holds a run, by the role in its owner id (`new_owner_id`), and how it lets go.
_HOLDERS = {
    "ask": ("`piw-channels ask --wait`, waiting for the answer",
            "stop it (Ctrl-C in its terminal, or: kill {pid}); the decision stays open"),
    "pi-bridge": ("the Pi session that asked (its piw-channels bridge)",
                  "answer or dismiss it in Pi, or end that Pi session (kill {pid})"),
    "pi-local": ("a `piw-channels pi answer` in progress", "let it finish"),
    "hook": ("the Claude Code or Codex hook waiting for the answer (`piw-channels hook`)",
             "answer it, or stop that hook (kill {pid}): its decision is then cancelled"),
    "mcp": ("an MCP client's request_approval, waiting for the answer (`piw-channels mcp`)",
            "answer it, or stop that MCP server (kill {pid}): its decision is then cancelled"),
}


def _held_run(decision_id: str, owner_id: str | None) -> str:
    """Why `cancel` cannot take a decision's run: who holds it and how to free it."""
    role, host, pid = [*(owner_id or "").split(":"), "", "", ""][:3]
    what, how = _HOLDERS.get(role, (f"a live {role or 'owner'} process",
                                    "let it finish, or stop it (kill {pid})"))
    where = f" (process {pid} on {host})" if pid.isdigit() else ""
    return (f"the run of {decision_id} is held by {what}{where}: only its holder may settle it"
            f" now; {how.format(pid=pid or 'PID')}, then run: piw-channels cancel"
            f" {decision_id}")


@dataclass(frozen=True, slots=True)
class AskSpec:
    """Everything `piw-channels ask` collects from its arguments."""

    title: str
    presentation: Mapping[str, Any]
    choices: Mapping[str, Any]
    audience: str = "operator"
    timeout_ms: int | None = None
    default_choice: str | None = None
    origin_session_id: str | None = None  # a Pi session: its answer goes back there as a turn
    subject: Mapping[str, Any] | None = None  # what the answer is bound to (default: the title)
    workflow: str = ASK_WORKFLOW
    run_id: str | None = None  # default: `ask-` + 24 random hex


@dataclass(frozen=True, slots=True)
class AskHandle:
    """A waiting ask run, its decision and the owner's lease."""

    run: runs.RunHandle
    request: DecisionRequest

    @property
    def decision_id(self) -> str:
        return self.request.decision_id

    def release(self, db: Database) -> None:
        """Let the run go, as created: an ask that does not wait (or stops before it waits)
        must not block others."""
        release_run(db, self.run.lease)


def create_ask(db: Database, spec: AskSpec, owner_id: str) -> AskHandle:
    """Create the run, its waiting attempt and the decision in one transaction."""
    now = db.clock.now_ms()
    run_id = spec.run_id or runs.new_run_id("ask", db.entropy)
    on_timeout = None
    expires_at = None
    if spec.timeout_ms is not None and spec.default_choice is not None:
        on_timeout = OnTimeout(spec.timeout_ms, {"choice": spec.default_choice})
    elif spec.timeout_ms is not None:
        expires_at = iso_from_ms(now + spec.timeout_ms)
    attempt_id = runs.attempt_id_for(run_id, _ASK_NODE)
    request = build_request(
        run_id=run_id, workflow_name=spec.workflow, node_id=_ASK_NODE, attempt_id=attempt_id,
        audience=spec.audience, choices=spec.choices, title=spec.title,
        subject=dict(spec.subject) if spec.subject is not None
        else {"kind": "ask", "title": spec.title}, presentation=spec.presentation,
        created_at_ms=now, on_timeout=on_timeout, expires_at=expires_at,
    )
    run_spec = runs.RunSpec(
        run_id=run_id, workflow_name=spec.workflow,
        definition={"name": spec.workflow, "nodes": [{"id": _ASK_NODE, "type": "human_decision"}]},
        # The ask's input is what it asks about: its subject, one blob with the decision's.
        input=request.document["subject"], node_id=_ASK_NODE, title=spec.title,
        source_ref=spec.workflow, origin_session_id=spec.origin_session_id,
    )

    def command(conn: apsw.Connection) -> runs.RunHandle:
        handle = runs.create_waiting_run(conn, run_spec, OwnerType.HOST, owner_id, now, db.entropy)
        records.open_decision(conn, handle.lease, request, now)
        return handle

    return AskHandle(db.write(command), request)


def release_run(db: Database, lease: Lease) -> None:
    """Give up run ownership (an owner that stops waiting must not block others)."""
    db.write(lambda c: lease.release(c, db.clock.now_ms()))


def renew_run(db: Database, lease: Lease) -> Lease:
    """Keep the run lease alive while waiting: a write transaction only near expiry (a
    waiter that looks often must not take the write lock each time it looks)."""
    if not lease.needs_renewal(db.clock.now_ms()):
        return lease
    return db.write(lambda c: lease.renew(c, db.clock.now_ms()))


@dataclass(slots=True)
class RunHold:
    """An owner's hold on a waiting run: its lease, renewed while the owner waits, and the
    run-owner steps taken under it (the decision's deadline, then its continuation)."""

    db: Database
    decision_id: str
    lease: Lease

    def renew(self) -> None:
        """Keep the lease alive (a write transaction only near expiry)."""
        self.lease = renew_run(self.db, self.lease)

    def apply_deadline(self) -> Verdict:
        """Apply the timeout default or the no-default expiry."""
        return apply_deadline(self.db, self.decision_id, self.lease)

    def finish(self) -> Resolution:
        """Finish the run with the decision's outcome (a run this tool created)."""
        return apply_continuation(self.db, self.decision_id, self.lease)

    def cancel(self, owner_id: str, reason: str) -> Verdict:
        """Cancel the decision as the run's owner (DecisionRefused when an answer won first)."""
        from channels.decisions import resolution

        return self.db.write(lambda c: resolution.resolve(c, resolution.Cancellation(
            self.decision_id, self.lease, owner_id, reason), self.db.clock.now_ms()))

    def release(self) -> None:
        """Let the run go (an owner that stops waiting must not block others)."""
        release_run(self.db, self.lease)


def apply_deadline(db: Database, decision_id: str, lease: Lease) -> Verdict:
    """Run-owner step: apply the timeout default or the no-default expiry."""
    from channels.decisions import resolution

    return db.write(lambda c: resolution.resolve(
        c, resolution.DeadlinePolicy(decision_id, lease), db.clock.now_ms()))


def apply_continuation(db: Database, decision_id: str, lease: Lease) -> Resolution:
    """Run-owner step for runs this tool created: finish the run with the outcome."""
    return db.write(lambda c: follow_ups.apply_continue_locally(c, decision_id, lease,
                                                               db.clock.now_ms()))


def _claim_run(db: Database, run_id: str, owner_id: str) -> Lease | None:
    try:
        return db.write(lambda c: leases.claim(c, runs.run_resource(run_id), OwnerType.HOST,
                                               owner_id, db.clock.now_ms(), db.entropy))
    except LeaseHeld:
        return None  # a live owner will handle it


@dataclass(frozen=True, slots=True)
class _ExpiryReport:
    """What one expiry pass did."""

    resolved: tuple[Verdict, ...]
    continued: tuple[str, ...]
    skipped_live_owner: tuple[str, ...]
    # (decision_id, error) of each decision that failed, undone alone: the others stand.
    failed: tuple[tuple[str, Exception], ...] = ()


def expire_overdue(db: Database, owner_id: str) -> _ExpiryReport:
    """Settle overdue decisions whose run owner is gone, and finish ask runs whose decision
    was resolved while nobody waited. Each decision: claim, act, release, as one unit; all
    of them in one transaction (one commit however many there are), a unit that fails undone
    alone and returned in `failed` (a request this version refuses, or a bug, must never keep
    the healthy decisions from their deadline, nor stop the poll pass)."""
    now = db.clock.now_ms()
    overdue = db.read(lambda c: views.overdue_decision_ids(c, now))
    waiting = [d for workflow in _LOCAL_WORKFLOWS
               for d in db.read(partial(views.pending_continuations, workflow_ref=workflow))]
    todo = list(dict.fromkeys([*overdue, *waiting]))
    if not todo:
        return _ExpiryReport((), (), ())

    def command(conn: apsw.Connection) -> _ExpiryReport:
        resolved: list[Verdict] = []
        continued: list[str] = []
        skipped: list[str] = []
        failed: list[tuple[str, Exception]] = []
        for decision_id in todo:
            try:
                with savepoint(conn, "expiry"):
                    verdict, finished = _expire_one(conn, db, decision_id, owner_id,
                                                    decision_id in set(overdue))
            except LeaseHeld:
                skipped.append(decision_id)  # a live owner will handle it
                continue
            except WriteRejected as exc:  # this decision's checks failed: it fails alone
                failed.append((decision_id, exc))
                continue
            except (StateError, apsw.Error):
                raise  # the database's own failure, not this decision's: nothing commits
            except Exception as exc:  # this decision's request, or a bug: it fails alone
                failed.append((decision_id, exc))
                continue
            if verdict is not None:
                resolved.append(verdict)
            if finished:
                continued.append(decision_id)
        return _ExpiryReport(tuple(resolved), tuple(continued), tuple(skipped), tuple(failed))

    return db.write(command)


def _expire_one(conn: apsw.Connection, db: Database, decision_id: str, owner_id: str,
                is_overdue: bool) -> tuple[Verdict | None, bool]:
    """Claim the run, apply the deadline and/or the continuation, release (one unit)."""
    now = db.clock.now_ms()
    run_id, workflow = records.run_of(conn, decision_id)
    verdict = None
    finished = workflow in _LOCAL_WORKFLOWS
    # One change of the run (its finish, or the tenure alone), not claim + finish + release.
    with leases.brief_tenure(conn, runs.run_resource(run_id), OwnerType.HOST, owner_id, now,
                             db.entropy) as lease:
        if is_overdue:
            from channels.decisions import resolution

            verdict = resolution.resolve(conn, resolution.DeadlinePolicy(decision_id, lease), now)
        if finished:
            follow_ups.apply_continue_locally(conn, decision_id, lease, now)
    return verdict, finished


def _run_of(db: Database, decision_id: str) -> tuple[str, str]:
    return db.read(lambda c: records.run_of(c, decision_id))


def cancel_decision(db: Database, decision_id: str, reason: str, owner_id: str) -> Verdict:
    """Explicit cancellation as a control actor; needs the run lease free or expired."""
    run_id, workflow = _run_of(db, decision_id)
    lease = _claim_run(db, run_id, owner_id)
    if lease is None:
        holder = db.read(lambda c: leases.read(c, runs.run_resource(run_id)))
        raise LeaseHeld(_held_run(decision_id, None if holder is None else holder.owner_id))
    from channels.decisions import resolution

    try:
        outcome = db.write(lambda c: resolution.resolve(
            c, resolution.Cancellation(decision_id, lease, owner_id, reason), db.clock.now_ms()))
        if workflow in _LOCAL_WORKFLOWS:
            apply_continuation(db, decision_id, lease)
        return outcome
    finally:
        release_run(db, lease)


def wait_for_resolution(
    db: Database, handle: AskHandle, *, poll_seconds: float = 0.1,
    on_change: Callable[[], None] | None = None,
) -> Resolution:
    """Hold the run lease until the decision resolves (applying the deadline when due), then
    apply the continuation. Notices other writers cheaply through `PRAGMA data_version`
    (every `poll_seconds`: no lock, no write; the lease is renewed only near expiry), so an
    answer is seen well within a second of its commit; `on_change` runs whenever another
    writer changed the database (progress for a person)."""
    lease = handle.run.lease
    decision_id = handle.decision_id
    deadline = handle.request.expires_at_ms
    seen = -1
    try:
        while True:
            version = int(db.conn.execute("PRAGMA data_version").get)
            if version != seen:
                seen = version
                if db.read(lambda c: records.resolution_of(c, decision_id)) is not None:
                    break
                if on_change is not None:
                    on_change()
            if deadline is not None and db.clock.now_ms() >= deadline:
                apply_deadline(db, decision_id, lease)
                break
            lease = renew_run(db, lease)
            time.sleep(poll_seconds)
        return apply_continuation(db, decision_id, lease)
    finally:
        # Also on Ctrl-C: an owner that stops waiting must not block `expire` for a minute.
        with contextlib.suppress(StateError):
            release_run(db, lease)


_LISTED = 10  # candidates an ambiguous id names (on one line)
_TITLE_CHARS = 40  # of each candidate's title


def _short(title: str) -> str:
    """A title cut to fit a line of candidates ("…" where it was cut)."""
    flat = " ".join(title.split())
    return flat if len(flat) <= _TITLE_CHARS else flat[:_TITLE_CHARS - 1].rstrip() + "…"


def resolve_id(db: Database, text: str) -> str:
    """The decision a person means: a full id, a unique prefix of one, or (a unique prefix
    of) the `Decision <fingerprint>` every message shows. Several matches name them all."""
    def read(c: Any) -> list[tuple[str, str, str]]:
        return [(d, views.fingerprint_of(c, d), views.view(c, d).title)
                for d in views.decision_candidates(c, text, limit=_LISTED + 1)]

    found = db.read(read)
    if len(found) == 1:
        return found[0][0]
    if not found:
        raise UnknownDecision(f"no decision matches {text!r}")
    listed = "; ".join(f"{d} (Decision {fp}: {_short(title)})"
                       for d, fp, title in found[:_LISTED])
    if len(found) > _LISTED:
        listed += "; and more"
    raise UnknownDecision(f"{text!r} matches more than one decision: {listed}; give more of"
                          " the decision id")


def presentation_for(title: str, summary: str | None, document: Mapping[str, Any] | None,
                     ) -> Mapping[str, Any]:
    """The presentation `ask` submits: a file's document, or a summary-only one."""
    if document is not None:
        return document
    return {"schema": "pi-workflows.decision-presentation.v1", "summary": summary or title,
            "blocks": []}
