"""The README's rehearsal, run word for word by bash on a fresh HOME: its code block is read
from the README, with `piw-channels` on PATH. Only the port is swapped for a free one, and
the script waits for the fake to listen after starting it (a person types slower)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import child_env
from tests.paths import ROOT

SECTION = "### Rehearse the setup against the fake Bot API"
README_PORT = "8765"


def rehearsal_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION):]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_readme_rehearsal_runs_to_the_end_on_a_fresh_home(tmp_path: Path) -> None:
    block = rehearsal_block()
    assert "demo --reply" in block and "--text-choice" in block
    port = str(free_port())
    # Up to a minute: five test suites may share this machine's two cores.
    listening = (f"for _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null"
                 " && break; sleep 0.1; done")
    lines = []
    for line in block.replace(README_PORT, port).splitlines():
        lines.append(line)
        if "demo --serve" in line:
            lines.append(listening)
    script = "set -e\n" + "\n".join(lines) + "\nwait || true\n"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "piw-channels"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c'
                    ' "from adapters.cli.main import main; main()" "$@"\n')
    shim.chmod(0o755)
    env = child_env(tmp_path)
    env |= {"PATH": f"{bin_dir}:{env['PATH']}", "PYTHONPATH": str(ROOT),
            "TMPDIR": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180)
    out = done.stdout
    assert (done.returncode, done.stderr) == (0, ""), out
    assert "Fake Bot API: http://127.0.0.1:" + port in out
    assert "typed reply (text): use the staging db" in out
    assert re.search(r"^decision-\S+ +\S+ +\d+ s +workflow +\S+ +operator +accepted +Replan"
                     r" +telegram:default ",
                     out, re.M), out
    # The chat transcript, printed by the background demo --serve into the same terminal.
    assert re.search(r"^\d\d:\d\d:\d\d Ada pressed \[ Replan \] on “.+”$", out, re.M), out
    assert re.search(r"^\d\d:\d\d:\d\d Ada ↪ replying to “Replan: What should change\?”:\n"
                     r"    use the staging db$", out, re.M), out
    assert re.search(r"^\d\d:\d\d:\d\d buttons of “.+” are now:$", out, re.M), out
    assert re.search(r"^    \[ ✓ Replan \]$", out, re.M), out
    assert re.search(r"^\d\d:\d\d:\d\d PiW Decisions reacted 👍 to “use the staging db”$",
                     out, re.M), out
    assert not (tmp_path / "home").exists()
    assert list(tmp_path.glob("tmp.*/piw-demo.token")) == []  # kill %1 removed it
