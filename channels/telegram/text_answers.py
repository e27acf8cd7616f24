"""Answers by text, for when a button cannot be pressed (a press lost while no poller ran, an
old client): a reply to a decision's card naming a choice by its number or its label, and the
`/pending` command's list of what waits (`commands`). Pure functions; inbound processing
applies them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from channels.decisions.askers import Asker
from channels.decisions.presentation import fingerprint
from channels.telegram.outcomes import shorten

__all__ = ["MAX_LISTED", "choice_named", "command", "hint", "pending_list"]


MAX_LISTED = 20

_COMMAND_RE = re.compile(r"^/([A-Za-z0-9_]{1,32})(?:@([A-Za-z0-9_]{1,64}))?(?:\s|$)")


def choice_named(choices: Mapping[str, Mapping[str, Any]], text: str) -> str | None:
    """The choice a reply names: its number ("2", "2."), or its label in any case, alone on
    the line. None when the text names no choice, or more than one."""
    said = " ".join(text.split()).casefold().rstrip(".!")
    ids = list(choices)
    if said.isdigit() and 1 <= int(said) <= len(ids):
        return ids[int(said) - 1]
    named = [choice_id for choice_id, choice in choices.items()
             if " ".join(str(choice["label"]).split()).casefold() == said]
    return named[0] if len(named) == 1 else None


def hint(choices: Mapping[str, Mapping[str, Any]]) -> str:
    """The one line an unclear reply gets (never a guess)."""
    labels = ", ".join(f"{n} {choice['label']}" for n, choice in
                       enumerate(choices.values(), start=1))
    return shorten(f"Reply with a number or a choice: {labels}", 1_000)


def command(text: str, bot_username: str | None = None) -> str | None:
    """The bot command a message starts with (`/pending`, `/pending@my_bot`), lowercased;
    None for plain text or a command addressed to another bot."""
    match = _COMMAND_RE.match(text)
    if match is None:
        return None
    target = match.group(2)
    if target is not None and bot_username is not None and \
            target.casefold() != bot_username.casefold():
        return None
    return match.group(1).casefold()


def pending_list(decisions: Sequence[tuple[str, str, Asker]]) -> str:
    """`/pending`'s answer: one numbered line per open decision (title, fingerprint, the agent
    that asked and on which host: "2. Run rm -rf build? · 1a2b3c4d5e6f · pi on laptop")."""
    if not decisions:
        return "Nothing is waiting for an answer."
    lines = [f"{len(decisions)} waiting; their cards follow:"] if len(decisions) <= MAX_LISTED \
        else [f"{len(decisions)} waiting; the {MAX_LISTED} oldest cards follow:"]
    for number, (title, digest, asker) in enumerate(decisions[:MAX_LISTED], start=1):
        who = asker.phrase()
        lines.append(f"{number}. {shorten(title.strip(), 120)} · {fingerprint(digest)} · "
                     f"{shorten(who, 60)}")
    return "\n".join(lines)
