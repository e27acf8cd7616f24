"""The simple lifecycle (ask, deliver in one part, press, settle) with fewer bytes still leaves
every record the plan requires: its rows, one event per accepted resource change (revisions
without gaps), and an effect resource for every effect, through real poll passes against the
fake Bot API."""

from __future__ import annotations

from typing import Any

from channels.decisions import records, runs
from channels.telegram import deliveries
from state import effects
from tests.channels.telegram.test_channel import CHANNEL, Flow, flow  # noqa: F401


def lifecycle(flow: Flow) -> Any:  # noqa: F811
    handle = flow.ask()
    flow.poll()
    flow.press(handle, "continue", callback_id="cb-1")
    flow.poll()
    return handle


def events_of(flow: Flow, resource_id: str) -> list[tuple[int, str, int | None]]:  # noqa: F811
    return [(int(r), str(t), g) for r, t, g in flow.rows(
        "SELECT resource_revision, event_type, lease_generation FROM events"
        " WHERE resource_id = ? ORDER BY resource_revision", resource_id)]


def test_every_row_of_the_lifecycle_is_there(flow: Flow) -> None:  # noqa: F811
    handle = lifecycle(flow)
    decision_id, run_id = handle.decision_id, handle.run.run_id
    assert flow.rows("SELECT status, output_hash IS NOT NULL FROM runs WHERE run_id = ?",
                     run_id) == [("completed", 1)]
    assert flow.rows("SELECT status FROM node_attempts WHERE run_id = ?", run_id) == [
        ("completed",)]
    assert flow.rows("SELECT count(*) FROM human_decisions WHERE decision_id = ?",
                     decision_id) == [(1,)]
    assert flow.rows("SELECT outcome, provenance FROM human_decision_resolutions"
                     " WHERE decision_id = ?", decision_id) == [("accepted", "human")]
    assert flow.rows("SELECT result FROM human_decision_submissions WHERE decision_id = ?",
                     decision_id) == [("won",)]
    assert flow.rows("SELECT purpose, status FROM channel_messages WHERE decision_id = ?"
                     " ORDER BY purpose", decision_id) == [
        ("delivery", "confirmed"), ("settlement", "confirmed")]
    assert flow.rows("SELECT count(*) FROM channel_inbox WHERE processed_at IS NOT NULL") == [
        (1,)]
    source = records.decision_resource(decision_id)
    assert flow.rows("SELECT effect_type, status, attempt_count FROM effects"
                     " WHERE source_resource_id = ? ORDER BY effect_type", source) == [
        ("run.continue", "applied", 1), ("telegram.deliver", "applied", 1),
        ("telegram.settle", "applied", 1)]  # no reminder: none was due before the press
    # Every effect is a resource with its lease history and its attempts.
    assert flow.rows(
        "SELECT e.effect_type, r.resource_type, a.outcome, l.generation FROM effects e"
        " JOIN resources r USING (resource_id) LEFT JOIN effect_attempts a USING (effect_id)"
        " LEFT JOIN leases l ON l.resource_id = e.resource_id WHERE e.source_resource_id = ?"
        " ORDER BY e.effect_type", source) == [
        ("run.continue", "effect", "applied", None), ("telegram.deliver", "effect", "applied", 1),
        ("telegram.settle", "effect", "applied", 1)]


def test_one_event_per_accepted_change_and_revisions_without_gaps(flow: Flow) -> None:  # noqa: F811
    handle = lifecycle(flow)
    # Every resource: its revision is its number of events, numbered 1..revision (an effect
    # reserved by its source's change starts at 0: that change's event records it).
    for resource_id, revision in flow.rows("SELECT resource_id, revision FROM resources"):
        numbers = [r for r, _, _ in events_of(flow, resource_id)]
        assert numbers == list(range(1, revision + 1)), resource_id
    # The run: created with its owner's claim, released, then claimed, finished and released
    # by the poll pass as one change that names the claim's generation.
    assert events_of(flow, runs.run_resource(handle.run.run_id)) == [
        (1, "run.created", 1), (2, "run.lease_released", 1), (3, "run.completed", 2)]
    assert flow.rows("SELECT generation, owner_id FROM leases WHERE resource_id = ?",
                     runs.run_resource(handle.run.run_id)) == [(2, None)]
    decision = records.decision_resource(handle.decision_id)
    assert [t for _, t, _ in events_of(flow, decision)] == ["decision.opened", "decision.resolved"]

    def effect_events(effect_type: str, key: str) -> list[str]:
        effect_id = effects.effect_id_for(decision, effect_type, key)
        return [t for _, t, _ in events_of(flow, f"effect:{effect_id}")]

    # Reserved by the channel pass (no change of their source): their own event.
    assert effect_events(deliveries.DELIVER, CHANNEL) == [
        "effect.reserved", "effect.attempt_started", "effect.applied"]
    assert effect_events(deliveries.SETTLE, CHANNEL) == [
        "effect.attempt_started", "effect.applied"]
    assert effect_events("run.continue", handle.decision_id) == ["effect.applied"]
    # The follow-ups' source revision is the resolution's, whose event is there.
    assert flow.rows("SELECT DISTINCT source_revision FROM effects WHERE source_resource_id = ?"
                     " AND effect_type IN ('run.continue', 'telegram.settle')", decision) == [
        (2,)]
