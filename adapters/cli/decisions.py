"""CLI commands for human decisions: ask, decisions, show, cancel, expire."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from adapters.cli.errors import UsageError
from channels.decisions import records, views
from channels.decisions import workflows as service
from channels.decisions.choices import text_input
from channels.decisions.presentation import render_decision_text
from state.database import Database
from state.errors import DatabaseMissing
from state.exit_codes import EXIT_NOT_ACCEPTED, EXIT_OK

_DURATION = re.compile(r"([1-9][0-9]*)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration(text: str) -> int:
    """`90s`, `10m`, `2h`, `1d`, `500ms` -> milliseconds."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise UsageError(f"--timeout {text!r}: use a positive duration like 90s, 10m or 2h")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


class _ChoiceAction(argparse.Action):
    """Collect --choice and --text-choice into one list, keeping their command-line order."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        specs = list(getattr(namespace, self.dest) or [])
        specs.append((option_string, values))
        setattr(namespace, self.dest, specs)


def parse_choices(specs: list[tuple[str, str]]) -> dict[str, Any]:
    """`--choice ID=LABEL` and `--text-choice ID=LABEL=PROMPT`, in the order given."""
    choices: dict[str, Any] = {}
    for option, spec in specs:
        if option == "--choice":
            cid, sep, label = spec.partition("=")
            if not sep:
                raise UsageError(f"--choice {spec!r}: expected ID=LABEL")
            _add(choices, cid, {"label": label})
            continue
        parts = spec.split("=", 2)
        if len(parts) != 3:
            raise UsageError(f"--text-choice {spec!r}: expected ID=LABEL=PROMPT")
        cid, label, prompt = parts
        _add(choices, cid, {"label": label, "input": text_input("text", prompt)})
    if not choices:
        raise UsageError("give at least one --choice ID=LABEL or --text-choice")
    return choices


def _add(choices: dict[str, Any], cid: str, choice: dict[str, Any]) -> None:
    if cid in choices:
        raise UsageError(f"choice {cid!r} is given twice")
    choices[cid] = choice


def _load_presentation(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--presentation {path}: cannot read JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise UsageError(f"--presentation {path}: expected a JSON object")
    return value


def cmd_ask(args: argparse.Namespace) -> int:
    """Open a decision in a new waiting run; optionally wait for its answer."""
    if args.default is not None and args.timeout is None:
        raise UsageError("--default needs --timeout")
    if args.summary is not None and args.presentation is not None:
        raise UsageError("use either --summary or --presentation, not both")
    spec = service.AskSpec(
        title=args.title,
        presentation=service.presentation_for(args.title, args.summary,
                                              _load_presentation(args.presentation)),
        choices=parse_choices(args.choices),
        audience=args.audience,
        timeout_ms=None if args.timeout is None else parse_duration(args.timeout),
        default_choice=args.default,
    )
    with Database.open_writer() as db:
        handle = service.create_ask(db, spec, service.new_owner_id(db, "ask"))
        if not args.wait:
            service.release_run(db, handle.run.lease)
            print(handle.decision_id)
            return EXIT_OK
        resolution = service.wait_for_resolution(db, handle)
    entered = None if resolution.response is None else resolution.response.get("input")
    answer: dict[str, Any] = {"decision_id": handle.decision_id, "choice": resolution.choice,
                              "input": entered, "provenance": resolution.provenance}
    if resolution.outcome != "accepted":
        answer["reason"] = resolution.reason
    if args.json:
        print(json.dumps(answer, ensure_ascii=False))
    elif resolution.outcome == "accepted":
        text = entered.get("text") if isinstance(entered, dict) else None
        print(resolution.choice if text is None else f"{resolution.choice}\n{text}")
    else:
        print(f"cancelled: {resolution.reason}", file=sys.stderr)
    return EXIT_OK if resolution.outcome == "accepted" else EXIT_NOT_ACCEPTED


def cmd_decisions(args: argparse.Namespace) -> int:
    """List open decisions (or all)."""
    try:
        db = Database.open_reader()
    except DatabaseMissing:
        print("[]" if args.json else "no decisions (no database yet)")
        return EXIT_OK
    with db:
        listed = db.read(lambda c: views.list_views(c, include_resolved=args.all))
    if args.json:
        print(json.dumps([v.to_json() for v in listed], indent=2, ensure_ascii=False))
        return EXIT_OK
    if not listed:
        print("no open decisions" if not args.all else "no decisions")
    for v in listed:
        outcome = v.choice_label or v.reason or ""
        where = f" ({v.decided_by})" if v.decided_by else ""
        print(f"{v.decision_id}  {v.display_status:<32}  {v.title}"
              + (f"  -> {outcome}{where}" if outcome else ""))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    """One decision: rendered text, status and submission counts."""
    with Database.open_reader() as db:
        decision_id = service.resolve_id(db, args.decision_id)

        def read(c: Any) -> tuple[views.DecisionView, str]:
            return (views.view(c, decision_id),
                    render_decision_text(records.load(c, decision_id).request.document))

        view, text = db.read(read)
    if args.json:
        print(json.dumps({**view.to_json(), "text": text}, indent=2, ensure_ascii=False))
        return EXIT_OK
    print(text)
    print()
    print(f"status: {view.display_status}")
    if view.status != "open":
        print(f"provenance: {view.provenance}")
        print(f"outcome: {view.choice_label or view.reason}")
        print(f"decided by: {view.decided_by}")
    counts = ", ".join(f"{k} {n}" for k, n in sorted(view.submissions.items())) or "none"
    print(f"submissions: {counts}")
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel an open decision as an operator (control actor)."""
    with Database.open_writer() as db:
        decision_id = service.resolve_id(db, args.decision_id)
        outcome = service.cancel_decision(db, decision_id, args.reason,
                                          service.new_owner_id(db, "control"))
    print(service.summarize(outcome))
    return EXIT_OK


def cmd_expire(args: argparse.Namespace) -> int:
    """Settle overdue decisions whose run owner is gone (cron-safe, quiet)."""
    with Database.open_writer() as db:
        report = service.expire_overdue(db, service.new_owner_id(db, "expire"))
    if args.verbose:
        for outcome in report.resolved:
            print(service.summarize(outcome))
        for decision_id in report.skipped_live_owner:
            print(f"skipped {decision_id}: its run owner is alive")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the decision commands to the top-level parser."""
    p = sub.add_parser("ask", help="open a human decision and optionally wait for the answer")
    p.add_argument("--title", required=True, help="the question")
    p.add_argument("--summary", help="one-line summary (default: the title)")
    p.add_argument("--presentation", type=Path, metavar="FILE.json",
                   help="a pi-workflows.decision-presentation.v1 document")
    p.add_argument("--choice", action=_ChoiceAction, dest="choices", default=[],
                   metavar="ID=LABEL", help="a choice (repeat; order is kept)")
    p.add_argument("--text-choice", action=_ChoiceAction, dest="choices", default=[],
                   metavar="ID=LABEL=PROMPT", help="a choice that asks for text")
    p.add_argument("--audience", default="operator", help="logical audience (default operator)")
    p.add_argument("--timeout", metavar="DURATION", help="deadline, e.g. 90s, 10m, 2h")
    p.add_argument("--default", metavar="ID", help="choice accepted when the deadline passes")
    p.add_argument("--wait", action="store_true", help="wait for the answer and print it")
    p.add_argument("--json", action="store_true", help="machine-readable answer")
    p.set_defaults(handler=cmd_ask)

    p = sub.add_parser("decisions", help="list open decisions (--all for every decision)")
    p.add_argument("--all", action="store_true", help="include resolved decisions")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_decisions)

    p = sub.add_parser("show", help="show one decision's text, status and submissions")
    p.add_argument("decision_id", help="decision id (a unique prefix is enough)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("cancel", help="cancel an open decision as an operator")
    p.add_argument("decision_id", help="decision id (a unique prefix is enough)")
    p.add_argument("--reason", default="cancelled", help="reason shown to channels")
    p.set_defaults(handler=cmd_cancel)

    p = sub.add_parser("expire", help="settle overdue decisions whose run owner is gone")
    p.add_argument("-v", "--verbose", action="store_true", help="say what was done")
    p.set_defaults(handler=cmd_expire)
