"""Where one cron `poll --once` pass's time goes: --presses button presses in one chat
(delivered beforehand), handled by one `piw-channels poll --once` child over https against the
loopback fake, under cProfile (start-up included: the whole process), Telegram's message
limits lifted (bench/unpaced.py).

Prints the wall time of the profiled run, of the same run unprofiled before it, and the
functions with the most cumulative and own time; --out keeps the profile (pstats format).

Run: python bench/pass_profile.py [--presses N] [--top N] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.telegram.fake import FakeBotApiProcess
from bench import piw
from bench.common import TOKEN, TlsFront, machine_load, self_signed, unpaced
from state.database import Database

_PROFILED = ("import cProfile, sys; import bench.unpaced as u; u.install();"
             " from adapters.cli.main import main; sys.argv = ['piw-channels', 'poll', '--once'];"
             " p = cProfile.Profile(); p.enable()\n"
             "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
             "p.disable(); p.dump_stats({out!r})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--out", type=Path)
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
        out = args.out or base / "pass.prof"
        with FakeBotApiProcess(token_file) as fake:
            front = TlsFront(fake.base_url, cert, key)
            home = piw.make_home(base / "piw", front.base_url)
            os.environ["HOME"] = str(home)
            env = piw.child_env(home, SSL_CERT_FILE=str(bundle))
            poll = piw.poll_command()
            piw.wall(poll, env)  # creates the database, registers the channel
            walls: list[float] = []
            phases = ""
            for run in ("plain", "phases", "profiled"):
                with Database.open_writer() as db:
                    handles = piw.open_decisions(db, args.presses, len(walls) * args.presses)
                    piw.poll_in_process(db)
                    piw.push_presses(fake.control, db, handles)
                argv = {"plain": poll,
                        "phases": [sys.executable, "-m", "bench.pass_phases", "poll", "--once"],
                        "profiled": [sys.executable, "-c", _PROFILED.format(out=str(out))]}[run]
                start = time.perf_counter()
                ran = subprocess.run(argv, env=env, capture_output=True, text=True, check=True,
                                     cwd=piw.ROOT)
                walls.append(time.perf_counter() - start)
                if run == "phases":
                    phases = ran.stderr
                with Database.open_reader() as db:
                    piw.check_settled(db, (len(walls)) * args.presses)
            front.close()
            print(f"{args.presses} presses in one `poll --once`: {walls[0] * 1000:.0f} ms wall"
                  f" unprofiled, {walls[2] * 1000:.0f} ms under cProfile; the phases of a"
                  f" third pass ({walls[1] * 1000:.0f} ms wall):")
            print(phases.rstrip())
            stats = pstats.Stats(str(out))
            stats.sort_stats("cumulative").print_stats(args.top)
            stats.sort_stats("tottime").print_stats(args.top)
    print(f"end: {machine_load()}")


if __name__ == "__main__":
    main()
