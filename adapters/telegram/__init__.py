"""The Telegram Bot API client (python-telegram-bot request layer over httpx), its error
classification and token redaction, and `fake`, the loopback fake Bot API."""
