"""Races between candidates across real processes released by a barrier: one winner, always."""

from __future__ import annotations

import dataclasses
import multiprocessing
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from channels.decisions import records
from state.clock import ManualClock
from state.database import Database
from tests.channels.decisions import race_worker
from tests.channels.decisions.helpers import ask

ROUNDS = 4
DEADLINE_MS = 30_000


def _targets(home: Path, kinds: list[str]) -> dict[str, list[dict[str, Any]]]:
    clock = ManualClock()
    created = clock.now_ms()
    per_kind: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    with Database.open_writer(clock=clock) as db:
        for _ in range(ROUNDS):
            handle = ask(db, timeout_ms=DEADLINE_MS, default="continue")
            lease = dataclasses.asdict(handle.run.lease)
            for kind in kinds:
                # Humans answer just before the deadline; the policy acts exactly at it.
                now = created + (DEADLINE_MS if kind == "timeout" else DEADLINE_MS - 1)
                per_kind[kind].append({
                    "decision_id": handle.decision_id, "digest": handle.request.request_digest,
                    "choice": "stop" if kind == "human-b" else "continue",
                    "lease": lease, "now": now})
    return per_kind


def _race(home: Path, kinds: list[str]) -> dict[str, dict[str, str]]:
    targets = _targets(home, kinds)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(kinds))
    results = ctx.Queue()
    procs = [ctx.Process(target=race_worker.contend, args=(barrier, k, targets[k], results))
             for k in kinds]
    for p in procs:
        p.start()
    outcomes: dict[str, dict[str, str]] = defaultdict(dict)
    for _ in range(ROUNDS * len(kinds)):
        decision_id, kind, result = results.get(timeout=120)
        outcomes[decision_id][kind] = result
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    with Database.open_reader() as db:
        for decision_id in outcomes:
            assert db.conn.execute(
                "SELECT count(*) FROM human_decision_resolutions WHERE decision_id = ?",
                (decision_id,)).get == 1
            assert db.conn.execute(
                "SELECT count(*) FROM effects WHERE effect_type = 'run.continue'"
                " AND source_resource_id = ?", (records.decision_resource(decision_id),)).get == 1
    return outcomes


def _one_winner(outcome: dict[str, str]) -> None:
    winners = [k for k, r in outcome.items() if r == "won"]
    assert len(winners) == 1, outcome


def test_two_humans_race_and_exactly_one_wins(home: Path) -> None:
    for outcome in _race(home, ["human-a", "human-b"]).values():
        _one_winner(outcome)
        assert sorted(outcome.values()) == ["already_resolved", "won"]


def test_human_versus_timeout(home: Path) -> None:
    for outcome in _race(home, ["human-a", "timeout"]).values():
        _one_winner(outcome)
        assert sorted(outcome.values()) == ["already_resolved", "won"]


def test_human_versus_cancellation(home: Path) -> None:
    for outcome in _race(home, ["human-a", "cancel"]).values():
        _one_winner(outcome)
        loser = outcome["cancel"] if outcome["human-a"] == "won" else outcome["human-a"]
        # A cancellation that lost to an accepted answer is refused; a late human is told.
        assert loser in ("refused:decision_refused", "already_resolved")


@pytest.mark.parametrize("kinds", [["timeout", "cancel"]])
def test_timeout_versus_cancellation(home: Path, kinds: list[str]) -> None:
    for outcome in _race(home, kinds).values():
        _one_winner(outcome)
        assert sorted(outcome.values()) in (
            ["already_resolved", "won"], ["refused:decision_refused", "won"])
