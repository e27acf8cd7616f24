"""Resolution benchmark: a winning Telegram answer (with its effects) vs a raw durable commit.

The timed command is the whole winning transaction of a button press: load and verify the
request, validate the answer, insert the resolution and the submission, bump the decision,
reserve run.continue and the channel's telegram.settle (keyboard removal and outcome post).
The raw commit is timed in chunks alternating with the answers (bench/common.py).
Target: at most 3x one raw durable commit.

Run: python bench/decision_bench.py [--decisions N]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import RawCommits
from channels import messages, store
from channels.decisions import resolution, workflows
from channels.decisions.resolution import HumanAnswer
from channels.messages import Purpose
from channels.store import AdapterType
from state.database import Database

CHOICES = {"continue": {"label": "Continue"}, "stop": {"label": "Stop"}}
CHANNEL_ID = "telegram-" + "0" * 40
CHANNEL = "telegram:bench"


def _present(conn: Any, *, decision_id: str, now: int) -> None:
    message_id = messages.message_id_for(CHANNEL_ID, Purpose.DELIVERY, decision_id)
    messages.ensure_message(conn, message_id, CHANNEL_ID, decision_id, Purpose.DELIVERY,
                            "decision", now)


def _answer(conn: Any, *, answer: HumanAnswer, now: int) -> Any:
    return resolution.resolve(conn, answer, now, allowed_channels=[CHANNEL])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        raw = RawCommits(base / "raw.sqlite")
        home = base / "home"
        home.mkdir(mode=0o700)
        os.environ["HOME"] = str(home)
        with Database.open_writer() as db:
            now = db.clock.now_ms()
            db.write(lambda c: store.ensure_channel(c, CHANNEL_ID, AdapterType.TELEGRAM, "bench",
                                                    now))
            spec = workflows.AskSpec(
                title="Approve?", choices=CHOICES,
                presentation=workflows.presentation_for("Approve?", "Bench decision.", None))
            handles = [workflows.create_ask(db, spec, "bench") for _ in range(args.decisions)]
            for h in handles:  # presented on the channel: the answer reserves its settlement
                db.write(functools.partial(_present, decision_id=h.decision_id, now=now))
            elapsed = 0.0
            for first in range(0, args.decisions, args.chunk):
                raw.chunk(args.chunk)
                start = time.perf_counter()
                for i in range(first, min(args.decisions, first + args.chunk)):
                    h = handles[i]
                    answer = HumanAnswer(h.decision_id, h.request.request_digest,
                                         {"choice": "continue"}, CHANNEL, "telegram-user:1",
                                         f"e{i}", f"{CHANNEL}:callback:k{i}")
                    db.write(functools.partial(_answer, answer=answer, now=db.clock.now_ms()))
                elapsed += time.perf_counter() - start
            settles = int(db.conn.execute(
                "SELECT count(*) FROM effects WHERE effect_type = 'telegram.settle'").get)
            if settles != args.decisions:
                raise SystemExit(f"{settles} settle effects for {args.decisions} answers")
        per_second = args.decisions / elapsed
        raw_per_second = 1000 / raw.ms
        raw.close()
    print(f"raw durable commits/s (alternating): {raw_per_second:10.0f}")
    print(f"winning Telegram answers/s:          {per_second:10.0f}")
    print(f"resolution cost / raw commit:        {raw_per_second / per_second:10.2f}x"
          "  (target <= 3.00x)")


if __name__ == "__main__":
    main()
