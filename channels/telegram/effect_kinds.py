"""The Telegram effect types, grouped by when a pass applies them and how urgently they are
paced: what presses and replies caused first, deliveries behind them."""

from __future__ import annotations

from typing import Final

from channels.telegram.notifying import NOTIFY
from channels.telegram.pacing import NORMAL, SETTLING, URGENT
from channels.telegram.reactions import REACT
from channels.telegram.reservations import DELIVER, NOTICE, PROMPT, REMIND, SETTLE

__all__ = ["BACKGROUND_TYPES", "EFFECT_TYPES", "LEVELS", "URGENT_TYPES"]


EFFECT_TYPES: Final = (DELIVER, PROMPT, SETTLE, NOTICE, REACT, REMIND, NOTIFY)
URGENT_TYPES: Final = (PROMPT, NOTICE, REACT)  # what replies caused: awaited by the pass
# (settlements, which presses cause, are applied in the background: channels.telegram.deliverer)
BACKGROUND_TYPES: Final = (DELIVER, REMIND, NOTIFY)  # deliveries, reminders, notifications

# The pacer's priority of each effect's sends: a press's prompt first; a settlement after a
# decision asked just now (the press itself was answered already).
LEVELS: Final = {PROMPT: URGENT, NOTICE: URGENT, REACT: SETTLING, SETTLE: SETTLING,
                 **dict.fromkeys(BACKGROUND_TYPES, NORMAL)}
