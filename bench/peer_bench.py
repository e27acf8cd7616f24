"""piw-channels against a naive python-telegram-bot approval bot (bench/peer_bot.py), both run
as cron processes over https (a loopback TLS front with a self-signed certificate) against
their own copy of the same fake Bot API, with the same workload.

Each round: --presses button presses on delivered decisions handled by one
`piw-channels poll --once` (resolve, answer the callback, remove the keyboard, post the
outcome, finish the ask run), by one peer run without and one with the outcome post, in ABBA
order (reversed every other round); then the idle runs of each, ABBA too. Per press = (batch
run - idle run) / presses; end to end per press = batch run / presses (start-up included, as
a user's cron run pays it); medians with their spread over rounds, and the machine's load.
Also: fsync/fdatasync per press of one batch of each (strace -f -c on the process), and the
cold (idle) runs against `python -c "import telegram"`.

Then the paced figures a user meets (bench/paced.py): --paced-presses presses in one chat,
then the same presses spread over --paced-chats chats (each its own profile, bot, fake and
audience: a profile sends a decision to every chat it allows), handled by
`piw-channels poll --once` passes with Telegram's limits (one message a second to a chat, a
short burst), pass after pass until every one is settled (a pass ends at its 15 s bound; the
rest is left for the next): the presses, chats, passes, their wall time, per press. The naive
bot has no pacer (python-telegram-bot sends at once, and meets Telegram's 429s instead): its
paced figure is its unpaced one. Printed beside the unpaced per press
(`bench.common.side_by_side`). --paced-presses is 10 by default: one chat takes one message a
second, two per press, so 10 presses take ~20 s of passes in one chat where 100 would take
~200 s; over 5 chats, 2 presses each fit in a chat's burst.

Targets: piw per press <= 1.0x the peer that posts the outcome; <= 3 fdatasync per press;
cold piw <= 1.5x `import telegram`.

Run: python bench/peer_bench.py [--rounds N] [--presses N] [--paced-presses N] [--paced-chats N]
     [--http]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.telegram.fake import FakeBotApiProcess
from bench import paced as pacing
from bench import piw
from bench.common import (
    TOKEN,
    USER,
    TlsFront,
    abba,
    machine_load,
    self_signed,
    side_by_side,
    spread,
    unpaced,
)
from state.database import Database

PEER = [sys.executable, str(Path(__file__).with_name("peer_bot.py"))]


class Peer:
    def __init__(self, state: Path, base_url: str, token_file: Path, env: dict[str, str]) -> None:
        state.mkdir(mode=0o700)
        self.args = [*PEER, "--base-url", base_url, "--token-file", str(token_file),
                     "--state", str(state)]
        self.env = env

    def setup(self, n: int) -> list[tuple[str, int]]:
        out = subprocess.run([*self.args, "--setup", str(n), "--chat", str(USER)], env=self.env,
                             capture_output=True, text=True, check=True)
        return [(str(d), int(m)) for d, m in json.loads(out.stdout)]

    def argv(self, post: bool) -> list[str]:
        return [*self.args, "--post"] if post else list(self.args)


class Plain:
    """The fake itself, over plain http (--http): no TLS front."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def close(self) -> None:
        pass


def push_peer_presses(fake: FakeBotApiProcess, sent: list[tuple[str, int]]) -> None:
    for decision, message_id in sent:
        fake.control.push_fixture("callback_press.json", {
            "user_id": USER, "chat_id": USER, "message_id": message_id,
            "message_text": "decision", "callback_data": f"{decision}:c"})


def strace_syncs(argv: list[str], env: dict[str, str], out: Path) -> int:
    """fsync + fdatasync calls of one run (all threads and children), by strace -f -c."""
    subprocess.run(["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(out), *argv],
                   env=env, check=True, capture_output=True)
    total = 0
    for line in out.read_text().splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)$", line)
        if m:
            total += int(m.group(1))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--presses", type=int, default=100, help="presses per batch (<= 100)")
    parser.add_argument("--paced-presses", type=int, default=10,
                        help="presses for the paced figures (0: none)")
    parser.add_argument("--paced-chats", type=int, default=5,
                        help="chats the paced presses are spread over (beside one chat)")
    parser.add_argument("--http", action="store_true",
                        help="plain http to the fakes (no TLS front)")
    args = parser.parse_args()
    n = args.presses
    os.environ.pop("PI_WORKFLOWS_CONFIG_DIR", None)
    print(f"start: {machine_load()}")
    print(unpaced())
    piw.compile_like_an_install()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        base.chmod(0o700)
        token_file = base / "fake.token"
        token_file.write_text(TOKEN)
        token_file.chmod(0o600)
        cert, key, bundle = self_signed(base)
        os.environ["SSL_CERT_FILE"] = str(bundle)  # this process delivers over https too
        fakes = [FakeBotApiProcess(token_file) for _ in range(3)]  # piw, peer, peer+post
        with fakes[0] as piw_fake, fakes[1], fakes[2]:
            piw_tls, *peer_tls = (Plain(f.base_url) if args.http else
                                  TlsFront(f.base_url, cert, key) for f in fakes)
            home = piw.make_home(base / "piw", piw_tls.base_url)
            os.environ["HOME"] = str(home)
            env = piw.child_env(home, SSL_CERT_FILE=str(bundle))
            peers = {post: Peer(base / f"peer-{post}", peer_tls[post].base_url, token_file, env)
                     for post in (False, True)}
            poll = piw.poll_command()
            piw.wall(poll, env)  # creates the database, registers the channel
            samples: dict[str, list[float]] = {"piw": [], "peer": [], "peer+post": []}
            idle: dict[str, list[float]] = {k: [] for k in (*samples, "import telegram")}
            syncs: dict[str, float] = {}
            done = 0
            for round_ in range(args.rounds + 1):
                # Set-up only: the timed cron runs must find the database closed, as cron
                # does (an open connection keeps a process from checkpointing at exit, and
                # moves that work into the next run's commits).
                with Database.open_writer() as db:
                    handles = piw.open_decisions(db, n, done)
                    piw.poll_in_process(db)  # delivery: not part of the figure
                    piw.push_presses(piw_fake.control, db, handles)
                    done += n
                batches: dict[str, tuple[list[str], dict[str, str]]] = {"piw": (poll, env)}
                for post, peer in peers.items():
                    push_peer_presses(fakes[1 + post], peer.setup(n))
                    batches["peer+post" if post else "peer"] = (peer.argv(post), env)
                if round_ == args.rounds:  # the last batch is counted, not timed
                    if shutil.which("strace") is None:
                        break
                    for name, (argv, e) in batches.items():
                        syncs[name] = strace_syncs(argv, e, base / f"{name}.strace") / n
                    break
                for name in abba(list(batches), round_):
                    argv, e = batches[name]
                    samples[name].append(piw.wall(argv, e))
                with Database.open_reader() as db:
                    piw.check_settled(db, done)
                idles = {"piw": (poll, env), "peer": (peers[False].argv(False), env),
                         "peer+post": (peers[True].argv(True), env),
                         "import telegram": (piw.IMPORT_TELEGRAM, env)}
                for name, seconds in piw.alternating_medians(idles, 4).items():
                    idle[name].append(seconds)
            with Database.open_reader() as db:
                piw.check_settled(db, done)
            paced = pacing.paced_figures(
                base, args.paced_presses, (1, args.paced_chats),
                Plain if args.http else lambda url: TlsFront(url, cert, key),
                {"SSL_CERT_FILE": str(bundle)}) if args.paced_presses else None
            for front in (piw_tls, *peer_tls):
                front.close()

    med = {k: statistics.median(v) for k, v in idle.items()}
    rounds = {k: [(b - i) * 1000 / n for b, i in zip(v, idle[k], strict=True)]
              for k, v in samples.items()}
    per = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"over {'plain http' if args.http else 'https'}, {args.rounds} rounds of {n} presses"
          " (ABBA; per press = (batch run -"
          " idle run) / presses)")
    for name in samples:
        print(f"  per press, {name:10s}: {spread(rounds[name])}")
    for name in samples:
        print(f"  end to end per press with start-up, {name:10s}:"
              f" {spread([b * 1000 / n for b in samples[name]])}")
    print(f"  piw / peer (no outcome post):   {per['piw'] / per['peer']:.2f}x")
    print(f"  piw / peer that posts outcome:  {per['piw'] / per['peer+post']:.2f}x"
          "  (target <= 1.00x)")
    for name, value in syncs.items():
        print(f"  fsync+fdatasync per press in a {n}-press batch, {name:10s}: {value:.2f}"
              "  (strace -f -c)" + ("  (target <= 3)" if name == "piw" else ""))
    if paced is not None:
        print("paced (Telegram's limits, `poll --once` passes until all are settled) beside"
              " unpaced; the peer has no pacer (python-telegram-bot sends at once and meets"
              " 429s instead): its paced figure is its unpaced one")
        print(f"  ({pacing.HOW})")
        for line in side_by_side(per["piw"], paced):
            print(line)
    print("cold (idle cron run):")
    for name, seconds in med.items():
        print(f"  {name:16s} {seconds * 1000:7.1f} ms")
    print(f"  piw / peer: {med['piw'] / med['peer']:.2f}x;"
          f" piw / import telegram: {med['piw'] / med['import telegram']:.2f}x  (target <= 1.50x)")
    for name, values in idle.items():
        print(f"  {name:16s} per round: {spread([v * 1000 for v in values], digits=1)}")
    print(f"end: {machine_load()}")


if __name__ == "__main__":
    main()
