"""Poll-cycle benchmark against the loopback fake Bot API over https (a TLS front with a
self-signed certificate, as against real Telegram), on this machine.

Prints, in one run:
  (a) a cold `piw-channels poll --once` with nothing to do against `python -c "import
      telegram"`, alternating (median of --runs each); target <= 1.5x;
  (b) the headline: the full end-to-end cost of a button press (ingest the getUpdates batch,
      resolve, answer the callback, remove the keyboard, post the outcome, finish the ask run)
      through the real poll cycle (`poll --once` passes in process with no instrumentation,
      one batch of --presses presses per pass, delivery excluded), median with its spread,
      against a raw durable commit timed in chunks alternating with the passes; commits per
      press over all timed batches (apsw commit hook); where the time goes (one more batch,
      instrumented); fsync+fdatasync per press (strace -f -c attached for one more batch,
      untimed), target <= 3; and end to end per press with start-up (one cron `poll --once`
      process per batch); and beside the headline, through `side_by_side`, the paced figures a
      user meets (bench/paced.py): --paced-presses presses (10 by default: one chat takes one
      message a second, two per press, so 10 presses cost ~20 s where 100 would cost ~200 s)
      in one chat, then spread over --paced-chats chats (each its own profile, bot, fake and
      audience), settled by cron `poll --once` passes with Telegram's limits on, per press,
      start-up included, with the presses, chats and passes;
  (c) an idle `piw-channels poll --for --window` (55 s, a cron minute): the getUpdates calls
      the fake recorded (target <= 5) and the events it added; and the events of one idle
      `poll --once` (target <= 2).

Per press against the naive python-telegram-bot bot: bench/peer_bench.py; with history:
bench/history_bench.py.

Run: python bench/poll_bench.py [--runs N] [--rounds N] [--presses N] [--window S]
     [--paced-presses N] [--paced-chats N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.cli import telegram as telegram_cli
from adapters.telegram.fake import FakeBotApiProcess
from bench import paced as pacing
from bench import piw
from bench.common import (
    TOKEN,
    RawCommits,
    TlsFront,
    count_commits,
    fdatasync_counter,
    machine_load,
    self_signed,
    side_by_side,
    spread,
    unpaced,
)
from channels.config.loading import load_config
from channels.config.model import TelegramProfile
from channels.decisions import workflows
from channels.telegram import poll
from channels.telegram.outbound import Outbound
from channels.telegram.transport import BotApi
from state.database import Database

PARSER_ONLY = [sys.executable, "-c", "from adapters.cli.main import build_parser; build_parser()"]


def cold_start(base: Path, base_url: str, runs: int, bundle: Path) -> None:
    home = piw.make_home(base / "cold", base_url)
    env = piw.child_env(home, SSL_CERT_FILE=str(bundle))
    command = piw.poll_command()
    piw.wall(command, env)  # creates the database, registers the channel, warms caches
    samples = piw.alternating_samples({"poll": (command, env), "import": (piw.IMPORT_TELEGRAM, env),
                                       "parser": (PARSER_ONLY, env)}, runs)
    got = {name: statistics.median(values) for name, values in samples.items()}
    print(f"(a) cold `piw-channels poll --once` over https, nothing to do (ABBA, {runs} each):"
          f" {spread([v * 1000 for v in samples['poll']], digits=1)}")
    print(f"    `python -c \"import telegram\"`:"
          f" {spread([v * 1000 for v in samples['import']], digits=1)}")
    print(f"    ratio of the medians {got['poll'] / got['import']:.2f}x  (target <= 1.50x)")
    print(f"    of which imports + argument parser alone (no command run):"
          f" {got['parser'] * 1000:.1f} ms ({got['parser'] / got['import']:.2f}x)")


SPENT: dict[str, float] = defaultdict(float)


class _TimedApi:
    """Wraps the real client: the time spent waiting on each Bot API method."""

    def __init__(self, api: BotApi) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._api, name)
        if not callable(method):
            return method

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                SPENT[f"http {name}"] += time.perf_counter() - start
        return timed


@asynccontextmanager
async def _timed_api(profile: TelegramProfile, token: str) -> AsyncIterator[BotApi]:
    async with telegram_cli.bot_api(profile, token) as api:
        yield _TimedApi(api)  # a duck-typed proxy


def _instrument(cls: Any, name: str, label: str) -> Callable[[], None]:
    """Accumulate the wall time of an (async or sync) method under `label`; returns undo."""
    original = getattr(cls, name)
    if asyncio.iscoroutinefunction(original):
        async def timed_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await original(self, *args, **kwargs)
            finally:
                SPENT[label] += time.perf_counter() - start
        setattr(cls, name, timed_async)
    else:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                SPENT[label] += time.perf_counter() - start
        setattr(cls, name, timed)
    return lambda: setattr(cls, name, original)


def _pass(db: Database, *, piw_api: bool) -> None:
    """One pass in process: with the real client as cron uses it, or with each Bot API
    method's wait timed (`piw_api` False)."""
    config = load_config()
    assert config is not None
    api = telegram_cli.bot_api if piw_api else _timed_api
    asyncio.run(poll.poll(db, config, api, poll.PollOptions()))


def _batch(db: Database, fake: FakeBotApiProcess, n: int, done: int) -> int:
    """Open and deliver `n` decisions and push a press on each (set-up, not timed)."""
    handles = piw.open_decisions(db, n, done)
    piw.poll_in_process(db)  # delivery: not part of the figures
    piw.push_presses(fake.control, db, handles)
    return done + n


def presses(base: Path, fake: FakeBotApiProcess, base_url: str, rounds: int, n: int,
            bundle: Path, paced_presses: int, paced_chats: int,
            front: Callable[[str], pacing.Front]) -> None:
    raw = RawCommits(base / "raw.sqlite")
    home = piw.make_home(base / "presses", base_url)
    os.environ["HOME"] = str(home)
    per_round: list[float] = []
    done = 0
    SPENT.clear()
    with Database.open_writer() as db:
        commits = count_commits(db.conn)
        counted = 0
        for _ in range(rounds):  # the headline: no instrumentation in these passes
            done = _batch(db, fake, n, done)
            raw.chunk(2 * n)
            before = commits[0]
            start = time.perf_counter()
            _pass(db, piw_api=True)
            per_round.append((time.perf_counter() - start) * 1000 / n)
            counted += commits[0] - before
            piw.check_settled(db, done)
        done = _batch(db, fake, n, done)  # one more batch, instrumented: where the time goes
        undo = [_instrument(poll.ChannelPoll, "_receive", "receive"),
                _instrument(poll.ChannelPoll, "_process_inbox", "process"),
                _instrument(Outbound, "apply_due", "effects"),
                _instrument(workflows, "expire_overdue", "finish runs")]
        start = time.perf_counter()
        try:
            _pass(db, piw_api=False)
        finally:
            for restore in undo:
                restore()
        instrumented = time.perf_counter() - start
        piw.check_settled(db, done)
        done = _batch(db, fake, n, done)  # and one counted by strace, not timed
        with fdatasync_counter() as syncs:
            piw.poll_in_process(db)
        piw.check_settled(db, done)
    # End to end as cron pays it: one `piw-channels poll --once` process per batch.
    env = piw.child_env(home, SSL_CERT_FILE=str(bundle))
    cron: list[float] = []
    runs = 0
    for _ in range(rounds):
        with Database.open_writer() as db:
            done = _batch(db, fake, n, done)
        spent = 0.0
        for _ in range(5):  # a pass ends by its 15 s deadline: cron's next run goes on
            spent += piw.wall(piw.poll_command(), env)
            runs += 1
            with Database.open_reader() as db:
                if piw.count(db, "SELECT count(*) FROM effects WHERE status = 'pending'") == 0:
                    break
        cron.append(spent * 1000 / n)
        with Database.open_reader() as db:
            piw.check_settled(db, done)
    # What a user meets: cron passes with Telegram's limits on (a few presses: ~1 s each).
    paced = pacing.paced_figures(base, paced_presses, (1, paced_chats), front,
                                 {"SSL_CERT_FILE": str(bundle)}) if paced_presses else None
    raw.close()
    headline = statistics.median(per_round)
    print(f"(b) {rounds} batches of {n} presses, each handled by one `poll --once` pass over"
          " https (delivery excluded)")
    print(f"    raw durable commit (alternating, {raw.count} commits): {raw.ms:.3f} ms")
    print(f"    HEADLINE per press end to end (ingest, resolve, answer the callback, remove the"
          f" keyboard, post the outcome, finish the run), no instrumentation:"
          f" {spread(per_round)} = {headline / raw.ms:.1f}x a raw commit")
    print(f"    end to end per press with start-up (cron `poll --once` processes, {runs} for"
          f" {rounds} batches): {spread(cron)}")
    print(f"    write transactions (commits) per press, over all {rounds} timed batches:"
          f" {counted / (rounds * n):.2f}  (apsw commit hook)")
    if syncs:
        print(f"    fsync+fdatasync per press ({n}-press batch): "
              f"{sum(syncs.values()) / n:.2f} {syncs}  (strace -f -c; target <= 3)")
    else:
        print("    fsync+fdatasync per press: not counted (strace missing or not permitted)")
    if paced is not None:
        print("    paced (Telegram's limits on, cron `poll --once` passes until all are settled)"
              " beside the headline:")
        print(f"      ({pacing.HOW})")
        for line in side_by_side(headline, paced):
            print("  " + line)

    def per(seconds: float) -> float:
        return seconds * 1000 / n

    print(f"    where it goes, per press (one more batch, instrumented: {per(instrumented):.3f}"
          " ms in all):")
    ingest = SPENT["receive"] - SPENT["http get_updates"]
    rows = [
        ("ingest (getUpdates batch -> inbox + cursor)", ingest),
        ("  getUpdates wait (HTTP)", SPENT["http get_updates"]),
        ("process (resolve, answer the callback)", SPENT["process"]),
        ("  answerCallbackQuery wait (HTTP)", SPENT["http answer_callback_query"]),
        ("settle on Telegram (edit + outcome post)", SPENT["effects"]),
        ("  editMessageReplyMarkup wait (HTTP)", SPENT["http edit_message_reply_markup"]),
        ("  sendMessage wait (HTTP)", SPENT["http send_message"]),
        ("finish ask runs (run.continue)", SPENT["finish runs"]),
    ]
    accounted = SPENT["receive"] + SPENT["process"] + SPENT["effects"] + SPENT["finish runs"]
    rows.append(("other (lease, recovery, reservations)", instrumented - accounted))
    for label, seconds in rows:
        print(f"      {label:45s} {per(seconds):8.3f} ms")


def idle(base: Path, fake: FakeBotApiProcess, base_url: str, window: int, bundle: Path) -> None:
    home = piw.make_home(base / "idle", base_url)
    env = piw.child_env(home, SSL_CERT_FILE=str(bundle))
    once = piw.poll_command()
    piw.wall(once, env)  # registers the channel

    def events() -> int:
        with Database.open_reader(home / ".pi/agent/workflows/state.sqlite") as db:
            return int(db.conn.execute("SELECT count(*) FROM events").get)

    before = events()
    piw.wall(once, env)
    per_once = events() - before
    calls = len(fake.control.requests("getUpdates"))
    before = events()
    seconds = piw.wall([*once[:-1], "--for", str(window)], env)
    calls = len(fake.control.requests("getUpdates")) - calls
    print(f"(c) idle `poll --once`: {per_once} events  (target <= 2)")
    print(f"    idle `poll --for {window}` ({seconds:.1f} s): {calls} getUpdates calls"
          f" (target <= 5), {events() - before} events")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="cold-start samples (median)")
    parser.add_argument("--rounds", type=int, default=5, help="timed batches of presses")
    parser.add_argument("--presses", type=int, default=100, help="presses per batch (<= 100)")
    parser.add_argument("--window", type=int, default=55, help="idle `poll --for` seconds")
    parser.add_argument("--paced-presses", type=int, default=10,
                        help="presses for the paced figures (0: none)")
    parser.add_argument("--paced-chats", type=int, default=5,
                        help="chats the paced presses are spread over (beside one chat)")
    args = parser.parse_args()
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
        os.environ["SSL_CERT_FILE"] = str(bundle)
        fakes = [FakeBotApiProcess(token_file) for _ in range(3)]
        with fakes[0], fakes[1] as fake, fakes[2] as idle_fake:
            fronts = [TlsFront(f.base_url, cert, key) for f in fakes]
            cold_start(base, fronts[0].base_url, args.runs, bundle)
            presses(base, fake, fronts[1].base_url, args.rounds, args.presses, bundle,
                    args.paced_presses, args.paced_chats, lambda url: TlsFront(url, cert, key))
            idle(base, idle_fake, fronts[2].base_url, args.window, bundle)
            for front in fronts:
                front.close()
    print(f"end: {machine_load()}")


if __name__ == "__main__":
    main()
