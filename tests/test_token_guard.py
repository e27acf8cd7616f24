"""The suite-wide token-leak guard sees what child processes print and every file they write
under the temporary directory (not only databases and crash reports), and leaves token files
alone. Without it, a child that printed a token, or wrote one into a config or log file,
would pass unseen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import token_guard
from tests.channels.telegram.helpers import TOKEN, write_token_file


def test_a_child_that_prints_a_token_is_caught() -> None:
    before = len(token_guard.CHILD_LEAKS)
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write('bot{TOKEN}')"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    caught = token_guard.CHILD_LEAKS[before:]
    del token_guard.CHILD_LEAKS[before:]  # caught on purpose: not a leak of the suite
    assert len(caught) == 1 and caught[0].startswith("the stderr of child ")
    subprocess.run([sys.executable, "-c", "print('no secret here')"], capture_output=True,
                   timeout=60)
    assert len(token_guard.CHILD_LEAKS) == before


def test_every_file_a_child_wrote_is_searched_but_token_files(tmp_path: Path) -> None:
    base = tmp_path / "scanned"
    base.mkdir()
    write_token_file(base)  # telegram.token: the token belongs there
    (base / "bare").write_text(TOKEN + "\n")  # a token file with another name
    (base / "notes.log").write_text("nothing to see\n")
    assert token_guard.file_leaks(base) == []
    leaked = base / "deep" / "settings.json"
    leaked.parent.mkdir()
    leaked.write_text(f'{{"url": "https://api.telegram.org/bot{TOKEN}/getMe"}}')
    assert token_guard.file_leaks(base) == [f"file {leaked}"]
    leaked.unlink()  # the session's own scan must not see it


def test_the_file_scan_finds_a_token_after_bot_but_not_a_pi_key_of_a_token_s_shape(
        tmp_path: Path) -> None:
    # A Pi session id can end in five digits: "<session id>:notification-<hash>" is a key.
    (tmp_path / "key").write_bytes(
        b"x01a234d5-4af7-776f-ae6e-92a175f49301:notification-e544b4e46800f72f89cc91c7")
    assert token_guard.file_leaks(tmp_path) == []
    url = tmp_path / "url"
    url.write_bytes(b"GET /bot" + TOKEN.encode() + b"/getMe")
    try:
        assert token_guard.file_leaks(tmp_path) == [f"file {url}"]
    finally:
        url.unlink()  # or the suite's own scan at the end would report it
