"""Private files whatever the umask, and only the running user's (issue 18, item 4): every
directory piw-channels creates is 0700 under `umask 000`, and a config file, token file or
their directory that another user owns is refused with 77 naming it (as the database is).
Real `piw-channels` children.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi
from tests.channels.telegram.helpers import (
    TOKEN,
    USER,
    config_dir,
    configure_telegram_profile,
    write_token_file,
)
from tests.cli import piw

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file away")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token=TOKEN) as server:
        yield server


def test_every_directory_is_created_0700_under_umask_000(home: Path, fake: FakeBotApi) -> None:
    assert piw(home, "init", umask=0).returncode == 0
    for directory in (".pi", ".pi/agent", ".pi/agent/workflows"):
        assert mode(home / directory) == 0o700, directory
    token_file = write_token_file(home)
    done = piw(home, "setup", "telegram", "--token-file", str(token_file), "--user", str(USER),
               "--chat", str(USER), "--api-base-url", fake.base_url, umask=0)
    assert done.returncode == 0, done.stderr
    for directory in (".config", ".config/pi-workflows"):
        assert mode(home / directory) == 0o700, directory
    for name in ("channels.json", "credentials.json"):
        assert mode(config_dir(home) / name) == 0o600, name


@as_root
def test_a_token_file_another_user_owns_is_refused_naming_it(
    home: Path, fake: FakeBotApi,
) -> None:
    token_file = configure_telegram_profile(home, fake.base_url)
    os.chown(token_file, NOBODY, NOBODY)
    for args in (["poll", "--once"], ["status"]):
        done = piw(home, *args)
        assert done.returncode == 77, (args, done.stdout, done.stderr)
        out = done.stdout + done.stderr
        assert f"{token_file} belongs to another user (uid {NOBODY})" in out, out
    assert not fake.requests()  # nothing was sent with it


@as_root
def test_a_config_directory_another_user_owns_is_refused(home: Path, fake: FakeBotApi) -> None:
    configure_telegram_profile(home, fake.base_url)
    os.chown(config_dir(home), NOBODY, NOBODY)
    done = piw(home, "poll", "--once")
    assert done.returncode == 77, done.stderr
    assert f"{config_dir(home)} belongs to another user (uid {NOBODY})" in done.stderr
    assert done.stderr.count("\n") == 1 and not fake.requests()


@as_root
def test_a_token_file_in_a_directory_another_user_owns_is_refused(
    home: Path, fake: FakeBotApi,
) -> None:
    theirs = home / "theirs"
    theirs.mkdir(mode=0o755)
    token_file = write_token_file(theirs)
    os.chown(theirs, NOBODY, NOBODY)
    done = piw(home, "setup", "telegram", "--token-file", str(token_file), "--user", str(USER),
               "--chat", str(USER), "--api-base-url", fake.base_url)
    assert done.returncode == 77, done.stderr
    assert f"its directory {theirs} belongs to another user" in done.stderr
    assert not fake.requests()
