"""The simple lifecycle (ask, deliver in one part, press, settle) with fewer bytes still leaves
every record the plan requires: its rows, one event per accepted resource change (revisions
without gaps), and an effect resource for every effect, through real poll passes against the
fake Bot API."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from channels.decisions import follow_ups, records, runs
from channels.telegram import reservations
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
    # One blob for content that is the same: the run's input is its subject, its attempt's
    # output the answer; the run's output is {node: answer}.
    assert flow.rows(
        "SELECT r.input_hash = d.subject_hash, a.output_hash = s.response_hash, b.content"
        " FROM runs r JOIN human_decisions d USING (run_id) JOIN node_attempts a USING (run_id)"
        " JOIN human_decision_resolutions s ON s.decision_id = d.decision_id"
        " JOIN blobs b ON b.blob_hash = r.output_hash WHERE d.decision_id = ?", decision_id) == [
        (1, 1, b'{"decision":{"choice":"continue"}}')]
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

    # Reserved by the channel pass (no change of their source): the channel's one event for
    # the pass's new deliveries names it; the effect starts at revision 0.
    # A channel's delivery and settlement are keyed by its short key (effects.scoped_key).
    assert effect_events(reservations.DELIVER, effects.scoped_key(CHANNEL)) == [
        "effect.attempt_started", "effect.applied"]
    delivery = effects.effect_id_for(decision, reservations.DELIVER, effects.scoped_key(CHANNEL))
    [(payload,)] = flow.rows(
        "SELECT b.content FROM events e JOIN blobs b ON b.blob_hash = e.payload_hash"
        " WHERE e.event_type = 'channel.effects_reserved'")
    assert json.loads(payload) == {"effects": [delivery]}
    assert effect_events(reservations.SETTLE, effects.scoped_key(CHANNEL)) == [
        "effect.attempt_started", "effect.applied"]
    assert effect_events("run.continue", follow_ups.CONTINUE_KEY) == ["effect.applied"]
    # The follow-ups' source revision is the resolution's, whose event is there.
    assert flow.rows("SELECT DISTINCT source_revision FROM effects WHERE source_resource_id = ?"
                     " AND effect_type IN ('run.continue', 'telegram.settle')", decision) == [
        (2,)]


def counts(flow: Flow) -> dict[str, Any]:  # noqa: F811
    tables = [str(n) for (n,) in flow.rows(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    return {
        "rows": Counter({t: int(flow.rows(f"SELECT count(*) FROM {t}")[0][0]) for t in tables}),
        "events": Counter({str(t): int(n) for t, n in flow.rows(
            "SELECT event_type, count(*) FROM events GROUP BY event_type")}),
    }


def test_the_footprint_of_one_more_decision_is_pinned(flow: Flow) -> None:  # noqa: F811
    lifecycle(flow)  # the channel registered, shared blobs (choices, payloads) stored
    before = counts(flow)
    handle = flow.ask(title="Another?")
    flow.poll()
    flow.press(handle, "continue", callback_id="cb-2")
    flow.poll()
    after = counts(flow)
    rows = after["rows"] - before["rows"]
    events = after["events"] - before["events"]
    # What one more simple lifecycle adds (two passes), row for row: its own records, the
    # three effects (no reminder: none was due) and their leases, the run's lease, and
    # nine blobs: five its own (the subject, which is also the run's input; the request; the
    # card, which is the delivery message's text and its part's; the press; the outcome
    # post; the presentation here is the first one's) and four of the channel's passes (two
    # claims, the cursor, the reservation). The choices, the delivery's recipients, the
    # answer's payloads, the outputs (the answer, and the run's {node: answer}) and every
    # result are blobs the first decision stored already.
    assert rows == Counter({
        "events": 16, "blobs": 9, "resources": 5, "effects": 3, "effect_attempts": 3,
        "leases": 3, "channel_messages": 2, "channel_message_parts": 2, "runs": 1,
        "node_attempts": 1, "human_decisions": 1, "human_decision_resolutions": 1,
        "human_decision_submissions": 1, "channel_inbox": 1})
    # Ten events of the decision's own resources, six of the channel's two passes.
    assert events == Counter({
        "run.created": 1, "run.lease_released": 1, "run.completed": 1,
        "decision.opened": 1, "decision.resolved": 1,
        "effect.attempt_started": 2, "effect.applied": 3,
        "channel.lease_acquired": 2, "channel.lease_released": 2,
        "channel.updates_received": 1, "channel.effects_reserved": 1})
