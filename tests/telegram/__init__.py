"""Tests of the Telegram adapter: the loopback fake Bot API, fixtures and the client."""
