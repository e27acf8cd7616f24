"""The run-side minimum a decision needs: a run, its waiting node attempt and its lease.

Pi owns the workflow engine; this store only creates a run that waits at one decision node
(for `ask` and for tests), and finishes it when the continuation is applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import apsw

from channels.decisions.errors import DecisionRefused
from state import blobs, leases, resources
from state.canonical import JsonValue
from state.clock import Entropy
from state.ids import digest_id, number_id
from state.leases import Lease, OwnerType
from state.resources import ResourceType

__all__ = [
    "GATE_WORKFLOW", "AttemptStatus", "ExecutionMode", "RunHandle", "RunOwner", "RunPoint",
    "RunSpec", "RunStatus", "SourceType", "TerminalStatus", "attempt_id_for",
    "create_finished_run", "create_waiting_run", "finish_run", "latest_attempt", "new_run_id",
    "run_output", "run_resource", "turn_session", "updated_since", "verify_owner",
]


class RunStatus(StrEnum):
    """A run's state (the plan's `runs.status` CHECK set; this project writes running,
    waiting, completed and cancelled)."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class AttemptStatus(StrEnum):
    """A node attempt's state (`node_attempts.status`)."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


# How a run ends here: its answer was accepted, or the decision was cancelled.
TerminalStatus = Literal[RunStatus.COMPLETED, RunStatus.CANCELLED]
# Who owns a run this project creates: a Pi session, or this host's command.
RunOwner = Literal[OwnerType.SESSION, OwnerType.HOST]


class ExecutionMode(StrEnum):
    """How a run is bound to its origin session (`run_bindings.execution_mode`)."""

    INTERACTIVE = "interactive"
    HEADLESS = "headless"


class SourceType(StrEnum):
    """Where a run's workflow comes from (`runs.source_type`)."""

    BUILTIN = "builtin"
    FILE = "file"


# A gated Pi tool call: its answer goes to the waiting call, never as a deferred turn.
GATE_WORKFLOW = "piw-channels.gate"


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What a new waiting run looks like."""

    run_id: str
    workflow_name: str
    definition: JsonValue
    input: JsonValue
    node_id: str
    node_type: str = "human_decision"
    title: str | None = None
    source_ref: str = "piw-channels"
    source_revision: str = "1"
    origin_session_id: str | None = None


@dataclass(frozen=True, slots=True)
class RunHandle:
    """A created run with its waiting attempt and the owner's lease."""

    run_id: str
    attempt_id: str
    lease: Lease


@dataclass(frozen=True, slots=True)
class RunPoint:
    """Where a run is: its latest node attempt, the run's title and the Pi session an
    interactive run is bound to (what a notification of the run is filed under and told to)."""

    run_id: str
    attempt_id: str
    title: str | None
    origin_session_id: str | None

    def touch(self, conn: apsw.Connection, now: int) -> None:
        """The run said something (a notification): its `updated_at` moves, so that the run
        is found among the recently active ones (`updated_since`) without reading its
        history."""
        conn.execute("UPDATE runs SET updated_at = max(updated_at, ?) WHERE run_id = ?",
                     (now, self.run_id))


def new_run_id(prefix: str, entropy: Entropy) -> str:
    """A new run's id: 96 random bits in 16 characters after `<prefix>-` (a run id is stored
    about twenty times per run: its rows, resource, lease, events and their indexes; the
    24 hex digits of earlier versions stand, nothing parses them)."""
    return f"{prefix}-" + number_id(int.from_bytes(entropy.token_bytes(12), "big"), 16)


def run_resource(run_id: str) -> str:
    """Resource id of a run."""
    return f"run:{run_id}"


def attempt_id_for(run_id: str, node_id: str, number: int = 1) -> str:
    """Deterministic attempt id: 96 bits in 16 characters after `a` (stored in its row and
    index, the decision's row and its request). An attempt is found by its run, never by
    recomputing its id, so the `attempt-<24 hex>` ids of earlier versions stand."""
    return "a" + digest_id(f"{run_id}\0{node_id}\0{number}")


def create_waiting_run(
    conn: apsw.Connection,
    spec: RunSpec,
    owner_type: RunOwner,
    owner_id: str,
    now: int,
    entropy: Entropy,
) -> RunHandle:
    """Create the run (status waiting), its waiting attempt and claim the run lease."""
    # A definition's digest is its blob's hash: the SHA-256 of its canonical JSON.
    definition_digest = definition_hash = blobs.put_json(conn, spec.definition, now)
    conn.execute(
        "INSERT INTO workflow_definitions (definition_digest, workflow_name, definition_hash,"
        " created_at) VALUES (?, ?, ?, ?) ON CONFLICT (definition_digest) DO NOTHING",
        (definition_digest, spec.workflow_name, definition_hash, now),
    )
    resource_id = run_resource(spec.run_id)
    owner = owner_type.actor(owner_id)
    # Created and claimed in one command: one change, one event (run.created, naming the
    # generation of the claim below: a new resource's first lease is generation 1). No
    # payload: the runs row holds its id and workflow.
    resources.create(conn, resource_id, ResourceType.RUN, owner, now, lease_generation=1)
    values = {
        "run_id": spec.run_id,
        "resource": resource_id,
        "definition": definition_digest,
        "workflow": spec.workflow_name,
        "source": blobs.put_json(conn, {"type": SourceType.BUILTIN, "ref": spec.source_ref}, now),
        "source_type": SourceType.BUILTIN,
        "options": blobs.put_json(conn, {}, now),
        "source_ref": spec.source_ref,
        "source_revision": spec.source_revision,
        "title": spec.title,
        "input": blobs.put_json(conn, spec.input, now),
        "now": now,
    }
    conn.execute(
        "INSERT INTO runs (run_id, resource_id, definition_digest, workflow_ref,"
        " workflow_source_hash, launch_options_hash, source_type, source_ref, source_revision,"
        " title, status, paused, input_hash, created_at, updated_at)"
        " VALUES (:run_id, :resource, :definition, :workflow, :source, :options, :source_type,"
        " :source_ref, :source_revision, :title, 'waiting', 0, :input, :now, :now)",
        values,
    )
    if spec.origin_session_id is not None:
        conn.execute(
            "INSERT INTO run_bindings (run_id, origin_session_id, execution_mode, created_at)"
            " VALUES (?, ?, ?, ?)",
            (spec.run_id, spec.origin_session_id, ExecutionMode.INTERACTIVE, now),
        )
    attempt_id = attempt_id_for(spec.run_id, spec.node_id)
    conn.execute(
        "INSERT INTO node_attempts (attempt_id, run_id, node_id, attempt_number, node_type,"
        " status, started_at, created_at, updated_at)"
        " VALUES (?, ?, ?, 1, ?, 'waiting', ?, ?, ?)",
        (attempt_id, spec.run_id, spec.node_id, spec.node_type, now, now, now),
    )
    lease = leases.acquire_row(conn, resource_id, owner_type, owner_id, now, entropy)
    if lease.generation != 1:
        raise DecisionRefused(f"run {spec.run_id} had an owner before it existed")
    return RunHandle(spec.run_id, attempt_id, lease)


def latest_attempt(conn: apsw.Connection, run_id: str) -> RunPoint | None:
    """The run's latest node attempt, or None for an unknown run or one without an attempt."""
    row = conn.execute(
        "SELECT a.attempt_id, r.title, b.origin_session_id FROM runs r"
        " JOIN node_attempts a USING (run_id) LEFT JOIN run_bindings b"
        " ON b.run_id = r.run_id AND b.execution_mode = 'interactive'"
        " WHERE r.run_id = ? ORDER BY a.created_at DESC, a.attempt_number DESC LIMIT 1",
        (run_id,)).fetchone()
    if row is None:
        return None
    title, session = (None if value is None else str(value) for value in row[1:])
    return RunPoint(run_id, str(row[0]), title, session)


_RUN_STATUSES = tuple(status.value for status in RunStatus)


def updated_since(conn: apsw.Connection, since: int) -> list[str]:
    """Runs changed at or after `since`, newest first (through `runs_status_updated`)."""
    marks = ",".join("?" for _ in _RUN_STATUSES)
    rows = conn.execute(
        f"SELECT run_id FROM runs WHERE status IN ({marks}) AND updated_at >= ?"
        " ORDER BY updated_at DESC", (*_RUN_STATUSES, since))
    return [str(r[0]) for r in rows]


def turn_session(conn: apsw.Connection, run_id: str) -> str | None:
    """The Pi session whose next turn gets this run's answer: the interactive binding, except
    for a gated tool call (the call itself waits for the answer)."""
    row = conn.execute(
        "SELECT b.origin_session_id, r.workflow_ref FROM run_bindings b JOIN runs r USING (run_id)"
        " WHERE b.run_id = ? AND b.execution_mode = 'interactive'", (run_id,)).fetchone()
    if row is None or row[1] == GATE_WORKFLOW:
        return None
    return str(row[0])


def verify_owner(conn: apsw.Connection, lease: Lease, run_id: str, now: int,
                 operation: str = "run.write") -> None:
    """The lease must be the live lease of this run (checked again in this transaction)."""
    leases.WritePermit(run_resource(run_id), operation, lease.actor, None, lease).check(conn, now)


def create_finished_run(conn: apsw.Connection, prefix: str, workflow_name: str, node: str,
                        title: str | None, owner_id: str, now: int, entropy: Entropy) -> RunPoint:
    """A run of one `node` node (its id and its type) that is over once written (a
    notification's own run: nothing to wait for): created, its attempt and the run
    completed, its lease let go. Its input is its title; its id is new, after `prefix-`."""
    run_id = new_run_id(prefix, entropy)
    spec = RunSpec(
        run_id=run_id, workflow_name=workflow_name,
        definition={"name": workflow_name, "nodes": [{"id": node, "type": node}]},
        input={"title": title}, node_id=node, node_type=node, title=title,
        source_ref=workflow_name)
    handle = create_waiting_run(conn, spec, OwnerType.HOST, owner_id, now, entropy)
    finish_run(conn, handle.lease, spec.run_id, handle.attempt_id, RunStatus.COMPLETED, now)
    handle.lease.release(conn, now)
    return RunPoint(run_id, handle.attempt_id, title, None)


def finish_run(
    conn: apsw.Connection,
    lease: Lease,
    run_id: str,
    attempt_id: str,
    status: TerminalStatus,
    now: int,
    *,
    output: JsonValue = None,
    detail: str | None = None,
) -> None:
    """Finish the waiting attempt and the run (owner only), with one run event. `output` is
    the attempt's node's output; the run's output maps each node to its output (the
    reference's `output[node]`), here the one node's. Both are blobs shared by every run that
    ended the same way (the same node, the same answer)."""
    verify_owner(conn, lease, run_id, now, f"run.{status}")
    current = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).get
    if current != "waiting":
        raise DecisionRefused(f"workflow run {run_id} is no longer waiting")
    node_id = conn.execute("SELECT node_id FROM node_attempts WHERE attempt_id = ?",
                           (attempt_id,)).get
    output_hash = None if output is None else blobs.put_json(conn, output, now)
    run_output_hash = None if output is None or node_id is None \
        else blobs.put_json(conn, {str(node_id): output}, now)
    conn.execute(
        "UPDATE node_attempts SET status = :status, output_hash = :output, finished_at = :now,"
        " updated_at = :now WHERE attempt_id = :attempt AND status = 'waiting'",
        {"status": status, "output": output_hash, "now": now, "attempt": attempt_id},
    )
    conn.execute(
        "UPDATE runs SET status = :status, output_hash = :output, status_detail = :detail,"
        " finished_at = :now, updated_at = :now WHERE run_id = :run",
        {"status": status, "output": run_output_hash, "detail": detail, "now": now,
         "run": run_id},
    )
    # No payload: the attempt row (the run's one attempt) records which attempt finished.
    resources.bump_current(conn, run_resource(run_id), f"run.{status}", lease.actor, now,
                           lease_generation=lease.generation)


def run_output(conn: apsw.Connection, run_id: str) -> JsonValue:
    """The run's output document, or None."""
    output_hash = conn.execute("SELECT output_hash FROM runs WHERE run_id = ?", (run_id,)).get
    return None if output_hash is None else blobs.get_json(conn, bytes(output_hash))
