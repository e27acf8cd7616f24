"""Resolution benchmark: a winning human answer (with its effects) vs a raw durable commit.

The timed command is the whole winning transaction: load and verify the request, validate the
answer, insert the resolution and the submission, bump the decision, reserve run.continue.
Target: at most 3x one raw durable commit measured in the same run.

Run: python bench/decision_bench.py [--decisions N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.state_bench import raw_commits
from channels.decisions import resolution, workflows
from channels.decisions.resolution import HumanAnswer
from state.database import Database

CHOICES = {"continue": {"label": "Continue"}, "stop": {"label": "Stop"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        raw = raw_commits(base / "raw.sqlite", args.decisions)
        home = base / "home"
        home.mkdir(mode=0o700)
        os.environ["HOME"] = str(home)
        with Database.open_writer() as db:
            spec = workflows.AskSpec(
                title="Approve?", choices=CHOICES,
                presentation=workflows.presentation_for("Approve?", "Bench decision.", None))
            handles = [workflows.create_ask(db, spec, "bench") for _ in range(args.decisions)]
            start = time.perf_counter()
            for i, h in enumerate(handles):
                answer = HumanAnswer(h.decision_id, h.request.request_digest,
                                     {"choice": "continue"}, "pi", "local:1", f"e{i}", f"k{i}")
                db.write(lambda c, a=answer: resolution.resolve(c, a, db.clock.now_ms()))
            per_second = args.decisions / (time.perf_counter() - start)
    print(f"raw durable commits/s:        {raw:10.0f}")
    print(f"winning resolutions/s:        {per_second:10.0f}")
    print(f"resolution cost / raw commit: {raw / per_second:10.2f}x  (target <= 3.00x)")


if __name__ == "__main__":
    main()
