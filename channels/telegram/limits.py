"""Bot API limits and the Telegram constants of this channel, found by name in one place."""

from __future__ import annotations

TELEGRAM_TEXT_LIMIT = 4_096  # UTF-16 code units in one message's text
MAX_TELEGRAM_PARTS = 20  # our bound on the messages one decision may take
CALLBACK_TEXT_LIMIT = 200  # answerCallbackQuery text
