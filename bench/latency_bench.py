"""Latency benchmark: how fast a decision reaches Telegram, and an answer the one who waits,
while the README's cron line runs (`piw-channels poll --for 65`, started every 60 s, so each run
overlaps the next by 5 s and the next takes over at its release), against the loopback fake Bot
API over https (a TLS front, as in the other benches).

Prints, in one run, p50/p95 with their spread (min-max, n) and the machine's load average
(target p95 <= 1 s for both directions, met or not):
  (a) steady state: --decisions probes, one after another at random gaps: each is a real
      `piw-channels ask --wait --json` process; ask -> sendMessage is from the decision's
      commit (its created_at) to the moment the fake received the sendMessage that carries
      it; press -> answer is from pushing the button press into the fake (as Telegram would
      hand it to getUpdates) to the moment the waiting `ask --wait` printed the answer;
  (h) the cron hand-over: the same cron line at a shorter period (--handover-period, the same
      5 s overlap) so that many hand-overs fit in a few minutes; decisions are asked and
      delivered decisions pressed at random moments, and the samples within 1 s of a
      hand-over (from the release of one run's lease to the claim of the next, read from the
      lease events) are reported (press -> the resolution committed, which is what
      `ask --wait` watches); also the hand-over gaps themselves;
  (b) with a backlog: --decisions probes delivered and waiting, then --backlog decisions
      opened at once while every sendMessage is held --pace seconds by the fake (a send rate
      of one message per --pace seconds, as Telegram allows about 1 message/s per chat);
      while the backlog drains, each probe is pressed (press -> answer) and a new decision
      is asked (ask -> sendMessage), with the deliveries still pending at each.

No unpaced beside paced per press here: this bench runs with Telegram's limits on throughout
(what a user meets) and times single decisions, not a batch's cost; the per-press figures,
unpaced and paced (one chat, five chats): poll_bench, peer_bench, history_bench.

Run: python bench/latency_bench.py [--decisions N] [--backlog N] [--pace S]
     [--handover-period S] [--handovers N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.telegram.fake import FakeBotApiProcess, Fault, RemoteFakeBotApi
from bench import piw
from bench.common import TOKEN, USER, TlsFront, self_signed
from channels.decisions import workflows
from state.database import Database

TARGET_S = 1.0
CRON_PERIOD_S = 60.0
WINDOW_S = 65  # the README's cron line: runs overlap by 5 s
OVERLAP_S = WINDOW_S - CRON_PERIOD_S
NEAR_HANDOVER_S = 1.0
WAIT_S = 180.0  # the longest any one step may take before the bench gives up
NO_SIDE_BY_SIDE = ("no unpaced-beside-paced per press here: Telegram's limits stay on throughout"
                   " and single decisions are timed, not a batch's cost (per press, unpaced and"
                   " paced, 1 and 5 chats: poll_bench, peer_bench, history_bench)")


class Cron:
    """Starts `poll --for 55` every CRON_PERIOD_S, like the README's crontab line; records
    when each run was alive."""

    def __init__(self, env: dict[str, str], log: Path, period: float = CRON_PERIOD_S) -> None:
        self._env = env
        self._log = log
        self.period = period
        self.runs: list[list[float]] = []  # [start, end] (end = inf while alive)
        self._stop = threading.Event()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        command = [*piw.poll_command()[:-1], "--for", str(int(self.period + OVERLAP_S))]
        start = time.time()
        while not self._stop.is_set():
            run = [time.time(), float("inf")]
            with self._log.open("ab") as err:
                proc = subprocess.Popen(command, env=self._env, stdout=err, stderr=err)
            self._procs.append(proc)
            self.runs.append(run)
            threading.Thread(target=self._reap, args=(proc, run), daemon=True).start()
            start += self.period
            self._stop.wait(max(0.0, start - time.time()))

    @staticmethod
    def _reap(proc: subprocess.Popen[bytes], run: list[float]) -> None:
        proc.wait()
        run[1] = time.time()

    def polling_at(self, t: float) -> bool:
        return any(start <= t < end for start, end in list(self.runs))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()  # SIGTERM: the pass releases its lease and exits 143
            proc.wait(30)


@dataclass
class Probe:
    """One `ask --wait --json` process and what was measured about it."""

    title: str
    proc: subprocess.Popen[str]
    answered_at: float | None = None
    answer: dict[str, object] = field(default_factory=dict)
    asked_at: float | None = None  # the decision's commit (created_at)
    sent_at: float | None = None  # the fake received its sendMessage
    pressed_at: float | None = None

    @classmethod
    def start(cls, env: dict[str, str], title: str) -> Probe:
        cli = piw.poll_command()[:-2]
        proc = subprocess.Popen(
            [*cli, "ask", "--title", title, "--choice", "yes=Yes", "--choice", "no=No",
             "--wait", "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        probe = cls(title, proc)
        threading.Thread(target=probe._read, daemon=True).start()
        return probe

    def _read(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.answered_at = time.time()
        if line.strip():
            self.answer = json.loads(line)

    def wait_answer(self) -> float:
        try:
            code = self.proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _until(f"the answer to {self.title!r}", "ask --wait still waiting")
        stderr = self.proc.stderr.read() if self.proc.stderr else ""
        if code != 0 or self.answer.get("choice") != "yes" or self.answered_at is None:
            raise SystemExit(f"{self.title}: ask --wait exited {code} with {self.answer}:"
                             f" {stderr.strip()}")
        assert self.pressed_at is not None
        return self.answered_at - self.pressed_at


def _until(what: str, found: object, timeout: float = WAIT_S) -> None:
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what} ({found})")


def asked_at(db_path: Path, title: str) -> float:
    end = time.time() + WAIT_S
    while time.time() < end:
        with Database.open_reader(db_path) as db:
            got = db.conn.execute("SELECT created_at FROM human_decisions WHERE title = ?",
                                  (title,)).get
        if got is not None:
            return int(got) / 1000
        time.sleep(0.02)
    _until(f"the decision {title!r}", "not in the database")
    raise AssertionError


def sent_at(control: RemoteFakeBotApi, title: str) -> float:
    """When the fake received the sendMessage that carries the decision's keyboard."""
    end = time.time() + WAIT_S
    while time.time() < end:
        for r in control.requests("sendMessage"):
            if title in str(r.params.get("text")) and r.params.get("reply_markup"):
                return r.started_at
        time.sleep(0.02)
    _until(f"the delivery of {title!r}", "no sendMessage")
    raise AssertionError


def press(control: RemoteFakeBotApi, probe: Probe) -> None:
    """Press the probe's first button (Yes), as Telegram would hand it to getUpdates."""
    end = time.time() + WAIT_S
    while not (boards := [k for k in control.keyboards() if probe.title in str(k["text"])]):
        if time.time() > end:  # a held send is stored once the fake answers it
            _until(f"the keyboard of {probe.title!r}", "none")
        time.sleep(0.02)
    board = boards[0]
    data = board["inline_keyboard"][0][0]["callback_data"]
    probe.pressed_at = time.time()
    control.push_fixture("callback_press.json", {
        "user_id": USER, "chat_id": USER, "message_id": board["message_id"],
        "message_text": "decision", "callback_data": data})


def pending_deliveries(db_path: Path) -> int:
    with Database.open_reader(db_path) as db:
        return int(db.conn.execute(
            "SELECT count(*) FROM effects WHERE effect_type = 'telegram.deliver'"
            " AND status IN ('pending', 'applying')").get)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f} (1/5 min) on {os.cpu_count()} cores"


def line(label: str, samples: list[float]) -> str:
    if not samples:
        return f"    {label:48s} n=0"
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, max(0, -(-95 * len(ordered) // 100) - 1))]
    met = "met" if p95 <= TARGET_S else "NOT met"
    return (f"    {label:48s} n={len(samples):3d}  p50 {statistics.median(ordered):6.3f} s"
            f"  p95 {p95:6.3f} s  (min {ordered[0]:5.3f}, max {ordered[-1]:6.3f})"
            f"  target p95 <= {TARGET_S:.0f} s: {met}; {load()}")


def handovers(db_path: Path, since: float = 0.0) -> list[tuple[float, float]]:
    """(release of one run's lease, claim by the next) for every hand-over after `since`,
    from the events."""
    with Database.open_reader(db_path) as db:
        rows = list(db.conn.execute(
            "SELECT event_type, recorded_at FROM events WHERE event_type IN"
            " ('channel.lease_released', 'channel.lease_acquired') AND recorded_at > ?"
            " ORDER BY event_seq", (int(since * 1000),)))
    pairs, released = [], None
    for kind, at in rows:
        if kind == "channel.lease_released":
            released = int(at) / 1000
        elif released is not None:
            pairs.append((released, int(at) / 1000))
            released = None
    return pairs


def claimed_since(db_path: Path, since: float) -> bool:
    with Database.open_reader(db_path) as db:
        return int(db.conn.execute(
            "SELECT count(*) FROM events WHERE event_type = 'channel.lease_acquired'"
            " AND recorded_at > ?", (int(since * 1000),)).get) > 0


def near(t: float, pairs: list[tuple[float, float]]) -> bool:
    return any(r - NEAR_HANDOVER_S <= t <= a + NEAR_HANDOVER_S for r, a in pairs)


def no_backlog(env: dict[str, str], db_path: Path, control: RemoteFakeBotApi, cron: Cron,
               n: int) -> None:
    sends: list[tuple[float, float]] = []
    answers: list[tuple[float, float]] = []
    for i in range(n):
        time.sleep(random.uniform(0.0, 2.0))  # lands anywhere in a long poll
        probe = Probe.start(env, f"Latency probe #{i:03d}?")
        probe.asked_at = asked_at(db_path, probe.title)
        probe.sent_at = sent_at(control, probe.title)
        sends.append((probe.asked_at, probe.sent_at - probe.asked_at))
        time.sleep(random.uniform(0.0, 1.0))
        press(control, probe)
        assert probe.pressed_at is not None
        answers.append((probe.pressed_at, probe.wait_answer()))
    pairs = handovers(db_path)
    print(f"(a) steady state: {n} decisions, `poll --for {WINDOW_S}` started every"
          f" {CRON_PERIOD_S:.0f} s ({len(pairs)} hand-overs meanwhile)")
    for label, samples in (("ask -> sendMessage", sends), ("press -> answer (ask --wait)",
                                                           answers)):
        print(line(label + ", all", [v for _, v in samples]))
        print(line(label + ", within 1 s of a hand-over",
                   [v for t, v in samples if near(t, pairs)]))


def resolved_at(db_path: Path, decision_id: str) -> float:
    end = time.time() + WAIT_S
    while time.time() < end:
        with Database.open_reader(db_path) as db:
            got = db.conn.execute("SELECT 1 FROM human_decision_resolutions"
                                  " WHERE decision_id = ?", (decision_id,)).get
        if got is not None:
            return time.time()
        time.sleep(0.02)
    _until(f"the resolution of {decision_id}", "none")
    raise AssertionError


def breakdown(db_path: Path, title: str, asked: float) -> str:
    """Where an ask's time went: its delivery reserved, and its attempts begun, after the
    ask (seconds), with their owners' pids."""
    with Database.open_reader(db_path) as db:
        rows = list(db.conn.execute(
            "SELECT e.created_at, a.started_at, a.outcome, a.owner_id FROM human_decisions d"
            " JOIN effects e ON e.source_resource_id = d.resource_id"
            " AND e.effect_type = 'telegram.deliver'"
            " LEFT JOIN effect_attempts a USING (effect_id) WHERE d.title = ?", (title,)))
    return "; ".join(
        f"reserved +{int(r) / 1000 - asked:.2f}"
        + (f", attempt +{int(a) / 1000 - asked:.2f} {o} by {str(w).split(':')[2]}" if a else "")
        for r, a, o, w in rows)


def handover(home: Path, db_path: Path, control: RemoteFakeBotApi, cron: Cron,
             count: int) -> None:
    """One ask and one press landing within 1 s of each of `count` hand-overs of a faster
    cron (the hand-overs are periodic: each run starts a period after the last, and polls
    for the same window), spaced so one chat's one message a second is not the bottleneck
    (a press's settlement posts two messages)."""
    os.environ["HOME"] = str(home)
    begun = time.time()
    while not handovers(db_path, begun):
        time.sleep(0.05)  # the phase's first hand-over fixes the phase of the next ones
    since = begun
    sends: list[tuple[float, float]] = []
    answers: list[tuple[float, float]] = []
    slow: list[str] = []
    ready: list[tuple[workflows.AskHandle, str]] = []
    for k in range(1, count + 1):
        last = handovers(db_path, since)[-1][0]
        if k % 2:  # just before a release: predicted from the last one (runs are periodic)
            target = last + cron.period + random.uniform(-NEAR_HANDOVER_S, 0.0)
            time.sleep(max(0.0, target - time.time()))
        else:  # right after one: as soon as the next release is committed
            while handovers(db_path, since)[-1][0] == last:
                time.sleep(0.02)
            time.sleep(random.uniform(0.0, 0.3))
        with Database.open_writer(db_path) as db:
            [handle] = piw.open_decisions(db, 1, 20_000 + k)
        title = f"Approve step {20_000 + k}?"  # as open_decisions names it
        asked = asked_at(db_path, title)
        sends.append((asked, sent_at(control, title) - asked))
        if sends[-1][1] > TARGET_S:
            slow.append(f"{sends[-1][1]:.2f} s: {breakdown(db_path, title, asked)}")
        ready.append((handle, title))
        if len(ready) > 1:  # the one before: its keyboard is stored, its settlement is done
            pressed, pressed_title = ready.pop(0)
            t0 = press_title(control, pressed_title)
            answers.append((t0, resolved_at(db_path, pressed.decision_id) - t0))
    pairs = handovers(db_path, since)
    gaps = [a - r for r, a in pairs]
    print(f"(h) hand-over: `poll --for {int(cron.period + OVERLAP_S)}` started every"
          f" {cron.period:.0f} s (the README's 5 s overlap), {len(pairs)} hand-overs,"
          f" release -> next claim: p50 {statistics.median(gaps):.3f} s,"
          f" max {max(gaps):.3f} s")
    print(line("ask -> sendMessage, within 1 s of a hand-over",
               [v for t, v in sends if near(t, pairs)]))
    print(line("press -> resolution, within 1 s of a hand-over",
               [v for t, v in answers if near(t, pairs)]))
    print(line("ask -> sendMessage, all of (h)", [v for _, v in sends]))
    print(line("press -> resolution, all of (h)", [v for _, v in answers]))
    for found in slow:
        print(f"    slow: {found}")


def press_title(control: RemoteFakeBotApi, title: str) -> float:
    """Press the first button of the decision titled so; when the press was pushed."""
    end = time.time() + WAIT_S
    while not (boards := [k for k in control.keyboards() if title in str(k["text"])]):
        if time.time() > end:
            _until(f"the keyboard of {title!r}", "none")
        time.sleep(0.02)
    data = boards[0]["inline_keyboard"][0][0]["callback_data"]
    t0 = time.time()
    control.push_fixture("callback_press.json", {
        "user_id": USER, "chat_id": USER, "message_id": boards[0]["message_id"],
        "message_text": "decision", "callback_data": data})
    return t0


def with_backlog(env: dict[str, str], db_path: Path, home: Path, control: RemoteFakeBotApi,
                 n: int, backlog: int, pace: float) -> None:
    probes = [Probe.start(env, f"Backlog probe #{i:03d}?") for i in range(n)]
    for probe in probes:
        sent_at(control, probe.title)
    control.inject("sendMessage", Fault.delay(pace, times=backlog + 3 * n + 10))
    os.environ["HOME"] = str(home)
    with Database.open_writer(db_path) as db:
        piw.open_decisions(db, backlog, 10_000)
    sends_before = len(control.requests("sendMessage"))
    if not control.wait_received("sendMessage", sends_before + 1, WAIT_S):
        _until("the backlog's first send", "none")
    answers: list[float] = []
    sends: list[float] = []
    pending: list[int] = []
    for i, probe in enumerate(probes):
        time.sleep(random.uniform(0.2, 1.2))
        pending.append(pending_deliveries(db_path))
        press(control, probe)
        answers.append(probe.wait_answer())
        time.sleep(random.uniform(0.0, 1.0))
        with Database.open_writer(db_path) as db:
            piw.open_decisions(db, 1, 30_000 + i)
        title = f"Approve step {30_000 + i}?"  # as open_decisions names it
        asked = asked_at(db_path, title)
        sends.append(sent_at(control, title) - asked)
    print(f"(b) backlog: {backlog} deliveries opened at once, each sendMessage held {pace:.1f} s"
          f" by the fake; while it drains, {n} waiting decisions pressed and {n} new ones asked"
          f" (deliveries still pending meanwhile: {min(pending)}-{max(pending)})")
    print(line("press -> answer (ask --wait), during the backlog", answers))
    print(line("ask -> sendMessage, during the backlog", sends))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=30, help="probes per scenario")
    parser.add_argument("--backlog", type=int, default=200, help="deliveries in the backlog")
    parser.add_argument("--pace", type=float, default=1.0, help="seconds the fake holds a send")
    parser.add_argument("--handover-period", type=float, default=8.0,
                        help="the cron period of (h), seconds")
    parser.add_argument("--handovers", type=int, default=32, help="hand-overs (h) runs over")
    parser.add_argument("--phases", default="ahb", help="which of (a), (h), (b) to run")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    random.seed(seed)
    os.environ.pop("PI_WORKFLOWS_CONFIG_DIR", None)
    piw.compile_like_an_install()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        base.chmod(0o700)
        token_file = base / "fake.token"
        token_file.write_text(TOKEN)
        token_file.chmod(0o600)
        cert, key, bundle = self_signed(base)
        with FakeBotApiProcess(token_file) as fake:
            front = TlsFront(fake.base_url, cert, key)
            try:
                home = piw.make_home(base / "home", front.base_url)
                env = piw.child_env(home, SSL_CERT_FILE=str(bundle))
                db_path = home / ".pi/agent/workflows/state.sqlite"
                subprocess.run([*piw.poll_command()[:-2], "init"], env=env, check=True,
                               capture_output=True)
                log = base / "poll.log"
                print(f"seed {seed}; over https to the loopback fake; {load()}")
                print(NO_SIDE_BY_SIDE)
                for phase in args.phases:
                    period = args.handover_period if phase == "h" else CRON_PERIOD_S
                    cron = Cron(env, log, period)
                    try:
                        if phase == "a":
                            no_backlog(env, db_path, fake.control, cron, args.decisions)
                        elif phase == "h":
                            handover(home, db_path, fake.control, cron, args.handovers)
                        else:
                            with_backlog(env, db_path, home, fake.control, args.decisions,
                                         args.backlog, args.pace)
                    finally:
                        cron.stop()
                    runs = [end - start for start, end in cron.runs]
                    print(f"    {len(runs)} poll runs, lasting {min(runs):.1f}-{max(runs):.1f} s")
                output = log.read_text().strip()
                if output:
                    print(f"    poll printed: {output[:500]}")
            finally:
                front.close()


if __name__ == "__main__":
    main()
