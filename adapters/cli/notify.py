"""CLI command `notify`: a run's progress or result, for the person away from the desk."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from adapters.cli.status_text import clock_time, with_iso
from channels.config.loading import load_config
from channels.decisions import context, workflows
from channels.notifications import producing, views
from channels.notifications.records import NotificationType
from state.database import Database
from state.exit_codes import ExitCode

__all__ = ["register", "run_notifications", "show_run"]


def _text(args: argparse.Namespace) -> str:
    """The text argument, or stdin when it is `-`."""
    text: str = args.text
    return sys.stdin.read() if text == "-" else text


def _cmd_notify(args: argparse.Namespace) -> int:
    """Write one notification and its delivery effects; print its run id (or `--json`)."""
    found = context.automatic(Path.cwd())
    spec = producing.NotifySpec(
        kind=NotificationType("final" if args.final else "progress"), text=_text(args),
        run_id=args.run,
        index=args.index, audience=args.audience, session_id=args.session,
        context={"project": found.project, "session": found.session, "host": found.host})
    config = load_config()
    producing.check(spec, config)  # bad input: one line, before the database is opened
    with Database.open_writer() as db:
        done = producing.notify(db, spec, config, workflows.new_owner_id(db, "notify"))
    n = done.notification
    if args.json:
        out: dict[str, Any] = {
            "notification_id": n.notification_id, "run_id": n.run_id,
            "attempt_id": n.attempt_id, "index": n.notification_index,
            "type": n.notification_type, "target_session_id": n.target_session_id or None,
            "adopted": done.adopted, "channels": list(done.channels), "created_at": n.created_at}
        print(json.dumps(with_iso(out), ensure_ascii=False))
    else:
        print(n.run_id)  # what the next `notify --run` of the same run needs
    return ExitCode.OK


def run_notifications(db: Database, run_id: str) -> list[views.NotificationView]:
    """A run's notifications with their deliveries (empty for a run that made none)."""
    return db.read(lambda c: views.for_run(c, run_id))


def show_run(listed: list[views.NotificationView], as_json: bool) -> None:
    """`show RUN_ID`: each notification, its text and where it got to (an ambiguous or
    refused delivery marked as needing attention)."""
    if as_json:
        print(json.dumps([with_iso(v.to_json()) for v in listed], indent=2, ensure_ascii=False))
        return
    print(f"run {listed[0].notification.run_id}: {len(listed)} notification"
          f"{'' if len(listed) == 1 else 's'}")
    for line in _notification_lines(listed):
        print(line)


def _notification_lines(listed: list[views.NotificationView]) -> list[str]:
    """Two lines and more per notification: what it said, then each target's delivery."""
    lines = []
    for view in listed:
        n = view.notification
        first = n.text.strip().split("\n", 1)[0]
        shown = first if len(first) <= 70 else first[:69] + "…"
        flag = "  (needs attention)" if view.troubled else ""
        lines.append(f"  #{n.notification_index} {n.notification_type}"
                     f" {clock_time(n.created_at)}: {shown}{flag}")
        if not any(d.target != "pi:none" for d in view.deliveries):
            lines.append("      nowhere: no Pi session and no Telegram chat in its audience")
        for d in view.deliveries:
            if d.target == "pi:none":
                continue  # no Pi session was to hear of it
            receipt = f", receipt {d.receipt}" if d.receipt else ""
            lines.append(f"      {d.target}: {d.status} ({d.attempts} attempt"
                         f"{'' if d.attempts == 1 else 's'}{receipt})")
    return lines


def register(sub: Any) -> None:
    """Add `notify` to the top-level parser."""
    p = sub.add_parser("notify", help="tell the run's audience how far it got, or its result")
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--progress", action="store_true",
                      help="a progress note: the run's status card is edited in place")
    kind.add_argument("--final", action="store_true",
                      help="the result: a new message that notifies")
    p.add_argument("text", metavar="TEXT", help="what to say ('-' reads it from stdin)")
    p.add_argument("--run", metavar="RUN_ID",
                   help="the run it belongs to (default: a one-off run of its own, printed)")
    p.add_argument("--index", type=int, metavar="N",
                   help="its stable index in the run (default: the next one); the same index"
                        " with the same text is adopted, with another text refused")
    p.add_argument("--audience", default=producing.DEFAULT_AUDIENCE,
                   help="a configured audience (default operator)")
    p.add_argument("--session", metavar="SESSION_ID",
                   help="the Pi session to tell (default: the run's own session, if any)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_notify)
