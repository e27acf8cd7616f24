"""Setup without traps: two bots set up one after the other both keep working; a credential
another profile uses is never re-pointed silently; an audience that is not configured is
refused by `ask`. Real CLI child processes, one loopback fake Bot API per bot."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.telegram.fake import FakeBotApi
from tests.channels.telegram.helpers import USER, config_dir, open_decision_now
from tests.cli import piw

TOKEN_A = "7100000001:AAH-botAlphaSecretAlphaSecret_0001"
TOKEN_B = "7200000002:AAH-botBravoSecretBravoSecret_0002"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return piw(home, *args)


def token(home: Path, name: str, value: str) -> Path:
    path = home / "secrets" / name
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_text(value + "\n")
    path.chmod(0o600)
    return path


def setup(home: Path, profile: str, token_file: Path, url: str,
          *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(home, "setup", "telegram", "--profile", profile, "--token-file", str(token_file),
               "--user", str(USER), "--chat", str(USER), "--api-base-url", url, *extra)


@pytest.fixture
def bots() -> Iterator[tuple[FakeBotApi, FakeBotApi]]:
    with FakeBotApi(token=TOKEN_A) as a, FakeBotApi(token=TOKEN_B) as b:
        yield a, b


def test_two_profiles_with_two_tokens_both_work_after_two_setups(
    home: Path, bots: tuple[FakeBotApi, FakeBotApi],
) -> None:
    a, b = bots
    file_a, file_b = token(home, "a.token", TOKEN_A), token(home, "b.token", TOKEN_B)
    assert setup(home, "bota", file_a, a.base_url).returncode == 0
    assert setup(home, "botb", file_b, b.base_url).returncode == 0  # no --credential
    credentials = json.loads((config_dir(home) / "credentials.json").read_text())["telegram"]
    assert credentials == {"bota": {"tokenFile": str(file_a)},
                           "botb": {"tokenFile": str(file_b)}}
    open_decision_now()
    polled = cli(home, "poll", "--once")
    assert (polled.returncode, polled.stdout, polled.stderr) == (0, "", "")
    for fake in (a, b):  # each bot polled and delivered with its own, accepted token
        assert [r.token_ok for r in fake.requests("getUpdates")] == [True]
        assert [r.token_ok for r in fake.requests("sendMessage")] == [True]
    # Set up again, a profile keeps its own credential and may move it to a new token file.
    moved = token(home, "b2.token", TOKEN_B)
    assert setup(home, "botb", moved, b.base_url).returncode == 0
    credentials = json.loads((config_dir(home) / "credentials.json").read_text())["telegram"]
    assert credentials == {"bota": {"tokenFile": str(file_a)},
                           "botb": {"tokenFile": str(moved)}}


def test_setup_refuses_a_credential_another_profile_uses(
    home: Path, bots: tuple[FakeBotApi, FakeBotApi],
) -> None:
    """With another bot's token file (re-pointing it would move that profile too) or with
    the same one (two profiles on one bot, which poll would reject every minute)."""
    a, b = bots
    file_a, file_b = token(home, "a.token", TOKEN_A), token(home, "b.token", TOKEN_B)
    assert setup(home, "bota", file_a, a.base_url).returncode == 0
    before = sorted((p.name, p.read_bytes()) for p in config_dir(home).iterdir())
    for token_file, fake in ((file_b, b), (file_a, a)):
        refused = setup(home, "botb", token_file, fake.base_url, "--credential", "bota")
        assert (refused.returncode, refused.stdout) == (78, "")
        assert refused.stderr.splitlines() == [
            f"Error: Telegram setup: credential bota is used by profile bota with token file"
            f" {file_a}; a credential serves one profile (two would share one bot, which poll"
            " polls for the first only): give this profile its own credential (--credential"
            " botb) and bot, or remove bota first (piw-channels setup telegram --remove"
            " bota); nothing was written"]
        assert sorted((p.name, p.read_bytes()) for p in config_dir(home).iterdir()) == before
    # The fix it names works: remove bota, then botb may take the credential.
    removed = cli(home, "setup", "telegram", "--remove", "bota")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith("Removed Telegram profile bota and credential bota")
    moved = setup(home, "botb", file_b, b.base_url, "--credential", "bota")
    assert moved.returncode == 0, moved.stderr
    credentials = json.loads((config_dir(home) / "credentials.json").read_text())["telegram"]
    assert credentials == {"bota": {"tokenFile": str(file_b)}}
    polled = cli(home, "poll", "--once")
    assert (polled.returncode, polled.stderr) == (0, "")


def test_remove_takes_the_profile_its_routes_and_its_unused_credential_away(
    home: Path, bots: tuple[FakeBotApi, FakeBotApi],
) -> None:
    a, b = bots
    file_a, file_b = token(home, "a.token", TOKEN_A), token(home, "b.token", TOKEN_B)
    assert setup(home, "bota", file_a, a.base_url).returncode == 0
    assert setup(home, "botb", file_b, b.base_url).returncode == 0
    assert cli(home, "setup", "telegram", "--remove", "botb").returncode == 0
    channels = json.loads((config_dir(home) / "channels.json").read_text())
    assert list(channels["telegramProfiles"]) == ["bota"]
    assert channels["audiences"]["operator"]["channels"] == ["pi", "telegram:bota"]
    credentials = json.loads((config_dir(home) / "credentials.json").read_text())["telegram"]
    assert credentials == {"bota": {"tokenFile": str(file_a)}}
    assert file_b.exists()  # the token file is the operator's to delete
    again = cli(home, "setup", "telegram", "--remove", "botb")
    assert (again.returncode, again.stdout) == (78, "")
    assert "Telegram profile botb is not configured (configured: bota)" in again.stderr
    assert cli(home, "poll", "--once").returncode == 0


def test_a_replaced_credential_leaves_no_reference_behind(
    home: Path, bots: tuple[FakeBotApi, FakeBotApi],
) -> None:
    """Deleting the old token file later must not break every profile (78)."""
    a, _ = bots
    old, new = token(home, "old.token", TOKEN_A), token(home, "new.token", TOKEN_A)
    assert setup(home, "bota", old, a.base_url).returncode == 0
    assert setup(home, "bota", new, a.base_url, "--credential", "fresh").returncode == 0
    credentials = json.loads((config_dir(home) / "credentials.json").read_text())["telegram"]
    assert credentials == {"fresh": {"tokenFile": str(new)}}
    old.unlink()
    assert cli(home, "poll", "--once").returncode == 0


def test_ask_refuses_an_audience_that_is_not_configured(
    home: Path, bots: tuple[FakeBotApi, FakeBotApi],
) -> None:
    a, _ = bots
    assert setup(home, "bota", token(home, "a.token", TOKEN_A), a.base_url,
                 "--audience", "reviewers").returncode == 0
    refused = cli(home, "ask", "--title", "Ship?", "--choice", "yes=Yes", "--audience", "nobody")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.splitlines() == [
        "Error: audience 'nobody' is not configured (configured: reviewers); use one of those,"
        " or add it with: piw-channels setup telegram --audience nobody ..."]
    accepted = cli(home, "ask", "--title", "Ship?", "--choice", "yes=Yes",
                   "--audience", "reviewers")
    assert accepted.returncode == 0 and accepted.stdout.startswith("decision-")


def test_ask_without_any_configuration_accepts_only_the_default_audience(home: Path) -> None:
    assert cli(home, "ask", "--title", "Ship?", "--choice", "yes=Yes").returncode == 0
    refused = cli(home, "ask", "--title", "Ship?", "--choice", "yes=Yes", "--audience", "ops")
    assert refused.returncode == 2
    assert "audience 'ops' is not configured (configured: none)" in refused.stderr


def test_setup_refuses_a_second_profile_on_a_bot_another_profile_uses(
    home: Path, bots: tuple[FakeBotApi, FakeBotApi],
) -> None:
    a, _ = bots
    file_a = token(home, "a.token", TOKEN_A)
    copy = token(home, "a-copy.token", TOKEN_A)  # the same bot through another file
    assert setup(home, "bota", file_a, a.base_url).returncode == 0
    before = sorted((p.name, p.read_bytes()) for p in config_dir(home).iterdir())
    for token_file in (file_a, copy):
        refused = cli(home, "setup", "telegram", "--token-file", str(token_file),  # no --profile
                      "--user", str(USER), "--chat", str(USER), "--api-base-url", a.base_url)
        assert (refused.returncode, refused.stdout) == (78, "")
        assert refused.stderr.splitlines() == [
            "Error: Telegram setup: profile bota already uses bot 7100000001 (token file"
            f" {file_a}); a bot serves one profile (two would both poll it and send every"
            " decision twice): to change that profile pass --profile bota, for another"
            " profile create another bot with @BotFather; nothing was written"]
    assert sorted((p.name, p.read_bytes()) for p in config_dir(home).iterdir()) == before
    # Setting the same profile up again with the copy is a change of that profile: fine.
    assert setup(home, "bota", copy, a.base_url).returncode == 0


def test_poll_polls_a_shared_bot_once_and_names_the_profile_to_fix(
    home: Path, bots: tuple[FakeBotApi, FakeBotApi],
) -> None:
    a, _ = bots
    file_a, copy = token(home, "a.token", TOKEN_A), token(home, "a-copy.token", TOKEN_A)
    assert setup(home, "bota", file_a, a.base_url).returncode == 0
    # An older setup (or a hand edit) left a second profile on the same bot.
    channels_file, credentials_file = (config_dir(home) / n
                                       for n in ("channels.json", "credentials.json"))
    channels, credentials = (json.loads(f.read_text()) for f in (channels_file,
                                                                   credentials_file))
    channels["telegramProfiles"]["twin"] = {**channels["telegramProfiles"]["bota"],
                                            "credential": "twin"}
    channels["audiences"]["operator"]["channels"].append("telegram:twin")
    credentials["telegram"]["twin"] = {"tokenFile": str(copy)}
    channels_file.write_text(json.dumps(channels))
    credentials_file.write_text(json.dumps(credentials))
    open_decision_now()
    polled = cli(home, "poll", "--once")
    assert (polled.returncode, polled.stdout) == (78, "")
    assert polled.stderr.splitlines() == [
        "Error: telegram:twin: profile twin uses bot 7100000001, which profile bota already"
        " polls; one bot serves one profile (two would split its updates and send every"
        " decision twice): remove it (piw-channels setup telegram --remove twin) or give it a"
        " bot of its own (setup telegram --profile twin --credential twin --token-file ...)"]
    assert len(a.requests("getUpdates")) == 1  # bota polled, twin did not
    assert len(a.requests("sendMessage")) == 1  # the decision went out once
