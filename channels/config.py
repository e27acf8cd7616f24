"""Private channel configuration: where it lives, how it is checked, how setup writes it.

The directory is `$PI_WORKFLOWS_CONFIG_DIR` (when set and non-empty) or
`~/.config/pi-workflows`. It holds two files, both in the reference format:

- `channels.json` (`pi-workflows.channels.v1`): audiences -> channels (`pi` or
  `telegram:<profile>`) and Telegram profiles (credential name, numeric user and chat
  allowlists, optional `apiBaseUrl`);
- `credentials.json` (`pi-workflows.credentials.v1`): credential name -> absolute token file.

Loading is strict: unknown keys, duplicate keys, wrong types and bad names are refused with a
message that names the file, the field (a JSON path) and the rule. Every file, token files
included, must be a regular file with no group or other permission bits (0600 or 0400), and
the directory must not be writable by group or others. Symlinks are followed: the check
applies to the file they point at, read through the same descriptor that was checked.

The token itself is never held here. `ChannelsConfig.read_token()` reads it from the token
file at the moment of use (checking the file again), so it never sits in a config object, its
repr, an exception message or a file written by setup.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final
from urllib.parse import urlsplit

from channels.config_errors import (
    SETUP_HINT,
    ConfigError,
    ConfigInvalid,
    ConfigMissing,
    ConfigPermission,
    ConfigUnavailable,
)

__all__ = [
    "ACCEPT_FIRST_VALID_ANSWER",
    "CHANNELS_FILE",
    "CHANNELS_SCHEMA",
    "CONFIG_DIR_ENV",
    "CREDENTIALS_FILE",
    "CREDENTIALS_SCHEMA",
    "DEFAULT_API_BASE_URL",
    "DEFAULT_ROUTES",
    "PI_CHANNEL",
    "Audience",
    "ChannelsConfig",
    "ConfigError",
    "ConfigInvalid",
    "ConfigMissing",
    "ConfigPermission",
    "ConfigUnavailable",
    "InstallResult",
    "TelegramCredential",
    "TelegramProfile",
    "audience_routes",
    "install_telegram_profile",
    "load_config",
    "require_config",
    "resolve_config_dir",
]

CONFIG_DIR_ENV: Final = "PI_WORKFLOWS_CONFIG_DIR"
CHANNELS_FILE: Final = "channels.json"
CREDENTIALS_FILE: Final = "credentials.json"
CHANNELS_SCHEMA: Final = "pi-workflows.channels.v1"
CREDENTIALS_SCHEMA: Final = "pi-workflows.credentials.v1"
ACCEPT_FIRST_VALID_ANSWER: Final = "first-valid-answer"
DEFAULT_API_BASE_URL: Final = "https://api.telegram.org"
PI_CHANNEL: Final = "pi"
TELEGRAM_PREFIX: Final = "telegram:"
DEFAULT_ROUTES: Final[tuple[str, ...]] = (PI_CHANNEL,)

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # profiles, credentials
AUDIENCE_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")  # the request contract's rule
ID_PATTERN = re.compile(r"-?[0-9]+")  # Telegram user and chat ids
_NAME, _AUDIENCE, _NUMERIC_ID = NAME_PATTERN, AUDIENCE_PATTERN, ID_PATTERN
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # keys written `.key` in a JSON path
_PRIVATE_FILE_MODE: Final = 0o600
_PRIVATE_DIR_MODE: Final = 0o700
_SETUP: Final = "Telegram setup"


# --- records -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TelegramProfile:
    """One private Telegram bot profile: its credential and who may answer through it."""

    name: str
    credential: str
    allowed_user_ids: tuple[str, ...]
    allowed_chat_ids: tuple[str, ...]
    api_base_url: str = DEFAULT_API_BASE_URL

    @property
    def channel(self) -> str:
        """The audience route that names this profile: `telegram:<name>`."""
        return f"{TELEGRAM_PREFIX}{self.name}"

    def allows(self, user_id: int | str, chat_id: int | str) -> bool:
        """True when both the user and the chat are on this profile's allowlists."""
        return str(user_id) in self.allowed_user_ids and str(chat_id) in self.allowed_chat_ids


@dataclass(frozen=True, slots=True)
class Audience:
    """A logical audience and the channels that present its decisions."""

    name: str
    channels: tuple[str, ...]
    accept: str = ACCEPT_FIRST_VALID_ANSWER


@dataclass(frozen=True, slots=True)
class TelegramCredential:
    """A named credential: only the path of its token file, never the token."""

    name: str
    token_file: Path


@dataclass(frozen=True, slots=True)
class ChannelsConfig:
    """The validated private configuration (no token inside: see `read_token`)."""

    audiences: Mapping[str, Audience]
    profiles: Mapping[str, TelegramProfile]
    credentials: Mapping[str, TelegramCredential]

    def __post_init__(self) -> None:
        # Read-only views: a loaded config is shared by the whole poll cycle.
        for name in ("audiences", "profiles", "credentials"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def routes(self, audience: str) -> tuple[str, ...]:
        """The channels for an audience; an unknown audience gets the Pi channel only."""
        return audience_routes(self, audience)

    def profile(self, name: str) -> TelegramProfile:
        """The Telegram profile called `name`, or ConfigInvalid when there is none."""
        found = self.profiles.get(name)
        if found is None:
            raise ConfigInvalid(
                f"{CHANNELS_FILE}: {_child('telegramProfiles', name)}: "
                f"Telegram profile {name} is not configured",
                field=_child("telegramProfiles", name),
                hint=SETUP_HINT,
            )
        return found

    def read_token(self, profile: TelegramProfile | str) -> str:
        """Read the profile's token from its file now, checking the file again first."""
        chosen = self.profile(profile) if isinstance(profile, str) else profile
        credential = self.credentials.get(chosen.credential)
        if credential is None:
            raise ConfigInvalid(
                f"Telegram profile {chosen.name} references a missing credential",
                field=_child(_child("telegramProfiles", chosen.name), "credential"),
            )
        return _read_token(credential, prefix="", field=None)


@dataclass(frozen=True, slots=True)
class InstallResult:
    """What `install_telegram_profile` wrote."""

    config_dir: Path
    channels_path: Path
    credentials_path: Path
    profile: TelegramProfile
    audience: Audience
    credential: TelegramCredential
    replaced_profile: bool


# --- location and loading ------------------------------------------------------------------


def resolve_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$PI_WORKFLOWS_CONFIG_DIR` when set and non-empty, else `~/.config/pi-workflows`."""
    env = os.environ if environ is None else environ
    configured = env.get(CONFIG_DIR_ENV, "")
    if configured:
        # Absolute so that every message and `chmod` fix names an unambiguous path.
        return Path(configured).absolute()
    return Path.home() / ".config" / "pi-workflows"


def audience_routes(config: ChannelsConfig | None, audience: str) -> tuple[str, ...]:
    """The channels for an audience; no config or an unknown audience gets `("pi",)`."""
    found = None if config is None else config.audiences.get(audience)
    return DEFAULT_ROUTES if found is None else found.channels


def load_config(directory: Path | str | None = None) -> ChannelsConfig | None:
    """Load and check the private configuration; None when there is no channels.json."""
    root = resolve_config_dir() if directory is None else Path(directory)
    channels_path = root / CHANNELS_FILE
    data = _read_channels_file(channels_path)
    if data is None:
        return None
    _check_directory(root)
    source = _Source(str(channels_path), channels_path)
    audiences, profiles = _parse_channels(source, _parse_json(source, data))
    credentials = _load_credentials(root / CREDENTIALS_FILE, source, profiles) if profiles else {}
    return ChannelsConfig(audiences, profiles, credentials)


def require_config(directory: Path | str | None = None) -> ChannelsConfig:
    """Like `load_config`, but no channels.json is ConfigMissing (for Telegram commands)."""
    root = resolve_config_dir() if directory is None else Path(directory)
    config = load_config(root)
    if config is None:
        path = root / CHANNELS_FILE
        raise ConfigMissing(
            f"No channel configuration: {path} does not exist; run `{SETUP_HINT}` to create it",
            path=path,
            hint=SETUP_HINT,
        )
    return config


def _read_channels_file(path: Path) -> bytes | None:
    try:
        return _read_file(_FileRef(path, str(path)))
    except FileNotFoundError:
        if os.path.lexists(path):  # a dangling symlink is a broken setup, not "no config"
            raise ConfigInvalid(
                f"{path} is a symbolic link to a file that does not exist", path=path
            ) from None
        return None


def _load_credentials(
    path: Path, channels: _Source, profiles: Mapping[str, TelegramProfile]
) -> dict[str, TelegramCredential]:
    try:
        data = _read_file(_FileRef(path, str(path)))
    except FileNotFoundError:
        raise ConfigInvalid(
            f"{path} does not exist, but {channels.label} defines Telegram profiles",
            path=path,
            hint=SETUP_HINT,
        ) from None
    source = _Source(str(path), path)
    credentials = _parse_credentials(source, _parse_json(source, data))
    _check_references(channels, profiles, credentials)
    for credential in credentials.values():
        where = _child(_child("telegram", credential.name), "tokenFile")
        _read_token(credential, prefix=f"{path}: {where}: ", field=where)
    return credentials


def _check_directory(directory: Path) -> None:
    try:
        mode = stat.S_IMODE(directory.stat().st_mode)
    except OSError as exc:
        raise _os_error(_FileRef(directory, str(directory)), exc) from None
    if mode & 0o022:
        fix = f"chmod 700 {shlex.quote(str(directory))}"
        raise ConfigPermission(
            f"{directory} is writable by group or others (mode {mode:04o}); fix: {fix}",
            path=directory,
            hint=fix,
        )


# --- private files -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FileRef:
    """A file to read, with the words that introduce it in messages."""

    path: Path
    context: str
    field: str | None = None


def _read_file(ref: _FileRef, *, private: bool = True) -> bytes:
    """The file's bytes, checked through the descriptor that reads them (no check/use race).

    FileNotFoundError passes through: each caller decides what a missing file means.
    """
    try:
        # O_NONBLOCK: a FIFO planted in place of a file must not hang the poller.
        fd = os.open(ref.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _os_error(ref, exc) from None
    try:
        _require_regular(ref, os.fstat(fd).st_mode, private=private)
        return _read_all(fd)
    except OSError as exc:
        raise _os_error(ref, exc) from None
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _require_regular(ref: _FileRef, st_mode: int, *, private: bool) -> None:
    if not stat.S_ISREG(st_mode):
        raise ConfigInvalid(
            f"{ref.context} must be a regular file (it is {_file_kind(st_mode)})",
            path=ref.path,
            field=ref.field,
        )
    mode = stat.S_IMODE(st_mode)
    if private and mode & 0o077:
        fix = f"chmod 600 {shlex.quote(str(ref.path))}"
        raise ConfigPermission(
            f"{ref.context} permissions must be 0600 or stricter (mode is {mode:04o}); fix: {fix}",
            path=ref.path,
            field=ref.field,
            hint=fix,
        )


def _file_kind(st_mode: int) -> str:
    if stat.S_ISDIR(st_mode):
        return "a directory"
    if stat.S_ISFIFO(st_mode):
        return "a FIFO"
    if stat.S_ISSOCK(st_mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(st_mode) or stat.S_ISBLK(st_mode) else "not a file"


def _os_error(ref: _FileRef, exc: OSError) -> ConfigError:
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, PermissionError):
        return ConfigPermission(
            f"{ref.context} cannot be accessed ({reason}); it must belong to, and be "
            "readable by, the user that runs piw-channels",
            path=ref.path,
            field=ref.field,
        )
    return ConfigUnavailable(f"{ref.context} cannot be used ({reason})", path=ref.path)


def _read_token(credential: TelegramCredential, *, prefix: str, field: str | None) -> str:
    """The trimmed token; every error names the file, never its content."""
    path = credential.token_file
    context = f"{prefix}Telegram credential {credential.name} token file {path}"
    ref = _FileRef(path, context, field)
    if not path.is_absolute():
        raise ConfigInvalid(f"{context} must be an absolute path", path=path, field=field)
    try:
        data = _read_file(ref)
    except FileNotFoundError:
        raise ConfigInvalid(f"{context} does not exist", path=path, field=field) from None
    try:
        # `from None` below: a UnicodeDecodeError keeps the whole input, i.e. the token.
        token = data.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        raise ConfigInvalid(f"{context} is not UTF-8 text", path=path, field=field) from None
    if not token:
        raise ConfigInvalid(
            f"{prefix}Telegram credential {credential.name} token file is empty ({path})",
            path=path,
            field=field,
        )
    return token


# --- JSON validation -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Source:
    """Where values come from (a file, or the setup arguments), for error messages."""

    label: str
    path: Path | None = None

    def invalid(self, where: str, rule: str) -> ConfigInvalid:
        return ConfigInvalid(
            f"{self.label}: {where or 'top level'}: {rule}", path=self.path, field=where or None
        )


class _JsonRejected(ValueError):
    """Valid to Python's json module, refused for a private file."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


def _unique_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # json.loads keeps the last of repeated keys; a repeated key in a private file is a mistake.
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise _JsonRejected(f"repeats the key {json.dumps(key)} in one object")
        result[key] = value
    return result


def _no_constant(name: str) -> object:
    raise _JsonRejected(f"contains {name}, which is not JSON")


def _parse_json(source: _Source, data: bytes) -> object:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise source.invalid("", "is not UTF-8 text") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_object, parse_constant=_no_constant)
    except _JsonRejected as exc:
        raise source.invalid("", exc.rule) from None
    except json.JSONDecodeError as exc:
        rule = f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        raise source.invalid("", rule) from None
    except RecursionError:
        raise source.invalid("", "is nested too deeply") from None


def _child(where: str, key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f"{where}.{key}" if where else key
    return f"{where}[{json.dumps(key)}]"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _object(source: _Source, value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise source.invalid(where, f"must be a JSON object, not {_kind(value)}")
    return value


def _fields(
    source: _Source,
    value: object,
    where: str,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> dict[str, object]:
    """An object with exactly these keys: unknown keys are refused, required ones needed."""
    entry = _object(source, value, where)
    allowed = required + optional
    for key in entry:
        if key not in allowed:
            rule = f"is not a known field (allowed: {', '.join(allowed)})"
            raise source.invalid(_child(where, key), rule)
    for key in required:
        if key not in entry:
            raise source.invalid(_child(where, key), "is required")
    return entry


def _schema(source: _Source, document: dict[str, object], expected: str, what: str) -> None:
    if document.get("schema") != expected:
        rule = f"{what} schema is invalid (it must be {json.dumps(expected)})"
        raise source.invalid("schema", rule)


def _string(source: _Source, value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise source.invalid(where, f"must be a non-empty string, not {_kind(value)}")
    return value


def _name(source: _Source, value: object, where: str, what: str) -> str:
    text = _string(source, value, where)
    if not _NAME.fullmatch(text):
        raise source.invalid(where, f"{what} is invalid: it must match {_NAME.pattern}")
    return text


def _audience_name(source: _Source, value: object, where: str) -> str:
    text = _string(source, value, where)
    if not _AUDIENCE.fullmatch(text):
        rule = f"Decision audience is invalid: it must match {_AUDIENCE.pattern}"
        raise source.invalid(where, rule)
    return text


def _ids(source: _Source, value: object, where: str, what: str) -> tuple[str, ...]:
    """A non-empty array of numeric ID strings; JSON numbers are refused like the reference."""
    if not isinstance(value, list) or not value:
        rule = f'{what} must contain numeric IDs: a non-empty array of strings like "123"'
        raise source.invalid(where, rule)
    return tuple(_id(source, item, f"{where}[{index}]", what) for index, item in enumerate(value))


def _id(source: _Source, item: object, where: str, what: str) -> str:
    if isinstance(item, int) and not isinstance(item, bool):
        rule = f'{what} must be strings, not JSON numbers: write "{item}", not {item}'
        raise source.invalid(where, rule)
    if not isinstance(item, str) or not _NUMERIC_ID.fullmatch(item):
        rule = f"{what} must contain numeric IDs: a string matching {_NUMERIC_ID.pattern}"
        raise source.invalid(where, rule)
    return item


def _api_base_url(source: _Source, value: object, where: str) -> str:
    text = _string(source, value, where)
    rule = url_problem(text)
    if rule is not None:
        raise source.invalid(where, f"apiBaseUrl {rule}")
    return text.rstrip("/")


def url_problem(text: str) -> str | None:
    """Why `text` is not an acceptable Bot API base URL, or None when it is."""
    if any(char.isspace() or not char.isprintable() for char in text):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 -- urlsplit checks the port only when it is read
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an absolute http:// or https:// URL"
    if "?" in text or "#" in text:
        return "must not have a query or a fragment"
    if parts.username is not None or parts.password is not None:
        return "must not contain a user name or password"
    return None


# --- channels.json and credentials.json ----------------------------------------------------


def _parse_channels(
    source: _Source, value: object
) -> tuple[dict[str, Audience], dict[str, TelegramProfile]]:
    document = _object(source, value, "")
    # The schema first: a file of another version fails on it, not on its first unknown key.
    _schema(source, document, CHANNELS_SCHEMA, "pi-workflows channel config")
    _fields(source, document, "", ("schema", "audiences"), ("telegramProfiles",))
    # Profiles before audiences (as the reference does): audience routes must name profiles.
    table = _object(source, document.get("telegramProfiles", {}), "telegramProfiles")
    profiles = {name: _parse_profile(source, name, raw) for name, raw in table.items()}
    audience_table = _object(source, document["audiences"], "audiences")
    audiences = {
        name: _parse_audience(source, name, raw, profiles) for name, raw in audience_table.items()
    }
    return audiences, profiles


def _parse_profile(source: _Source, name: str, value: object) -> TelegramProfile:
    where = _child("telegramProfiles", name)
    _name(source, name, where, "Telegram profile name")
    keys = ("credential", "allowedUserIds", "allowedChatIds")
    entry = _fields(source, value, where, keys, ("apiBaseUrl",))
    label = f"Telegram profile {name}"
    return TelegramProfile(
        name=name,
        credential=_name(
            source, entry["credential"], _child(where, "credential"), "Telegram credential name"
        ),
        allowed_user_ids=_ids(
            source, entry["allowedUserIds"], _child(where, "allowedUserIds"), f"{label} user IDs"
        ),
        allowed_chat_ids=_ids(
            source, entry["allowedChatIds"], _child(where, "allowedChatIds"), f"{label} chat IDs"
        ),
        api_base_url=(
            _api_base_url(source, entry["apiBaseUrl"], _child(where, "apiBaseUrl"))
            if "apiBaseUrl" in entry
            else DEFAULT_API_BASE_URL
        ),
    )


def _parse_audience(
    source: _Source, name: str, value: object, profiles: Mapping[str, TelegramProfile]
) -> Audience:
    where = _child("audiences", name)
    _audience_name(source, name, where)
    entry = _fields(source, value, where, ("channels", "accept"))
    if entry["accept"] != ACCEPT_FIRST_VALID_ANSWER:
        rule = f"Audience {name} accept policy must be {ACCEPT_FIRST_VALID_ANSWER}"
        raise source.invalid(_child(where, "accept"), rule)
    known = {PI_CHANNEL, *(profile.channel for profile in profiles.values())}
    channels = _audience_channels(source, entry["channels"], _child(where, "channels"), name, known)
    return Audience(name=name, channels=channels, accept=ACCEPT_FIRST_VALID_ANSWER)


def _audience_channels(
    source: _Source, value: object, where: str, audience: str, known: set[str]
) -> tuple[str, ...]:
    """A non-empty list of distinct known channels: `pi` or `telegram:<defined profile>`."""
    if not isinstance(value, list) or not value:
        rule = f"Audience {audience} must have at least one channel (a non-empty array)"
        raise source.invalid(where, rule)
    channels: list[str] = []
    for index, channel in enumerate(value):
        if not isinstance(channel, str) or channel not in known:
            rule = (
                f'Audience {audience} references an unknown channel: use "pi" or '
                '"telegram:<profile>" with a profile defined in telegramProfiles'
            )
            raise source.invalid(f"{where}[{index}]", rule)
        if channel in channels:
            raise source.invalid(f"{where}[{index}]", f"Audience {audience} repeats a channel")
        channels.append(channel)
    return tuple(channels)


def _parse_credentials(source: _Source, value: object) -> dict[str, TelegramCredential]:
    document = _object(source, value, "")
    _schema(source, document, CREDENTIALS_SCHEMA, "pi-workflows credential config")
    _fields(source, document, "", ("schema", "telegram"))
    table = _object(source, document["telegram"], "telegram")
    return {name: _parse_credential(source, name, raw) for name, raw in table.items()}


def _parse_credential(source: _Source, name: str, value: object) -> TelegramCredential:
    where = _child("telegram", name)
    _name(source, name, where, "Telegram credential name")
    entry = _fields(source, value, where, ("tokenFile",))
    token_file = _string(source, entry["tokenFile"], _child(where, "tokenFile"))
    if not os.path.isabs(token_file):
        rule = f"Telegram credential {name} tokenFile must be an absolute path"
        raise source.invalid(_child(where, "tokenFile"), rule)
    return TelegramCredential(name=name, token_file=Path(token_file))


def _check_references(
    channels: _Source,
    profiles: Mapping[str, TelegramProfile],
    credentials: Mapping[str, TelegramCredential],
) -> None:
    for profile in profiles.values():
        if profile.credential not in credentials:
            where = _child(_child("telegramProfiles", profile.name), "credential")
            rule = (
                f"Telegram profile {profile.name} references a missing credential "
                f"(add telegram.{profile.credential} to {CREDENTIALS_FILE})"
            )
            raise channels.invalid(where, rule)


# --- setup ---------------------------------------------------------------------------------


def install_telegram_profile(
    config_dir: Path | str,
    *,
    token_file: Path | str,
    user_ids: Sequence[str | int],
    chat_ids: Sequence[str | int],
    profile: str = "default",
    audience: str = "operator",
    credential: str = "telegram",
    api_base_url: str | None = None,
) -> InstallResult:
    """Merge one verified Telegram profile into both files and write them atomically (0600).

    The caller has already verified the token (getMe). Other profiles, audiences and
    credentials are kept; the audience routes to `pi`, its other channels, then this profile.
    credentials.json is written first, so a crash between the two writes never leaves
    channels.json naming a credential that does not exist. The token is never copied.
    """
    setup = _Source(_SETUP)
    new_profile = TelegramProfile(
        name=_name(setup, profile, "profile", "Telegram profile name"),
        credential=_name(setup, credential, "credential", "Telegram credential name"),
        allowed_user_ids=_setup_ids(setup, user_ids, "user_ids", "Telegram allowed user IDs"),
        allowed_chat_ids=_setup_ids(setup, chat_ids, "chat_ids", "Telegram allowed chat IDs"),
        api_base_url=(
            DEFAULT_API_BASE_URL
            if api_base_url is None
            else _api_base_url(setup, api_base_url, "api_base_url")
        ),
    )
    audience_name = _audience_name(setup, audience, "audience")
    new_credential = _setup_credential(setup, new_profile.credential, token_file)
    root = Path(config_dir)
    _prepare_directory(root)
    return _merge_and_write(root, new_profile, audience_name, new_credential)


def _setup_ids(
    source: _Source, values: Sequence[str | int], where: str, what: str
) -> tuple[str, ...]:
    if isinstance(values, str | bytes):  # a lone string would split into one-digit IDs
        raise source.invalid(where, f"{what} must be a list of IDs, not a single string")
    # Integers are fine here (argument parsers produce them); the file stores strings.
    ids: list[object] = [_setup_id(item) for item in values]
    checked = _ids(source, ids, where, what)
    return tuple(dict.fromkeys(checked))  # drop repeats, keep the order given


def _setup_id(item: object) -> object:
    if isinstance(item, int) and not isinstance(item, bool):
        return str(item)
    return item.strip() if isinstance(item, str) else item


def _setup_credential(source: _Source, name: str, token_file: Path | str) -> TelegramCredential:
    path = Path(token_file)
    if not path.is_absolute():
        raise source.invalid("token_file", "Telegram token file path must be absolute")
    credential = TelegramCredential(name=name, token_file=path)
    # Checks the file (regular, private, non-empty); the token read here is dropped at once.
    _read_token(credential, prefix=f"{_SETUP}: token_file: ", field="token_file")
    return credential


def _prepare_directory(root: Path) -> None:
    try:
        root.mkdir(mode=_PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        os.chmod(root, _PRIVATE_DIR_MODE)  # kept 0700 even when it already existed
    except OSError as exc:
        raise _os_error(_FileRef(root, f"{_SETUP}: configuration directory {root}"), exc) from None


def _merge_and_write(
    root: Path, profile: TelegramProfile, audience: str, credential: TelegramCredential
) -> InstallResult:
    channels_path = root / CHANNELS_FILE
    credentials_path = root / CREDENTIALS_FILE
    audiences, profiles = _existing_channels(channels_path)
    credentials = _existing_credentials(credentials_path)
    replaced = profile.name in profiles
    merged_audience = Audience(audience, _merged_routes(audiences.get(audience), profile.channel))
    profiles[profile.name] = profile
    audiences[audience] = merged_audience
    credentials[credential.name] = credential
    _check_references(_Source(str(channels_path), channels_path), profiles, credentials)
    _write_private_json(credentials_path, _credentials_document(credentials))
    _write_private_json(channels_path, _channels_document(audiences, profiles))
    return InstallResult(
        config_dir=root,
        channels_path=channels_path,
        credentials_path=credentials_path,
        profile=profile,
        audience=merged_audience,
        credential=credential,
        replaced_profile=replaced,
    )


def _merged_routes(existing: Audience | None, channel: str) -> tuple[str, ...]:
    """`pi` first, then the audience's other channels in their order, then this profile."""
    kept = () if existing is None else existing.channels
    others = tuple(name for name in kept if name not in (PI_CHANNEL, channel))
    return (PI_CHANNEL, *others, channel)


def _existing_document(path: Path) -> tuple[_Source, object] | None:
    # Existing files are read without the mode check: setup rewrites them as 0600 anyway.
    try:
        data = _read_file(_FileRef(path, str(path)), private=False)
    except FileNotFoundError:
        return None
    source = _Source(str(path), path)
    return source, _parse_json(source, data)


def _existing_channels(path: Path) -> tuple[dict[str, Audience], dict[str, TelegramProfile]]:
    found = _existing_document(path)
    return ({}, {}) if found is None else _parse_channels(*found)


def _existing_credentials(path: Path) -> dict[str, TelegramCredential]:
    found = _existing_document(path)
    return {} if found is None else _parse_credentials(*found)


def _channels_document(
    audiences: Mapping[str, Audience], profiles: Mapping[str, TelegramProfile]
) -> dict[str, object]:
    document: dict[str, object] = {
        "schema": CHANNELS_SCHEMA,
        "audiences": {
            name: {"channels": list(entry.channels), "accept": entry.accept}
            for name, entry in audiences.items()
        },
    }
    if profiles:
        document["telegramProfiles"] = {
            name: _profile_entry(entry) for name, entry in profiles.items()
        }
    return document


def _profile_entry(profile: TelegramProfile) -> dict[str, object]:
    entry: dict[str, object] = {
        "credential": profile.credential,
        "allowedUserIds": list(profile.allowed_user_ids),
        "allowedChatIds": list(profile.allowed_chat_ids),
    }
    # Omitted when default, so the file stays readable by the reference implementation.
    if profile.api_base_url != DEFAULT_API_BASE_URL:
        entry["apiBaseUrl"] = profile.api_base_url
    return entry


def _credentials_document(credentials: Mapping[str, TelegramCredential]) -> dict[str, object]:
    return {
        "schema": CREDENTIALS_SCHEMA,
        "telegram": {
            name: {"tokenFile": str(entry.token_file)} for name, entry in credentials.items()
        },
    }


def _write_private_json(path: Path, document: Mapping[str, object]) -> None:
    """Write 2-space JSON + LF via `<f>.<pid>.<random>.tmp` (0600), fsync and rename."""
    data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(16)}.tmp")
    try:
        _write_new_file(temporary, data)
        os.replace(temporary, path)
        os.chmod(path, _PRIVATE_FILE_MODE)
        _fsync_directory(path.parent)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise _os_error(_FileRef(path, f"{_SETUP}: {path}"), exc) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _write_new_file(path: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(path, flags, _PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, _PRIVATE_FILE_MODE)  # the umask may have removed owner bits
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable, not only the file's content.
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
