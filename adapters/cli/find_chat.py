"""`setup telegram --find-chat`: wait for a message to the bot and print the chat and user ids
it came from, so that nobody opens `getUpdates` in a browser with the token in the URL.

It never confirms an update (it never sends an offset): whatever it sees stays queued for the
poller, which would otherwise lose a button press made meanwhile (the wait itself:
adapters.telegram.setup_steps).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from adapters.telegram.setup_steps import find_chats
from channels.config.model import DEFAULT_API_BASE_URL
from state.exit_codes import ExitCode

__all__ = ["find_chat"]


def find_chat(token: str, bot: str, token_file: Path, api_base_url: str, seconds: float,
              as_json: bool) -> int:
    """Wait up to `seconds` for a message to `bot` (its label, verified by the caller with
    getMe); print where it came from."""
    print(f"Waiting up to {seconds:g} s for a message to {bot}: send it one from the chat"
          " to set up (in a group, mention it: @bot hello). Ctrl-C stops.", file=sys.stderr,
          flush=True)
    found = find_chats(token, api_base_url, seconds)
    if not found:
        print(f"Error: no message reached {bot} within {seconds:g} s; send it one (a"
              " private chat needs Start first), then run this again", file=sys.stderr)
        return ExitCode.TEMPORARY
    if as_json:
        print(json.dumps({"bot": bot, "chats": [asdict(f) for f in found]}, indent=2,
                         sort_keys=True, ensure_ascii=False))
        return ExitCode.OK
    for f in found:
        sender = "" if f.user_id is None else f", from user {f.user_id} ({f.user_name})"
        print(f"Chat {f.chat_id} ({f.chat_type}: {f.chat_name}){sender}")
        user = "ID" if f.user_id is None else str(f.user_id)
        api = "" if api_base_url == DEFAULT_API_BASE_URL else f" --api-base-url {api_base_url}"
        print(f"  piw-channels setup telegram --token-file {token_file} --user {user}"
              f" --chat {f.chat_id}{api}")
    return ExitCode.OK
