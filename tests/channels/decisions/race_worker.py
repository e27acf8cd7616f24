"""Child-process contenders for decision races (spawned by multiprocessing)."""

from __future__ import annotations

from typing import Any

from channels.decisions import resolution
from channels.decisions.resolution import Cancellation, DeadlinePolicy, HumanAnswer
from state.clock import ManualClock
from state.database import Database
from state.errors import StateError
from state.leases import Lease


def contend(barrier: Any, kind: str, targets: list[dict[str, Any]], results: Any) -> None:
    """For each target: wait at the barrier, then submit this process's candidate once."""
    for target in targets:
        db = Database.open_writer(clock=ManualClock(target["now"]))
        lease = Lease(**target["lease"])
        candidate: Any
        if kind.startswith("human"):
            candidate = HumanAnswer(
                decision_id=target["decision_id"], request_digest=target["digest"],
                response={"choice": target["choice"]}, channel="pi", actor_id=f"local:{kind}",
                external_event_id=f"{kind}-{target['decision_id']}",
                idempotency_key=f"{kind}-{target['decision_id']}")
        elif kind == "timeout":
            candidate = DeadlinePolicy(target["decision_id"], lease)
        else:
            candidate = Cancellation(target["decision_id"], lease, "control", "cancelled")
        barrier.wait()
        try:
            now = db.clock.now_ms()
            outcome = db.write(lambda c, cand=candidate, t=now: resolution.resolve(
                c, cand, t, allowed_channels=("pi",)))
            results.put((target["decision_id"], kind, outcome.result.value))
        except StateError as exc:
            results.put((target["decision_id"], kind, f"refused:{exc.code}"))
        finally:
            db.close()
