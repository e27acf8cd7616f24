"""The private configuration as values: profiles, audiences, credentials, and their rules."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from channels.config.errors import (
    SETUP_HINT,
    ConfigInvalid,
)
from channels.config.files import read_token_file
from channels.config.quiet_hours import QuietHours
from channels.decisions.fields import NAME_RE

__all__ = [
    "ACCEPT_FIRST_VALID_ANSWER",
    "AUDIENCE_PATTERN",
    "CHANNELS_FILE",
    "CHANNELS_SCHEMA",
    "CONFIG_DIR_ENV",
    "CREDENTIALS_FILE",
    "CREDENTIALS_SCHEMA",
    "DEFAULT_API_BASE_URL",
    "ID_PATTERN",
    "NAME_PATTERN",
    "PI_CHANNEL",
    "Audience",
    "ChannelsConfig",
    "InstallResult",
    "TelegramCredential",
    "TelegramProfile",
    "audience_routes",
    "json_path",
]


CONFIG_DIR_ENV: Final = "PI_WORKFLOWS_CONFIG_DIR"

CHANNELS_FILE: Final = "channels.json"

CREDENTIALS_FILE: Final = "credentials.json"

CHANNELS_SCHEMA: Final = "pi-workflows.channels.v1"

CREDENTIALS_SCHEMA: Final = "pi-workflows.credentials.v1"

ACCEPT_FIRST_VALID_ANSWER: Final = "first-valid-answer"

PI_CHANNEL: Final = "pi"
DEFAULT_API_BASE_URL: Final = "https://api.telegram.org"  # a profile's Bot API server

_TELEGRAM_PREFIX: Final = "telegram:"

_DEFAULT_ROUTES: Final[tuple[str, ...]] = (PI_CHANNEL,)

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # profiles, credentials

AUDIENCE_PATTERN = NAME_RE  # the request contract's rule for audiences, defined there once

ID_PATTERN = re.compile(r"-?[0-9]+")  # Telegram user and chat ids
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # keys written `.key` in a JSON path


def json_path(where: str, key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f"{where}.{key}" if where else key
    return f"{where}[{json.dumps(key)}]"


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
        return f"{_TELEGRAM_PREFIX}{self.name}"

    def allows(self, user_id: int | str, chat_id: int | str) -> bool:
        """True when both the user and the chat are on this profile's allowlists."""
        return str(user_id) in self.allowed_user_ids and str(chat_id) in self.allowed_chat_ids


@dataclass(frozen=True, slots=True)
class Audience:
    """A logical audience and the channels that present its decisions."""

    name: str
    channels: tuple[str, ...]
    accept: str = ACCEPT_FIRST_VALID_ANSWER
    reminders: bool = True  # bring waiting decisions back to the top of the chat
    quiet_hours: QuietHours | None = None  # a daily UTC window with no reminders


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
                f"{CHANNELS_FILE}: {json_path('telegramProfiles', name)}: "
                f"Telegram profile {name} is not configured (configured: "
                f"{', '.join(sorted(self.profiles)) or 'none'})",
                field=json_path("telegramProfiles", name),
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
                field=json_path(json_path("telegramProfiles", chosen.name), "credential"),
            )
        return read_token_file(credential, prefix="", field=None)


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


def audience_routes(config: ChannelsConfig | None, audience: str) -> tuple[str, ...]:
    """The channels for an audience; no config or an unknown audience gets `("pi",)`."""
    found = None if config is None else config.audiences.get(audience)
    return _DEFAULT_ROUTES if found is None else found.channels
