"""The `piw-channels pi` command group: the local operator view and the Pi session bridge.

    piw-channels pi                       pick an open decision and answer it (terminal only)
    piw-channels pi list [--json]         open decisions routed to pi
    piw-channels pi show DECISION_ID      one decision's text, choices and status
    piw-channels pi answer ID CHOICE [--text TEXT | --text-file PATH] [--json]
    piw-channels pi bridge                JSON lines on stdin/stdout, started by the Pi extension
    piw-channels pi extension-path        where the Pi extension file is installed

`answer` and the interactive view exit 0 when the answer was accepted, 3 when it was not
(already decided, stale, rejected), 77 without a terminal, 75 when the local channel stays busy.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from adapters.cli.arguments import DECISION_ID_HELP
from adapters.cli.errors import UsageError
from adapters.pi import operator, serving
from channels.config.loading import load_config
from channels.decisions import views, workflows
from channels.pi import answers
from channels.pi.answers import AnswerReport, OpenDecision
from state.database import Database
from state.errors import DatabaseMissing
from state.exit_codes import ExitCode

__all__ = ["register"]


_EXTENSION = Path(__file__).resolve().parents[1] / "pi" / "extension" / "piw-channels.ts"


def _cmd_list(args: argparse.Namespace) -> int:
    """Open decisions whose audience routes to pi."""
    config = load_config()
    try:
        db = Database.open_reader()
    except DatabaseMissing:
        print("[]" if args.json else "no open decisions (no database yet)")
        return ExitCode.OK
    with db:
        found = db.read(lambda c: answers.open_for_pi(c, config, now=db.clock.now_ms()))
    if args.json:
        print(json.dumps([d.to_json() for d in found], indent=2, ensure_ascii=False))
        return ExitCode.OK
    if not found:
        print("no open decisions")
    for d in found:
        labels = ", ".join(f"{c['id']}={c['label']}" for c in d.choices)
        print(f"{d.decision_id}  {d.title}  [{labels}]")
    return ExitCode.OK


def _cmd_show(args: argparse.Namespace) -> int:
    """One decision: its text, numbered choices and status."""
    with Database.open_reader() as db:
        decision_id = workflows.resolve_id(db, args.decision_id)

        def read(c: Any) -> tuple[OpenDecision, views.DecisionView]:
            return answers.load_open(c, decision_id), views.view(c, decision_id)

        shown, view = db.read(read)
    if args.json:
        print(json.dumps({**shown.to_json(), "status": view.status, "choice": view.choice,
                          "reason": view.reason}, indent=2, ensure_ascii=False))
        return ExitCode.OK
    print(shown.text)
    print()
    for number, choice in enumerate(shown.choices, start=1):
        needs = "  (asks for text)" if choice["input"] else ""
        print(f"{number}. {choice['id']}: {choice['label']}{needs}")
    print()
    print(f"status: {view.display_status}")
    if view.status != "open":
        print(f"outcome: {view.choice_label or view.reason}")
    return ExitCode.OK


def _read_text(args: argparse.Namespace) -> str | None:
    if args.text_file is None:
        text: str | None = args.text
        return text
    try:
        text = args.text_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--text-file {args.text_file}: cannot read it ({exc})") from exc
    # Editors end files with a newline that is not part of the answer.
    return text[:-1] if text.endswith("\n") else text


def _cmd_answer(args: argparse.Namespace) -> int:
    """Answer one decision as the local operator (a person at a terminal only)."""
    os.close(operator.open_terminal())  # checked before anything touches the database
    report = operator.answer(args.decision_id, args.choice, _read_text(args))
    return _print_report(report, as_json=args.json)


def _print_report(report: AnswerReport, *, as_json: bool) -> int:
    if as_json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print(report.describe())
    return ExitCode.OK if report.accepted else ExitCode.NOT_ACCEPTED


def _cmd_interactive(args: argparse.Namespace) -> int:
    """List open decisions, let the person pick one and a choice, prompt for text, submit."""
    report = operator.answer_interactively()
    if isinstance(report, str):  # nothing to answer, or nothing answered
        print(report)
        return ExitCode.OK
    return _print_report(report, as_json=False)


def _cmd_extension_path(args: argparse.Namespace) -> int:
    """Where the Pi extension file is (to link it into ~/.pi/agent/extensions/)."""
    print(_EXTENSION)
    return ExitCode.OK


def _cmd_bridge(args: argparse.Namespace) -> int:
    """Serve one Pi session over JSON lines on stdin/stdout until stdin closes."""
    return serving.serve(args.secret_fd, tick_seconds=args.tick)


def register(sub: Any) -> None:
    """Add the `pi` command group to the top-level parser."""
    p = sub.add_parser(
        "pi", help="answer decisions as the local operator; the Pi session bridge",
        description="Without a subcommand: pick an open decision and answer it in the terminal.")
    p.set_defaults(handler=_cmd_interactive)
    pi_sub = p.add_subparsers(dest="pi_command", metavar="PI_COMMAND")

    q = pi_sub.add_parser("list", help="open decisions routed to pi")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(handler=_cmd_list)

    q = pi_sub.add_parser("show", help="one decision's text, numbered choices and status")
    q.add_argument("decision_id", help=DECISION_ID_HELP)
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(handler=_cmd_show)

    q = pi_sub.add_parser("answer", help="answer a decision as the local operator (terminal only)")
    q.add_argument("decision_id", help=DECISION_ID_HELP)
    q.add_argument("choice", help="choice id, or its number as `pi show` prints it")
    text = q.add_mutually_exclusive_group()
    text.add_argument("--text", help="the text a choice asks for (kept exactly)")
    text.add_argument("--text-file", type=Path, metavar="PATH",
                      help="read the text from a UTF-8 file (one final newline is dropped)")
    q.add_argument("--json", action="store_true", help="machine-readable result")
    q.set_defaults(handler=_cmd_answer)

    q = pi_sub.add_parser("bridge", help="JSON-lines bridge for one Pi session (run by the Pi"
                          " extension)")
    q.add_argument("--tick", type=float, help=argparse.SUPPRESS)  # tests: a faster tick
    q.add_argument("--secret-fd", type=int, metavar="FD",
                   help="the inherited pipe the Pi extension writes its secret on")
    q.set_defaults(handler=_cmd_bridge)

    q = pi_sub.add_parser("extension-path", help="print the path of the Pi extension file")
    q.set_defaults(handler=_cmd_extension_path)
