"""The paced figure a user meets: presses settled by cron `poll --once` passes with Telegram's
limits on (one message a second to a chat, a burst of 3), in one chat or spread over several.

How the product spreads decisions over chats (README "Set up Telegram", channels/config): an
audience routes to profiles, a profile sends each decision to every chat it allows, and one
bot serves one profile. So N chats are N profiles in one HOME, each with its own bot (token),
its own fake Bot API behind its own front, and its own audience `chatK` routed to it alone: a
decision asked for `chatK` goes to chat K only. Each chat is that bot's private chat with the
one person (a private chat's id is the person's id); Telegram paces per bot and chat, and one
`poll --once` polls the N profiles concurrently, each pass with its own pacer.

Nothing here changes the product: the passes run the plain CLI (`piw.poll_command(paced=True)`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from adapters.telegram.fake import FakeBotApiProcess, RemoteFakeBotApi
from bench import piw
from bench.common import USER, PacedFigure, presses_per_chat
from channels.config.install import install_telegram_profile
from state.database import Database

MAX_PASSES = 60
HOW = ("N chats: N profiles in one HOME, each its own bot, fake and audience, one decision per"
       " press routed round robin; one cron `poll --once` polls them all")


class Front(Protocol):
    """What stands before a fake: a TLS front (bench.common.TlsFront) or plain http."""

    base_url: str

    def close(self) -> None: ...


def chat_token(k: int) -> str:
    """Chat K's bot token (a bot of its own: one bot serves one profile)."""
    return f"{7123456780 + k}:AAF-benchTokenNotASecret_0123456789ab"


@contextlib.contextmanager
def chats_home(path: Path, chats: int, front: Callable[[str], Front]
               ) -> Iterator[list[RemoteFakeBotApi]]:
    """A HOME at `path` with `chats` profiles `chatK` (audience `chatK`), each polling its own
    fake through `front(fake_url)`; yields each chat's fake control, in K order."""
    path.mkdir(mode=0o700)
    fakes: list[FakeBotApiProcess] = []
    fronts: list[Front] = []
    try:
        for k in range(chats):
            token_file = path / f"chat{k}.token"
            token_file.write_text(chat_token(k) + "\n")
            token_file.chmod(0o600)
            fakes.append(FakeBotApiProcess(token_file))
            fronts.append(front(fakes[-1].start()))
            install_telegram_profile(path / ".config" / "pi-workflows", token_file=token_file,
                                     user_ids=[str(USER)], chat_ids=[str(USER)],
                                     profile=f"chat{k}", audience=f"chat{k}",
                                     api_base_url=fronts[-1].base_url)
        yield [fake.control for fake in fakes]
    finally:
        for each in fronts:
            each.close()
        for fake in fakes:
            fake.stop()


def paced_figure(path: Path, presses: int, chats: int, front: Callable[[str], Front],
                 env_extra: dict[str, str], prepare: Callable[[Path], None] | None = None
                 ) -> PacedFigure:
    """`presses` presses, press K on a decision of audience `chat{K mod chats}`, delivered
    (not part of the figure), then settled by paced `poll --once` passes (a pass ends at its
    15 s bound and leaves the rest to the next) until every one won, was settled on Telegram
    and finished its run. `prepare(home)` fills its database first (history_bench's
    history), with HOME set and no connection open."""
    saved = os.environ.get("HOME")
    with chats_home(path, chats, front) as controls:
        os.environ["HOME"] = str(path)  # Database and load_config read this HOME
        try:
            env = piw.child_env(path, **env_extra)
            if prepare is not None:
                prepare(path)
            with Database.open_writer() as db:
                before = piw.settled_counts(db)
            piw.wall(piw.poll_command(paced=True), env)  # registers the channels, warms up
            with Database.open_writer() as db:
                handles = [piw.open_decisions(db, 1, k, audience=f"chat{k % chats}")[0]
                           for k in range(presses)]
                piw.poll_in_process(db)  # delivery: not part of the figure
                for k, expected in enumerate(presses_per_chat(presses, chats)):
                    sent = len(controls[k].requests("sendMessage"))
                    if sent != expected:  # each decision went to its own chat, and only there
                        raise SystemExit(f"chat {k} got {sent} deliveries, not {expected}")
                for k, handle in enumerate(handles):
                    piw.push_presses(controls[k % chats], db, [handle])
            walls: list[float] = []
            while len(walls) < MAX_PASSES:
                walls.append(piw.wall(piw.poll_command(paced=True), env))
                with Database.open_reader() as db:
                    now = piw.settled_counts(db)
                    if all(now[k] == before[k] + presses for k in now):
                        return PacedFigure(presses, chats, tuple(walls))
            raise SystemExit(f"{presses} paced presses over {chats} chats not settled after"
                             f" {len(walls)} passes")
        finally:
            if saved is None:
                os.environ.pop("HOME", None)
            else:
                os.environ["HOME"] = saved


def paced_figures(base: Path, presses: int, chat_counts: tuple[int, ...],
                  front: Callable[[str], Front], env_extra: dict[str, str],
                  prepare: Callable[[Path], None] | None = None) -> list[PacedFigure]:
    """One paced figure for each number of chats (one chat, five chats), each in a HOME and
    fakes of its own under `base`, the same presses each time (a count given twice, once)."""
    return [paced_figure(base / f"paced-{chats}-chats", presses, chats, front, env_extra,
                         prepare) for chats in dict.fromkeys(chat_counts)]
