"""The rehearsal runs to the end: `demo --reply` types the text a choice asks for, `--press`
and `--reply` pick a decision with `--decision`, and `demo --serve` prints the chat as the
person sees it. Real child processes: `demo --serve`, `setup`, `ask`, `poll`, `demo`."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
from pathlib import Path

from adapters.telegram.fake import RecordedRequest, RemoteFakeBotApi
from adapters.telegram.fake.transcript import readable, shorten
from channels.decisions import records, views
from channels.telegram.buttons import callback_token
from state.database import Database
from tests.adapters.cli.test_demo_serve import cli, start_serve, stop
from tests.channels.telegram.helpers import live_keyboards, settled_labels

TIME = re.compile(r"^\d\d:\d\d:\d\d ")


def rehearsal(home: Path) -> tuple[subprocess.Popen[str], str]:
    """`demo --serve` running, with the profile its Rehearse line gives set up."""
    serve, (first, rehearse, *_) = start_serve(home, "--token-file", str(home / "demo.token"))
    setup = cli(home, *shlex.split(rehearse.removeprefix("Rehearse: piw-channels ")))
    assert setup.returncode == 0, setup.stderr
    return serve, first.split()[3]


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def transcript_of(serve: subprocess.Popen[str]) -> list[str]:
    """What demo --serve printed after its header (the transcript), until Ctrl-C, without
    the clock."""
    serve.send_signal(signal.SIGINT)
    out, err = serve.communicate(timeout=30)
    assert (serve.returncode, err) == (130, "")
    return [TIME.sub("", line) for line in out.splitlines()]


def test_the_readme_rehearsal_finishes_a_text_answer_with_demo_reply(home: Path) -> None:
    serve, url = rehearsal(home)
    fake = RemoteFakeBotApi(url)
    try:
        decision_id = ok(cli(home, "ask", "--title", "Migrate the billing tables?",
                             "--choice", "go=Continue", "--text-choice",
                             "replan=Replan=What should change?")).strip()
        ok(cli(home, "poll"))
        [card] = sent_with(fake, "inline_keyboard")
        assert ok(cli(home, "demo", "--press", "Replan", "--api-base-url", url)) == (
            "pressed 'Replan'; run piw-channels poll to collect it\n")
        ok(cli(home, "poll"))  # collects the press; the prompt goes out
        [prompt] = sent_with(fake, "force_reply")
        assert ok(cli(home, "demo", "--reply", "use the staging db", "--api-base-url",
                      url)) == (f"replied 'use the staging db' to “{shorten(prompt.params['text'])}”;"
                                " run piw-channels poll to collect it\n")
        ok(cli(home, "poll"))  # collects the reply: the decision is answered and settled
        [listed] = json.loads(ok(cli(home, "decisions", "--all", "--json")))
        assert (listed["decision_id"], listed["status"], listed["choice"], listed["input"],
                listed["channel"]) == (decision_id, "accepted", "replan",
                                       {"text": "use the staging db"}, "telegram:default")
        assert "typed reply (text): use the staging db" in ok(cli(home, "show", decision_id))
        # settled: the card keeps its buttons, the chosen one marked, none answers
        assert live_keyboards(fake.keyboards()) == []
        assert "✓ Replan" in settled_labels(fake.keyboards()[0]["inline_keyboard"])
        # the typed answer got its receipt: 👍 on the reply
        [reaction] = fake.requests("setMessageReaction")
        assert reaction.params["reaction"] == [{"type": "emoji", "emoji": "👍"}]
        outcome = fake.requests("sendMessage")[-1].params
    finally:
        chat = transcript_of(serve)
    card_quote, prompt_quote = (f"“{shorten(r.params['text'])}”" for r in (card, prompt))
    pressed = chat.index(f"Ada pressed [ Replan ] on {card_quote}")
    replied = chat.index(f"Ada ↪ replying to {prompt_quote}:")
    settled = chat.index(f"buttons of {card_quote} are now:")  # marked and inert
    reacted = chat.index("PiW Decisions reacted 👍 to “use the staging db”")
    assert pressed < replied < reacted and replied < settled, chat
    assert any("[ ✓ Replan ]" in line for line in chat[settled:settled + 4])
    assert chat[replied + 1] == "    use the staging db"
    # The card as sent: its text with its entities, then its buttons.
    shown = ["    " + line if line else ""
             for line in readable(card.params["text"], card.params.get("entities")).split("\n")]
    start = chat.index(shown[0])
    assert chat[start:start + len(shown)] == shown
    assert any("[ Replan ]" in line for line in chat[start + len(shown):pressed])
    assert chat[start - 1].startswith("PiW Decisions")
    # And last, the outcome post.
    told = readable(outcome["text"], outcome.get("entities")).split("\n")
    assert chat[-len(told):] == ["    " + line if line else "" for line in told]


def sent_with(fake: RemoteFakeBotApi, markup: str) -> list[RecordedRequest]:
    """The sends whose reply_markup has `markup` (a keyboard, a ForceReply)."""
    return [r for r in fake.requests("sendMessage")
            if markup in (r.params.get("reply_markup") or {})]


def tokens(decision_id: str) -> set[str]:
    with Database.open_reader() as db:
        request = db.read(lambda c: records.load(c, decision_id).request)
    return {callback_token(decision_id, request.request_digest, c) for c in request.choices}


def card_message_id(fake: RemoteFakeBotApi, decision_id: str) -> int:
    mine = tokens(decision_id)
    [card] = [r.result["message_id"] for r in fake.requests("sendMessage")
              if mine & {b["callback_data"] for row in
                         (r.params.get("reply_markup") or {}).get("inline_keyboard", [])
                         for b in row}]
    return int(card)


def test_press_and_reply_with_decision_act_on_that_decisions_message(home: Path) -> None:
    serve, url = rehearsal(home)
    try:
        first = ok(cli(home, "ask", "--title", "First?", "--choice", "yes=Yes")).strip()
        second = ok(cli(home, "ask", "--title", "Second?", "--choice", "yes=Yes")).strip()
        ok(cli(home, "poll"))
        with Database.open_reader() as db:
            fp = db.read(lambda c: views.fingerprint_of(c, first))
        pressed = cli(home, "demo", "--press", "1", "--decision", f"Decision {fp}",
                      "--api-base-url", url)
        assert (pressed.returncode, pressed.stdout) == (
            0, "pressed 'Yes'; run piw-channels poll to collect it\n")
        ok(cli(home, "poll"))
        listing = {d["decision_id"]: d["status"] for d in json.loads(
            ok(cli(home, "decisions", "--all", "--json")))}
        assert listing == {first: "accepted", second: "open"}  # not the newest: the first

        again = cli(home, "demo", "--press", "Yes", "--decision", first[:20],
                    "--api-base-url", url)
        assert (again.returncode, again.stderr) == (
            2, f"Error: Decision {fp}'s message shows no buttons any more (it was decided:"
               f" run piw-channels show {fp})\n")
        fake = RemoteFakeBotApi(url)
        replied = ok(cli(home, "demo", "--reply", "yes", "--decision", second,
                         "--api-base-url", url))
        assert re.fullmatch(r"replied 'yes' to “.+”; run piw-channels poll to collect it\n",
                            replied)
        update = fake.pushed_updates()[-1].update["message"]
        assert update["reply_to_message"]["message_id"] == card_message_id(fake, second)
        assert (update["text"], update["from"]["id"], update["chat"]["id"]) == (
            "yes", 5123456789, 5123456789)
        late = ok(cli(home, "demo", "--reply", "a late word", "--decision", first,
                      "--user", "42", "--api-base-url", url))
        assert late.startswith("replied 'a late word' to ")  # a settled card can be replied to
        update = fake.pushed_updates()[-1].update["message"]
        assert update["reply_to_message"]["message_id"] == card_message_id(fake, first)
        assert update["from"]["id"] == 42
    finally:
        stop(serve)


def test_demo_reply_and_decision_refuse_what_they_cannot_do(home: Path) -> None:
    serve, url = rehearsal(home)
    try:
        no_prompt = cli(home, "demo", "--reply", "hello", "--api-base-url", url)
        assert (no_prompt.returncode, no_prompt.stderr) == (
            2, "Error: no prompt on the demo Bot API waits for a reply (a choice that asks for"
               " text sends one when pressed); to answer a decision by text, reply to its"
               " message: piw-channels demo --reply TEXT --decision ID --api-base-url URL\n")
        empty = cli(home, "demo", "--reply", "  ", "--api-base-url", url)
        assert (empty.returncode, empty.stderr) == (
            2, "Error: --reply needs some text (Telegram sends no empty message)\n")
        decision_id = ok(cli(home, "ask", "--title", "Undelivered?", "--choice", "a=A")).strip()
        undelivered = cli(home, "demo", "--reply", "a", "--decision", decision_id,
                          "--api-base-url", url)
        assert undelivered.returncode == 2
        assert undelivered.stderr.endswith(" was not delivered to the demo Bot API yet; run:"
                                           " piw-channels poll\n")
        unknown = cli(home, "demo", "--press", "A", "--decision", "ffffffffffff",
                      "--api-base-url", url)
        assert (unknown.returncode, unknown.stderr) == (
            2, "Error: no decision matches 'ffffffffffff'\n")
        for args, message in (
                (["--decision", "x"], "--decision only applies with --press or --reply"),
                (["--serve", "--user", "1"], "--user only applies with --press or --reply"),
                (["--reply", "x"], "--reply needs --api-base-url (the URL demo --serve"
                                   " printed)")):
            refused = cli(home, "demo", *args)
            assert (refused.returncode, refused.stderr) == (2, f"Error: {message}\n")
    finally:
        stop(serve)
