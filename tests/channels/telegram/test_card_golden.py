"""Golden cards: what a person receives, byte for byte, through real `ask` and `poll` processes.

Each case asks from the command line, runs `poll --once` in a child process against the
loopback fake Bot API, and compares every sendMessage the fake received (text, entities,
notification, keyboard, threading) with `tests/fixtures/cards/<case>.json`. The deadline's
clock time and countdown depend on when the test runs: they are checked against the decision's
own deadline, then written as `HH:MM` in the golden file. PIW_UPDATE_GOLDEN=1 rewrites them
(read every changed file as a person would before committing it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram.fake import FakeBotApi
from tests.channels.telegram.helpers import (
    PROFILE,
    USER,
    configure_telegram_profile,
)
from tests.cli import piw
from tests.paths import FIXTURES

GOLDEN = FIXTURES / "cards"
CONTEXT = ["--context", "project=web-app", "--context", "session=deploy-review",
           "--context", "host=laptop"]
CHOICES = ["--choice", "continue=Continue", "--choice", "stop=Stop",
           "--text-choice", "replan=Replan=What should change?"]
DEADLINE = re.compile(r"Answer by (\d\d:\d\d) UTC, in (\d+) min")
DAY_MS = 86_400_000


def at_noon(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`piw-channels ARGS` with the child's clock at tomorrow's 12:00:30 UTC (and so never
    near midnight): the card's deadline line is the same whenever the suite runs."""
    now = int(time.time() * 1000)
    return piw(home, *args, offset_ms=now - now % DAY_MS + DAY_MS + 43_230_000 - now)

DIFF = "\n".join([
    "--- a/deploy/config.yaml", "+++ b/deploy/config.yaml", "@@ -3,4 +3,4 @@",
    " replicas: 2", "-image: web:1.4.2", "+image: web:1.5.0", " region: eu-west-1",
    "-debug: true", "+debug: false"])


def presentation(*blocks: dict[str, Any], summary: str) -> dict[str, Any]:
    return {"schema": "pi-workflows.decision-presentation.v1", "summary": summary,
            "blocks": list(blocks)}


CASES: dict[str, tuple[str, dict[str, Any] | None, list[str]]] = {
    "short": ("Deploy web-app 1.5.0 to production?", None, []),
    "deadline": ("Deploy web-app 1.5.0 to production?", None,
                 ["--timeout", "15m", "--default", "stop"]),
    "deadline_without_default": ("Merge the release branch?", None, ["--timeout", "15m"]),
    "code_block": ("Run this command?", presentation(
        {"kind": "paragraph", "text": "The agent wants to clean the build output:"},
        {"kind": "preformatted", "text": "rm -rf build/ dist/ && make clean"},
        {"kind": "fields", "items": [{"label": "Working directory", "value": "~/src/web-app"}]},
        summary="Pi wants to run a command"), []),
    "diff": ("Apply this change?", presentation(
        {"kind": "preformatted", "text": DIFF}, summary="Pi wants to edit deploy/config.yaml"),
        []),
    "right_to_left": ("לפרוס את הגרסה החדשה? 🚀", presentation(
        {"kind": "paragraph", "text": "هل توافق على نشر الإصدار 1.5.0؟ 👩‍💻"},
        {"kind": "bullets", "items": ["שלב 1: בדיקות", "שלב 2: פריסה"]},
        summary="בקשת אישור"), []),
    "special_characters": ("Approve *this* <b>plan</b> & [that](x)?", presentation(
        {"kind": "paragraph", "text": "Use `make test` before _merging_; 1 < 2 > 0 \\ #tag"},
        summary="Markdown_V2 *and* <html> & friends"), []),
    "long": ("Approve the migration plan?", presentation(
        *({"kind": "paragraph", "text": f"Step {n}. " + " ".join(
            f"Migrate module {n}.{m} to the new storage layer and record the result."
            for m in range(6))} for n in range(1, 25)),
        summary="24 steps, about 10,000 characters"), []),
}


@pytest.fixture
def fake(home: Path) -> Iterator[FakeBotApi]:
    with FakeBotApi(token="7123456789:AAF-goldenCardSecret_k3Jq9XwVbN0pLm") as server:
        token_file = home / "golden.token"
        token_file.write_text("7123456789:AAF-goldenCardSecret_k3Jq9XwVbN0pLm\n")
        token_file.chmod(0o600)
        configure_telegram_profile(home, server.base_url,
                                   token="7123456789:AAF-goldenCardSecret_k3Jq9XwVbN0pLm")
        yield server


def ask(home: Path, title: str, document: dict[str, Any] | None, extra: list[str]) -> str:
    args = ["ask", "--title", title, *CHOICES, *CONTEXT, *extra, "--json"]
    if document is not None:
        path = home / "presentation.json"
        path.write_text(json.dumps(document, ensure_ascii=False))
        args += ["--presentation", str(path)]
    done = at_noon(home, *args)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["decision_id"])


def sent_as_recorded(fake: FakeBotApi, deadline_ms: int | None) -> list[dict[str, Any]]:
    """The sendMessage requests as a person's phone gets them (the chat is always USER)."""
    found = []
    for request in fake.requests("sendMessage"):
        params = dict(request.params)
        assert params.pop("chat_id") == str(USER)
        assert "parse_mode" not in params  # formatting travels as entities only
        params["text"] = pin_deadline(str(params["text"]), deadline_ms)
        for row in params.get("reply_markup", {}).get("inline_keyboard", []):
            for button in row:  # the token covers the decision id, which is new every run
                assert re.fullmatch(r"piw:[0-9a-f]{24}", button["callback_data"])
                button["callback_data"] = "piw:<token>"
        found.append(params)
    return found


def pin_deadline(text: str, deadline_ms: int | None) -> str:
    match = DEADLINE.search(text)
    if match is None:
        return text
    assert deadline_ms is not None, text
    assert match.group(1) == time.strftime("%H:%M", time.gmtime(deadline_ms // 1000)) \
        == "12:15"  # asked at 12:00:30, with 15 minutes to answer
    assert match.group(2) == "15"  # sent within the same half minute
    return DEADLINE.sub("Answer by HH:MM UTC, in 15 min", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_card_on_the_wire_matches_its_golden_file(home: Path, fake: FakeBotApi,
                                                      case: str) -> None:
    title, document, extra = CASES[case]
    decision_id = ask(home, title, document, extra)
    done = at_noon(home, "poll", "--once", "--profile", PROFILE)
    assert done.returncode == 0, done.stderr
    shown = json.loads(at_noon(home, "show", decision_id, "--json").stdout)
    sent = sent_as_recorded(fake, shown.get("deadline_at"))
    golden = GOLDEN / f"{case}.json"
    if os.environ.get("PIW_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(sent, ensure_ascii=False, indent=1) + "\n")
    assert sent == json.loads(golden.read_text())
