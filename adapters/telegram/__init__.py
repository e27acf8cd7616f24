"""The Telegram Bot API client (over httpx: the cron path imports no python-telegram-bot), its
error classification and token redaction, `setup`'s calls through python-telegram-bot's `Bot`
(setup_bot) and its steps on them (setup_steps), and `fake`, the loopback fake Bot API."""

__all__ = ["client", "fake", "setup_steps"]
