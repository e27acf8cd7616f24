"""Private channel configuration: location, strict loading, file modes, tokens and setup.

Real files under tmp_path; HOME and PI_WORKFLOWS_CONFIG_DIR are set per test.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from channels.config.errors import (
    SETUP_HINT,
    ConfigError,
    ConfigInvalid,
    ConfigMissing,
    ConfigPermission,
    ConfigUnavailable,
)
from channels.config.install import install_telegram_profile
from channels.config.loading import load_config, require_config, resolve_config_dir
from channels.config.model import (
    CHANNELS_FILE,
    CREDENTIALS_FILE,
    DEFAULT_API_BASE_URL,
    Audience,
    ChannelsConfig,
    TelegramCredential,
    TelegramProfile,
    audience_routes,
)
from tests.paths import ROOT

TOKEN = "123456789:AAExampleTokenThatMustNeverLeakXYZ_0123"


@dataclass
class Files:
    """One private configuration laid out on disk, plus the dicts it was written from."""

    directory: Path
    token_file: Path
    channels: dict[str, Any] = field(default_factory=dict)
    credentials: dict[str, Any] = field(default_factory=dict)

    @property
    def channels_path(self) -> Path:
        return self.directory / CHANNELS_FILE

    @property
    def credentials_path(self) -> Path:
        return self.directory / CREDENTIALS_FILE

    def write(self) -> None:
        write_json(self.channels_path, self.channels)
        write_json(self.credentials_path, self.credentials)


def write_json(path: Path, document: object, mode: int = 0o600) -> None:
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.chmod(path, mode)


def write_private(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)
    return path


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PI_WORKFLOWS_CONFIG_DIR", raising=False)
    return home


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    return write_private(tmp_path / "secrets" / "bot.token", f"  {TOKEN}\n")


@pytest.fixture
def files(home: Path, tmp_path: Path, token_file: Path, monkeypatch: pytest.MonkeyPatch) -> Files:
    directory = tmp_path / "config"
    directory.mkdir(mode=0o700)
    os.chmod(directory, 0o700)
    monkeypatch.setenv("PI_WORKFLOWS_CONFIG_DIR", str(directory))
    laid_out = Files(
        directory=directory,
        token_file=token_file,
        channels={
            "schema": "pi-workflows.channels.v1",
            "audiences": {
                "operator": {"channels": ["pi", "telegram:default"], "accept": "first-valid-answer"}
            },
            "telegramProfiles": {
                "default": {
                    "credential": "telegram",
                    "allowedUserIds": ["42", "43"],
                    "allowedChatIds": ["-100123"],
                }
            },
        },
        credentials={
            "schema": "pi-workflows.credentials.v1",
            "telegram": {"telegram": {"tokenFile": str(token_file)}},
        },
    )
    laid_out.write()
    return laid_out


# --- location ------------------------------------------------------------------------------


def test_config_dir_comes_from_the_environment_when_set(home: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "elsewhere"
    assert resolve_config_dir({"PI_WORKFLOWS_CONFIG_DIR": str(chosen)}) == chosen


def test_config_dir_defaults_to_home_when_unset_or_empty(home: Path) -> None:
    expected = home / ".config" / "pi-workflows"
    assert resolve_config_dir({}) == expected
    assert resolve_config_dir({"PI_WORKFLOWS_CONFIG_DIR": ""}) == expected
    assert resolve_config_dir() == expected


def test_relative_env_dir_is_made_absolute(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_config_dir({"PI_WORKFLOWS_CONFIG_DIR": "cfg"}) == tmp_path / "cfg"


def test_load_reads_the_home_default_directory(home: Path, token_file: Path) -> None:
    directory = home / ".config" / "pi-workflows"
    directory.mkdir(parents=True, mode=0o700)
    install_telegram_profile(directory, token_file=token_file, user_ids=["1"], chat_ids=["1"])
    loaded = load_config()
    assert loaded is not None
    assert loaded.routes("operator") == ("pi", "telegram:default")


# --- no configuration ----------------------------------------------------------------------


def test_no_channels_json_means_no_config_and_pi_routes(home: Path) -> None:
    assert load_config() is None
    assert audience_routes(None, "operator") == ("pi",)


def test_require_config_without_channels_json_is_config_missing(home: Path) -> None:
    with pytest.raises(ConfigMissing, match="No channel configuration") as caught:
        require_config()
    assert caught.value.exit_code == 78
    assert caught.value.hint == SETUP_HINT
    assert SETUP_HINT in str(caught.value)


def test_pi_only_config_does_not_read_credentials(files: Files) -> None:
    files.channels = {
        "schema": "pi-workflows.channels.v1",
        "audiences": {"operator": {"channels": ["pi"], "accept": "first-valid-answer"}},
    }
    write_json(files.channels_path, files.channels)
    files.credentials_path.write_text("not json at all")
    os.chmod(files.credentials_path, 0o644)
    loaded = load_config()
    assert loaded == ChannelsConfig(
        audiences={"operator": Audience("operator", ("pi",))}, profiles={}, credentials={}
    )


def test_dangling_channels_symlink_is_not_silently_no_config(files: Files) -> None:
    files.channels_path.unlink()
    files.channels_path.symlink_to(files.directory / "gone.json")
    with pytest.raises(ConfigInvalid, match="symbolic link to a file that does not exist"):
        load_config()


# --- valid configuration -------------------------------------------------------------------


def test_valid_config_loads_into_records(files: Files) -> None:
    loaded = require_config()
    assert loaded == ChannelsConfig(
        audiences={"operator": Audience("operator", ("pi", "telegram:default"))},
        profiles={"default": TelegramProfile("default", "telegram", ("42", "43"), ("-100123",))},
        credentials={"telegram": TelegramCredential("telegram", files.token_file)},
    )
    assert loaded.routes("operator") == ("pi", "telegram:default")
    assert loaded.routes("unknown") == ("pi",)
    assert loaded.profile("default").api_base_url == DEFAULT_API_BASE_URL
    assert loaded.profile("default").channel == "telegram:default"
    assert loaded.read_token("default") == TOKEN


def test_profile_allows_only_listed_user_in_listed_chat(files: Files) -> None:
    profile = require_config().profile("default")
    assert profile.allows(42, -100123)
    assert profile.allows("43", "-100123")
    assert not profile.allows(44, -100123)
    assert not profile.allows(42, 42)


def test_api_base_url_is_kept_without_trailing_slash(files: Files) -> None:
    files.channels["telegramProfiles"]["default"]["apiBaseUrl"] = "http://127.0.0.1:8081/bot-api/"
    files.write()
    assert require_config().profile("default").api_base_url == "http://127.0.0.1:8081/bot-api"


def test_read_only_owner_modes_pass(files: Files) -> None:
    for path in (files.channels_path, files.credentials_path, files.token_file):
        os.chmod(path, 0o400)
    os.chmod(files.directory, 0o500)
    try:
        assert require_config().read_token("default") == TOKEN
    finally:
        os.chmod(files.directory, 0o700)


def test_group_readable_directory_is_accepted(files: Files) -> None:
    os.chmod(files.directory, 0o755)
    assert load_config() is not None


def test_unknown_profile_is_refused_by_name(files: Files) -> None:
    with pytest.raises(ConfigInvalid, match="Telegram profile other is not configured"):
        require_config().profile("other")


def test_symlinked_token_file_is_checked_at_its_target(files: Files, tmp_path: Path) -> None:
    link = tmp_path / "secrets" / "link.token"
    link.symlink_to(files.token_file)
    files.credentials["telegram"]["telegram"]["tokenFile"] = str(link)
    files.write()
    assert require_config().read_token("default") == TOKEN
    os.chmod(files.token_file, 0o644)
    with pytest.raises(ConfigPermission, match="mode is 0644"):
        load_config()


def test_unreferenced_credentials_are_checked_too(files: Files, tmp_path: Path) -> None:
    loose = write_private(tmp_path / "secrets" / "spare.token", "x", mode=0o644)
    files.credentials["telegram"]["spare"] = {"tokenFile": str(loose)}
    files.write()
    with pytest.raises(ConfigPermission, match=r"telegram\.spare\.tokenFile: .*spare token file"):
        load_config()


# --- tokens are read at use and never shown ------------------------------------------------


def test_read_token_reads_the_file_at_the_time_of_use(files: Files) -> None:
    loaded = require_config()
    write_private(files.token_file, "987:rotated\n")
    assert loaded.read_token(loaded.profile("default")) == "987:rotated"


def test_read_token_checks_permissions_again(files: Files) -> None:
    loaded = require_config()
    os.chmod(files.token_file, 0o640)
    with pytest.raises(ConfigPermission, match=re.escape(f"chmod 600 {files.token_file}")):
        loaded.read_token("default")


def test_read_token_refuses_a_file_emptied_after_loading(files: Files) -> None:
    loaded = require_config()
    write_private(files.token_file, " \n\t")
    with pytest.raises(ConfigInvalid, match="Telegram credential telegram token file is empty"):
        loaded.read_token("default")


def test_token_never_appears_in_config_reprs(files: Files) -> None:
    loaded = require_config()
    shown = [repr(loaded), str(loaded), *map(repr, loaded.profiles.values())]
    shown += [repr(item) for item in loaded.credentials.values()]
    assert all(TOKEN not in text for text in shown)
    assert all("AAExampleToken" not in text for text in shown)


def test_token_in_a_non_utf8_file_is_not_chained_into_the_error(files: Files) -> None:
    files.token_file.write_bytes(b"\xff" + TOKEN.encode())
    with pytest.raises(ConfigInvalid, match="is not UTF-8 text") as caught:
        load_config()
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__
    assert TOKEN not in str(caught.value)


# --- malformed configuration: one table ----------------------------------------------------

Arrange = Callable[[Files], None]


def _channels(edit: Callable[[dict[str, Any]], object]) -> Arrange:
    def arrange(files: Files) -> None:
        edit(files.channels)
        files.write()

    return arrange


def _credentials(edit: Callable[[dict[str, Any]], object]) -> Arrange:
    def arrange(files: Files) -> None:
        edit(files.credentials)
        files.write()

    return arrange


def _profile(**changes: object) -> Arrange:
    return _channels(lambda doc: doc["telegramProfiles"]["default"].update(changes))


def _audience(**changes: object) -> Arrange:
    return _channels(lambda doc: doc["audiences"]["operator"].update(changes))


def _raw_channels(text: str) -> Arrange:
    def arrange(files: Files) -> None:
        files.channels_path.write_text(text)

    return arrange


def _rename(table: str, old: str, new: str) -> Callable[[dict[str, Any]], object]:
    return lambda doc: doc[table].__setitem__(new, doc[table].pop(old))


def _chmod(which: str, mode: int) -> Arrange:
    return lambda files: os.chmod(_path_of(files, which), mode)


def _token_text(text: str) -> Arrange:
    def arrange(files: Files) -> None:
        write_private(files.token_file, text)

    return arrange


def _token_dir(files: Files) -> None:
    files.token_file.unlink()
    files.token_file.mkdir()


def _no_token(files: Files) -> None:
    files.token_file.unlink()


def _no_credentials(files: Files) -> None:
    files.credentials_path.unlink()


def _channels_dir(files: Files) -> None:
    files.channels_path.unlink()
    files.channels_path.mkdir()


def _path_of(files: Files, which: str) -> Path:
    return {
        "channels": files.channels_path,
        "credentials": files.credentials_path,
        "token": files.token_file,
        "dir": files.directory,
    }[which]


P = "telegramProfiles.default"
MALFORMED: list[tuple[str, Arrange, type[ConfigError], str, str]] = [
    # (id, arrange, error, file the message starts with, field and rule)
    ("wrong-schema", _channels(lambda d: d.update(schema="pi-workflows.channels.v2")),
     ConfigInvalid, "channels", r"schema: pi-workflows channel config schema is invalid"),
    ("missing-schema", _channels(lambda d: d.pop("schema")),
     ConfigInvalid, "channels", r"schema: .*schema is invalid"),
    ("top-level-array", _raw_channels("[]"),
     ConfigInvalid, "channels", r"top level: must be a JSON object, not an array"),
    ("not-json", _raw_channels("{"),
     ConfigInvalid, "channels", r"top level: is not valid JSON \(.* line 1 column 2\)"),
    ("duplicate-key", _raw_channels('{"schema": "x", "schema": "y"}'),
     ConfigInvalid, "channels", r'top level: repeats the key "schema"'),
    ("nan", _raw_channels('{"schema": NaN}'),
     ConfigInvalid, "channels", r"top level: contains NaN, which is not JSON"),
    ("unknown-top-level-key", _channels(lambda d: d.update(channels={})),
     ConfigInvalid, "channels", r"channels: is not a known field \(allowed: schema, audiences,"),
    ("missing-audiences", _channels(lambda d: d.pop("audiences")),
     ConfigInvalid, "channels", r"audiences: is required"),
    ("profiles-not-object", _channels(lambda d: d.update(telegramProfiles=[])),
     ConfigInvalid, "channels", r"telegramProfiles: must be a JSON object, not an array"),
    ("unknown-profile-key", _profile(allowedUsers=["1"]),
     ConfigInvalid, "channels", rf"{P}\.allowedUsers: is not a known field"),
    ("bad-profile-name", _channels(_rename("telegramProfiles", "default", "-bad")),
     ConfigInvalid, "channels", r'telegramProfiles\["-bad"\]: Telegram profile name is invalid'),
    ("missing-credential-field", _channels(lambda d: d["telegramProfiles"]["default"].pop(
        "credential")), ConfigInvalid, "channels", rf"{P}\.credential: is required"),
    ("bad-credential-name", _profile(credential="bad name"),
     ConfigInvalid, "channels", rf"{P}\.credential: Telegram credential name is invalid"),
    ("empty-user-allowlist", _profile(allowedUserIds=[]),
     ConfigInvalid, "channels", rf"{P}\.allowedUserIds: Telegram profile default user IDs "
     "must contain numeric IDs"),
    ("allowlist-not-array", _profile(allowedChatIds="-100123"),
     ConfigInvalid, "channels", rf"{P}\.allowedChatIds: .*must contain numeric IDs"),
    ("non-numeric-id", _profile(allowedUserIds=["42", "4x2"]),
     ConfigInvalid, "channels", rf"{P}\.allowedUserIds\[1\]: .*must contain numeric IDs"),
    ("integer-id", _profile(allowedChatIds=[-100123]),
     ConfigInvalid, "channels",
     rf'{P}\.allowedChatIds\[0\]: .*must be strings, not JSON numbers: write "-100123"'),
    ("api-base-relative", _profile(apiBaseUrl="/bot-api"),
     ConfigInvalid, "channels", rf"{P}\.apiBaseUrl: apiBaseUrl must be an absolute http"),
    ("api-base-ftp", _profile(apiBaseUrl="ftp://example.org"),
     ConfigInvalid, "channels", rf"{P}\.apiBaseUrl: apiBaseUrl must be an absolute http"),
    ("api-base-query", _profile(apiBaseUrl="https://example.org/api?x=1"),
     ConfigInvalid, "channels", rf"{P}\.apiBaseUrl: apiBaseUrl must not have a query"),
    ("api-base-fragment", _profile(apiBaseUrl="https://example.org/#top"),
     ConfigInvalid, "channels", rf"{P}\.apiBaseUrl: apiBaseUrl must not have a query"),
    ("api-base-userinfo", _profile(apiBaseUrl="https://user:pw@example.org"),
     ConfigInvalid, "channels", rf"{P}\.apiBaseUrl: apiBaseUrl must not contain a user name"),
    ("api-base-not-string", _profile(apiBaseUrl=8081),
     ConfigInvalid, "channels", rf"{P}\.apiBaseUrl: must be a non-empty string, not a number"),
    ("bad-audience-name", _channels(_rename("audiences", "operator", "9ops")),
     ConfigInvalid, "channels", r'audiences\["9ops"\]: Decision audience is invalid'),
    ("unknown-audience-key", _audience(policy="any"),
     ConfigInvalid, "channels", r"audiences\.operator\.policy: is not a known field"),
    ("unknown-telegram-profile", _audience(channels=["pi", "telegram:other"]),
     ConfigInvalid, "channels",
     r"audiences\.operator\.channels\[1\]: Audience operator references an unknown channel"),
    ("unknown-channel-kind", _audience(channels=["email"]),
     ConfigInvalid, "channels",
     r"audiences\.operator\.channels\[0\]: Audience operator references an unknown channel"),
    ("empty-channels", _audience(channels=[]),
     ConfigInvalid, "channels",
     r"audiences\.operator\.channels: Audience operator must have at least one channel"),
    ("repeated-channel", _audience(channels=["pi", "pi"]),
     ConfigInvalid, "channels", r"audiences\.operator\.channels\[1\]: .*repeats a channel"),
    ("bad-accept", _audience(accept="all-answers"),
     ConfigInvalid, "channels",
     r"audiences\.operator\.accept: Audience operator accept policy must be first-valid-answer"),
    ("missing-accept", _channels(lambda d: d["audiences"]["operator"].pop("accept")),
     ConfigInvalid, "channels", r"audiences\.operator\.accept: is required"),
    ("credentials-wrong-schema", _credentials(lambda d: d.update(schema="pi-workflows.x")),
     ConfigInvalid, "credentials",
     r"schema: pi-workflows credential config schema is invalid"),
    ("credentials-unknown-key", _credentials(lambda d: d.update(slack={})),
     ConfigInvalid, "credentials", r"slack: is not a known field \(allowed: schema, telegram\)"),
    ("credential-unknown-key", _credentials(lambda d: d["telegram"]["telegram"].update(
        token="inline")), ConfigInvalid, "credentials",
     r"telegram\.telegram\.token: is not a known field \(allowed: tokenFile\)"),
    ("bad-credential-key", _credentials(_rename("telegram", "telegram", "bad name")),
     ConfigInvalid, "credentials", r'telegram\["bad name"\]: Telegram credential name is invalid'),
    ("token-file-not-string", _credentials(lambda d: d["telegram"]["telegram"].update(
        tokenFile=None)), ConfigInvalid, "credentials",
     r"telegram\.telegram\.tokenFile: must be a non-empty string, not null"),
    ("missing-credential", _credentials(_rename("telegram", "telegram", "other")),
     ConfigInvalid, "channels",
     rf"{P}\.credential: Telegram profile default references a missing credential"),
    ("missing-credentials-file", _no_credentials,
     ConfigInvalid, "credentials", r"does not exist, but .*channels\.json defines Telegram"),
    ("relative-token-file", _credentials(lambda d: d["telegram"]["telegram"].update(
        tokenFile="secrets/bot.token")), ConfigInvalid, "credentials",
     r"telegram\.telegram\.tokenFile: Telegram credential telegram tokenFile must be an absolute"),
    ("directory-token-file", _token_dir,
     ConfigInvalid, "credentials",
     r"telegram\.telegram\.tokenFile: Telegram credential telegram token file .* must be a "
     r"regular file \(it is a directory\)"),
    ("missing-token-file", _no_token,
     ConfigInvalid, "credentials", r"tokenFile: Telegram credential telegram token file .* does "
     "not exist"),
    ("empty-token-file", _token_text("  \n"),
     ConfigInvalid, "credentials",
     r"telegram\.telegram\.tokenFile: Telegram credential telegram token file is empty"),
    ("token-file-0644", _chmod("token", 0o644),
     ConfigPermission, "credentials",
     r"tokenFile: Telegram credential telegram token file .* permissions must be 0600 or "
     r"stricter \(mode is 0644\); fix: chmod 600 "),
    ("channels-json-0644", _chmod("channels", 0o644),
     ConfigPermission, "channels", r"permissions must be 0600 or stricter \(mode is 0644\)"),
    ("credentials-json-0640", _chmod("credentials", 0o640),
     ConfigPermission, "credentials", r"permissions must be 0600 or stricter \(mode is 0640\)"),
    ("channels-json-is-directory", _channels_dir,
     ConfigInvalid, "channels", r"must be a regular file \(it is a directory\)"),
    ("group-writable-dir", _chmod("dir", 0o770),
     ConfigPermission, "dir", r"is writable by group or others \(mode 0770\); fix: chmod 700 "),
    ("world-writable-dir", _chmod("dir", 0o703),
     ConfigPermission, "dir", r"is writable by group or others \(mode 0703\)"),
]


@pytest.mark.parametrize(
    ("arrange", "error", "where", "rule"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_config_is_refused_naming_file_field_and_rule(
    files: Files, arrange: Arrange, error: type[ConfigError], where: str, rule: str
) -> None:
    arrange(files)
    with pytest.raises(error) as caught:
        load_config()
    message = str(caught.value)
    assert type(caught.value) is error
    assert message.startswith(f"{_path_of(files, where)}")
    assert re.search(rule, message), message
    assert TOKEN not in message


def test_permission_errors_carry_the_chmod_fix_as_hint(files: Files) -> None:
    os.chmod(files.channels_path, 0o644)
    with pytest.raises(ConfigPermission) as caught:
        load_config()
    assert caught.value.hint == f"chmod 600 {files.channels_path}"
    assert caught.value.path == files.channels_path
    assert caught.value.exit_code == 77


def test_json_path_quotes_keys_that_are_not_plain(files: Files) -> None:
    profile = files.channels["telegramProfiles"].pop("default")
    files.channels["telegramProfiles"]["my.bot"] = {**profile, "allowedUserIds": ["x"]}
    files.channels["audiences"]["operator"]["channels"] = ["pi"]
    files.write()
    with pytest.raises(ConfigInvalid) as caught:
        load_config()
    assert caught.value.field == 'telegramProfiles["my.bot"].allowedUserIds[0]'


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_a_permission_error(files: Files) -> None:
    os.chmod(files.credentials_path, 0o000)
    with pytest.raises(ConfigPermission, match="cannot be accessed"):
        load_config()


# --- setup ---------------------------------------------------------------------------------


def _files_in(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_setup_writes_private_files_in_a_private_new_directory(
    home: Path, tmp_path: Path, token_file: Path
) -> None:
    directory = tmp_path / "fresh" / "pi-workflows"
    result = install_telegram_profile(
        directory, token_file=token_file, user_ids=["42"], chat_ids=["-100123"]
    )
    assert mode_of(directory) == 0o700
    assert _files_in(directory) == [CHANNELS_FILE, CREDENTIALS_FILE]
    for path in (result.channels_path, result.credentials_path):
        assert mode_of(path) == 0o600
        text = path.read_text(encoding="utf-8")
        assert TOKEN not in text and "AAExampleToken" not in text
        assert text.endswith("}\n") and not text.endswith("\n\n")
        assert text == json.dumps(json.loads(text), indent=2) + "\n"
    assert json.loads(result.credentials_path.read_text()) == {
        "schema": "pi-workflows.credentials.v1",
        "telegram": {"default": {"tokenFile": str(token_file)}},
    }
    assert json.loads(result.channels_path.read_text()) == {
        "schema": "pi-workflows.channels.v1",
        "audiences": {
            "operator": {"channels": ["pi", "telegram:default"], "accept": "first-valid-answer"}
        },
        "telegramProfiles": {
            "default": {
                "credential": "default",  # the profile's own name
                "allowedUserIds": ["42"],
                "allowedChatIds": ["-100123"],
            }
        },
    }
    assert not result.replaced_profile
    loaded = load_config(directory)
    assert loaded is not None and loaded.read_token("default") == TOKEN


def test_setup_merge_keeps_other_profiles_audiences_and_credentials(
    files: Files, tmp_path: Path
) -> None:
    spare = write_private(tmp_path / "secrets" / "approval.token", "555:approval")
    files.channels["telegramProfiles"]["approval"] = {
        "credential": "approval-bot",
        "allowedUserIds": ["7"],
        "allowedChatIds": ["7"],
        "apiBaseUrl": "http://127.0.0.1:9000",
    }
    files.channels["audiences"]["reviewers"] = {
        "channels": ["telegram:approval"],
        "accept": "first-valid-answer",
    }
    files.channels["audiences"]["operator"]["channels"] = ["pi", "telegram:approval"]
    files.credentials["telegram"]["approval-bot"] = {"tokenFile": str(spare)}
    files.write()
    new_token = write_private(tmp_path / "secrets" / "ops.token", "777:ops")

    result = install_telegram_profile(
        files.directory, token_file=new_token, user_ids=[42], chat_ids=["42"],
        profile="ops", credential="ops-bot",
    )

    loaded = require_config()
    assert set(loaded.profiles) == {"default", "approval", "ops"}
    assert loaded.profile("approval").api_base_url == "http://127.0.0.1:9000"
    assert loaded.routes("reviewers") == ("telegram:approval",)
    assert loaded.routes("operator") == ("pi", "telegram:approval", "telegram:ops")
    assert result.audience.channels == ("pi", "telegram:approval", "telegram:ops")
    assert loaded.read_token("ops") == "777:ops"
    assert loaded.read_token("approval") == "555:approval"
    assert loaded.read_token("default") == TOKEN
    assert _files_in(files.directory) == [CHANNELS_FILE, CREDENTIALS_FILE]


def test_setup_replaces_a_profile_of_the_same_name(files: Files) -> None:
    result = install_telegram_profile(
        files.directory, token_file=files.token_file, user_ids=["9"], chat_ids=["9"]
    )
    assert result.replaced_profile
    assert require_config().profile("default").allowed_user_ids == ("9",)


def test_setup_puts_pi_first_in_an_existing_audience(files: Files) -> None:
    files.channels["audiences"]["operator"]["channels"] = ["telegram:default"]
    files.write()
    install_telegram_profile(
        files.directory, token_file=files.token_file, user_ids=["1"], chat_ids=["1"]
    )
    assert require_config().routes("operator") == ("pi", "telegram:default")


def test_setup_tightens_an_existing_directory_and_file_modes(files: Files) -> None:
    os.chmod(files.directory, 0o775)
    os.chmod(files.channels_path, 0o644)
    install_telegram_profile(
        files.directory, token_file=files.token_file, user_ids=["1"], chat_ids=["1"]
    )
    assert mode_of(files.directory) == 0o700
    assert mode_of(files.channels_path) == 0o600
    assert load_config() is not None


def test_setup_writes_api_base_url_without_trailing_slash(
    home: Path, tmp_path: Path, token_file: Path
) -> None:
    directory = tmp_path / "cfg"
    install_telegram_profile(
        directory, token_file=token_file, user_ids=["1"], chat_ids=["1"],
        api_base_url="http://127.0.0.1:8081/",
    )
    stored = json.loads((directory / CHANNELS_FILE).read_text())
    assert stored["telegramProfiles"]["default"]["apiBaseUrl"] == "http://127.0.0.1:8081"


def test_setup_accepts_integer_ids_trims_and_drops_repeats(
    home: Path, tmp_path: Path, token_file: Path
) -> None:
    result = install_telegram_profile(
        tmp_path / "cfg", token_file=token_file, user_ids=[42, " 43 ", "42"], chat_ids=[-100]
    )
    assert result.profile.allowed_user_ids == ("42", "43")
    assert result.profile.allowed_chat_ids == ("-100",)


def _bad_token(text: str, mode: int = 0o600) -> Callable[[Path], Path]:
    return lambda tmp: write_private(tmp / "secrets" / "bad.token", text, mode)


def _token_directory(tmp: Path) -> Path:
    path = tmp / "secrets" / "token-dir"
    path.mkdir(parents=True)
    return path


SETUP_REJECTS: list[tuple[str, dict[str, Any], type[ConfigError], str]] = [
    ("relative-token-file", {"token_file": "secrets/bot.token"},
     ConfigInvalid, r"Telegram setup: token_file: Telegram token file path must be absolute"),
    ("missing-token-file", {"token_file": lambda tmp: tmp / "secrets" / "absent.token"},
     ConfigInvalid, r"token_file: .* does not exist"),
    ("token-file-0644", {"token_file": _bad_token(TOKEN, 0o644)},
     ConfigPermission, r"token_file: .* permissions must be 0600 or stricter \(mode is 0644\)"),
    ("empty-token-file", {"token_file": _bad_token(" \n")},
     ConfigInvalid, r"token_file: Telegram credential default token file is empty"),
    ("directory-token-file", {"token_file": _token_directory},
     ConfigInvalid, r"token_file: .* must be a regular file \(it is a directory\)"),
    ("empty-user-ids", {"user_ids": []},
     ConfigInvalid, r"user_ids: Telegram allowed user IDs must contain numeric IDs"),
    ("non-numeric-user-id", {"user_ids": ["42", "abc"]},
     ConfigInvalid, r"user_ids\[1\]: Telegram allowed user IDs must contain numeric IDs"),
    ("single-string-ids", {"chat_ids": "42"},
     ConfigInvalid, r"chat_ids: .*must be a list of IDs, not a single string"),
    ("boolean-chat-id", {"chat_ids": [True]},
     ConfigInvalid, r"chat_ids\[0\]: Telegram allowed chat IDs must contain numeric IDs"),
    ("fractional-chat-id", {"chat_ids": ["1.5"]},
     ConfigInvalid, r"chat_ids\[0\]: .*must contain numeric IDs"),
    ("bad-profile", {"profile": "bad name"},
     ConfigInvalid, r"profile: Telegram profile name is invalid"),
    ("empty-credential", {"credential": ""},
     ConfigInvalid, r"credential: must be a non-empty string"),
    ("bad-audience", {"audience": "9ops"},
     ConfigInvalid, r"audience: Decision audience is invalid"),
    ("ftp-api-base", {"api_base_url": "ftp://example.org"},
     ConfigInvalid, r"api_base_url: apiBaseUrl must be an absolute http"),
    ("api-base-query", {"api_base_url": "https://example.org?x"},
     ConfigInvalid, r"api_base_url: apiBaseUrl must not have a query"),
]


@pytest.mark.parametrize(
    ("changes", "error", "rule"),
    [case[1:] for case in SETUP_REJECTS],
    ids=[case[0] for case in SETUP_REJECTS],
)
def test_setup_rejects_bad_values_and_writes_nothing(
    home: Path,
    tmp_path: Path,
    token_file: Path,
    changes: dict[str, Any],
    error: type[ConfigError],
    rule: str,
) -> None:
    directory = tmp_path / "cfg"
    arguments: dict[str, Any] = {"token_file": token_file, "user_ids": ["1"], "chat_ids": ["1"]}
    arguments.update(changes)
    if callable(arguments["token_file"]):
        arguments["token_file"] = arguments["token_file"](tmp_path)
    with pytest.raises(error) as caught:
        install_telegram_profile(directory, **arguments)
    assert type(caught.value) is error
    assert str(caught.value).startswith("Telegram setup: ")
    assert re.search(rule, str(caught.value)), str(caught.value)
    assert TOKEN not in str(caught.value)
    assert not directory.exists()


def test_setup_refuses_to_overwrite_an_invalid_existing_file(files: Files) -> None:
    files.channels_path.write_text("{broken")
    with pytest.raises(ConfigInvalid, match=r"channels\.json: top level: is not valid JSON"):
        install_telegram_profile(
            files.directory, token_file=files.token_file, user_ids=["1"], chat_ids=["1"]
        )
    assert files.channels_path.read_text() == "{broken"


def test_setup_refuses_when_another_profile_misses_its_credential(
    files: Files, tmp_path: Path
) -> None:
    files.channels["telegramProfiles"]["orphan"] = {
        "credential": "nowhere",
        "allowedUserIds": ["1"],
        "allowedChatIds": ["1"],
    }
    files.write()
    before = files.channels_path.read_text()
    with pytest.raises(ConfigInvalid, match="Telegram profile orphan references a missing"):
        install_telegram_profile(
            files.directory, token_file=files.token_file, user_ids=["1"], chat_ids=["1"]
        )
    assert files.channels_path.read_text() == before


def test_setup_failure_during_rename_leaves_no_temporary_file(
    files: Files, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = files.credentials_path.read_text()

    def refuse(source: object, target: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ConfigUnavailable, match="No space left on device") as caught:
        install_telegram_profile(
            files.directory, token_file=files.token_file, user_ids=["1"], chat_ids=["1"]
        )
    assert caught.value.exit_code == 75
    assert _files_in(files.directory) == [CHANNELS_FILE, CREDENTIALS_FILE]
    assert files.credentials_path.read_text() == before


def test_setup_into_a_path_that_is_a_file_is_refused(
    home: Path, tmp_path: Path, token_file: Path
) -> None:
    occupied = write_private(tmp_path / "occupied", "x")
    with pytest.raises(ConfigUnavailable, match="configuration directory"):
        install_telegram_profile(occupied, token_file=token_file, user_ids=["1"], chat_ids=["1"])


# --- the shipped examples ------------------------------------------------------------------

EXAMPLES = ROOT / "config.example"


def test_shipped_examples_load_once_token_paths_exist(files: Files, tmp_path: Path) -> None:
    write_json(files.channels_path, json.loads((EXAMPLES / CHANNELS_FILE).read_text()))
    credentials = json.loads((EXAMPLES / CREDENTIALS_FILE).read_text())
    for name, entry in credentials["telegram"].items():
        entry["tokenFile"] = str(write_private(tmp_path / "secrets" / name,
                                               f"{len(name)}:{name}-token"))
    write_json(files.credentials_path, credentials)
    loaded = require_config()
    assert loaded.routes("operator") == ("pi", "telegram:default")
    assert loaded.profile("local-bot-api").api_base_url == "http://127.0.0.1:8081"
    assert loaded.read_token("local-bot-api") == "14:telegram-local-token"


def test_shipped_crontab_starts_a_65_second_poll_every_minute_so_runs_overlap() -> None:
    lines = (EXAMPLES / "crontab").read_text().splitlines()
    assert "* * * * * piw-channels poll --for 65" in lines


# --- errors --------------------------------------------------------------------------------


def _subclasses(root: type[ConfigError]) -> list[type[ConfigError]]:
    found = [root]
    for child in root.__subclasses__():
        found += _subclasses(child)
    return found


def test_every_config_error_has_a_unique_code_and_exit_code() -> None:
    classes = _subclasses(ConfigError)
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes))
    assert all(code.startswith("config_") for code in codes)
    assert {cls.__name__: cls.exit_code for cls in classes} == {
        "ConfigError": 78,
        "ConfigMissing": 78,
        "ConfigInvalid": 78,
        "ConfigPermission": 77,
        "ConfigUnavailable": 75,
    }
