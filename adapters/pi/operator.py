"""The local operator view: who may answer from this machine, the terminal menus, and their
answers from the decision to the channel's report (`piw-channels pi answer` and `pi`).

The actor is the local OS user (`local:<uid>`). An answer is accepted only from a person at a
terminal: stdin must be a TTY and `/dev/tty` must open. Pi's bash tool runs commands detached
with stdin ignored, so an agent's tool call has neither and is refused (exit 77). This is a
guard rail, not a security boundary: a process of the same user could fake a pty.

The interactive view draws on `/dev/tty` (so stdout only carries the final result line) and
reads keys in cbreak mode: arrow keys or j/k move, a digit picks directly, Enter confirms, q or
Esc cancels. Text is read as one line in the terminal's normal (canonical) mode.
"""

from __future__ import annotations

import os
import sys
import termios
import tty
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from channels.config.loading import load_config
from channels.config.model import ChannelsConfig
from channels.decisions import workflows
from channels.decisions.choices import validate_response
from channels.decisions.errors import DecisionError
from channels.pi import answers
from channels.pi.answers import AnswerEvent, AnswerReport, OpenDecision
from state.database import Database
from state.errors import PermissionProblem
from state.exit_codes import ExitCode

__all__ = [
    "Key", "TextRequired", "answer", "answer_interactively", "menu_step",
    "open_terminal", "parse_key", "split_keys",
]


_NO_TERMINAL_HINT = (
    "answering a decision needs a person at a terminal ({why}); an agent's tool call cannot"
    " answer. Run this command in your own shell, or use /decision inside Pi."
)


class _TerminalRequired(PermissionProblem):
    """The command was not run by a person at a terminal (exit 77)."""

    code = "terminal_required"


class TextRequired(ValueError):
    """The choice asks for text and none was given (exit 2, a usage error)."""

    exit_code = ExitCode.USAGE


def _local_actor() -> str:
    """The operator's actor id: `local:<uid>`."""
    return f"local:{os.getuid()}"


def _new_event_key() -> str:
    """A fresh answer event id; also the idempotency key (`pi:<uuid4 hex>`)."""
    return f"pi:{uuid.uuid4().hex}"


def open_terminal(stdin: TextIO | None = None) -> int:
    """The `/dev/tty` descriptor, after checking that stdin is a terminal too.

    Raises TerminalRequired (exit 77) before anything touches the database.
    """
    stream = sys.stdin if stdin is None else stdin
    try:
        interactive = stream is not None and stream.isatty()
    except ValueError:  # a closed stdin
        interactive = False
    if not interactive:
        raise _TerminalRequired(_NO_TERMINAL_HINT.format(why="stdin is not a terminal"))
    try:
        return os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError as exc:
        why = f"/dev/tty cannot be opened: {exc.strerror}"
        raise _TerminalRequired(_NO_TERMINAL_HINT.format(why=why)) from None


def _require_owner(db_path: Path) -> None:
    """Only the user who owns the state database answers as the local operator."""
    owner = db_path.stat().st_uid
    if owner != os.getuid():
        raise PermissionProblem(
            f"{db_path} belongs to uid {owner}; only its owner answers as the local operator")


# -- answering ---------------------------------------------------------------------------------


def answer(decision_id: str, choice: str, text: str | None) -> AnswerReport:
    """Answer one decision (an id or its prefix) as the local operator: `choice` is a choice
    id or its number as `pi show` prints it. The caller has checked the terminal first."""
    config = load_config()
    with Database.open_writer() as db:
        _require_owner(db.path)
        full_id = workflows.resolve_id(db, decision_id)
        decision = db.read(lambda c: answers.load_open(c, full_id))
        chosen = _choice_id(decision, choice)
        if text is None and _needs_text(decision, chosen):
            raise TextRequired(f"choice {chosen} asks for text: give --text or --text-file")
        return _submit(db, decision, chosen, text, config)


def answer_interactively() -> AnswerReport | str:
    """List the open decisions on the terminal, let the person pick one and a choice, prompt
    for its text, submit: the report, or the line that says why nothing was answered."""
    term = _Terminal(open_terminal())
    try:
        config = load_config()
        with Database.open_writer() as db:
            _require_owner(db.path)
            found = db.read(lambda c: answers.open_for_pi(c, config, now=db.clock.now_ms()))
            if not found:
                return "no open decisions"
            # The person takes their time here: no transaction is open while they choose.
            picked = _pick(term, found)
            if picked is None:
                return "nothing answered"
            return _submit(db, picked.decision, picked.choice, picked.text, config)
    finally:
        term.close()


def _choice_id(decision: OpenDecision, given: str) -> str:
    """A choice id, or its number as `pi show` prints it."""
    ids = [str(c["id"]) for c in decision.choices]
    if given not in ids and given.isdigit() and 1 <= int(given) <= len(ids):
        return ids[int(given) - 1]
    return given


def _needs_text(decision: OpenDecision, choice: str) -> bool:
    return any(c["id"] == choice and c["input"] is not None for c in decision.choices)


def _submit(db: Database, decision: OpenDecision, choice: str, text: str | None,
            config: ChannelsConfig | None) -> AnswerReport:
    event = AnswerEvent(
        decision_id=decision.decision_id, request_digest=decision.request_digest, choice=choice,
        entered=text, actor_id=_local_actor(), event_key=_new_event_key(),
        details={"source": "terminal"},
    )
    return answers.answer_locally(db, event, workflows.new_owner_id(db, "pi-local"), config)


# -- terminal input ----------------------------------------------------------------------------

Key = Literal["up", "down", "enter", "cancel", "other"] | int


def split_keys(data: bytes) -> list[bytes]:
    """Split one read into key presses (a fast typist or a paste delivers several at once)."""
    keys = []
    while data:
        size = 3 if data[:2] in (b"\x1b[", b"\x1bO") and len(data) >= 3 else 1
        keys.append(data[:size])
        data = data[size:]
    return keys


def parse_key(data: bytes) -> Key:
    """Translate one key press from a cbreak terminal."""
    if data in (b"\x1b[A", b"\x1bOA", b"k"):
        return "up"
    if data in (b"\x1b[B", b"\x1bOB", b"j"):
        return "down"
    if data in (b"\n", b"\r"):
        return "enter"
    if data in (b"q", b"Q", b"\x1b", b"\x04"):
        return "cancel"
    if len(data) == 1 and data.isdigit() and data != b"0":
        return int(data)
    return "other"


@dataclass(frozen=True, slots=True)
class _MenuStep:
    """The menu after one key: the highlighted row and, when finished, the choice (None when
    cancelled)."""

    index: int
    done: bool = False
    chosen: int | None = None


def menu_step(index: int, count: int, key: Key) -> _MenuStep:
    """Pure menu logic: move, pick by number, confirm or cancel."""
    if key == "up":
        return _MenuStep((index - 1) % count)
    if key == "down":
        return _MenuStep((index + 1) % count)
    if key == "enter":
        return _MenuStep(index, done=True, chosen=index)
    if key == "cancel":
        return _MenuStep(index, done=True, chosen=None)
    if isinstance(key, int) and 1 <= key <= count:
        return _MenuStep(key - 1, done=True, chosen=key - 1)
    return _MenuStep(index)


class _Terminal:
    """Menus and line input on the `/dev/tty` descriptor; restores its mode on close."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved: list[Any] = termios.tcgetattr(fd)

    def write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self.fd, data):]

    def close(self) -> None:
        termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
        os.close(self.fd)

    def choose(self, title: str, labels: Sequence[str]) -> int | None:
        """Let the person pick one label; None when cancelled."""
        # cbreak before drawing, so that keys typed at once are neither echoed nor held back.
        tty.setcbreak(self.fd, termios.TCSANOW)
        try:
            self.write(f"{title}\n")
            index = 0
            self._draw(labels, index, first=True)
            while True:
                data = os.read(self.fd, 64)
                if not data:
                    return None
                for key in split_keys(data):
                    step = menu_step(index, len(labels), parse_key(key))
                    index = step.index
                    self._draw(labels, index, first=False)
                    if step.done:
                        return step.chosen
        finally:
            termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)

    def _draw(self, labels: Sequence[str], index: int, *, first: bool) -> None:
        rows = [f"{'>' if i == index else ' '} {i + 1}. {label}" for i, label in enumerate(labels)]
        rows.append("  (up/down or a number, Enter to choose, q to cancel)")
        # Redraw in place: back to the first row, clear below, write every row again.
        prefix = "" if first else f"\r\x1b[{len(rows)}A\x1b[J"
        self.write(prefix + "\n".join(rows) + "\n")

    def read_line(self, prompt: str) -> str | None:
        """One line of text in canonical mode with echo; None at end of input (Ctrl-D)."""
        while True:
            data = self._read_raw_line(prompt)
            if data is None:
                return None
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                self.write("That text is not valid UTF-8; please type it again.\n")

    def _read_raw_line(self, prompt: str) -> bytes | None:
        attrs = termios.tcgetattr(self.fd)
        attrs[3] |= termios.ICANON | termios.ECHO
        termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        try:
            self.write(prompt)
            data = b""
            while not data.endswith(b"\n"):
                chunk = os.read(self.fd, 4096)
                if not chunk:
                    return None
                data += chunk
            return data[:-1]
        finally:
            termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)


@dataclass(frozen=True, slots=True)
class _Picked:
    """What the person chose in the interactive view."""

    decision: OpenDecision
    choice: str
    text: str | None


def _pick(term: _Terminal, open_decisions: Sequence[OpenDecision]) -> _Picked | None:
    """Decision, choice and (when the choice asks for it) text; None when cancelled."""
    chosen = term.choose("Open decisions:", [d.title for d in open_decisions])
    if chosen is None:
        return None
    decision = open_decisions[chosen]
    term.write(f"\n{decision.text}\n\n")
    index = term.choose("Your answer:", [str(c["label"]) for c in decision.choices])
    if index is None:
        return None
    choice = decision.choices[index]
    if choice["input"] is None:
        return _Picked(decision, str(choice["id"]), None)
    text = _ask_text(term, decision, choice)
    return None if text is None else _Picked(decision, str(choice["id"]), text)


def _ask_text(term: _Terminal, decision: OpenDecision, choice: dict[str, Any]) -> str | None:
    """Prompt until the text fits the choice's input rules (checked locally first, so a typo
    costs no submission); None when the person gives up (Ctrl-D)."""
    spec = choice["input"]
    choices = {str(c["id"]): _request_choice(c) for c in decision.choices}
    prompt = f"{spec['prompt']} ({spec['min_length']}-{spec['max_length']} characters): "
    while True:
        text = term.read_line(prompt)
        if text is None:
            return None
        try:
            validate_response(choices, {"choice": choice["id"], "input": {spec["name"]: text}})
        except DecisionError as exc:
            term.write(f"{exc}\n")
            continue
        return text


def _request_choice(choice: dict[str, Any]) -> Any:
    """The request-contract form of a wire choice (for local validation)."""
    entry: dict[str, Any] = {"label": choice["label"]}
    spec = choice["input"]
    if spec is not None:
        entry["input"] = {"kind": "text", "name": spec["name"], "prompt": spec["prompt"],
                          "minLength": spec["min_length"], "maxLength": spec["max_length"]}
    return entry
