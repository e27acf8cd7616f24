"""Crash reports: private (0600 whatever the umask), under the workflows directory, with the
traceback, and never a bot token (scrubbed before the file is written)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from state import crashes
from state.files import default_path

TOKEN = "7123456789:AAF-flowTestSecret_k3Jq9XwVbN0pLmZr8Tc"


def _raised() -> Exception:
    try:
        raise ValueError(f"POST https://api.telegram.org/bot{TOKEN}/sendMessage failed")
    except ValueError as exc:
        return exc


def test_a_crash_report_is_private_scrubbed_and_named_by_its_line(home: Path) -> None:
    old = os.umask(0)
    try:
        line = crashes.report_line(_raised(), "sending")
    finally:
        os.umask(old)
    assert line.startswith("internal error while sending: ValueError: POST")
    assert TOKEN not in line and "<redacted>" in line
    path = Path(line.rsplit("crash report: ", 1)[1])
    assert path.parent == default_path().parent
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert "Traceback" in text and "_raised" in text and TOKEN not in text
    assert TOKEN.split(":")[1] not in text


def test_a_report_that_cannot_be_written_is_said_in_the_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = crashes.report_line(_raised(), "sending", directory=blocker / "sub")
    assert "(no crash report: " in line and TOKEN not in line
