"""The kill -9 matrix: real `poll` processes SIGKILLed in each phase of a pass, over and over.

Each round picks a phase and kills the poller when it is observably there, not after a random
sleep: at start-up (before it holds the channel lease), at its claim (it holds the lease and has
sent nothing yet), during a delivery (a `sendMessage` held in flight by the fake), in a long
poll (a `getUpdates` in flight) and at a batch commit (the batch's presses are committed and
being answered, unconfirmed to Telegram: an `answerCallbackQuery` held in flight). Where each
kill landed is observed at the moment of the kill (the requests then in flight, the lease's
owner), counted by phase and printed; every phase must be hit. The suite runs a fixed seed (the
same rounds every time); `PIW_KILL_SEED=random` adds a run with a new random seed and
`PIW_KILL_SEED=<seed>` one that replays it (each run prints its seed; `PIW_KILLS` sets the
kills of each run, 50 by default).

After every kill the dead poller's leases are let go, and:

- no acknowledged update is lost: every update Telegram would have forgotten (confirmed by an
  offset) is in the inbox;
- one winner per decision: at most one `won` submission and one resolution;
- no blind resend: no text ever reaches a chat twice (no `resend` is run here).

Scripts' notifications (progress cards and final results) are written between rounds, so
kills land in their deliveries too; at the end each reached the chat exactly once, or, left
ambiguous by a kill, at most once.

At the end clean polls drain everything, every update is processed exactly once, and every
pressed decision is resolved.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from adapters.telegram.fake import ANY_METHOD, FakeBotApi, Fault
from channels.config.loading import load_config
from channels.decisions import workflows
from channels.decisions.choices import text_input
from channels.decisions.workflows import AskHandle
from channels.notifications import producing
from channels.notifications.records import NotificationType
from state.database import Database
from tests.channels.telegram.helpers import (
    TOKEN,
    USER,
    configure_telegram_profile,
    db_rows,
    delivery_texts,
    expire_poller_leases,
    inbox_states,
    open_decision_now,
    press_button,
    prompt_message,
    reap,
    reply_to_prompt,
    run_cli,
    start_cli,
)

KILLS = int(os.environ.get("PIW_KILLS", "50"))  # CI runs the default, on the fixed seed
# A random run only on request (not a skip: CI counts skips as failures).
_ASKED_SEED = os.environ.get("PIW_KILL_SEED", "")
MAX_DECISIONS = 30
FIXED_SEED = 18
PHASES = ("start-up", "claim", "delivery", "long poll", "batch commit")
# The method a phase holds in flight (hung by the fake until the kill), and the pass it needs.
HELD = {"delivery": "sendMessage", "long poll": "getUpdates",
        "batch commit": "answerCallbackQuery"}
WAIT_S = 20.0  # a bound on waiting for a phase (never reached when the pass works)


@dataclass
class Matrix:
    home: Path
    fake: FakeBotApi
    rng: random.Random
    seed: int
    decisions: list[AskHandle] = field(default_factory=list)
    pushed: set[int] = field(default_factory=set)
    replied: set[str] = field(default_factory=set)
    notes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # text -> its effects
    kills: int = 0
    landed: Counter[str] = field(default_factory=Counter)

    def why(self) -> str:
        return f"(kill matrix seed {self.seed}, after {self.kills} kills)"

    # -- workload -------------------------------------------------------------------------------

    def open_decision(self) -> None:
        n = len(self.decisions)
        choices = {"continue": {"label": "Continue"}, "stop": {"label": "Stop"},
                   "replan": {"label": "Replan", "input": text_input(
                       "instructions", f"What should change in plan {n}?")}}
        self.decisions.append(open_decision_now(title=f"Approve plan {n}?", choices=choices))

    def notify(self) -> None:
        """A script's notification (a one-off run's progress card or final result)."""
        kind = self.rng.choice([NotificationType.PROGRESS, NotificationType.FINAL])
        text = f"Matrix {kind} {len(self.notes)}."
        with Database.open_writer() as db:
            done = producing.notify(db, producing.NotifySpec(kind=kind, text=text),
                                    load_config(), workflows.new_owner_id(db, "notify"))
        self.notes[text] = done.effect_ids

    def message_of(self, handle: AskHandle) -> int | None:
        """The delivered message of a decision as Telegram holds it (known to us or not)."""
        [text] = delivery_texts(handle)
        found = [m["message_id"] for m in self.fake.sent_messages(USER) if m["text"] == text]
        return int(found[0]) if found else None

    def push_work(self) -> int:
        """Push presses (and replies to prompts) on delivered decisions; how many."""
        pushed = len(self.pushed)
        for handle in self.rng.sample(self.decisions, min(3, len(self.decisions))):
            message = self.message_of(handle)
            if message is None:
                continue
            choice = self.rng.choice(["continue", "stop", "replan", "replan"])
            self.pushed.add(press_button(self.fake, handle, choice, message))
            prompt = prompt_message(handle.decision_id)
            if prompt is not None and handle.decision_id not in self.replied and \
                    self.rng.random() < 0.7:
                self.replied.add(handle.decision_id)
                self.pushed.add(reply_to_prompt(self.fake, prompt[0], prompt[1],
                                                f"reply to {handle.decision_id[-6:]}",
                                                message_id=10_000 + len(self.pushed)))
        return len(self.pushed) - pushed

    # -- one round ------------------------------------------------------------------------------

    def kill_one(self, phase: str) -> None:
        """Start a poller, wait until it is observably in `phase`, SIGKILL it, and count where
        the kill landed (seen at that moment: what is in flight, who holds the lease)."""
        self.fake.clear_faults()
        if phase in HELD:
            self.fake.inject(HELD[phase], Fault.hang(times=100))
        if phase == "claim":  # its first request waits, so the claim cannot be missed
            self.fake.inject(ANY_METHOD, Fault.hang(times=100))
        before = len(self.fake.requests())
        poller = start_cli(self.home, "poll", "--for", "30" if phase == "long poll" else "5")
        try:
            if phase == "start-up":  # before the interpreter has even imported the worker
                time.sleep(self.rng.uniform(0.0, 0.05))
            else:
                self._wait_for(phase, poller, before)
            if poller.poll() is None:
                poller.kill()
                poller.communicate(timeout=30)
                self.kills += 1
                # Seen after the kill, so nothing moves meanwhile: the held requests stay in
                # flight until released, and a dead poller changes no lease.
                self.landed[self._where(poller.pid, before)] += 1
            poller.communicate(timeout=30)
        finally:
            self.fake.clear_faults()
            self.fake.release()  # the held requests of the dead poller
            reap(poller)
        expire_poller_leases(poller.pid)

    def _wait_for(self, phase: str, poller: subprocess.Popen[str], before: int) -> None:
        end = time.monotonic() + WAIT_S
        while poller.poll() is None and time.monotonic() < end:
            if phase == "claim" and self._holds_lease(poller.pid):
                return
            if phase in HELD and self._in_flight(before, HELD[phase]):
                return
            time.sleep(0.002)

    def _in_flight(self, before: int, method: str | None = None) -> list[str]:
        return [r.method for r in self.fake.requests()[before:]
                if r.ended_at is None and (method is None or r.method == method)]

    def _holds_lease(self, pid: int) -> bool:
        return bool(db_rows("SELECT 1 FROM leases WHERE owner_type = 'channel' AND owner_id"
                            " LIKE ?", f"poll:%:{pid}:%"))

    def _where(self, pid: int, before: int) -> str:
        """The phase the kill of poller `pid` (started after request `before`) landed in."""
        flying = set(self._in_flight(before))
        for phase, method in HELD.items():
            if method in flying:
                return phase
        if len(self.fake.requests()) > before:
            return "between requests"
        return "claim" if self._holds_lease(pid) else "start-up"

    # -- invariants -----------------------------------------------------------------------------

    def check(self) -> None:
        why = self.why()
        pending = {int(u["update_id"]) for u in self.fake.pending_updates()}
        stored = {s.update_id for s in inbox_states()}
        acknowledged = self.pushed - pending
        assert acknowledged <= stored, f"acknowledged updates lost: {acknowledged - stored} {why}"
        winners = Counter(d for (d,) in db_rows(
            "SELECT decision_id FROM human_decision_submissions WHERE result = 'won'"))
        assert all(n == 1 for n in winners.values()), f"two winners: {winners} {why}"
        resolved = Counter(d for (d,) in db_rows(
            "SELECT decision_id FROM human_decision_resolutions"))
        assert all(n == 1 for n in resolved.values()), why
        # The same text may rightly reach a chat twice when it answers two messages ("Already
        # decided: Stop, by Ada" to replies on two decisions): a send is its text and what it
        # replies to. A request cut by the kill before its body arrived sent nothing.
        sent = Counter((str(r.params.get("chat_id")), str(r.params.get("text")),
                        str(r.params.get("reply_parameters")))
                       for r in self.fake.requests("sendMessage") if r.params.get("text"))
        twice = {text[:40]: n for (_, text, _), n in sent.items() if n > 1}
        assert twice == {}, f"sent again blindly: {twice} {why}"
        # A request cut by the kill before its body arrived names no query (the fake refuses
        # it, as Telegram would): it answered nothing.
        answered = Counter(str(r.params["callback_query_id"])
                           for r in self.fake.requests("answerCallbackQuery")
                           if r.params.get("callback_query_id") is not None)
        assert all(n == 1 for n in answered.values()), f"answered twice: {answered} {why}"


def make_matrix(home: Path, seed: int) -> Iterator[Matrix]:
    print(f"kill matrix seed: {seed} (replay: PIW_KILL_SEED={seed})")
    with FakeBotApi(TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        yield Matrix(home, fake, random.Random(seed), seed)


@pytest.fixture(params=["fixed seed", *(["asked seed"] if _ASKED_SEED else [])])
def matrix(home: Path, request: pytest.FixtureRequest) -> Iterator[Matrix]:
    if request.param == "fixed seed":
        seed = FIXED_SEED
    elif _ASKED_SEED == "random":
        seed = time.time_ns() % 2**32
    else:
        seed = int(_ASKED_SEED)
    yield from make_matrix(home, seed)


def test_random_sigkills_lose_no_acknowledged_update_and_never_resend_or_double_resolve(
    matrix: Matrix,
) -> None:
    kills = KILLS // 2
    rounds = 0
    plan: list[str] = []
    while matrix.kills < kills:
        rounds += 1
        assert rounds <= 2 * kills, f"pollers kept finishing before their kill {matrix.why()}"
        if not plan:  # every phase once per block, in a seeded order; a delivery first
            plan = matrix.rng.sample(PHASES, len(PHASES))
            if rounds == 1:
                plan.remove("delivery")
                plan.insert(0, "delivery")
        phase = plan.pop(0)
        if len(matrix.decisions) < MAX_DECISIONS and (phase == "delivery" or rounds % 3 == 1):
            matrix.open_decision()
        if rounds % 2 == 0:
            matrix.notify()
        if matrix.push_work() == 0 and phase == "batch commit":
            phase = "long poll"  # no press to commit yet (nothing delivered so far)
        matrix.kill_one(phase)
        matrix.check()

    outcomes = Counter(s for (s,) in db_rows("SELECT status FROM channel_messages"))
    print(f"kill matrix: {matrix.kills} kills in {rounds} rounds, {len(matrix.pushed)} updates,"
          f" {len(matrix.decisions)} decisions, messages by status {dict(outcomes)}")
    print("kills by phase: " + ", ".join(f"{p} {matrix.landed[p]}" for p in
                                         [*PHASES, "between requests"]))
    missed = [p for p in PHASES if matrix.landed[p] == 0]
    assert not missed, f"no kill landed in {missed}: {dict(matrix.landed)} {matrix.why()}"
    for _ in range(4):  # drain: clean passes until nothing is left to do
        result = run_cli(matrix.home, "poll", "--once")
        # A send a kill left ambiguous needs a person while its decision is open: poll says
        # so (once, then quietly with exit 75). Nothing else may be wrong.
        assert result.returncode in (0, 75), f"{result.stderr} {matrix.why()}"
        assert all("may not have arrived" in line or line.startswith("Recovered:")
                   for line in result.stderr.splitlines()), f"{result.stderr} {matrix.why()}"
    matrix.check()
    assert matrix.fake.pending_updates() == [], matrix.why()
    states = inbox_states()
    assert {s.update_id for s in states} == matrix.pushed, matrix.why()
    assert all(s.processed for s in states), matrix.why()
    won = {d for (d,) in db_rows(
        "SELECT decision_id FROM human_decision_submissions WHERE result = 'won'")}
    resolved = {d for (d,) in db_rows("SELECT decision_id FROM human_decision_resolutions")}
    assert won <= resolved, matrix.why()
    # Every notification reached the chat exactly once, unless a kill left it ambiguous
    # (it may have arrived: never sent again), and then at most once.
    texts = [str(r.params.get("text")) for r in matrix.fake.requests("sendMessage")]
    for note, effect_ids in matrix.notes.items():
        sends = sum(note in text for text in texts)
        statuses = {str(st) for (st,) in db_rows(
            "SELECT status FROM effects WHERE effect_type = 'telegram.notify' AND effect_id IN"
            " (" + ",".join("?" * len(effect_ids)) + ")", *effect_ids)}
        assert sends == 1 or (sends == 0 and statuses == {"ambiguous"}), \
            f"{note!r} sent {sends} times, effects {statuses} {matrix.why()}"
