"""Shared steps of the notification tests on Telegram: a chat behind the fake Bot API in a
process of its own, real `notify` and `poll` processes, and what the fake recorded of them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.telegram.fake import Fault, RemoteFakeBotApi
from channels.notifications.producing import TELEGRAM_NOTIFY
from tests.channels.telegram.helpers import (
    configure_telegram_profile,
    db_rows,
    kill_hard,
    out_of_process_fake,
    reap,
    run_cli,
    start_cli,
    wait_in_flight,
    write_token_file,
)
from tests.cli import piw


@contextmanager
def notification_chat(home: Path) -> Iterator[RemoteFakeBotApi]:
    """The fake Bot API in its own process, profile `ops` set up for it; yields its controls."""
    with out_of_process_fake(write_token_file(home)) as server:
        configure_telegram_profile(home, server.base_url)
        yield server.control


def notify(home: Path, *args: str) -> str:
    """`piw-channels notify ARGS`, which must succeed; the run id it prints."""
    result = run_cli(home, "notify", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def poll_once(home: Path, code: int = 0, *, ahead_ms: int = 0) -> str:
    """`poll --once` with the child's clock `ahead_ms` ahead, which must exit `code`; its
    stderr (the alert lines)."""
    result = piw(home, "poll", "--once", offset_ms=ahead_ms)
    assert result.returncode == code, result.stderr
    return result.stderr


def kill_poll_during(home: Path, fake: RemoteFakeBotApi, method: str, count: int) -> int:
    """Hold every `method` call unanswered, start `poll --once` and SIGKILL it once its
    `count`-th `method` request is on the wire; its process id (its leases name it)."""
    fake.inject(method, Fault.hang())
    poller = start_cli(home, "poll", "--once")
    try:
        wait_in_flight(fake, method, count)
        kill_hard(poller)
    finally:
        reap(poller)
    return poller.pid


def sends(fake: RemoteFakeBotApi) -> list[dict[str, Any]]:
    """The parameters of each sendMessage the fake accepted."""
    return [r.params for r in fake.requests("sendMessage") if r.status == 200]


def edits(fake: RemoteFakeBotApi) -> list[dict[str, Any]]:
    """The parameters of each editMessageText the fake received."""
    return [r.params for r in fake.requests("editMessageText")]


def texts_starting(fake: RemoteFakeBotApi, start: str) -> int:
    """How many sendMessage requests (answered or not) carried a text that starts so."""
    return sum(str(r.params.get("text", "")).startswith(start)
               for r in fake.requests("sendMessage"))


def notify_effects(run_id: str) -> list[tuple[str, str]]:
    """(status, what superseded it or "") of each `telegram.notify` effect of the run."""
    return [(str(a), str(b)) for a, b in db_rows(
        "SELECT status, coalesce(json_extract(b.content, '$.superseded'), '') FROM effects e"
        " LEFT JOIN blobs b ON b.blob_hash = e.result_hash"
        " WHERE e.source_resource_id = ? AND e.effect_type = ? ORDER BY e.created_at, e.rowid",
        f"run:{run_id}", TELEGRAM_NOTIFY)]
