"""Shared builders for decision tests."""

from __future__ import annotations

from typing import Any

from channels.decisions import resolution, workflows
from channels.decisions.choices import text_input
from channels.decisions.resolution import HumanAnswer, Verdict
from state.database import Database

CHOICES: dict[str, Any] = {
    "continue": {"label": "Continue"},
    "stop": {"label": "Stop"},
    "replan": {"label": "Replan", "input": text_input("text", "What should change?", 1, 20)},
}


def ask(db: Database, *, timeout_ms: int | None = None, default: str | None = None,
        release: bool = False) -> workflows.AskHandle:
    spec = workflows.AskSpec(
        title="Approve the plan?",
        presentation=workflows.presentation_for("Approve the plan?", "Review it.", None),
        choices=CHOICES, timeout_ms=timeout_ms, default_choice=default,
    )
    handle = workflows.create_ask(db, spec, "owner-1")
    if release:
        workflows.release_run(db, handle.run.lease)
    return handle


def answer(handle: workflows.AskHandle, response: Any, key: str, *, channel: str = "pi",
           actor: str = "local:1000", digest: str | None = None, origin: str = "human"
           ) -> HumanAnswer:
    return HumanAnswer(
        decision_id=handle.decision_id,
        request_digest=digest or handle.request.request_digest,
        response=response, channel=channel, actor_id=actor, external_event_id=f"event-{key}",
        idempotency_key=key, origin=origin,
    )


def submit(db: Database, candidate: HumanAnswer, *, channels: tuple[str, ...] = ("pi",)
           ) -> Verdict:
    return db.write(lambda c: resolution.resolve(c, candidate, db.clock.now_ms(),
                                                allowed_channels=channels))


def rows(db: Database, sql: str, *params: object) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.conn.execute(sql, params)]
