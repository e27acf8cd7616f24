"""Run the real `piw-channels` (or a poll in this process) with Telegram's message limits lifted.

A bench measures the worker's own cost of a 100-press batch in one chat, and a test about
statements delivers dozens of cards to one chat in one pass; paced, each message to one chat
waits up to 1 s. This test-only launcher replaces the pass's pacer with one without the
message limits (429 holds still apply): the product has no switch for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when installed: the CLI checks its packages before they load
    from channels.telegram.holds import Hold
    from channels.telegram.pacing import Pacer

CLI_UNPACED = [sys.executable, "-c", "import tests.unpaced as u; u.main()"]


def unpaced_pacer(now_ms: Callable[[], int], holds: dict[str, Hold]) -> Pacer:
    """A pass's pacer without the message limits; holds (429s) still apply."""
    from channels.telegram import pacing

    return pacing.Pacer(now_ms, holds, chat_interval_ms=0, group_per_minute=2**31,
                        bot_per_second=2**31)


def install() -> None:
    """Every poll pass of this process paces nothing but 429 holds."""
    from channels.telegram import pacing

    pacing.new_pacer = unpaced_pacer


def main() -> None:
    from adapters.cli.main import main as cli_main  # checks the packages first

    install()
    cli_main()
