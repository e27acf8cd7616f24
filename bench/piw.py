"""piw-channels set-up the benches share: a configured HOME, open and delivered decisions,
recorded presses pushed to the fake, and the cron command."""

from __future__ import annotations

import asyncio
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from adapters.cli import telegram as telegram_cli
from adapters.telegram.fake import RemoteFakeBotApi
from bench.common import TOKEN, USER, abba, is_unpaced
from channels.config.install import install_telegram_profile
from channels.config.loading import load_config
from channels.decisions import workflows
from channels.telegram import poll as worker
from channels.telegram.buttons import callback_token
from state.database import Database

ROOT = Path(__file__).resolve().parents[1]
CHOICES = {"continue": {"label": "Continue"}, "stop": {"label": "Stop"}}
IMPORT_TELEGRAM = [sys.executable, "-c", "import telegram"]


def poll_command(*, paced: bool = False) -> list[str]:
    """The installed console script when there is one (what cron runs), else `python -c`;
    the bench's launcher without Telegram's message limits once the bench lifted them
    (unless `paced`: what a user's cron runs)."""
    if is_unpaced() and not paced:
        from bench.unpaced import CLI_UNPACED

        return [*CLI_UNPACED, "poll", "--once"]
    script = Path(sys.executable).with_name("piw-channels")
    if script.exists():
        return [str(script), "poll", "--once"]
    return [sys.executable, "-c", "from adapters.cli.main import main; main()", "poll", "--once"]


def child_env(home: Path, **extra: str) -> dict[str, str]:
    """This worktree first on the path (the venv's editable install points elsewhere)."""
    return {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT), **extra}


def compile_like_an_install() -> None:
    """pip compiles an installed package's bytecode (so does `import telegram`'s install)."""
    for package in ("state", "channels", "adapters", "bench"):
        compileall.compile_dir(ROOT / package, quiet=1)


def wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{argv} failed ({result.returncode}): {result.stderr.strip()}")
    return elapsed


def alternating_samples(commands: dict[str, tuple[list[str], dict[str, str]]], runs: int
                        ) -> dict[str, list[float]]:
    """Wall seconds of each command, run in turn `runs` times in ABBA order (the same machine
    load for each, and no side always first)."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for run in range(runs):
        for name in abba(list(commands), run):
            argv, env = commands[name]
            samples[name].append(wall(argv, env))
    return samples


def alternating_medians(commands: dict[str, tuple[list[str], dict[str, str]]], runs: int
                        ) -> dict[str, float]:
    """Median wall seconds of each command (see `alternating_samples`)."""
    return {name: statistics.median(s)
            for name, s in alternating_samples(commands, runs).items()}


def make_home(path: Path, base_url: str) -> Path:
    path.mkdir(mode=0o700)
    token_file = path / "telegram.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    install_telegram_profile(path / ".config" / "pi-workflows", token_file=token_file,
                             user_ids=[str(USER)], chat_ids=[str(USER)], profile="bench",
                             api_base_url=base_url)
    return path


def open_decisions(db: Database, count: int, start: int = 0, audience: str = "operator"
                   ) -> list[workflows.AskHandle]:
    """`count` ask decisions for `audience` whose owner went away (so the poll finishes
    their runs)."""
    handles = []
    for i in range(start, start + count):
        spec = workflows.AskSpec(
            title=f"Approve step {i}?", choices=CHOICES, audience=audience,
            presentation=workflows.presentation_for(f"Approve step {i}?", None, None))
        handle = workflows.create_ask(db, spec, workflows.new_owner_id(db, "bench"))
        workflows.release_run(db, handle.run.lease)
        handles.append(handle)
    return handles


def poll_in_process(db: Database) -> list[worker.ChannelReport]:
    """One `poll --once` pass in this process (no deadline: delivering a backlog may take a
    while, the 15 s `--once` bound is for cron)."""
    worker.ONCE_DEADLINE_SECONDS = 3600
    config = load_config()
    assert config is not None
    return asyncio.run(worker.poll(db, config, telegram_cli.bot_api, worker.PollOptions()))


def delivered_refs(db: Database) -> dict[str, int]:
    rows = db.conn.execute(
        "SELECT m.decision_id, p.external_message_ref FROM channel_message_parts p"
        " JOIN channel_messages m USING (message_id) WHERE m.purpose = 'delivery'"
        " AND p.external_message_ref IS NOT NULL")
    return {str(d): int(ref) for d, ref in rows}


def push_presses(control: RemoteFakeBotApi, db: Database,
                 handles: list[workflows.AskHandle]) -> None:
    refs = delivered_refs(db)
    missing = [h.decision_id for h in handles if h.decision_id not in refs]
    if missing:
        raise SystemExit(f"{len(missing)} of {len(handles)} decisions were not delivered")
    for handle in handles:
        control.push_fixture("callback_press.json", {
            "user_id": USER, "chat_id": USER, "message_id": refs[handle.decision_id],
            "message_text": "decision", "callback_data": callback_token(
                handle.decision_id, handle.request.request_digest, "continue")})


def count(db: Database, sql: str) -> int:
    return int(db.conn.execute(sql).get)


def settled_counts(db: Database) -> dict[str, int]:
    """Presses won, settlements applied on Telegram, runs continued: one each per press."""
    return {
        "won": count(db, "SELECT count(*) FROM human_decision_submissions WHERE result = 'won'"),
        "settled": count(db, "SELECT count(*) FROM effects WHERE effect_type = 'telegram.settle'"
                             " AND status = 'applied'"),
        "continued": count(db, "SELECT count(*) FROM effects WHERE effect_type = 'run.continue'"
                               " AND status = 'applied'"),
    }


def check_settled(db: Database, expected: int) -> None:
    """Every press won, was settled on Telegram and finished its run (not a fake success)."""
    got = settled_counts(db)
    if any(v != expected for v in got.values()):
        raise SystemExit(f"expected {expected} presses won, settled and continued; got {got}")
