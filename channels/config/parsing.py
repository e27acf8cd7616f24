"""Parsing channels.json and credentials.json: strict JSON, exact schemas, one-line errors
that name the file and the JSON path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from channels.config.errors import (
    ConfigInvalid,
)
from channels.config.model import (
    ACCEPT_FIRST_VALID_ANSWER,
    AUDIENCE_PATTERN,
    CHANNELS_SCHEMA,
    CREDENTIALS_FILE,
    CREDENTIALS_SCHEMA,
    DEFAULT_API_BASE_URL,
    ID_PATTERN,
    NAME_PATTERN,
    PI_CHANNEL,
    Audience,
    TelegramCredential,
    TelegramProfile,
    json_path,
)
from channels.config.quiet_hours import QuietHours

__all__ = [
    "Source", "api_base_url_field", "audience_name_field", "check_references", "ids_field",
    "name_field", "parse_channels", "parse_credentials", "parse_json", "url_problem",
]


@dataclass(frozen=True, slots=True)
class Source:
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


def parse_json(source: Source, data: bytes) -> object:
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


def _object(source: Source, value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise source.invalid(where, f"must be a JSON object, not {_kind(value)}")
    return value


def _fields(
    source: Source,
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
            raise source.invalid(json_path(where, key), rule)
    for key in required:
        if key not in entry:
            raise source.invalid(json_path(where, key), "is required")
    return entry


def _schema(source: Source, document: dict[str, object], expected: str, what: str) -> None:
    if document.get("schema") != expected:
        rule = f"{what} schema is invalid (it must be {json.dumps(expected)})"
        raise source.invalid("schema", rule)


def _string(source: Source, value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise source.invalid(where, f"must be a non-empty string, not {_kind(value)}")
    return value


def name_field(source: Source, value: object, where: str, what: str) -> str:
    text = _string(source, value, where)
    if not NAME_PATTERN.fullmatch(text):
        raise source.invalid(where, f"{what} is invalid: it must match {NAME_PATTERN.pattern}")
    return text


def audience_name_field(source: Source, value: object, where: str) -> str:
    text = _string(source, value, where)
    if not AUDIENCE_PATTERN.fullmatch(text):
        rule = f"Decision audience is invalid: it must match {AUDIENCE_PATTERN.pattern}"
        raise source.invalid(where, rule)
    return text


def ids_field(source: Source, value: object, where: str, what: str) -> tuple[str, ...]:
    """A non-empty array of numeric ID strings; JSON numbers are refused like the reference."""
    if not isinstance(value, list) or not value:
        rule = f'{what} must contain numeric IDs: a non-empty array of strings like "123"'
        raise source.invalid(where, rule)
    return tuple(_id(source, item, f"{where}[{index}]", what) for index, item in enumerate(value))


def _id(source: Source, item: object, where: str, what: str) -> str:
    if isinstance(item, int) and not isinstance(item, bool):
        rule = f'{what} must be strings, not JSON numbers: write "{item}", not {item}'
        raise source.invalid(where, rule)
    if not isinstance(item, str) or not ID_PATTERN.fullmatch(item):
        rule = f"{what} must contain numeric IDs: a string matching {ID_PATTERN.pattern}"
        raise source.invalid(where, rule)
    return item


def api_base_url_field(source: Source, value: object, where: str) -> str:
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


def parse_channels(
    source: Source, value: object
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


def _parse_profile(source: Source, name: str, value: object) -> TelegramProfile:
    where = json_path("telegramProfiles", name)
    name_field(source, name, where, "Telegram profile name")
    keys = ("credential", "allowedUserIds", "allowedChatIds")
    entry = _fields(source, value, where, keys, ("apiBaseUrl",))
    label = f"Telegram profile {name}"
    return TelegramProfile(
        name=name,
        credential=name_field(
            source, entry["credential"], json_path(where, "credential"), "Telegram credential name"
        ),
        allowed_user_ids=ids_field(
            source, entry["allowedUserIds"], json_path(where, "allowedUserIds"), f"{label} user IDs"
        ),
        allowed_chat_ids=ids_field(
            source, entry["allowedChatIds"], json_path(where, "allowedChatIds"), f"{label} chat IDs"
        ),
        api_base_url=(
            api_base_url_field(source, entry["apiBaseUrl"], json_path(where, "apiBaseUrl"))
            if "apiBaseUrl" in entry
            else DEFAULT_API_BASE_URL
        ),
    )


def _parse_audience(
    source: Source, name: str, value: object, profiles: Mapping[str, TelegramProfile]
) -> Audience:
    where = json_path("audiences", name)
    audience_name_field(source, name, where)
    entry = _fields(source, value, where, ("channels", "accept"), ("reminders",))
    if entry["accept"] != ACCEPT_FIRST_VALID_ANSWER:
        rule = f"Audience {name} accept policy must be {ACCEPT_FIRST_VALID_ANSWER}"
        raise source.invalid(json_path(where, "accept"), rule)
    known = {PI_CHANNEL, *(profile.channel for profile in profiles.values())}
    channels = _audience_channels(source, entry["channels"], json_path(where, "channels"), name,
                                  known)
    enabled, quiet = _reminders(source, entry.get("reminders", {}), json_path(where, "reminders"))
    return Audience(name=name, channels=channels, accept=ACCEPT_FIRST_VALID_ANSWER,
                    reminders=enabled, quiet_hours=quiet)


def _reminders(source: Source, value: object, where: str) -> tuple[bool, QuietHours | None]:
    """`{"enabled": true, "quietHours": "22:00-07:00"}`, both optional."""
    entry = _fields(source, value, where, (), ("enabled", "quietHours"))
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise source.invalid(json_path(where, "enabled"), "must be true or false")
    quiet = entry.get("quietHours")
    if quiet is None:
        return enabled, None
    try:
        if not isinstance(quiet, str):
            raise ValueError("must be HH:MM-HH:MM (UTC), for example 22:00-07:00")
        return enabled, QuietHours.parse(quiet)
    except ValueError as exc:
        raise source.invalid(json_path(where, "quietHours"), str(exc)) from None


def _audience_channels(
    source: Source, value: object, where: str, audience: str, known: set[str]
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


def parse_credentials(source: Source, value: object) -> dict[str, TelegramCredential]:
    document = _object(source, value, "")
    _schema(source, document, CREDENTIALS_SCHEMA, "pi-workflows credential config")
    _fields(source, document, "", ("schema", "telegram"))
    table = _object(source, document["telegram"], "telegram")
    return {name: _parse_credential(source, name, raw) for name, raw in table.items()}


def _parse_credential(source: Source, name: str, value: object) -> TelegramCredential:
    where = json_path("telegram", name)
    name_field(source, name, where, "Telegram credential name")
    entry = _fields(source, value, where, ("tokenFile",))
    token_file = _string(source, entry["tokenFile"], json_path(where, "tokenFile"))
    if not os.path.isabs(token_file):
        rule = f"Telegram credential {name} tokenFile must be an absolute path"
        raise source.invalid(json_path(where, "tokenFile"), rule)
    return TelegramCredential(name=name, token_file=Path(token_file))


def check_references(
    channels: Source,
    profiles: Mapping[str, TelegramProfile],
    credentials: Mapping[str, TelegramCredential],
) -> None:
    for profile in profiles.values():
        if profile.credential not in credentials:
            where = json_path(json_path("telegramProfiles", profile.name), "credential")
            rule = (
                f"Telegram profile {profile.name} references a missing credential "
                f"(add telegram.{profile.credential} to {CREDENTIALS_FILE})"
            )
            raise channels.invalid(where, rule)
