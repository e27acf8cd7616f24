"""Run one of the README's bash blocks word for word on a fresh HOME, as a new user would:
`piw-channels` on PATH (a shim to this checkout), only the fake's port swapped for a free one,
and a wait for the fake to listen after `demo --serve` starts it (a person types slower)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import child_env
from tests.paths import ROOT


def block(heading: str) -> str:
    """The first ```bash block after the README text `heading`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```bash\n(.*?)```", text[text.index(heading):], re.S)
    assert match is not None, f"no bash block after {heading!r}"
    return match.group(1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run(tmp_path: Path, script: str, readme_port: str, port: int,
        rewrite: Callable[[str], str] = lambda line: line,
        timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run `script` under `set -e` with HOME and TMPDIR in `tmp_path`, the README's port
    replaced by `port`; `rewrite` may replace a line (a person's pause by a wait for what they
    waited for). Whatever the script left running (the fake, a waiting hook) is killed."""
    # Up to a minute: several suites may share this machine's two cores.
    listening = (f"for _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null"
                 " && break; sleep 0.1; done")
    lines = []
    for line in script.replace(readme_port, str(port)).splitlines():
        lines.append(rewrite(line))
        if "demo --serve" in line:
            lines.append(listening)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "piw-channels"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c'
                    ' "from adapters.cli.main import main; main()" "$@"\n')
    shim.chmod(0o755)
    env = child_env(tmp_path)
    env |= {"PATH": f"{bin_dir}:{env['PATH']}", "PYTHONPATH": str(ROOT),
            "TMPDIR": str(tmp_path)}
    shell = subprocess.Popen(["bash", "-c", "set -e\n" + "\n".join(lines) + "\nwait || true\n"],
                             cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = shell.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.communicate()
    return subprocess.CompletedProcess(shell.args, shell.returncode, out, err)
