"""The naive bot's side of the history bench: bench/peer_bot.py's press handling (one
getUpdates, per press one autocommit INSERT into its one table of answers, answer the
callback, remove the keyboard, post the outcome), in process, over https to its own loopback
fake, with --history rows of its own state already in that table.

Timed like the project's press pass: the bot's client session and the run, with the SQLite
file opened beforehand; the rows a batch adds are deleted afterwards (not timed), so every
batch runs at exactly its size, as the project's batches run on a copy of the built file.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from telegram import Bot

from bench import peer_bot
from bench.common import TOKEN, USER


class NaiveBot:
    """One naive bot with `rows` answers of history, against `fake` through `base_url`."""

    def __init__(self, state: Path, rows: int, fake: Any, base_url: str,
                 offset_file: Path) -> None:
        state.mkdir(mode=0o700)
        self.rows = rows
        self.fake = fake
        self.base_url = base_url
        # Bots that share a fake share its update offset (as one bot token does).
        self.offset_file = offset_file
        self.db = sqlite3.connect(state / "peer.sqlite")
        self.db.execute("CREATE TABLE IF NOT EXISTS decisions (id TEXT PRIMARY KEY,"
                        " message_id INTEGER)")
        self.db.execute("CREATE TABLE IF NOT EXISTS answers (decision TEXT, choice TEXT,"
                        " user_id INTEGER, update_id INTEGER)")
        with self.db:  # the history: one transaction, direct writes
            self.db.executemany(
                "INSERT INTO answers (decision, choice, user_id, update_id) VALUES (?,?,?,?)",
                ((f"d{-n}", "c", USER, 10_000_000 + n) for n in range(1, rows + 1)))

    def _bot(self) -> Bot:
        return Bot(TOKEN, base_url=f"{self.base_url}/bot")

    async def _send(self, count: int) -> list[tuple[str, int]]:
        async with self._bot() as bot:
            return await peer_bot.setup(bot, self.db, count, USER)

    async def _run(self) -> int:
        async with self._bot() as bot:
            return await peer_bot.run(bot, self.db, self.offset_file, post=True)

    def batch(self, presses: int) -> float:
        """Milliseconds per press of one batch of `presses` presses on delivered messages."""
        sent = asyncio.run(self._send(presses))
        for decision, message_id in sent:
            self.fake.control.push_fixture("callback_press.json", {
                "user_id": USER, "chat_id": USER, "message_id": message_id,
                "message_text": "decision", "callback_data": f"{decision}:c"})
        start = time.perf_counter()
        handled = asyncio.run(self._run())
        elapsed = time.perf_counter() - start
        if handled != presses:
            raise SystemExit(f"the naive bot saw {handled} updates, not {presses}")
        with self.db:
            self.db.execute("DELETE FROM answers WHERE rowid > ?", (self.rows,))
        return elapsed * 1000 / presses

    def close(self) -> None:
        self.db.close()
