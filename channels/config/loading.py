"""Finding and loading the private configuration directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from channels.config.errors import (
    SETUP_HINT,
    ConfigInvalid,
    ConfigMissing,
)
from channels.config.files import FileRef, check_directory, read_private_file, read_token_file
from channels.config.model import (
    CHANNELS_FILE,
    CONFIG_DIR_ENV,
    CREDENTIALS_FILE,
    ChannelsConfig,
    TelegramCredential,
    TelegramProfile,
    json_path,
)
from channels.config.parsing import (
    Source,
    check_references,
    parse_channels,
    parse_credentials,
    parse_json,
)

__all__ = ["load_config", "require_config", "resolve_config_dir"]


def resolve_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$PI_WORKFLOWS_CONFIG_DIR` when set and non-empty, else `~/.config/pi-workflows`."""
    env = os.environ if environ is None else environ
    configured = env.get(CONFIG_DIR_ENV, "")
    if configured:
        # Absolute so that every message and `chmod` fix names an unambiguous path.
        return Path(configured).absolute()
    return Path.home() / ".config" / "pi-workflows"


def load_config(directory: Path | str | None = None, *,
                check_tokens: bool = True) -> ChannelsConfig | None:
    """Load and check the private configuration; None when there is no channels.json.
    `check_tokens=False` (poll) leaves each token file to the pass of its own profile, so that
    one profile's broken token file fails that profile alone."""
    root = resolve_config_dir() if directory is None else Path(directory)
    channels_path = root / CHANNELS_FILE
    data = _read_channels_file(channels_path)
    if data is None:
        return None
    check_directory(root)
    source = Source(str(channels_path), channels_path)
    audiences, profiles = parse_channels(source, parse_json(source, data))
    credentials = _load_credentials(root / CREDENTIALS_FILE, source, profiles,
                                    check_tokens) if profiles else {}
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
        return read_private_file(FileRef(path, str(path)))
    except FileNotFoundError:
        if os.path.lexists(path):  # a dangling symlink is a broken setup, not "no config"
            raise ConfigInvalid(
                f"{path} is a symbolic link to a file that does not exist", path=path
            ) from None
        return None


def _load_credentials(
    path: Path, channels: Source, profiles: Mapping[str, TelegramProfile], check_tokens: bool
) -> dict[str, TelegramCredential]:
    try:
        data = read_private_file(FileRef(path, str(path)))
    except FileNotFoundError:
        raise ConfigInvalid(
            f"{path} does not exist, but {channels.label} defines Telegram profiles",
            path=path,
            hint=SETUP_HINT,
        ) from None
    source = Source(str(path), path)
    credentials = parse_credentials(source, parse_json(source, data))
    check_references(channels, profiles, credentials)
    for credential in credentials.values() if check_tokens else ():
        where = json_path(json_path("telegram", credential.name), "tokenFile")
        read_token_file(credential, prefix=f"{path}: {where}: ", field=where)
    return credentials
