"""The installer behind `setup telegram`: merge a profile into the private files, atomically."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from channels.config.errors import ConfigError, ConfigInvalid
from channels.config.files import (
    SETUP_LABEL,
    FileRef,
    bot_id,
    prepare_directory,
    read_private_file,
    read_token_file,
    write_private_json,
)
from channels.config.model import (
    AUDIENCE_PATTERN,
    CHANNELS_FILE,
    CHANNELS_SCHEMA,
    CREDENTIALS_FILE,
    CREDENTIALS_SCHEMA,
    DEFAULT_API_BASE_URL,
    ID_PATTERN,
    NAME_PATTERN,
    PI_CHANNEL,
    Audience,
    ChannelsConfig,
    InstallResult,
    TelegramCredential,
    TelegramProfile,
)
from channels.config.parsing import (
    Source,
    api_base_url_field,
    audience_name_field,
    check_references,
    ids_field,
    name_field,
    parse_channels,
    parse_credentials,
    parse_json,
    url_problem,
)

__all__ = ["install_telegram_profile", "remove_telegram_profile", "setup_argument",
           "setup_token"]

# The rules of a name and an audience as `setup telegram` states them.
_WORDS: Final[dict[str, tuple[re.Pattern[str], str]]] = {
    "name": (NAME_PATTERN, "use letters, digits, '.', '_' or '-', starting with a letter or"
             " digit (at most 200 characters)"),
    "audience": (AUDIENCE_PATTERN, "use letters, digits, '_' or '-', starting with a letter"
                 " or '_' (at most 128 characters)"),
}


def setup_argument(kind: Literal["id", "name", "audience", "url"], text: str) -> str:
    """One `setup telegram` argument (a Telegram user or chat ID, a profile or credential
    name, an audience, a Bot API URL) checked by the rules install_telegram_profile applies
    again before it writes, so that a bad one is refused before any request: the value to
    install (an ID trimmed, a URL without its final '/'), or ValueError saying why (one line)."""
    if kind == "id":
        value = text.strip()
        if not ID_PATTERN.fullmatch(value):
            raise ValueError(f"{text!r} is not a numeric Telegram ID (like 123456789 or"
                             " -1001234567890)")
        return value
    if kind == "url":
        problem = url_problem(text)
        if problem is not None:
            raise ValueError(f"{text!r} {problem}")
        return text.rstrip("/")
    pattern, rule = _WORDS[kind]
    if not pattern.fullmatch(text):
        raise ValueError(f"{text!r} is not a valid {kind}: {rule}")
    return text


def setup_token(token_file: Path, credential: str) -> str:
    """The trimmed token, after the checks the poller makes (absolute, regular, private,
    non-empty): they run through `ChannelsConfig.read_token`, the very code the poller uses,
    so that setup cannot accept a token file that the poller would later refuse."""
    entry = TelegramCredential(name=credential, token_file=token_file)
    # A stand-in profile: read_token only follows its credential reference.
    profile = TelegramProfile(
        name="setup", credential=credential, allowed_user_ids=(), allowed_chat_ids=()
    )
    return ChannelsConfig({}, {}, {credential: entry}).read_token(profile)


def install_telegram_profile(
    config_dir: Path | str,
    *,
    token_file: Path | str,
    user_ids: Sequence[str | int],
    chat_ids: Sequence[str | int],
    profile: str = "default",
    audience: str = "operator",
    credential: str | None = None,
    api_base_url: str | None = None,
) -> InstallResult:
    """Merge one verified Telegram profile into both files and write them atomically (0600).

    The caller has already verified the token (getMe). Other profiles, audiences and
    credentials are kept; the audience routes to `pi`, its other channels, then this profile.
    credentials.json is written first, so a crash between the two writes never leaves
    channels.json naming a credential that does not exist. The token is never copied.

    The credential defaults to the one the profile already has, else the profile's own name.
    A credential or a bot that another profile uses is refused (one serves one profile); a
    credential the profile no longer uses, and no other profile does, is removed.
    """
    setup = Source(SETUP_LABEL)
    root = Path(config_dir)
    if credential is None:
        # is_file: a broken location is left for prepare_directory to report.
        existing = root / CHANNELS_FILE
        known = _existing_channels(existing)[1].get(profile) if existing.is_file() else None
        credential = profile if known is None else known.credential
    new_profile = TelegramProfile(
        name=name_field(setup, profile, "profile", "Telegram profile name"),
        credential=name_field(setup, credential, "credential", "Telegram credential name"),
        allowed_user_ids=_setup_ids(setup, user_ids, "user_ids", "Telegram allowed user IDs"),
        allowed_chat_ids=_setup_ids(setup, chat_ids, "chat_ids", "Telegram allowed chat IDs"),
        api_base_url=(
            DEFAULT_API_BASE_URL
            if api_base_url is None
            else api_base_url_field(setup, api_base_url, "api_base_url")
        ),
    )
    audience_name = audience_name_field(setup, audience, "audience")
    new_credential = _setup_credential(setup, new_profile.credential, token_file)
    prepare_directory(root)
    return _merge_and_write(root, new_profile, audience_name, new_credential)


def _setup_ids(
    source: Source, values: Sequence[str | int], where: str, what: str
) -> tuple[str, ...]:
    if isinstance(values, str | bytes):  # a lone string would split into one-digit IDs
        raise source.invalid(where, f"{what} must be a list of IDs, not a single string")
    # Integers are fine here (argument parsers produce them); the file stores strings.
    ids: list[object] = [_setup_id(item) for item in values]
    checked = ids_field(source, ids, where, what)
    return tuple(dict.fromkeys(checked))  # drop repeats, keep the order given


def _setup_id(item: object) -> object:
    if isinstance(item, int) and not isinstance(item, bool):
        return str(item)
    return item.strip() if isinstance(item, str) else item


def _setup_credential(source: Source, name: str, token_file: Path | str) -> TelegramCredential:
    path = Path(token_file)
    if not path.is_absolute():
        raise source.invalid("token_file", "Telegram token file path must be absolute")
    credential = TelegramCredential(name=name, token_file=path)
    # Checks the file (regular, private, non-empty); the token read here is dropped at once.
    read_token_file(credential, prefix=f"{SETUP_LABEL}: token_file: ", field="token_file")
    return credential


def _merge_and_write(
    root: Path, profile: TelegramProfile, audience: str, credential: TelegramCredential,
) -> InstallResult:
    channels_path = root / CHANNELS_FILE
    credentials_path = root / CREDENTIALS_FILE
    audiences, profiles = _existing_channels(channels_path)
    credentials = _existing_credentials(credentials_path)
    replaced = profile.name in profiles
    _refuse_shared_credential(profiles, credentials, profile, credential)
    _refuse_shared_bot(profiles, credentials, profile, credential)
    old = profiles.get(profile.name)
    if old is not None and old.credential != credential.name and not any(
            p.credential == old.credential for p in profiles.values() if p.name != profile.name):
        credentials.pop(old.credential, None)  # replaced: no reference left behind
    merged_audience = Audience(audience, _merged_routes(audiences.get(audience), profile.channel))
    profiles[profile.name] = profile
    audiences[audience] = merged_audience
    credentials[credential.name] = credential
    check_references(Source(str(channels_path), channels_path), profiles, credentials)
    write_private_json(credentials_path, _credentials_document(credentials))
    write_private_json(channels_path, _channels_document(audiences, profiles))
    return InstallResult(
        config_dir=root,
        channels_path=channels_path,
        credentials_path=credentials_path,
        profile=profile,
        audience=merged_audience,
        credential=credential,
        replaced_profile=replaced,
    )


def _refuse_shared_credential(profiles: Mapping[str, TelegramProfile],
                              credentials: Mapping[str, TelegramCredential],
                              profile: TelegramProfile, credential: TelegramCredential) -> None:
    """A credential serves one profile, as its bot does: two profiles on one credential are
    one bot, which poll polls for the first only (re-pointing it would also move the other
    profile onto this bot)."""
    users = sorted(p.name for p in profiles.values()
                   if p.credential == credential.name and p.name != profile.name)
    if users:
        old = credentials.get(credential.name)
        where = "" if old is None else f" with token file {old.token_file}"
        raise ConfigInvalid(
            f"{SETUP_LABEL}: credential {credential.name} is used by profile {', '.join(users)}"
            f"{where}; a credential serves one profile (two would share one bot, which poll"
            f" polls for the first only): give this profile its own credential (--credential"
            f" {profile.name}) and bot, or remove {users[0]} first (piw-channels setup"
            f" telegram --remove {users[0]}); nothing was written", field="credential")


def _refuse_shared_bot(profiles: Mapping[str, TelegramProfile],
                       credentials: Mapping[str, TelegramCredential], profile: TelegramProfile,
                       credential: TelegramCredential) -> None:
    """A bot serves one profile: two profiles on one bot would both poll it (each update
    reaches only one of them) and both deliver every decision. Profiles sharing this
    credential are `_refuse_shared_credential`'s business; here, those that reach the same
    bot through a credential of their own."""
    bot = _bot_id(credential)
    for other in profiles.values():
        if other.name == profile.name or other.credential == credential.name \
                or other.api_base_url != profile.api_base_url:
            continue
        theirs = credentials.get(other.credential)
        if theirs is None:
            continue
        same_file = theirs.token_file == credential.token_file
        if same_file or (bot is not None and _bot_id(theirs) == bot):
            raise ConfigInvalid(
                f"{SETUP_LABEL}: profile {other.name} already uses bot {bot} (token file"
                f" {theirs.token_file}); a bot serves one profile (two would both poll it and"
                f" send every decision twice): to change that profile pass --profile"
                f" {other.name}, for another profile create another bot with @BotFather;"
                f" nothing was written", field="token_file")


def _bot_id(credential: TelegramCredential) -> str | None:
    """The bot id a token file names (its digits before the colon), None when unreadable:
    a broken file of another profile is that profile's problem, not this setup's."""
    try:
        token = read_token_file(credential, prefix="", field=None)
    except ConfigError:
        return None
    return bot_id(token)


def _merged_routes(existing: Audience | None, channel: str) -> tuple[str, ...]:
    """`pi` first, then the audience's other channels in their order, then this profile."""
    kept = () if existing is None else existing.channels
    others = tuple(name for name in kept if name not in (PI_CHANNEL, channel))
    return (PI_CHANNEL, *others, channel)


def _existing_document(path: Path) -> tuple[Source, object] | None:
    # Existing files are read without the mode check: setup rewrites them as 0600 anyway.
    try:
        data = read_private_file(FileRef(path, str(path)), private=False)
    except FileNotFoundError:
        return None
    source = Source(str(path), path)
    return source, parse_json(source, data)


def _existing_channels(path: Path) -> tuple[dict[str, Audience], dict[str, TelegramProfile]]:
    found = _existing_document(path)
    return ({}, {}) if found is None else parse_channels(*found)


def _existing_credentials(path: Path) -> dict[str, TelegramCredential]:
    found = _existing_document(path)
    return {} if found is None else parse_credentials(*found)


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


@dataclass(frozen=True, slots=True)
class _Removal:
    """What `remove_telegram_profile` removed."""

    profile: str
    credential: str | None  # the credential removed with it (no other profile used it)
    audiences: tuple[str, ...]  # the audiences that routed to it


def remove_telegram_profile(config_dir: Path | str, profile: str) -> _Removal:
    """Remove a Telegram profile, its routes, and its credential when no other profile uses
    it. channels.json is written first, so it never names a credential that is gone."""
    root = Path(config_dir)
    channels_path, credentials_path = root / CHANNELS_FILE, root / CREDENTIALS_FILE
    audiences, profiles = _existing_channels(channels_path)
    credentials = _existing_credentials(credentials_path)
    gone = profiles.pop(profile, None)
    if gone is None:
        raise ConfigInvalid(
            f"{SETUP_LABEL}: Telegram profile {profile} is not configured (configured:"
            f" {', '.join(sorted(profiles)) or 'none'}); nothing was written", field="profile")
    routed = tuple(name for name, a in audiences.items() if gone.channel in a.channels)
    for name in routed:
        audiences[name] = Audience(name, tuple(c for c in audiences[name].channels
                                               if c != gone.channel), audiences[name].accept)
    unused = not any(p.credential == gone.credential for p in profiles.values())
    if unused:
        credentials.pop(gone.credential, None)
    check_references(Source(str(channels_path), channels_path), profiles, credentials)
    write_private_json(channels_path, _channels_document(audiences, profiles))
    write_private_json(credentials_path, _credentials_document(credentials))
    return _Removal(profile, gone.credential if unused else None, routed)
