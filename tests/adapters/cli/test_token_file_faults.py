"""A token file that does not hold a bot token: exit 78 everywhere, naming the file (F12).

Real `piw-channels` processes in a temporary HOME; the file's content is never printed (it is
usually the real token with a typo).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.telegram.helpers import (
    PROFILE,
    configure_telegram_profile,
    open_decision_now,
    run_cli,
    write_token_file,
)

MALFORMED = [
    "7123456789 AAF-flowTestSecret_k3Jq9XwVbN0pLmZr8Tc",  # a space for the colon
    "bot7123456789:AAF-flowTestSecret_k3Jq9XwVbN0pLmZr8Tc",  # the URL's "bot" prefix pasted
    "7123456789:AAF-flowTestSecret/../k3Jq9XwVbN0pLmZr8Tc",  # would change the request path
    "7123456789:AAF-flow TestSecret",
    "export TOKEN=7123456789:AAF",
]


@pytest.mark.parametrize("content", MALFORMED)
def test_poll_and_resend_exit_78_naming_the_token_file(home: Path, content: str) -> None:
    token_file = configure_telegram_profile(home, "http://127.0.0.1:9")
    handle = open_decision_now()
    token_file.write_text(content + "\n")
    for args in (["poll", "--once"], ["poll", "--for", "5"],
                 ["resend", handle.decision_id, "--profile", PROFILE]):
        result = run_cli(home, *args)
        assert (result.returncode, result.stdout) == (78, ""), (args, result.stderr)
        if args[1] == "--for":  # the profile's condition was reported by the pass before
            assert result.stderr == ""
            continue
        assert result.stderr.endswith(f"token file {token_file} does not hold a bot token"
                                      " (expected <bot id>:<secret> as @BotFather gives it:"
                                      " digits, a colon, then letters, digits, '_' or '-')\n")
        assert result.stderr.count("\n") == 1 and content not in result.stderr
        assert content.split(":")[-1] not in result.stderr


@pytest.mark.parametrize("content", MALFORMED)
def test_setup_exits_78_naming_the_token_file(home: Path, content: str) -> None:
    token_file = write_token_file(home, content)
    result = run_cli(home, "setup", "telegram", "--token-file", str(token_file),
                     "--user", "1", "--chat", "1", "--api-base-url", "http://127.0.0.1:9")
    assert (result.returncode, result.stdout) == (78, ""), result.stderr
    assert str(token_file) in result.stderr and result.stderr.count("\n") == 1
    assert "does not hold a bot token" in result.stderr and content not in result.stderr
    assert not (home / ".config" / "pi-workflows" / "channels.json").exists()
