"""Shared builders for end-to-end Telegram flow tests (real poll cycle, fake Bot API).

Everything works on the temporary HOME of the `home` fixture (tests/conftest.py): the private
config goes to `~/.config/pi-workflows`, the database to `~/.pi/agent/workflows`. The fake Bot
API runs in process (`FakeBotApi`) or out of process (`FakeBotApiProcess`, which outlives a
SIGKILLed poller); both are driven through the same few calls (`FakeControls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import apsw

from adapters.cli import telegram as telegram_cli
from adapters.telegram.fake import (
    FakeBotApiProcess,
    Fault,
    Overlap,
    RecordedRequest,
    load_demo_fixture,
)
from adapters.telegram.fake.fixtures import updates_of as fixture_updates
from channels import inbox, store
from channels.config.install import install_telegram_profile
from channels.config.loading import load_config
from channels.decisions import workflows
from channels.decisions.choices import text_input
from channels.decisions.request import channel_request_document
from channels.telegram import poll
from channels.telegram.buttons import TOKEN_RE, callback_token
from channels.telegram.card import card_parts
from state.database import Database
from state.files import default_path
from tests.cli import CLI, piw
from tests.conftest import child_env
from tests.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "telegram"

# A token of the real shape ("<bot id>:<secret>"); tests prove it never leaks anywhere.
TOKEN = "7123456789:AAF-flowTestSecret_k3Jq9XwVbN0pLmZr8Tc"
USER = 5123456789  # a private chat: its chat id is the user id
PROFILE = "ops"
AUDIENCE = "operator"

CHOICES: dict[str, Any] = {
    "continue": {"label": "Continue"},
    "stop": {"label": "Stop"},
    "replan": {"label": "Replan", "input": text_input("instructions", "What should change?")},
}


class FakeControls(Protocol):
    """What the tests use of `FakeBotApi` and `RemoteFakeBotApi` alike."""

    def push_fixture(self, name: str, values: Mapping[str, object] | None = None) -> list[int]: ...
    def push_raw_update(self, text: str, update_id: int | None = None) -> int: ...
    def inject(self, method: str, fault: Fault) -> None: ...
    def release(self) -> None: ...
    def requests(self, method: str | None = None) -> list[RecordedRequest]: ...
    def overlaps(self) -> list[Overlap]: ...
    def wait_received(self, method: str, count: int = 1, timeout: float = 5.0) -> bool: ...


# -- configuration -----------------------------------------------------------------------------


def token_secret(token: str = TOKEN) -> str:
    """The secret part of a bot token (after the colon)."""
    return token.split(":", 1)[1]


def write_token_file(home: Path, token: str = TOKEN, name: str = "telegram.token") -> Path:
    """A private (0600) token file under HOME, as an operator would create it."""
    path = home / name
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def config_dir(home: Path) -> Path:
    """The private config directory the CLI reads (PI_WORKFLOWS_CONFIG_DIR is unset)."""
    return home / ".config" / "pi-workflows"


def configure_telegram_profile(
    home: Path,
    api_base_url: str,
    *,
    profile: str = PROFILE,
    token: str = TOKEN,
    user_ids: Sequence[int] = (USER,),
    chat_ids: Sequence[int] = (USER,),
    audience: str = AUDIENCE,
) -> Path:
    """Install one Telegram profile against a (fake) Bot API; returns the token file."""
    token_file = write_token_file(home, token)
    install_telegram_profile(
        config_dir(home), token_file=token_file, user_ids=[str(u) for u in user_ids],
        chat_ids=[str(c) for c in chat_ids], profile=profile, audience=audience,
        api_base_url=api_base_url)
    return token_file


def channel_id_of(profile: str = PROFILE) -> str:
    """The channel id of a Telegram profile."""
    return store.telegram_channel_id(profile)


@contextlib.contextmanager
def out_of_process_fake(token_file: Path) -> Iterator[FakeBotApiProcess]:
    """A fake Bot API in a child process (it survives a SIGKILLed poller)."""
    with FakeBotApiProcess(token_file) as fake:
        yield fake


# -- decisions ---------------------------------------------------------------------------------


def _plan_steps(count: int) -> str:
    return "\n".join(
        f"Step {i}: migrate module {i} to the new storage layer, run its tests, and record "
        f"the result in the release notes." for i in range(1, count + 1))


def open_decision(
    db: Database, *, title: str = "Approve the plan?", parts: int = 1,
    choices: Mapping[str, Any] | None = None, audience: str = AUDIENCE,
) -> workflows.AskHandle:
    """Open an ask decision (run lease released, as after `ask` without --wait).

    `parts` > 1 adds enough plan text for the delivery to need that many Telegram parts.
    """
    # A paragraph of 22 steps fills most of one part, so N paragraphs need N parts.
    blocks: list[dict[str, Any]] = [
        {"kind": "paragraph", "text": f"[{index}]\n" + _plan_steps(22)}
        for index in range(1, parts + 1 if parts > 1 else 1)]
    presentation = {"schema": "pi-workflows.decision-presentation.v1",
                    "summary": f"{title} Review the plan.", "blocks": blocks}
    spec = workflows.AskSpec(title=title, presentation=presentation,
                                    choices=dict(choices or CHOICES), audience=audience)
    handle = workflows.create_ask(db, spec, workflows.new_owner_id(db, "test"))
    workflows.release_run(db, handle.run.lease)
    assert len(delivery_texts(handle)) == parts, "the presentation did not split as asked"
    return handle


def open_decision_now(**kwargs: Any) -> workflows.AskHandle:
    """`open_decision` on a writer opened (and closed) for this one call."""
    with Database.open_writer() as db:
        return open_decision(db, **kwargs)


def delivery_texts(handle: workflows.AskHandle) -> list[str]:
    """The Telegram texts a delivery of this decision sends, part by part."""
    return [part.text for part in card_parts(channel_request_document(handle.request),
                                             int(time.time() * 1000))]


def button_data(handle: workflows.AskHandle, choice: str) -> str:
    """The callback_data of a choice's button."""
    return callback_token(handle.decision_id, handle.request.request_digest, choice)


# -- the fake Bot API --------------------------------------------------------------------------


def press_button(
    fake: FakeControls, handle: workflows.AskHandle, choice: str, message_id: int, *,
    user: int = USER, chat: int = USER, message_text: str = "decision",
) -> int:
    """Push a recorded button press on a delivered message; returns its update_id."""
    [update_id] = fake.push_fixture("callback_press.json", {
        "user_id": user, "chat_id": chat, "message_id": message_id,
        "message_text": message_text, "callback_data": button_data(handle, choice)})
    return update_id


def press_update(
    handle: workflows.AskHandle, choice: str, message_id: int, *, update_id: int,
    user: int = USER, chat: int = USER, data: str | None = None,
    callback_id: str | None = None,
) -> dict[str, Any]:
    """The recorded button press as a dict (to be altered and pushed raw)."""
    [update] = fixture_updates(load_demo_fixture("callback_press.json", {
        "update_id": update_id, "callback_query_id": callback_id or f"cb-{update_id}",
        "date": 1787097600, "bot_id": 7000000001, "bot_username": "piw_decisions_bot",
        "user_id": user, "chat_id": chat, "message_id": message_id, "message_text": "decision",
        "callback_data": button_data(handle, choice) if data is None else data}), "press")
    return update


def reply_to_prompt(
    fake: FakeControls, prompt_message_id: int, prompt_text: str, reply_text: str, *,
    user: int = USER, chat: int = USER, message_id: int | None = None,
) -> int:
    """Push a recorded ForceReply answer to a prompt message; returns its update_id."""
    [update_id] = fake.push_fixture("reply_to_prompt.json", {
        "user_id": user, "chat_id": chat,
        "message_id": prompt_message_id + 1 if message_id is None else message_id,
        "prompt_message_id": prompt_message_id, "prompt_text": prompt_text,
        "reply_text": reply_text})
    return update_id


def push_plain_message(fake: FakeControls) -> int:
    """Push the recorded plain chat message (a reply to nothing, which the worker ignores).

    Its recorded message_id (45) moves the fake's message numbering in that chat past 45.
    """
    [update_id] = fake.push_fixture(str(FIXTURES / "message_plain_text.json"))
    return update_id


def live_buttons(keyboard: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
    """The labels of the buttons of an inline keyboard that still answer (a settled card keeps
    its buttons, marked and inert: their data is no live token)."""
    return [str(b["text"]) for row in keyboard for b in row
            if TOKEN_RE.fullmatch(str(b.get("callback_data", "")))]


def live_keyboards(shown: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Of the fake's `keyboards()`, those with a button that still answers."""
    return [m for m in shown if live_buttons(m["inline_keyboard"])]


def settled_labels(keyboard: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
    """A settled keyboard's labels (the chosen one marked "✓ "); fails on a live button."""
    assert live_buttons(keyboard) == [], keyboard
    return [str(b["text"]) for row in keyboard for b in row]


def sent_texts(fake: FakeControls) -> list[str]:
    """The text of every sendMessage the fake received, in order."""
    return [str(r.params.get("text")) for r in fake.requests("sendMessage")]


def is_outcome(text: str, label: str, title: str | None = None) -> bool:
    """Whether a message is the outcome post of a choice ("Ada Lovelace chose Continue on
    Telegram at 16:05 UTC", then the title and the decision's fingerprint)."""
    lines = text.split("\n")
    return bool(re.fullmatch(rf".+ chose {re.escape(label)} on Telegram at \d\d:\d\d UTC",
                             lines[0])) and (title is None or title in lines) and \
        bool(re.fullmatch(r"Decision [0-9a-f]{12}", lines[-1]))


def outcome_count(fake: FakeControls, label: str, chat: int = USER,
                  title: str | None = "Approve the plan?") -> int:
    """How many outcome posts of this choice went to this chat."""
    return sum(1 for r in fake.requests("sendMessage")
               if str(r.params.get("chat_id")) == str(chat)
               and is_outcome(str(r.params.get("text")), label, title))


def send_count(fake: FakeControls, text: str, chat: int = USER) -> int:
    """How many sendMessage requests carried exactly this text to this chat."""
    return sum(1 for r in fake.requests("sendMessage")
               if r.params.get("text") == text and str(r.params.get("chat_id")) == str(chat))


def wait_in_flight(fake: FakeControls, method: str, count: int = 1,
                   timeout: float = 30.0) -> RecordedRequest:
    """Wait until the `count`-th request of `method` has arrived and is still unanswered."""
    assert fake.wait_received(method, count, timeout), f"{method} #{count} never arrived"
    request = fake.requests(method)[count - 1]
    assert request.ended_at is None, f"{method} #{count} was already answered"
    return request


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll a condition (every 20 ms) until it holds, or fail naming it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


# -- processes ---------------------------------------------------------------------------------


def run_cli(home: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """Run `piw-channels <args>` to completion with this HOME (in this process unless
    `process`: tests.cli)."""
    return piw(home, *args, process=process)


def start_cli(home: Path, *args: str) -> subprocess.Popen[str]:
    """Start `piw-channels <args>` in a child process (stdout/stderr piped)."""
    return subprocess.Popen([*CLI, *args], cwd=ROOT, env=child_env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_hard(proc: subprocess.Popen[str], timeout: float = 30) -> tuple[str, str]:
    """SIGKILL a child (no cleanup runs in it), reap it, and return what it printed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, err)
    return out, err


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    """Wait for a child to exit by itself; returns (exit code, stdout, stderr)."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def reap(proc: subprocess.Popen[str]) -> None:
    """Make sure a child is gone and its pipes are closed (for `finally` blocks)."""
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(Exception):
        proc.communicate(timeout=10)


def poll_in_process(db: Database, profile: str | None = None,
                    window_seconds: float = 0.0) -> list[poll.ChannelReport]:
    """One pass of the real poll cycle in this process, with the real Bot API client."""
    config = load_config()
    assert config is not None, "no channel is configured"
    options = poll.PollOptions(window_seconds=window_seconds, profile=profile)
    return asyncio.run(poll.poll(db, config, telegram_cli.bot_api, options))


# -- database state ----------------------------------------------------------------------------


def db_rows(sql: str, *params: object) -> list[tuple[Any, ...]]:
    """Rows of a read-only query on the HOME's database."""
    with Database.open_reader() as db:
        return [tuple(r) for r in db.conn.execute(sql, params)]


def db_value(sql: str, *params: object) -> Any:
    """The single value of a read-only query (None when there is no row)."""
    rows = db_rows(sql, *params)
    return rows[0][0] if rows else None


@dataclass(frozen=True, slots=True)
class InboxState:
    """One channel_inbox row as the tests see it (a malformed item's update_id is -1)."""

    update_id: int
    event_type: str
    processed: bool
    result: Any


def inbox_states(channel_id: str | None = None) -> list[InboxState]:
    """Every inbox row of a channel, in arrival order, with its recorded result."""
    cid = channel_id or channel_id_of()
    with Database.open_reader() as db:
        rows = db.conn.execute(
            "SELECT external_event_id, event_type, processed_at FROM channel_inbox"
            " WHERE channel_id = ? ORDER BY rowid", (cid,)).fetchall()
        return [InboxState(int(str(e)) if str(e).isdigit() else -1, str(t), p is not None,
                           inbox.inbox_result(db.conn, cid, str(e))) for e, t, p in rows]


def inbox_results(channel_id: str | None = None) -> list[tuple[int, str, str | None]]:
    """(update_id, event_type, result code) per inbox row in arrival order; the code is None
    while the row is unprocessed."""
    return [(s.update_id, s.event_type, s.result["result"] if s.processed else None)
            for s in inbox_states(channel_id)]


def cursor_value(channel_id: str | None = None) -> int | None:
    """The stored getUpdates offset of a channel."""
    value = db_value("SELECT cursor_value FROM channel_cursors WHERE channel_id = ?"
                     " AND cursor_key = 'telegram_update'", channel_id or channel_id_of())
    return None if value is None else int(value)


def effect_statuses(decision_id: str, effect_type: str) -> list[str]:
    """Statuses of the effects of one type a decision caused, oldest first."""
    return [str(s) for (s,) in db_rows(
        "SELECT status FROM effects WHERE source_resource_id = ? AND effect_type = ?"
        " ORDER BY created_at, rowid", f"decision:{decision_id}", effect_type)]


def attempt_outcomes(decision_id: str, effect_type: str) -> list[str | None]:
    """Outcomes of every attempt of a decision's effects of one type, in order."""
    return [o for (o,) in db_rows(
        "SELECT a.outcome FROM effect_attempts a JOIN effects e USING (effect_id)"
        " WHERE e.source_resource_id = ? AND e.effect_type = ?"
        " ORDER BY e.created_at, a.attempt_number", f"decision:{decision_id}", effect_type)]


@dataclass(frozen=True, slots=True)
class PartState:
    """One channel_message_parts row: an intent while `message_ref` is None."""

    recipient: int
    part: int
    conversation_ref: str | None
    message_ref: str | None


def message_parts(decision_id: str, purpose: str = "delivery") -> list[PartState]:
    """The part rows of a decision's message of one purpose."""
    return [PartState(*r) for r in db_rows(
        "SELECT p.recipient_index, p.part_index, p.external_conversation_ref,"
        " p.external_message_ref FROM channel_message_parts p JOIN channel_messages m"
        " USING (message_id) WHERE m.decision_id = ? AND m.purpose = ?"
        " ORDER BY p.recipient_index, p.part_index", decision_id, purpose)]


def message_statuses(decision_id: str, purpose: str = "delivery") -> list[str]:
    """Statuses of a decision's messages of one purpose."""
    return [str(s) for (s,) in db_rows(
        "SELECT status FROM channel_messages WHERE decision_id = ? AND purpose = ?",
        decision_id, purpose)]


def prompt_message(decision_id: str) -> tuple[int, str] | None:
    """(Telegram message id, text) of the confirmed prompt of a decision, if any."""
    with Database.open_reader() as db:
        row = db.conn.execute(
            "SELECT external_message_ref, content_hash FROM channel_messages"
            " WHERE decision_id = ? AND purpose = 'prompt' AND external_message_ref IS NOT NULL",
            (decision_id,)).fetchone()
        if row is None:
            return None
        text = db.conn.execute("SELECT content FROM blobs WHERE blob_hash = ?", (row[1],)).get
        return int(row[0]), bytes(text).decode("utf-8")


def resolutions(decision_id: str) -> list[tuple[str, str, str | None]]:
    """(outcome, provenance, external_event_id) of the decision's resolution rows."""
    return [(str(o), str(p), e) for o, p, e in db_rows(
        "SELECT outcome, provenance, external_event_id FROM human_decision_resolutions"
        " WHERE decision_id = ?", decision_id)]


def submissions_of_update(update_id: int) -> list[tuple[str, str]]:
    """(decision_id, result) of every submission an update caused."""
    return [(str(d), str(r)) for d, r in db_rows(
        "SELECT decision_id, result FROM human_decision_submissions"
        " WHERE external_event_id = ?", str(update_id))]


def live_lease_owners(now_ms: int | None = None) -> list[tuple[str, str]]:
    """(resource_id, owner_id) of every lease that is still live."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return [(str(r), str(o)) for r, o in db_rows(
        "SELECT resource_id, owner_id FROM leases WHERE owner_id IS NOT NULL"
        " AND expires_at > ?", now)]


def expire_poller_leases(pid: int) -> int:
    """Let the leases a dead poller (by process id) held expire now: the channel lease and the
    effect leases of its attempts. Test-only raw SQL; returns how many leases changed."""
    conn = apsw.Connection(str(default_path()))
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute(
            "UPDATE leases SET expires_at = 0, heartbeat_at = 0, acquired_at = 0"
            " WHERE owner_type = 'channel' AND owner_id LIKE ?", (f"poll:%:{pid}:%",))
        return int(conn.changes())
    finally:
        conn.close()
