"""The root of every error the channels package raises on purpose.

Every class carries a stable `code` so callers (the CLI, submission records) can react without
parsing messages. Messages themselves follow the reference contract word for word.

    ChannelsError                      channels_error      (here)
    ├── DecisionError and its kinds                         (channels.decisions.errors)
    └── ConfigError and its kinds                           (channels.config.errors)
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["ChannelsError"]


class ChannelsError(Exception):
    """Root of every error the channels package raises on purpose."""

    code: ClassVar[str] = "channels_error"
    exit_code: ClassVar[int] = 1
