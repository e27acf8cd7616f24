"""Bot API limits and the Telegram constants of this channel, found by name in one place:
the client and the fake Bot API take theirs from here (the default Bot API server is the
configuration's: channels.config.model). (The fake's exact
error texts stay in `adapters/telegram/fake/constants.py`: they are what the server sends, and
the client's matching of them is tested against them, not derived from them.)"""

from __future__ import annotations

__all__ = ["CALLBACK_TEXT_LIMIT", "MAX_TELEGRAM_PARTS", "TELEGRAM_TEXT_LIMIT"]


TELEGRAM_TEXT_LIMIT = 4_096  # UTF-16 code units in one message's text
MAX_TELEGRAM_PARTS = 20  # our bound on the messages one decision may take
CALLBACK_TEXT_LIMIT = 200  # answerCallbackQuery text
