"""`setup telegram`'s steps on the Bot API as the operator meets them: the calls
(adapters.telegram.setup_steps: verify the token, make the bot pollable) and the one question
they need answered, whether to delete a webhook that blocks polling (only when the operator
agrees: never silently), and the notes that follow a setup that worked. Nothing here writes a
file.
"""

from __future__ import annotations

import sys
from typing import ClassVar, Final

from adapters.telegram import setup_steps
from adapters.telegram.setup_steps import VerifiedBot
from channels.errors import ChannelsError
from state.exit_codes import ExitCode

__all__ = ["WebhookBlocksPolling", "prepare_polling", "print_notes"]


_NOTHING_WRITTEN: Final = "nothing was written"


class WebhookBlocksPolling(ChannelsError):
    """The bot has a webhook, which the operator did not agree to delete; exit 75, as the
    409 that `poll` would get (README's table: a provider conflict)."""

    code: ClassVar[str] = "telegram_setup_webhook"
    exit_code: ClassVar[int] = ExitCode.TEMPORARY


def prepare_polling(token: str, api_base_url: str, bot: VerifiedBot, *,
                    delete_webhook: bool) -> VerifiedBot:
    """Make the verified bot pollable: delete its webhook if it has one and the operator
    agrees (`--delete-webhook`, or yes at the prompt; otherwise exit 75, nothing written),
    then set its command menu so that the bot's commands are offered in the chat."""
    deleting = bool(bot.webhook) and _webhook_may_go(bot, token, delete_webhook)
    return setup_steps.make_pollable(token, api_base_url, bot, delete_webhook=deleting)


def _webhook_may_go(bot: VerifiedBot, token: str, delete_webhook: bool) -> bool:
    """Whether the operator agrees to delete the webhook: `--delete-webhook`, or yes at the
    prompt on a terminal; raise WebhookBlocksPolling otherwise (never deleted silently)."""
    where = bot.webhook_place(token)
    if delete_webhook:
        return True
    if sys.stdin is not None and sys.stdin.isatty():
        print(f"This bot has a webhook ({where}): Telegram sends it every update, and refuses"
              " to be polled while it is set. Delete the webhook so that piw-channels can poll"
              " (the updates waiting are kept)? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() in ("y", "yes"):
            return True
    raise WebhookBlocksPolling(
        f"Telegram setup: this bot has a webhook ({where}), and Telegram refuses to be polled"
        " while it is set: run setup again with --delete-webhook to delete it (the updates"
        f" waiting are kept); {_NOTHING_WRITTEN}")


def print_notes(bot: VerifiedBot) -> None:
    """What the operator should know although the profile works (stderr, after the summary)."""
    if bot.webhook_deleted:
        print(f"Deleted the bot's webhook ({bot.webhook_place()}): it is polled now.",
              file=sys.stderr)
    if bot.webhook is None:
        print("Note: whether the bot has a webhook could not be checked (getWebhookInfo"
              " failed); `poll` says so if one is set.", file=sys.stderr)
    if not bot.commands_set:  # the profile works; only the chat's command menu is missing
        print("Note: the bot's command menu (/pending, /mute) could not be set; run setup"
              " again to retry. Typing the commands works without it.", file=sys.stderr)
