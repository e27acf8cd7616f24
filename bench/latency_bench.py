"""Latency benchmark: how fast a decision reaches Telegram, and an answer the one who waits,
while the README's cron line runs (`piw-channels poll --for 55`, started every 60 s, as
successive runs), against the loopback fake Bot API over https (a TLS front, as in the other
benches).

Prints, in one run (target p95 <= 1 s for both directions, met or not):
  (a) no backlog, --decisions probes, one after another at random gaps: each is a real
      `piw-channels ask --wait --json` process; ask -> sendMessage is from the decision's
      commit (its created_at) to the moment the fake received the sendMessage that carries
      it; press -> answer is from pushing the button press into the fake (as Telegram would
      hand it to getUpdates) to the moment the waiting `ask --wait` printed the answer;
  (b) with a backlog: --decisions probes delivered and waiting, then --backlog decisions
      opened at once while every sendMessage is held --pace seconds by the fake (a send
      rate of one message per --pace seconds, as Telegram allows about 1 message/s per
      chat); the probes are pressed while the backlog drains: press -> answer, and the
      deliveries still pending at each press; also ask -> sendMessage for --late probes asked
      during the backlog (they queue behind it: deliveries go out oldest first).
Samples are split by whether a poll was running when the ask was committed (or the press
pushed): the target is about the time a poller runs; the few seconds between two cron runs
(a run ends at 55 s, the next starts at 60 s) are reported on their own line.

Run: python bench/latency_bench.py [--decisions N] [--backlog N] [--pace S] [--late N]
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
from state.database import Database

TARGET_S = 1.0
CRON_PERIOD_S = 60.0
WINDOW_S = 55
WAIT_S = 180.0  # the longest any one step may take before the bench gives up


class Cron:
    """Starts `poll --for 55` every CRON_PERIOD_S, like the README's crontab line; records
    when each run was alive."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self._env = env
        self._log = log
        self.runs: list[list[float]] = []  # [start, end] (end = inf while alive)
        self._stop = threading.Event()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        command = [*piw.poll_command()[:-1], "--for", str(WINDOW_S)]
        start = time.time()
        while not self._stop.is_set():
            run = [time.time(), float("inf")]
            with self._log.open("ab") as err:
                proc = subprocess.Popen(command, env=self._env, stdout=err, stderr=err)
            self._procs.append(proc)
            self.runs.append(run)
            threading.Thread(target=self._reap, args=(proc, run), daemon=True).start()
            start += CRON_PERIOD_S
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


def line(label: str, samples: list[float]) -> str:
    if not samples:
        return f"    {label:46s} n=0"
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, max(0, -(-95 * len(ordered) // 100) - 1))]
    met = "met" if p95 <= TARGET_S else "NOT met"
    return (f"    {label:46s} n={len(samples):3d}  p50 {statistics.median(ordered):6.3f} s"
            f"  p95 {p95:6.3f} s  max {ordered[-1]:6.3f} s  (target p95 <= {TARGET_S:.0f} s:"
            f" {met})")


def split(cron: Cron, samples: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """(latencies of samples taken while a poll ran, latencies of those between runs)."""
    inside = [v for t, v in samples if cron.polling_at(t)]
    between = [v for t, v in samples if not cron.polling_at(t)]
    return inside, between


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
    print(f"(a) no backlog: {n} decisions, `poll --for {WINDOW_S}` started every"
          f" {CRON_PERIOD_S:.0f} s")
    for label, samples in (("ask -> sendMessage", sends), ("press -> answer (ask --wait)",
                                                           answers)):
        inside, between = split(cron, samples)
        print(line(label + ", while a poll runs", inside))
        print(line(label + ", between two runs", between))
        print(line(label + ", all", inside + between))


def with_backlog(env: dict[str, str], db_path: Path, home: Path, control: RemoteFakeBotApi,
                 cron: Cron, n: int, backlog: int, pace: float, late: int) -> None:
    probes = [Probe.start(env, f"Backlog probe #{i:03d}?") for i in range(n)]
    for probe in probes:
        sent_at(control, probe.title)
    control.inject("sendMessage", Fault.delay(pace, times=backlog + 2 * n + late + 10))
    os.environ["HOME"] = str(home)
    with Database.open_writer(db_path) as db:
        piw.open_decisions(db, backlog, 10_000)
    sends_before = len(control.requests("sendMessage"))
    if not control.wait_received("sendMessage", sends_before + 1, WAIT_S):
        _until("the backlog's first send", "none")
    lates = [Probe.start(env, f"Late probe #{i:03d}?") for i in range(late)]
    answers: list[tuple[float, float]] = []
    pending: list[int] = []
    for probe in probes:
        time.sleep(random.uniform(0.2, 1.2))
        pending.append(pending_deliveries(db_path))
        press(control, probe)
        assert probe.pressed_at is not None
        answers.append((probe.pressed_at, probe.wait_answer()))
    sends: list[tuple[float, float]] = []
    for probe in lates:
        probe.asked_at = asked_at(db_path, probe.title)
        probe.sent_at = sent_at(control, probe.title)
        sends.append((probe.asked_at, probe.sent_at - probe.asked_at))
        press(control, probe)
        probe.wait_answer()
    print(f"(b) backlog: {backlog} deliveries opened at once, each sendMessage held {pace:.1f} s"
          f" by the fake; {n} waiting decisions pressed while it drains (deliveries still"
          f" pending at the presses: {min(pending)}-{max(pending)})")
    inside, between = split(cron, answers)
    print(line("press -> answer, while a poll runs", inside))
    print(line("press -> answer, between two runs", between))
    print(line("press -> answer, all", inside + between))
    inside, between = split(cron, sends)
    print(line("ask -> sendMessage, behind the backlog", inside + between))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=30, help="probes per scenario")
    parser.add_argument("--backlog", type=int, default=60, help="deliveries in the backlog")
    parser.add_argument("--pace", type=float, default=1.0, help="seconds the fake holds a send")
    parser.add_argument("--late", type=int, default=3, help="probes asked during the backlog")
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
                cron = Cron(env, log)
                try:
                    print(f"seed {seed}; the README's cron line: `poll --for {WINDOW_S}` every"
                          f" {CRON_PERIOD_S:.0f} s, over https to the loopback fake")
                    no_backlog(env, db_path, fake.control, cron, args.decisions)
                    with_backlog(env, db_path, home, fake.control, cron, args.decisions,
                                 args.backlog, args.pace, args.late)
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
