"""Poll-cycle benchmark against a loopback fake Bot API (a separate process), on this machine.

Prints, in one run:
  (a) a cold `piw-channels poll --once` with nothing to do (subprocess wall time, median of
      --runs) against `python -c "import telegram"` (median of --runs); target ratio <= 1.5;
  (b) --decisions open decisions delivered, then one recorded button press per decision (a
      choice without input) pushed to the fake and ingested and resolved by the real poll cycle
      (`worker.poll`, in process, repeated `--once` passes). The cost per update is the wall
      time of the passes that ingest and process the presses (delivery excluded), against one
      raw durable commit measured in the same run (`raw_commits`); target <= 4x. The same
      passes also answer each press, settle each decision on Telegram (keyboard removal and an
      outcome post) and finish each ask run: a breakdown shows where the time goes;
  (c) (a) again on the database left by (b): how a poll with nothing to do grows with history.

Run: python bench/poll_bench.py [--runs N] [--decisions N] [--commits N]
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import statistics
import subprocess
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
from adapters.telegram.fake import FakeBotApiProcess, RemoteFakeBotApi
from bench.state_bench import raw_commits
from channels.config.install import install_telegram_profile
from channels.config.loading import load_config
from channels.config.model import TelegramProfile
from channels.decisions import workflows as decision_service
from channels.telegram import poll as worker
from channels.telegram.buttons import callback_token
from channels.telegram.outbound import Outbound
from channels.transport import BotApi
from state.database import Database

TOKEN = "7123456789:AAF-benchTokenNotASecret_0123456789ab"
USER = 5123456789
CHOICES = {"continue": {"label": "Continue"}, "stop": {"label": "Stop"}}
POLL = [sys.executable, "-c", "from adapters.cli.main import main; main()", "poll", "--once"]
IMPORT_TELEGRAM = [sys.executable, "-c", "import telegram"]
# What every `piw-channels` start pays before the command runs: the modules and the parser.
PARSER_ONLY = [sys.executable, "-c", "from adapters.cli.main import build_parser; build_parser()"]


def _command_for_poll() -> list[str]:
    """The installed console script when there is one (what cron runs), else `python -c`."""
    script = Path(sys.executable).with_name("piw-channels")
    return [str(script), "poll", "--once"] if script.exists() else POLL


def _median_wall(argv: list[str], runs: int, env: dict[str, str]) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        samples.append(time.perf_counter() - start)
        if result.returncode != 0:
            raise SystemExit(f"{argv} failed ({result.returncode}): {result.stderr.strip()}")
    return statistics.median(samples)


def _configure(home: Path, base_url: str) -> None:
    token_file = home / "telegram.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    install_telegram_profile(home / ".config" / "pi-workflows", token_file=token_file,
                             user_ids=[str(USER)], chat_ids=[str(USER)], profile="bench",
                             api_base_url=base_url)


def _poll_once(db: Database) -> list[worker.ChannelReport]:
    config = load_config()
    assert config is not None
    return asyncio.run(worker.poll(db, config, _timed_api, worker.PollOptions()))


# -- (a) cold start ----------------------------------------------------------------------------


def cold_start(base: Path, fake: FakeBotApiProcess, runs: int) -> None:
    home = base / "cold"
    home.mkdir(mode=0o700)
    os.environ["HOME"] = str(home)
    _configure(home, fake.base_url)
    env = {**os.environ, "HOME": str(home)}
    argv = _command_for_poll()
    _median_wall(argv, 2, env)  # creates the database, registers the channel, warms caches
    _median_wall(IMPORT_TELEGRAM, 2, env)
    poll = _median_wall(argv, runs, env)
    baseline = _median_wall(IMPORT_TELEGRAM, runs, env)
    parser_only = _median_wall(PARSER_ONLY, runs, env)
    print(f"(a) cold `{' '.join(Path(a).name for a in argv[:1])} poll --once`, nothing to do"
          f" (median of {runs}): {poll * 1000:8.1f} ms")
    print(f"    `python -c \"import telegram\"` (median of {runs}):        "
          f"{baseline * 1000:8.1f} ms")
    print(f"    ratio: {poll / baseline:.2f}x  (target <= 1.50x)")
    print(f"    of which imports + argument parser alone (no command run): "
          f"{parser_only * 1000:.1f} ms ({parser_only / baseline:.2f}x)")


# -- (b) presses through the poll cycle --------------------------------------------------------

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


def _open_decisions(db: Database, count: int) -> list[decision_service.AskHandle]:
    handles = []
    for i in range(count):
        spec = decision_service.AskSpec(
            title=f"Approve step {i}?", choices=CHOICES,
            presentation=decision_service.presentation_for(f"Approve step {i}?", None, None))
        handle = decision_service.create_ask(db, spec, decision_service.new_owner_id(db, "bench"))
        decision_service.release_run(db, handle.run.lease)
        handles.append(handle)
    return handles


def _delivered_message_ids(db: Database) -> dict[str, int]:
    rows = db.conn.execute(
        "SELECT m.decision_id, p.external_message_ref FROM channel_message_parts p"
        " JOIN channel_messages m USING (message_id) WHERE m.purpose = 'delivery'"
        " AND p.external_message_ref IS NOT NULL")
    return {str(d): int(ref) for d, ref in rows}


def _count(db: Database, sql: str) -> int:
    return int(db.conn.execute(sql).get)


def presses(base: Path, fake: FakeBotApiProcess, count: int, commits: int) -> Path:
    raw_per_second = raw_commits(base / "raw.sqlite", commits)
    raw_ms = 1000 / raw_per_second
    home = base / "presses"
    home.mkdir(mode=0o700)
    os.environ["HOME"] = str(home)
    _configure(home, fake.base_url)
    control: RemoteFakeBotApi = fake.control
    # One pass may deliver everything: the 15 s `--once` bound is for cron, not for a bench.
    worker.ONCE_DEADLINE_SECONDS = 3600
    with Database.open_writer() as db:
        start = time.perf_counter()
        handles = _open_decisions(db, count)
        opened = time.perf_counter() - start
        start = time.perf_counter()
        _poll_once(db)
        delivered = time.perf_counter() - start
        refs = _delivered_message_ids(db)
        if len(refs) != count:
            raise SystemExit(f"only {len(refs)} of {count} decisions were delivered")
        for handle in handles:
            control.push_fixture("callback_press.json", {
                "user_id": USER, "chat_id": USER, "message_id": refs[handle.decision_id],
                "message_text": "decision", "callback_data": callback_token(
                    handle.decision_id, handle.request.request_digest, "continue")})
        SPENT.clear()
        undo = [_instrument(worker._ChannelPoll, "_receive", "receive"),
                _instrument(worker._ChannelPoll, "_process_inbox", "process"),
                _instrument(Outbound, "apply_due", "effects"),
                _instrument(decision_service, "expire_overdue", "finish runs")]
        passes = 0
        start = time.perf_counter()
        try:
            while _count(db, "SELECT count(*) FROM human_decision_resolutions") < count:
                _poll_once(db)
                passes += 1
                if passes > count:
                    raise SystemExit("the presses were not all processed")
        finally:
            for restore in undo:
                restore()
        total = time.perf_counter() - start
        processed = _count(db, "SELECT count(*) FROM channel_inbox WHERE processed_at IS NOT NULL")
        won = _count(db, "SELECT count(*) FROM human_decision_submissions WHERE result = 'won'")
    if (processed, won) != (count, count):
        raise SystemExit(f"processed {processed}, won {won}; expected {count} each")

    def per(seconds: float) -> float:
        return seconds * 1000 / count

    ingest = SPENT["receive"] - SPENT["http get_updates"]
    process = SPENT["process"] - SPENT["http answer_callback_query"]
    print(f"(b) {count} decisions: opened in {opened:.1f} s, delivered in {delivered:.1f} s"
          f" ({per(delivered):.1f} ms each; not part of the figure below)")
    print(f"    raw durable commit (same run, {commits} commits): {raw_ms:.3f} ms")
    print(f"    {count} presses ingested and resolved in {passes} `poll --once` passes:"
          f" {total:.2f} s")
    print(f"    cost per update: {per(total):.3f} ms = {per(total) / raw_ms:.1f}x a raw commit"
          f"  (target <= 4x)")
    print("    where it goes, per update:")
    rows = [
        ("ingest (getUpdates batch -> inbox + cursor)", ingest),
        ("process (resolve, record the result)", process),
        ("  getUpdates wait (HTTP)", SPENT["http get_updates"]),
        ("  answerCallbackQuery wait (HTTP)", SPENT["http answer_callback_query"]),
        ("settle on Telegram (edit + outcome post)", SPENT["effects"]),
        ("finish ask runs (run.continue)", SPENT["finish runs"]),
    ]
    accounted = SPENT["receive"] + SPENT["process"] + SPENT["effects"] + SPENT["finish runs"]
    rows.append(("other (lease, recovery, reservations)", total - accounted))
    for label, seconds in rows:
        print(f"      {label:45s} {per(seconds):8.3f} ms  {per(seconds) / raw_ms:6.1f}x")
    print(f"    ingest + process only: {per(ingest + process):.3f} ms ="
          f" {per(ingest + process) / raw_ms:.1f}x a raw commit")
    return home


def cold_start_with_history(base: Path, home: Path, runs: int, count: int) -> None:
    """(c) (a) on the database of (b) (nothing to do, `count` settled decisions), alternating
    with (a)'s empty one so that both see the same machine load."""
    argv = _command_for_poll()
    envs = {name: {**os.environ, "HOME": str(path)}
            for name, path in (("empty", base / "cold"), ("history", home))}
    samples: dict[str, list[float]] = {"empty": [], "history": []}
    for _ in range(runs):
        for name, env in envs.items():
            samples[name].append(_median_wall(argv, 1, env))
    empty, history = (statistics.median(samples[n]) * 1000 for n in ("empty", "history"))
    print(f"(c) cold `poll --once`, nothing to do, {count} settled decisions in the history:"
          f" {history:.1f} ms vs {empty:.1f} ms on (a)'s database (alternating, median of"
          f" {runs}): {history / empty:.2f}x")


def _compile_like_an_install() -> None:
    """pip compiles an installed package's bytecode (so does `import telegram`'s install);
    an editable checkout under PYTHONDONTWRITEBYTECODE would otherwise recompile every run."""
    root = Path(__file__).resolve().parents[1]
    for package in ("state", "channels", "adapters"):
        compileall.compile_dir(root / package, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="cold-start samples (median)")
    parser.add_argument("--decisions", type=int, default=1000, help="decisions and presses")
    parser.add_argument("--commits", type=int, default=2000, help="raw commits for the baseline")
    args = parser.parse_args()
    os.environ.pop("PI_WORKFLOWS_CONFIG_DIR", None)
    _compile_like_an_install()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        base.chmod(0o700)
        token_file = base / "fake.token"
        token_file.write_text(TOKEN)
        token_file.chmod(0o600)
        with FakeBotApiProcess(token_file) as fake:
            cold_start(base, fake, args.runs)
            home = presses(base, fake, args.decisions, args.commits)
            cold_start_with_history(base, home, args.runs, args.decisions)


if __name__ == "__main__":
    main()
