"""Child-process contenders for the Pi-versus-Telegram race (spawned by multiprocessing)."""

from __future__ import annotations

from typing import Any

from channels.config.loading import load_config
from channels.config.model import ChannelsConfig, audience_routes
from channels.decisions import resolution
from channels.decisions.resolution import HumanAnswer, Verdict
from channels.pi import answers, sessions
from channels.pi.answers import AnswerEvent
from state.database import Database
from state.leases import Lease


def pi_side(barrier: Any, session_id: str, targets: list[dict[str, str]], results: Any) -> None:
    """What the bridge does for an answer: hold the session channel lease, submit."""
    config = load_config()
    with Database.open_writer() as db:
        channel_id = sessions.session_channel_id(session_id)
        lease = sessions.claim_channel(db, channel_id, session_id, "race-pi", wait_seconds=10)
        for target in targets:
            event = AnswerEvent(
                decision_id=target["decision_id"], request_digest=target["digest"],
                choice="continue", entered=None, actor_id=session_id,
                event_key=f"{session_id}:{target['decision_id']}",
                details={"source": "interactive", "mode": "tui"})
            barrier.wait()
            report = _submit(db, lease, channel_id, event, config)
            results.put((target["decision_id"], "pi", report.result))
        db.write(lambda c: lease.release(c, db.clock.now_ms()))


def telegram_side(barrier: Any, targets: list[dict[str, str]], results: Any) -> None:
    """A Telegram callback reaching the resolution function (until the poll worker exists)."""
    allowed = audience_routes(load_config(), "operator")
    with Database.open_writer() as db:
        for number, target in enumerate(targets):
            candidate = HumanAnswer(
                decision_id=target["decision_id"], request_digest=target["digest"],
                response={"choice": "stop"}, channel="telegram:default", actor_id="telegram:42",
                external_event_id=f"update:{1000 + number}",
                idempotency_key=f"callback:{target['decision_id']}")
            barrier.wait()
            outcome = _resolve(db, candidate, allowed)
            results.put((target["decision_id"], "telegram", outcome.result.value))


def _submit(db: Database, lease: Lease, channel_id: str, event: AnswerEvent,
            config: ChannelsConfig | None) -> answers.AnswerReport:
    return db.write(lambda c: answers.submit_answer(c, lease, channel_id, event,
                                                       db.clock.now_ms(), config))


def _resolve(db: Database, candidate: HumanAnswer, allowed: tuple[str, ...]) -> Verdict:
    return db.write(lambda c: resolution.resolve(c, candidate, db.clock.now_ms(),
                                                allowed_channels=allowed))


def pi_side_at_once(barrier: Any, session_id: str, targets: list[dict[str, str]],
                    results: Any) -> None:
    """The bridge answering every decision right as a real poller starts (one barrier)."""
    config = load_config()
    with Database.open_writer() as db:
        channel_id = sessions.session_channel_id(session_id)
        lease = sessions.claim_channel(db, channel_id, session_id, "race-pi", wait_seconds=10)
        barrier.wait()
        for target in targets:
            event = AnswerEvent(
                decision_id=target["decision_id"], request_digest=target["digest"],
                choice="continue", entered=None, actor_id=session_id,
                event_key=f"{session_id}:{target['decision_id']}",
                details={"source": "interactive", "mode": "tui"})
            report = _submit(db, lease, channel_id, event, config)
            results.put((target["decision_id"], "pi", report.result))
        db.write(lambda c: lease.release(c, db.clock.now_ms()))
