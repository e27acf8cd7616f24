"""`piw-channels setup telegram`: real getMe over loopback HTTP, real files in a temporary HOME."""

from __future__ import annotations

import argparse
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.cli import setup as setup_cli
from adapters.cli.main import build_parser, run
from adapters.telegram.fake import FakeBotApi, Fault, unused_port_url
from adapters.telegram.setup_steps import BotApiUnavailable, verify_token
from channels.config.errors import ConfigInvalid
from channels.config.install import install_telegram_profile
from channels.config.loading import load_config
from tests.cli import piw

TOKEN = "7000000001:AAH-setupTestTokenSetupTestToken_0123"
OTHER_TOKEN = "7000000002:AAH-anotherBotsTokenAnotherBots_9876"
SECRET_PART = TOKEN.split(":", 1)[1]
USER = "123456789"
GROUP = "-1001234567890"


@dataclass(frozen=True)
class Result:
    """What one CLI run returned and printed."""

    code: int
    out: str
    err: str


@pytest.fixture
def fake() -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN) as server:
        yield server


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    return write_token(tmp_path / "secrets" / "bot.token", TOKEN + "\n")


def write_token(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def config_dir(home: Path) -> Path:
    return home / ".config" / "pi-workflows"


def setup_args(token_file: Path | str, url: str, *extra: str) -> list[str]:
    return ["setup", "telegram", "--token-file", str(token_file), "--user", USER,
            "--chat", USER, "--chat", GROUP, "--api-base-url", url, *extra]  # fmt: skip


def invoke(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Result:
    """Run the CLI in this process (argparse errors exit through SystemExit)."""
    try:
        code = run(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def cli(home: Path, argv: list[str]) -> Result:
    done = piw(home, *argv)
    return Result(done.returncode, done.stdout, done.stderr)


def read_json(path: Path) -> object:
    return json.loads(path.read_text())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def assert_token_nowhere(result: Result, home: Path) -> None:
    """Neither the token nor its secret half is printed or written under HOME."""
    for text in (result.out, result.err):
        assert TOKEN not in text and SECRET_PART not in text
    for path in home.rglob("*"):
        if path.is_file():
            assert SECRET_PART not in path.read_text(errors="replace"), path


def assert_nothing_written(home: Path) -> None:
    assert not config_dir(home).exists()


# --- success ---------------------------------------------------------------------------------


def test_setup_verifies_the_token_and_installs_private_files(
    home: Path, fake: FakeBotApi, token_file: Path
) -> None:
    result = cli(home, setup_args(token_file, fake.base_url))
    assert result.code == 0, result.err
    root = config_dir(home)
    assert read_json(root / "channels.json") == {
        "schema": "pi-workflows.channels.v1",
        "audiences": {
            "operator": {"channels": ["pi", "telegram:default"], "accept": "first-valid-answer"}
        },
        "telegramProfiles": {
            "default": {"credential": "default", "allowedUserIds": [USER],
                        "allowedChatIds": [USER, GROUP], "apiBaseUrl": fake.base_url}
        },
    }  # fmt: skip
    assert read_json(root / "credentials.json") == {
        "schema": "pi-workflows.credentials.v1",
        "telegram": {"default": {"tokenFile": str(token_file)}},
    }
    assert sorted(os.listdir(root)) == ["channels.json", "credentials.json"]  # no temp leftovers
    assert (mode(root), mode(root / "channels.json"), mode(root / "credentials.json")) == (
        0o700, 0o600, 0o600,
    )  # fmt: skip
    assert [(r.method, r.token_ok) for r in fake.requests()] == [
        ("getMe", True), ("getWebhookInfo", True), ("setMyCommands", True)]
    [menu] = fake.requests("setMyCommands")  # the chat offers /pending and /mute
    assert json.loads(menu.fields["commands"]) == [
        {"command": "pending", "description": "List the decisions that wait for an answer"},
        {"command": "mute",
         "description": "Mute progress cards in this chat: /mute 1h (30m, 2h, 1d), /mute off"}]
    assert_token_nowhere(result, home)


def test_setup_prints_a_short_summary_without_the_token(
    home: Path, fake: FakeBotApi, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = invoke(capsys, setup_args(token_file, fake.base_url))
    assert result.code == 0, result.err
    assert result.err == ""
    assert result.out.splitlines() == [
        "Verified Telegram bot @piw_decisions_bot and installed profile default.",
        f"Configuration: {config_dir(home)}",
        "Audience operator routes to: pi, telegram:default",
        "Allowed: 1 user, 2 chats",
        f"Bot API: {fake.base_url}",
    ]


def test_installed_files_load_and_lead_back_to_the_token(
    home: Path, fake: FakeBotApi, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert invoke(capsys, setup_args(token_file, fake.base_url + "/")).code == 0
    config = load_config()
    assert config is not None
    assert config.routes("operator") == ("pi", "telegram:default")
    assert config.profile("default").api_base_url == fake.base_url
    assert config.read_token("default") == TOKEN


def test_a_second_profile_is_merged_and_the_first_is_kept(
    home: Path, fake: FakeBotApi, token_file: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    second_file = write_token(tmp_path / "secrets" / "backup.token", OTHER_TOKEN)
    assert invoke(capsys, setup_args(token_file, fake.base_url)).code == 0
    with FakeBotApi(OTHER_TOKEN) as backup_bot:  # a second bot: one bot serves one profile
        second = setup_args(second_file, backup_bot.base_url, "--profile", "backup",
                            "--audience", "oncall", "--credential", "telegram-backup")
        result = invoke(capsys, second)
        assert [r.method for r in backup_bot.requests()] == ["getMe", "getWebhookInfo",
                                                             "setMyCommands"]
    assert result.code == 0, result.err
    channels = read_json(config_dir(home) / "channels.json")
    assert isinstance(channels, dict)
    assert channels["audiences"] == {
        "operator": {"channels": ["pi", "telegram:default"], "accept": "first-valid-answer"},
        "oncall": {"channels": ["pi", "telegram:backup"], "accept": "first-valid-answer"},
    }
    assert list(channels["telegramProfiles"]) == ["default", "backup"]
    assert channels["telegramProfiles"]["backup"]["credential"] == "telegram-backup"
    assert read_json(config_dir(home) / "credentials.json") == {
        "schema": "pi-workflows.credentials.v1",
        "telegram": {"default": {"tokenFile": str(token_file)},
                     "telegram-backup": {"tokenFile": str(second_file)}},
    }  # fmt: skip
    assert [r.method for r in fake.requests()] == ["getMe", "getWebhookInfo", "setMyCommands"]


# --- getMe failures: nothing written ----------------------------------------------------------


def test_a_token_the_bot_api_rejects_exits_78_and_writes_nothing(
    home: Path, token_file: Path
) -> None:
    with FakeBotApi(OTHER_TOKEN) as other_bot:
        result = cli(home, setup_args(token_file, other_bot.base_url))
        requests = other_bot.requests()
    assert result.code == 78
    assert "the Bot API rejected the token (HTTP 401)" in result.err
    assert result.out == ""
    assert [(r.method, r.token_ok) for r in requests] == [("getMe", False)]
    assert_nothing_written(home)
    assert_token_nowhere(result, home)


@pytest.mark.parametrize(
    ("fault", "code", "message"),
    [
        (Fault.error(404, "Not Found"), 78, "the Bot API rejected the token (HTTP 404)"),
        (Fault.error(500, "Internal Server Error"), 75, "getMe failed with HTTP 500"),
        (Fault.drop(), 75, "did not return a response"),
        (Fault.non_json(), 75, "did not return a response"),
        (Fault.ok_without_result(), 75, "did not return a response"),
    ],
    ids=["404", "500", "dropped", "not-json", "ok-without-user"],
)
def test_every_unsuccessful_getme_writes_nothing(
    home: Path, fake: FakeBotApi, token_file: Path, capsys: pytest.CaptureFixture[str],
    fault: Fault, code: int, message: str,
) -> None:  # fmt: skip
    fake.inject("getMe", fault)
    result = invoke(capsys, setup_args(token_file, fake.base_url))
    assert (result.code, result.out) == (code, "")
    assert message in result.err and "nothing was written" in result.err
    assert_nothing_written(home)
    assert_token_nowhere(result, home)


def test_an_unreachable_bot_api_exits_75_naming_the_url(
    home: Path, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = unused_port_url()
    result = invoke(capsys, setup_args(token_file, url))
    assert result.code == 75
    assert f"could not reach the Telegram Bot API at {url}" in result.err
    assert_nothing_written(home)
    assert_token_nowhere(result, home)


def test_a_bot_api_that_never_answers_fails_at_the_deadline(fake: FakeBotApi) -> None:
    fake.inject("getMe", Fault.hang())
    try:
        with pytest.raises(BotApiUnavailable, match=r"did not return a response within 0\.3 s"):
            verify_token(TOKEN, fake.base_url, deadline_seconds=0.3)
    finally:
        fake.release()


# --- inputs refused before any request --------------------------------------------------------


TokenFileCase = Callable[[Path], str]


def _relative(path: Path) -> str:
    return "secrets/bot.token"


def _chmod(mode: int) -> TokenFileCase:
    def prepare(path: Path) -> str:
        path.chmod(mode)
        return str(path)

    return prepare


def _content(text: str) -> TokenFileCase:
    def prepare(path: Path) -> str:
        path.write_text(text)
        return str(path)

    return prepare


def _missing(path: Path) -> str:
    path.unlink()
    return str(path)


def _directory(path: Path) -> str:
    return str(path.parent)


@pytest.mark.parametrize(
    ("prepare", "code", "message"),
    [
        (_relative, 2, "argument --token-file: 'secrets/bot.token' is not an absolute path:"
                       " give the full path, like /"),
        (_chmod(0o644), 77, "permissions must be 0600 or stricter (mode is 0644); fix: chmod 600 "),
        (_chmod(0o640), 77, "permissions must be 0600 or stricter (mode is 0640); fix: chmod 600 "),
        (_content(" \n"), 78, "token file is empty"),
        (_missing, 78, "does not exist"),
        (_directory, 78, "must be a regular file (it is a directory)"),
        (_content("my password\n"), 78, "does not hold a bot token (expected <bot id>:"),
    ],
    ids=["relative", "0644", "0640", "empty", "missing", "directory", "not-a-token"],
)
def test_a_bad_token_file_is_refused_before_any_request(
    home: Path, fake: FakeBotApi, token_file: Path, capsys: pytest.CaptureFixture[str],
    prepare: TokenFileCase, code: int, message: str,
) -> None:  # fmt: skip
    argument = prepare(token_file)
    result = invoke(capsys, setup_args(argument, fake.base_url))
    assert result.code == code
    assert message in result.err
    if code == 77:
        assert result.err.rstrip().endswith(f"chmod 600 {token_file}")
    assert fake.requests() == []
    assert_nothing_written(home)
    assert "my password" not in result.err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--user", "alice"], "argument --user: 'alice' is not a numeric Telegram ID"),
        (["--user", "12a"], "argument --user: '12a' is not a numeric Telegram ID"),
        (["--chat", "@ops"], "argument --chat: '@ops' is not a numeric Telegram ID"),
        (["--profile", "my profile"], "argument --profile: 'my profile' is not a valid name"),
        (["--credential", ".hidden"], "argument --credential: '.hidden' is not a valid name"),
        (["--audience", "9lives"], "argument --audience: '9lives' is not a valid audience"),
        (["--api-base-url", "ftp://example.org"], "must be an absolute http:// or https:// URL"),
        (["--api-base-url", "https://u:p@example.org"], "must not contain a user name"),
    ],
    ids=["user-name", "user-mixed", "chat-handle", "profile", "credential", "audience",
         "url-scheme", "url-credentials"],
)  # fmt: skip
def test_a_bad_argument_is_a_usage_error_before_any_request(
    home: Path, fake: FakeBotApi, token_file: Path, capsys: pytest.CaptureFixture[str],
    extra: list[str], message: str,
) -> None:  # fmt: skip
    result = invoke(capsys, setup_args(token_file, fake.base_url, *extra))
    assert result.code == 2
    assert message in result.err
    assert fake.requests() == []
    assert_nothing_written(home)


def test_users_and_chats_are_required(
    home: Path, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = invoke(capsys, ["setup", "telegram", "--token-file", str(token_file)])
    assert result.code == 2
    assert result.err == "Error: setup telegram needs --user, --chat (or --remove PROFILE)\n"
    assert_nothing_written(home)


# --- the argument rules are channels.config's rules -------------------------------------------


def _accepts(check: Callable[[str], str], value: str) -> bool:
    try:
        check(value)
    except argparse.ArgumentTypeError:
        return False
    return True


def _config_accepts(root: Path, token_file: Path, **values: object) -> bool:
    arguments: dict[str, object] = {"user_ids": ["1"], "chat_ids": ["1"], **values}
    try:
        install_telegram_profile(root, token_file=token_file, **arguments)  # type: ignore[arg-type]
    except ConfigInvalid:
        return False
    return True


NAMES = ["default", "a", "A.b_c-9", "9lives", "x" * 200, "", "x" * 201, "-x", ".x", "_x",
         "a b", "é", "a/b", "a:b"]  # fmt: skip
AUDIENCES = ["operator", "_x", "on-call_2", "x" * 128, "", "9lives", "x" * 129, "-x", "a.b",
             "a b"]  # fmt: skip
IDS = ["1", "-100123", " 42 ", "0", "", "abc", "1.5", "+1", "--1", "١٢", "1e5"]
URLS = ["https://api.telegram.org", "http://127.0.0.1:8081/", "https://h.example/p/", "ftp://h",
        "http://", "https://h?x=1", "https://h#f", "https://u:p@h", "https://h:99999",
        "https://h /x", "api.telegram.org", "https://[::1"]  # fmt: skip


@pytest.mark.parametrize(
    ("check", "field", "samples"),
    [
        (setup_cli.name_argument, "profile", NAMES),
        (setup_cli.name_argument, "credential", NAMES),
        (setup_cli.audience_argument, "audience", AUDIENCES),
        (setup_cli.url_argument, "api_base_url", URLS),
    ],
)
def test_argument_rules_agree_with_channels_config(
    tmp_path: Path, token_file: Path, check: Callable[[str], str], field: str,
    samples: list[str],
) -> None:  # fmt: skip
    for n, value in enumerate(samples):  # a directory each: one bot serves one profile
        expected = _config_accepts(tmp_path / f"config{n}", token_file, **{field: value})
        assert _accepts(check, value) == expected, (field, value)


@pytest.mark.parametrize("value", IDS)
def test_id_rule_agrees_with_channels_config(tmp_path: Path, token_file: Path, value: str) -> None:
    expected = _config_accepts(tmp_path / "config", token_file, user_ids=[value])
    assert _accepts(setup_cli.id_argument, value) == expected


# --- help ---------------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_setup_and_its_subcommand_have_help_text(capsys: pytest.CaptureFixture[str]) -> None:
    top = _subcommands(build_parser())
    assert top.choices["setup"].description
    setup = _subcommands(top.choices["setup"])
    helps = {action.dest: action.help for action in setup._choices_actions}
    assert helps.keys() == setup.choices.keys() == {"telegram"}
    assert all(helps.values())
    for argv in (["setup", "--help"], ["setup", "telegram", "--help"]):
        assert invoke(capsys, argv).code == 0
    assert "--token-file ABS_PATH" in invoke(capsys, ["setup", "telegram", "--help"]).out


def test_setup_without_a_channel_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    result = invoke(capsys, ["setup"])
    assert result.code == 2
    assert "required: CHANNEL" in result.err
