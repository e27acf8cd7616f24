"""`decisions` and `show` for a person: a header with age, audience, status, outcome, the
winning channel and when; who answered through which channel and when, and a timeline; no
repeated title; ISO-8601 beside epoch ms in --json; `ask --json` without --wait. Real CLI
children, the answer pressed on the loopback fake Bot API."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

from adapters.telegram.fake import FakeBotApi
from tests.adapters.cli.test_poll_alerts import fingerprint
from tests.channels.telegram.helpers import (
    PROFILE,
    TOKEN,
    USER,
    configure_telegram_profile,
    open_decision_now,
    press_button,
)
from tests.cli import piw

WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def cli(home: Path, *args: str) -> str:
    done = piw(home, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_decisions_and_show_say_who_answered_through_which_channel(home: Path) -> None:
    with FakeBotApi(token=TOKEN) as fake:
        configure_telegram_profile(home, fake.base_url)
        answered = open_decision_now()
        cli(home, "poll")
        press_button(fake, answered, "continue", 1)
        cli(home, "poll")
    cancelled = cli(home, "ask", "--title", "Ship?", "--choice", "a=A").strip()
    cli(home, "cancel", cancelled)
    waiting = json.loads(cli(home, "ask", "--title", "Open one?", "--choice", "a=A", "--json"))
    assert set(waiting) == {"decision_id", "fingerprint", "audience", "channels", "deadline_at"}
    assert waiting["channels"] == ["pi", f"telegram:{PROFILE}"]

    header, *rows = cli(home, "decisions", "--all").splitlines()
    assert header.split() == ["ID", "FINGERPRINT", "AGE", "AGENT", "HOST", "AUDIENCE", "STATUS",
                              "OUTCOME", "VIA", "WHEN", "DEADLINE", "TITLE"]
    assert [r.split()[:2] for r in rows] == [
        [d[:17], fingerprint(d)] for d in (answered.decision_id, cancelled,
                                          waiting["decision_id"])]
    # Who asked: `ask` is a workflow's decision, on this host (its context line says so).
    host = socket.gethostname().split(".")[0]
    assert [r.split()[4:11] for r in rows[1:]] == [
        ["workflow", host, "operator", "cancelled", "cancelled", "cancel", "command"],
        ["workflow", host, "operator", "open", "—", "—", "—"]]
    assert rows[0].split()[4:10] == ["workflow", "-", "operator", "accepted", "Continue",
                                     f"telegram:{PROFILE}"]
    listed = json.loads(cli(home, "decisions", "--all", "--json"))
    assert [(d["agent"], d["host"]) for d in listed] == [
        ("workflow", "-"), ("workflow", host), ("workflow", host)]
    assert cli(home, "decisions").splitlines()[1].startswith(waiting["decision_id"][:17])

    shown = cli(home, "show", answered.decision_id).splitlines()
    assert re.fullmatch(
        rf"status: accepted \(Continue\), answered by telegram-user:{USER} through"
        rf" telegram:{PROFILE}, \d+ s ago \({WHEN}\)", shown[shown.index("timeline:") - 2])
    timeline = [re.sub(rf"^  {WHEN}  ", "", line)
                for line in shown[shown.index("timeline:") + 1:]]
    assert timeline[:4] == [
        "asked for audience operator",
        f"telegram.deliver on telegram:{PROFILE}, attempt 1: applied",
        f"answer continue through telegram:{PROFILE} by telegram-user:{USER}: won",
        f"resolved: accepted (human) through telegram:{PROFILE}"]
    # Both follow the resolution, in either order (the settlement goes in the background).
    assert sorted(timeline[4:]) == [
        "run.continue, attempt 1: applied",
        f"telegram.settle on telegram:{PROFILE}, attempt 1: applied"]

    text = cli(home, "show", cancelled)
    lines = text.splitlines()
    assert lines[:2] == ["Ship?", ""] and lines.count("Ship?") == 1  # the title once
    # `ask` adds who asked (the repository, the shell, this host) as the presentation's last
    # block; a terminal shows it as fields, a Telegram card as its context line.
    assert re.fullmatch(r"Project: \S+", lines[2]) and lines[3] == "Session: shell"
    assert re.fullmatch(r"Host: \S+", lines[4]) and lines[6:9] == ["Choices", "• A", ""]
    assert re.search(r"status: cancelled \(reason: cancelled\), by the cancel command, \d+ s ago",
                     text)
    assert "None" not in text

    document = json.loads(cli(home, "show", answered.decision_id, "--json"))
    assert (document["channel"], document["actor"]) == (f"telegram:{PROFILE}",
                                                        f"telegram-user:{USER}")
    assert re.fullmatch(ISO, document["created_at_iso"])
    assert re.fullmatch(ISO, document["resolved_at_iso"])
    assert all(re.fullmatch(ISO, e["at_iso"]) for e in document["timeline"])
    listing = json.loads(cli(home, "decisions", "--all", "--json"))
    assert [d["channel"] for d in listing] == [f"telegram:{PROFILE}", None, None]
    assert all(re.fullmatch(ISO, d["created_at_iso"]) for d in listing)
