"""CLI commands for human decisions: ask, decisions, show, cancel, expire."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

from adapters.cli import notify
from adapters.cli.arguments import DECISION_ID_HELP
from adapters.cli.decision_table import BY, Listed, render_table, status_text, terminal_width
from adapters.cli.errors import UsageError, raise_terminated
from adapters.cli.status_text import ago, clock_time, with_iso
from channels.config.loading import load_config
from channels.config.model import audience_routes
from channels.decisions import context, history, records, views, workflows
from channels.decisions.choices import text_input
from channels.decisions.errors import DecisionRefused
from channels.decisions.fields import name_error
from channels.decisions.presentation import fingerprint, render_decision_text
from channels.decisions.resolution import Verdict
from channels.telegram.failures import expiry_failure
from state.database import Database
from state.errors import DatabaseMissing, StateError
from state.exit_codes import ExitCode

__all__ = ["register"]


_DURATION = re.compile(r"([1-9][0-9]*)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_MAX_TIMEOUT_DAYS = 3650  # far enough for any workflow, well inside every date range


def _parse_duration(text: str) -> int:
    """`90s`, `10m`, `2h`, `1d`, `500ms` -> milliseconds."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise UsageError(f"--timeout {text!r}: use a positive duration like 90s, 10m or 2h")
    value = int(match.group(1)) * _UNIT_MS[match.group(2)]
    if value > _MAX_TIMEOUT_DAYS * _UNIT_MS["d"]:
        raise UsageError(f"--timeout {text!r} is too far away: use a duration between 1ms"
                         f" and {_MAX_TIMEOUT_DAYS}d")
    return value


class _ChoiceAction(argparse.Action):
    """Collect --choice and --text-choice into one list, keeping their command-line order."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        specs = list(getattr(namespace, self.dest) or [])
        specs.append((option_string, values))
        setattr(namespace, self.dest, specs)


def _parse_choices(specs: list[tuple[str, str]]) -> dict[str, Any]:
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
    if (rule := name_error(cid)) is not None:
        raise UsageError(f"choice id {cid!r} is invalid: {rule}")
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


_DEFAULT_AUDIENCE = "operator"


def _check_audience(audience: str) -> tuple[str, ...]:
    """The channels of a configured audience; without any configuration only the default one
    (which then goes to Pi alone) is accepted. A typo would otherwise route to Pi only."""
    config = load_config()
    names = [] if config is None else sorted(config.audiences)
    if audience in names or (config is None and audience == _DEFAULT_AUDIENCE):
        return audience_routes(config, audience)
    raise UsageError(
        f"audience {audience!r} is not configured (configured: {', '.join(names) or 'none'});"
        f" use one of those, or add it with: piw-channels setup telegram --audience {audience}"
        " ...")


_CONTEXT_KEYS = ("project", "session", "host")


def _ask_context(settings: list[str]) -> context.Context:
    """The context line of a decision asked from this shell: automatic values (the repository
    or folder, `shell`, this host), each replaced by `--context KEY=VALUE`, or none at all
    with `--context none`."""
    if settings == ["none"]:
        return context.Context()
    facts = vars(context.automatic(Path.cwd()))
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or key not in _CONTEXT_KEYS:
            raise UsageError(f"--context takes project=NAME, session=NAME, host=NAME or none,"
                             f" not {setting!r}")
        facts[key] = context.clean(value)
    return context.Context(**facts)


def _cmd_ask(args: argparse.Namespace) -> int:
    """Open a decision in a new waiting run; optionally wait for its answer."""
    routes = _check_audience(args.audience)
    if args.default is not None and args.timeout is None:
        raise UsageError("--default needs --timeout")
    if args.summary is not None and args.presentation is not None:
        raise UsageError("use either --summary or --presentation, not both")
    presentation = workflows.presentation_for(args.title, args.summary,
                                            _load_presentation(args.presentation))
    spec = workflows.AskSpec(
        title=args.title,
        presentation=context.with_context(presentation, _ask_context(args.context)),
        choices=_parse_choices(args.choices),
        audience=args.audience,
        timeout_ms=None if args.timeout is None else _parse_duration(args.timeout),
        default_choice=args.default,
    )
    if args.wait:  # SIGTERM unwinds like Ctrl-C, so the run lease is released at once (not
        signal.signal(signal.SIGTERM, raise_terminated)  # in 60 s), as soon as the run exists
    with Database.open_writer() as db:
        handle = workflows.create_ask(db, spec, workflows.new_owner_id(db, "ask"))
        if not args.wait:
            handle.release(db)
            if args.json:
                print(json.dumps(with_iso({
                    "decision_id": handle.decision_id,
                    "fingerprint": fingerprint(handle.request.presentation_digest),
                    "audience": args.audience, "channels": list(routes),
                    "deadline_at": handle.request.expires_at_ms}), ensure_ascii=False))
            else:
                print(handle.decision_id)
            return ExitCode.OK
        try:
            progress = None
            if sys.stderr.isatty():
                _tell_waiting(handle, routes)
                progress = _DeliveryProgress(db, handle.decision_id)
        except BaseException:  # Ctrl-C or SIGTERM before the wait holds the run: release it
            with contextlib.suppress(StateError):
                handle.release(db)
            raise
        resolution = workflows.wait_for_resolution(db, handle, on_change=progress)
    entered = None if resolution.response is None else resolution.response.get("input")
    answer: dict[str, Any] = {"decision_id": handle.decision_id, "choice": resolution.choice,
                              "input": entered, "provenance": resolution.provenance}
    if resolution.outcome != records.Outcome.ACCEPTED:
        answer["reason"] = resolution.reason
    if args.json:
        print(json.dumps(answer, ensure_ascii=False))
    elif resolution.outcome == records.Outcome.ACCEPTED:
        text = entered.get("text") if isinstance(entered, dict) else None
        print(resolution.choice if text is None else f"{resolution.choice}\n{text}")
    else:
        print(f"cancelled: {resolution.reason}", file=sys.stderr)
    return ExitCode.OK if resolution.outcome == records.Outcome.ACCEPTED else ExitCode.NOT_ACCEPTED


def _tell_waiting(handle: workflows.AskHandle, routes: tuple[str, ...]) -> None:
    """What a person at a terminal needs while `ask --wait` sits there (on stderr)."""
    fp = fingerprint(handle.request.presentation_digest)
    print(f"Waiting for Decision {fp} ({handle.decision_id}), sent to: {', '.join(routes)}"
          " (Telegram gets it on the next poll).", file=sys.stderr)
    print("Ctrl-C stops waiting; the decision stays open: answer it later, or run:"
          f" piw-channels cancel {handle.decision_id}", file=sys.stderr)


class _DeliveryProgress:
    """Says on stderr, once per channel, where the decision was delivered while ask waits."""

    def __init__(self, db: Database, decision_id: str) -> None:
        self.db, self.decision_id, self.told = db, decision_id, set[str]()

    def __call__(self) -> None:
        for channel in self.db.read(lambda c: history.delivered_to(c, self.decision_id)):
            if channel not in self.told:
                self.told.add(channel)
                print(f"Delivered to {channel}.", file=sys.stderr, flush=True)


def _cmd_decisions(args: argparse.Namespace) -> int:
    """List open decisions (or all), with a header: age, audience, status (overdue past the
    deadline), the outcome, the winning channel and when, the deadline; fitted to the
    terminal."""
    try:
        db = Database.open_reader()
    except DatabaseMissing:
        print("[]" if args.json else "no decisions (no database yet)")
        return ExitCode.OK
    with db:
        now = db.clock.now_ms()

        def read(c: Any) -> list[Listed]:
            return [Listed(v, views.fingerprint_of(c, v.decision_id),
                           history.winner(c, v.decision_id), records.load(c, v.decision_id).asker())
                    for v in views.list_views(c, include_resolved=args.all)]

        listed = db.read(read)
    if args.json:
        print(json.dumps([with_iso({**i.view.to_json(), "fingerprint": i.fingerprint,
                                    "agent": i.asker.agent, "host": i.asker.host,
                                    "channel": None if i.winner is None else i.winner.channel})
                          for i in listed], indent=2, ensure_ascii=False))
        return ExitCode.OK
    if not listed:
        print("no open decisions" if not args.all else "no decisions")
        return ExitCode.OK
    table = render_table(listed, now, terminal_width())
    for line in table:
        print(line)
    return ExitCode.OK


def _cmd_show(args: argparse.Namespace) -> int:
    """One decision: its text, who answered through which channel and when, a timeline."""
    with Database.open_reader() as db:
        if notes := notify.run_notifications(db, args.decision_id):
            notify.show_run(notes, args.json)  # a run's id: its notifications
            return ExitCode.OK
        decision_id = workflows.resolve_id(db, args.decision_id)
        now = db.clock.now_ms()

        def read(c: Any) -> tuple[views.DecisionView, Any, history.Winner | None,
                                  list[history.Entry]]:
            return (views.view(c, decision_id), records.load(c, decision_id).request.document,
                    history.winner(c, decision_id), history.timeline(c, decision_id))

        view, document, won, events = db.read(read)
    if args.json:
        print(json.dumps(with_iso({
            **view.to_json(), "text": render_decision_text(document),
            "fingerprint": fingerprint(document["presentationDigest"]),
            "channel": None if won is None else won.channel,
            "actor": None if won is None else won.actor_id,
            "timeline": [e.to_json() for e in events]}), indent=2, ensure_ascii=False))
        return ExitCode.OK
    print(render_decision_text(document, once=True) + f" ({decision_id})")
    print()
    deadline = "no deadline" if view.deadline_at is None else (
        f"deadline {clock_time(view.deadline_at)}"
        + (f", then {view.default_choice}" if view.default_choice else ""))
    print(f"asked {ago(view.created_at, now)} for audience {view.audience}; {deadline}")
    print(f"status: {_status_line(view, won, now)}")
    for line in _typed_reply(view):
        print(line)
    counts = ", ".join(f"{k} {n}" for k, n in sorted(view.submissions.items())) or "none"
    print(f"submissions: {counts}")
    print("timeline:")
    for entry in events:
        print(f"  {clock_time(entry.at)}  {_entry_text(entry)}")
    return ExitCode.OK


def _status_line(view: views.DecisionView, won: history.Winner | None, now: int) -> str:
    if won is None:
        return status_text(view, now)
    what = view.choice_label or view.choice if won.outcome == records.Outcome.ACCEPTED else \
        f"reason: {view.reason}"
    if won.provenance == "human":
        how = f"answered by {won.actor_id} through {won.channel}"
    else:
        how = f"by the {BY.get(won.provenance, won.provenance)}"
    return f"{view.display_status} ({what}), {how}, {ago(won.resolved_at, now)}"


def _typed_reply(view: views.DecisionView) -> list[str]:
    """The text a person typed for the accepted choice, exactly (indented when multi-line)."""
    lines = []
    for name, value in (view.input or {}).items():
        text = str(value)
        if "\n" in text or not text.strip():
            lines += [f"typed reply ({name}):", *("  " + line for line in text.split("\n"))]
        else:
            lines.append(f"typed reply ({name}): {text}")
    return lines


def _entry_text(entry: history.Entry) -> str:
    d = entry.detail
    if entry.what == "asked":
        return f"asked for audience {d['audience']}"
    if entry.what == "submission":
        return (f"answer {d['choice']} through {d['channel']} by {d['actor']}:"
                f" {d['result']}")
    if entry.what == "resolved":
        via = f" through {d['channel']}" if d.get("channel") else ""
        return f"resolved: {d['outcome']} ({d['provenance']}){via}"
    where = f" on {d['channel']}" if d.get("channel") else ""
    return f"{d['effect']}{where}, attempt {d['attempt']}: {d['outcome']}"


def _cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel an open decision as an operator (control actor)."""
    with Database.open_writer() as db:
        decision_id = workflows.resolve_id(db, args.decision_id)
        try:
            outcome = workflows.cancel_decision(db, decision_id, args.reason,
                                              workflows.new_owner_id(db, "control"))
            won = outcome.result.value == "won"
        except DecisionRefused:
            won = False  # decided before: say how, below
        view = db.read(lambda c: views.view(c, decision_id))
    if won or view.status == "cancelled":
        reason = args.reason if won else view.reason
        if args.json:
            print(json.dumps({"decision_id": decision_id, "status": "cancelled",
                              "already": not won, "reason": reason}, ensure_ascii=False))
        elif won:
            print(f"cancelled {decision_id} (reason: {reason})")
        else:
            print(f"{decision_id} was already cancelled (reason: {reason})")
    else:
        chosen = view.choice_label or view.choice
        raise DecisionRefused(f"{decision_id} is already decided ({chosen}); nothing to cancel")
    return ExitCode.OK


def _cmd_expire(args: argparse.Namespace) -> int:
    """Settle overdue decisions whose run owner is gone (cron-safe, quiet)."""
    with Database.open_writer() as db:
        report = workflows.expire_overdue(db, workflows.new_owner_id(db, "expire"))
    failures = [expiry_failure(decision_id, exc) for decision_id, exc in report.failed]
    if args.json:
        print(json.dumps({
            "resolved": [_verdict_json(outcome) for outcome in report.resolved],
            "continued": list(report.continued),
            "skipped_live_owner": list(report.skipped_live_owner),
            "failed": [{"decision_id": decision_id, "exit_code": failed.exit_code,
                        "message": failed.line}
                       for (decision_id, _), failed in zip(report.failed, failures,
                                                           strict=True)],
        }, ensure_ascii=False))
    elif args.verbose:
        for outcome in report.resolved:
            named = "" if outcome.resolution is None else f"{outcome.resolution.decision_id}: "
            print(named + _summary(outcome))
        for decision_id in report.skipped_live_owner:
            print(f"skipped {decision_id}: its run owner is alive")
    code: int = ExitCode.OK
    for failed in failures:  # each failed alone: the others were settled
        print(f"Error: {failed.line}", file=sys.stderr)
        code = max(code, failed.exit_code)
    return code


def _summary(outcome: Verdict) -> str:
    """One line for an outcome (`expire --verbose`)."""
    res = outcome.resolution
    if res is None:
        return f"{outcome.result.value}: {outcome.message}"
    detail = res.choice if res.outcome == records.Outcome.ACCEPTED else res.reason
    return f"{outcome.result.value}: {res.outcome} ({res.provenance}) {detail}"


def _verdict_json(outcome: Verdict) -> dict[str, Any]:
    res = outcome.resolution
    return {"result": outcome.result.value, "message": outcome.message,
            "decision_id": None if res is None else res.decision_id,
            "outcome": None if res is None else res.outcome,
            "provenance": None if res is None else res.provenance,
            "choice": None if res is None else res.choice,
            "reason": None if res is None else res.reason}


def register(sub: Any) -> None:
    """Add the decision commands to the top-level parser."""
    p = sub.add_parser("ask", help="open a human decision and optionally wait for the answer")
    p.add_argument("--title", required=True, help="the question")
    p.add_argument("--summary", help="one-line summary (default: the title)")
    p.add_argument("--presentation", type=Path, metavar="FILE.json",
                   help="a pi-workflows.decision-presentation.v1 document")
    # Required as a pair: argparse can only mark one option required, so the group says it.
    choices = p.add_argument_group("choices (at least one --choice or --text-choice)")
    choices.add_argument("--choice", action=_ChoiceAction, dest="choices", default=[],
                         metavar="ID=LABEL", help="a choice (repeat; order is kept)")
    choices.add_argument("--text-choice", action=_ChoiceAction, dest="choices", default=[],
                         metavar="ID=LABEL=PROMPT", help="a choice that asks for text")
    p.add_argument("--audience", default=_DEFAULT_AUDIENCE,
                   help="a configured audience (default operator)")
    p.add_argument("--context", action="append", default=[], metavar="KEY=VALUE",
                   help="the card's context line: project=, session= or host= (default: this"
                        " repository or folder, 'shell', this host); 'none' leaves it out")
    p.add_argument("--timeout", metavar="DURATION", help="deadline, e.g. 90s, 10m, 2h")
    p.add_argument("--default", metavar="ID", help="choice accepted when the deadline passes")
    p.add_argument("--wait", action="store_true", help="wait for the answer and print it")
    p.add_argument("--json", action="store_true",
                   help="machine-readable output (without --wait: the opened decision)")
    p.set_defaults(handler=_cmd_ask)

    p = sub.add_parser("decisions", help="list open decisions (--all for every decision)")
    p.add_argument("--all", action="store_true", help="include resolved decisions")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_decisions)

    p = sub.add_parser("show", help="show one decision's text, status and submissions, or"
                                    " a run's notifications")
    p.add_argument("decision_id", help=DECISION_ID_HELP + "; or a run id: its notifications")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_show)

    p = sub.add_parser("cancel", help="cancel an open decision as an operator")
    p.add_argument("decision_id", help=DECISION_ID_HELP)
    p.add_argument("--reason", default="cancelled", help="reason shown to channels")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_cancel)

    p = sub.add_parser("expire", help="settle overdue decisions whose run owner is gone")
    p.add_argument("-v", "--verbose", action="store_true", help="say what was done")
    p.add_argument("--json", action="store_true",
                   help="machine-readable output: what was settled, continued, skipped, failed")
    p.set_defaults(handler=_cmd_expire)
