"""The naive peer: a python-telegram-bot approval bot as people write it, run from cron.

Each run: read the offset from a JSON file, one getUpdates, and per button press one sqlite3
INSERT (autocommit, the stdlib defaults), answer the callback, remove the keyboard, and with
--post send an outcome message; then write the offset file. No leases, no outbox, no dedup
beyond the offset: what piw-channels is measured against (bench/peer_bench.py).

Run: python bench/peer_bot.py --base-url URL --token-file F --state DIR [--post]
     python bench/peer_bot.py ... --setup N --chat ID   (send N decisions; print message ids)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
from pathlib import Path

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup


async def setup(bot: Bot, db: sqlite3.Connection, count: int, chat: int
                ) -> list[tuple[str, int]]:
    ids = []
    first = int(db.execute("SELECT count(*) FROM decisions").fetchone()[0])
    for n in range(first, first + count):
        markup = InlineKeyboardMarkup([[InlineKeyboardButton("Continue", callback_data=f"d{n}:c")],
                                       [InlineKeyboardButton("Stop", callback_data=f"d{n}:s")]])
        message = await bot.send_message(chat, f"Approve step {n}?", reply_markup=markup)
        db.execute("INSERT INTO decisions (id, message_id) VALUES (?, ?)",
                   (f"d{n}", message.message_id))
        db.commit()
        ids.append((f"d{n}", message.message_id))
    return ids


async def run(bot: Bot, db: sqlite3.Connection, offset_file: Path, post: bool) -> int:
    offset = json.loads(offset_file.read_text())["offset"] if offset_file.exists() else None
    updates = await bot.get_updates(offset=offset, timeout=0)
    for update in updates:
        query = update.callback_query
        if query is None or query.data is None or query.message is None:
            continue
        decision, choice = query.data.split(":")
        db.execute("INSERT INTO answers (decision, choice, user_id, update_id) VALUES (?,?,?,?)",
                   (decision, choice, query.from_user.id, update.update_id))
        db.commit()
        label = "Continue" if choice == "c" else "Stop"
        await query.answer(f"Accepted: {label}")
        await bot.edit_message_reply_markup(query.message.chat.id, query.message.message_id)
        if post:
            await bot.send_message(query.message.chat.id, f"Accepted: {label}")
    if updates:
        offset_file.write_text(json.dumps({"offset": updates[-1].update_id + 1}))
    return len(updates)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--post", action="store_true")
    parser.add_argument("--setup", type=int, default=0)
    parser.add_argument("--chat", type=int, default=0)
    args = parser.parse_args()
    state = Path(args.state)
    db = sqlite3.connect(state / "peer.sqlite")
    db.execute("CREATE TABLE IF NOT EXISTS decisions (id TEXT PRIMARY KEY, message_id INTEGER)")
    db.execute("CREATE TABLE IF NOT EXISTS answers (decision TEXT, choice TEXT, user_id INTEGER,"
               " update_id INTEGER)")
    token = Path(args.token_file).read_text().strip()
    async with Bot(token, base_url=f"{args.base_url}/bot") as bot:
        if args.setup:
            print(json.dumps(await setup(bot, db, args.setup, args.chat)))
        else:
            await run(bot, db, state / "offset.json", args.post)
    db.close()


if __name__ == "__main__":
    asyncio.run(main())
