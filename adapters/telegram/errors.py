"""Errors raised by the Telegram adapter.

Provider failures are *not* exceptions: every Bot API call returns a
``CallResult`` whose outcome says whether the request provably did not leave
(``not_sent``), may have been acted on (``ambiguous``), was refused
(``rejected``) or succeeded (``ok``). The exceptions below are for misuse and
local problems only, and none of them ever carries the bot token::

    TelegramAdapterError            root of this package
    ├── InvalidTokenFormat          the token cannot be placed in a Bot API URL
    ├── ClientClosedError           a call on a client that was shut down
    └── FixtureError                a recorded fixture is missing or malformed

Each class has a stable ``code`` so callers and the CLI can report it without
parsing messages.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["ClientClosedError", "FixtureError", "InvalidTokenFormat", "TelegramAdapterError"]


class TelegramAdapterError(Exception):
    """Root of every error the Telegram adapter raises."""

    code: ClassVar[str] = "telegram_adapter_error"


class InvalidTokenFormat(TelegramAdapterError, ValueError):
    """The bot token is empty or holds characters that would change the request URL."""

    code: ClassVar[str] = "telegram_invalid_token_format"


class ClientClosedError(TelegramAdapterError, RuntimeError):
    """A Bot API call was attempted on a client that was already shut down."""

    code: ClassVar[str] = "telegram_client_closed"


class FixtureError(TelegramAdapterError, ValueError):
    """A recorded Bot API fixture is missing, malformed or has unfilled placeholders."""

    code: ClassVar[str] = "telegram_fixture_error"
