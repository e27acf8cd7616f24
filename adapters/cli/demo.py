"""`piw-channels demo`: the whole Telegram flow against a local recorded Bot API.

Everything happens in a temporary HOME with a loopback fake of the Bot API, so a new user sees
delivery, a button press, a ForceReply prompt, a typed reply, the resolution and the
settlement, with no token and no network. The real poll cycle does every step.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from adapters.cli import rehearsal
from adapters.cli import telegram as telegram_cli
from adapters.cli.errors import Terminated, UsageError, raise_terminated
from adapters.telegram.fake import FakeBotApi
from adapters.telegram.fake.transcript import TranscriptFollower
from channels.config.install import install_telegram_profile
from channels.config.loading import load_config
from channels.decisions import views, workflows
from channels.decisions.choices import text_input
from channels.telegram import poll
from channels.telegram.buttons import callback_token
from state.database import Database
from state.exit_codes import ExitCode

__all__ = ["first_update_id", "register"]


_DEMO_TOKEN = "123456789:demo-token-not-a-secret_0123456789ab"
_USER = 5123456789
_TRANSCRIPT_TICK_S = 0.2  # how often --serve prints what happened in the chat


def first_update_id(now: float) -> int:
    """The first update id a `--serve` started at `now` hands out.

    Ids continue above those of an earlier run: a setup that polled it has its cursor there,
    and ids below it would be taken as already confirmed and dropped. One id per millisecond
    of clock: no run hands out updates faster than that (each is a round trip), so a restart
    even within the same second starts above the last run's ids.
    """
    return int(now * 1000)


def _steps(first: int, last: int) -> str:
    return "\n".join(
        f"Step {i}: migrate module {i} to the new storage layer, run its tests, and record "
        f"the result in the release notes." for i in range(first, last + 1))


@contextmanager
def _temporary_home() -> Iterator[Path]:
    saved = {k: os.environ.get(k) for k in ("HOME", "PI_WORKFLOWS_CONFIG_DIR")}
    with tempfile.TemporaryDirectory(prefix="piw-demo-") as tmp:
        home = Path(tmp)
        home.chmod(0o700)
        os.environ["HOME"] = str(home)
        os.environ.pop("PI_WORKFLOWS_CONFIG_DIR", None)
        try:
            yield home
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _say(step: str) -> None:
    print(f"* {step}", flush=True)


def _configure(home: Path, server: FakeBotApi) -> None:
    token_file = home / "telegram.token"
    token_file.write_text(_DEMO_TOKEN + "\n")
    token_file.chmod(0o600)
    install_telegram_profile(
        home / ".config" / "pi-workflows", token_file=token_file, user_ids=[str(_USER)],
        chat_ids=[str(_USER)], profile="demo", audience="operator",
        api_base_url=server.base_url)


def _ask(db: Database) -> workflows.AskHandle:
    presentation = {
        "schema": "pi-workflows.decision-presentation.v1",
        "summary": "The agent wants to migrate 44 modules; review the plan.",
        "blocks": [{"kind": "section", "title": "Plan"},
                   {"kind": "paragraph", "text": _steps(1, 22)},
                   {"kind": "paragraph", "text": _steps(23, 44)}],
    }
    spec = workflows.AskSpec(
        title="Approve the migration plan?", presentation=presentation,
        choices={"continue": {"label": "Continue"}, "stop": {"label": "Stop"},
                 "replan": {"label": "Replan",
                            "input": text_input("instructions", "What should change?")}})
    handle = workflows.create_ask(db, spec, workflows.new_owner_id(db, "demo"))
    handle.release(db)
    return handle


def _poll(db: Database) -> None:
    config = load_config()
    assert config is not None
    reports = asyncio.run(poll.poll(db, config, telegram_cli.bot_api, poll.PollOptions()))
    for report in reports:
        if report.status != "polled":
            raise RuntimeError(f"demo poll: {report.status}: {report.message}")


def _sent(server: FakeBotApi) -> list[dict[str, Any]]:
    return [r.params for r in server.requests("sendMessage")]


def _run_demo() -> int:
    """Narrated demo; returns the exit code."""
    with _temporary_home() as home, FakeBotApi(token=_DEMO_TOKEN) as server:
        _say(f"temporary HOME {home}; fake Bot API at {server.base_url}")
        _configure(home, server)
        _say("configured Telegram profile 'demo' (token file 0600, allowlisted user and chat)")
        with Database.open_writer() as db:
            handle = _ask(db)
            _say(f"opened decision {handle.decision_id}")
            _poll(db)
            parts = _sent(server)
            _say(f"delivered in {len(parts)} parts (keyboard on the last part)")
            last = server.sent_messages(_USER)[-1]
            token = callback_token(handle.decision_id, handle.request.request_digest, "replan")
            server.push_fixture("callback_press.json", {
                "user_id": _USER, "chat_id": _USER, "message_id": last["message_id"],
                "message_text": last.get("text", ""), "callback_data": token})
            _say("button 'Replan' pressed")
            _poll(db)
            prompt = _sent(server)[-1]
            _say(f"prompt sent: {prompt['text']!r} (ForceReply)")
            prompt_message = server.sent_messages(_USER)[-1]
            server.push_fixture("reply_to_prompt.json", {
                "user_id": _USER, "chat_id": _USER,
                "message_id": int(prompt_message["message_id"]) + 1,
                "prompt_message_id": prompt_message["message_id"],
                "prompt_text": prompt["text"], "reply_text": "Do modules 1-10 first."})
            _say("reply typed: 'Do modules 1-10 first.'")
            _poll(db)
            view = db.read(lambda c: views.view(c, handle.decision_id))
            _say(f"reply accepted: decision {view.status} with {view.choice_label!r} "
                 f"({view.provenance}), input {view.input}")
            _poll(db)  # applies the settlement reserved by the resolution
            edits = len(server.requests("editMessageReplyMarkup"))
            _say(f"decision resolved; keyboards removed ({edits} edit), outcome posted: "
                 f"{_sent(server)[-1]['text'].splitlines()[0]!r}")
            if view.status != "accepted" or edits < 1:
                return ExitCode.INTERNAL
    _say("done: the temporary HOME and the fake Bot API are gone")
    return ExitCode.OK


def _serve(token_file: Path, port: int) -> int:
    """`demo --serve`: the fake Bot API in the foreground, to rehearse a real setup."""
    created = not token_file.exists()
    if created:
        token_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(_DEMO_TOKEN + "\n")
    token = token_file.read_text(encoding="utf-8").strip()
    server = FakeBotApi(token, port=port, first_update_id=first_update_id(time.time()))
    try:
        server.start()
    except OSError as exc:  # most often: the port is taken (another --serve still running)
        if created:
            token_file.unlink(missing_ok=True)
        raise UsageError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror}; choose another"
                         " --port (or leave it out for a free one)") from exc
    print(f"Fake Bot API: {server.base_url} (its token is in {token_file}); Ctrl-C stops it.")
    print(f"Rehearse: piw-channels setup telegram --token-file {token_file} --user {_USER}"
          f" --chat {_USER} --api-base-url {server.base_url}")
    print(f"Press a button: piw-channels demo --press LABEL --api-base-url {server.base_url}")
    print(f"Type a reply: piw-channels demo --reply TEXT --api-base-url {server.base_url}")
    print("The chat, as the person sees it:", flush=True)
    signal.signal(signal.SIGTERM, raise_terminated)
    code = ExitCode.OK
    follower = TranscriptFollower(server)
    try:
        while not server.wait_closed(_TRANSCRIPT_TICK_S):
            for line in follower.new_lines():
                print(line, flush=True)
    except KeyboardInterrupt:
        code = ExitCode.INTERRUPTED
    except Terminated:
        code = ExitCode.TERMINATED
    finally:
        with contextlib.suppress(OSError):  # what happened since the last tick
            for line in follower.new_lines():
                print(line, flush=True)
        server.close()
        if created:
            token_file.unlink(missing_ok=True)
    return code


# Options that apply to some modes only, refused without them (ignoring them would mislead).
_MODE_OPTIONS: Final = {"port": ("serve",), "token_file": ("serve",),
                        "api_base_url": ("press", "reply"), "user": ("press", "reply"),
                        "decision": ("press", "reply")}


def _cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo, serve its fake Bot API, or act as the person on it."""
    active = {"serve": args.serve, "press": args.press is not None,
              "reply": args.reply is not None}
    for name, modes in _MODE_OPTIONS.items():
        if getattr(args, name) is not None and not any(active[m] for m in modes):
            option = "--" + name.replace("_", "-")
            raise UsageError(f"{option} only applies with " + " or ".join(
                f"--{m}" for m in modes))
    for mode in ("press", "reply"):
        if active[mode] and args.api_base_url is None:
            raise UsageError(f"--{mode} needs --api-base-url (the URL demo --serve printed)")
    if args.press is not None:
        return rehearsal.press(args.api_base_url, args.press, args.user, args.decision)
    if args.reply is not None:
        return rehearsal.reply(args.api_base_url, args.reply, args.user, args.decision)
    if args.serve:
        return _serve(args.token_file or Path.home() / "piw-demo.token", args.port or 0)
    return _run_demo()


def register(sub: Any) -> None:
    """Add `demo` to the top-level parser."""
    p = sub.add_parser("demo", help="see the whole Telegram flow against a local fake Bot API",
                       description="Without options: a narrated run of the whole flow in a"
                       " temporary HOME. --serve: run the fake Bot API to rehearse setup, ask"
                       " and poll against it, printing the chat as the person sees it;"
                       " --press and --reply: act as the person on it.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--serve", action="store_true",
                      help="run the fake Bot API on loopback until Ctrl-C, printing its URL"
                      " and then the chat transcript")
    mode.add_argument("--press", metavar="LABEL",
                      help="press the button with this label (or number) on the newest message")
    mode.add_argument("--reply", metavar="TEXT",
                      help="reply with TEXT to the newest prompt (or to --decision's message)")
    p.add_argument("--port", type=int, help="--serve: port (default: a free one)")
    p.add_argument("--token-file", type=Path, metavar="PATH",
                   help="--serve: the token the fake accepts (default: ~/piw-demo.token,"
                   " created with a demo token and removed at exit)")
    p.add_argument("--api-base-url", metavar="URL",
                   help="--press, --reply: the URL --serve printed")
    p.add_argument("--user", type=int, metavar="ID",
                   help="--press, --reply: the user who acts (default: the chat's id, a private"
                   " chat)")
    p.add_argument("--decision", metavar="ID",
                   help="--press, --reply: act on this decision's message (its id or Decision"
                   " fingerprint, or a unique prefix) instead of the newest")
    p.set_defaults(handler=_cmd_demo)
