"""Errors of the private channel configuration (`channels/config.py`).

    ChannelsError                   (channels/errors.py) the package root
    └── ConfigError                 every config class has a stable `code` and an `exit_code`
        ├── ConfigMissing           no channels.json: nothing is configured (exit 78)
        ├── ConfigInvalid           a file or a setup value breaks a rule (exit 78)
        ├── ConfigPermission        a file or directory is not private, or unreadable (exit 77)
        └── ConfigUnavailable       the file system failed (I/O error, no space) (exit 75)

Messages name the file, the field (a JSON path such as
`telegramProfiles.default.allowedUserIds[1]`) and the rule, and `hint` holds the command that
fixes the problem when there is one. No message ever contains a token or a value read from a
token file: token-file errors are raised `from None` so that no decoder error carrying the
file's bytes is chained to them.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from channels.errors import ChannelsError
from state.exit_codes import ExitCode

__all__ = [
    "SETUP_HINT", "ConfigError", "ConfigInvalid", "ConfigMissing", "ConfigPermission",
    "ConfigUnavailable",
]


SETUP_HINT = "piw-channels setup telegram ..."


class ConfigError(ChannelsError):
    """Root of every private-configuration error."""

    code: ClassVar[str] = "config_error"
    exit_code: ClassVar[int] = ExitCode.CONFIG

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.field = field
        self.hint = hint


class ConfigMissing(ConfigError):
    """There is no channels.json, so no channel other than Pi is configured."""

    code = "config_missing"
    exit_code = ExitCode.CONFIG


class ConfigInvalid(ConfigError):
    """A configuration file or a setup value breaks a rule; nothing was written."""

    code = "config_invalid"
    exit_code = ExitCode.CONFIG


class ConfigPermission(ConfigError):
    """A file or the directory is readable or writable by others, or cannot be read."""

    code = "config_permission"
    exit_code = ExitCode.PERMISSION


class ConfigUnavailable(ConfigError):
    """Reading or writing a configuration file failed for a reason other than its content."""

    code = "config_unavailable"
    exit_code = ExitCode.TEMPORARY
