"""`status` for a person: whether cron is alive (last pass, last successful getUpdates, a
warning after 3 minutes without a pass), a provider error with its time until a success, and
what needs attention with the exact command. Real CLI children against the fake Bot API."""

from __future__ import annotations

import json
import re
from pathlib import Path

from adapters.telegram.fake import BotError, FakeBotApi, Fault, unused_port_url
from tests.adapters.cli.test_poll_alerts import WHO, cli, fake, fingerprint, poll
from tests.channels.telegram.helpers import (
    PROFILE,
    USER,
    config_dir,
    configure_telegram_profile,
    open_decision_now,
)

__all__ = ["fake"]  # the fixture

WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def status(home: Path, minutes: float = 0, code: int = 0) -> list[str]:
    """`status`, which exits with the highest code of what needs attention."""
    done = cli(home, "status", minutes=minutes)
    assert done.code == code, done.lines
    return done.lines


def test_status_says_in_plain_words_whether_cron_is_alive(home: Path, fake: FakeBotApi) -> None:
    assert poll(home) == poll(home)  # two quiet passes
    lines = status(home)
    assert re.fullmatch(r"Database .*state\.sqlite: \d+ kB, schema ok, 0 open decisions\.",
                        lines[0])
    assert re.fullmatch(rf"{WHO}: last pass \d+ s ago \({WHEN}\); last successful getUpdates"
                        rf" \d+ s ago \({WHEN}\)", lines[1])
    assert lines[2:] == ["  Deliveries: none.", "Nothing needs attention."]
    later = status(home, minutes=4, code=75)  # a dead cron job needs attention
    assert later[1].startswith(f"{WHO}: last pass 4 min ago (")
    assert later[2] == ("  Warning: no poll pass for 4 min; is the cron job running? Check"
                        " `crontab -l` and cron's mail.")
    for text in lines + later:
        for jargon in ("None", "generation", "lease", "unsettled", "cursor", "effects"):
            assert jargon not in text


def test_a_provider_error_shows_its_time_until_a_success(home: Path, fake: FakeBotApi) -> None:
    assert poll(home).code == 0
    fake.inject("getUpdates", Fault.error(502, "Bad Gateway"))
    assert poll(home).code == 0  # not yet for cron (--alert-after 10)
    lines = status(home)
    assert re.fullmatch(rf"  Provider error \d+ s ago \({WHEN}\): getUpdates HTTP 502: Bad"
                        " Gateway", lines[2]), lines
    assert poll(home).code == 0
    assert not any("Provider error" in line for line in status(home))


def test_needs_attention_lists_each_decision_with_the_command(
    home: Path, fake: FakeBotApi,
) -> None:
    handle = open_decision_now()
    fake.inject("sendMessage", Fault.canned(BotError.BLOCKED))
    assert poll(home).code == 78
    lines = status(home, code=78)
    assert lines[-2:] == ["Needs attention:", (
        f"  {WHO}: Decision {fingerprint(handle.decision_id)} was refused for chat {USER}"
        " (HTTP 403: Forbidden: bot was blocked by the user); unblock the bot or start it in"
        f" that chat (or remove the chat from telegramProfiles.{PROFILE}.allowedChatIds in"
        f" {config_dir(home)}/channels.json), then run: piw-channels resend"
        f" {handle.decision_id} --profile {PROFILE}")]
    document = json.loads("\n".join(cli(home, "status", "--json").lines))
    [item] = document["needs_attention"]
    assert (item["kind"], item["facts"]["decisionId"]) == ("rejected", handle.decision_id)
    [channel] = document["channels"]
    assert channel["lease"]["generation"] == 1  # storage details stay in --json
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",
                        channel["last_pass"]["at_iso"])


def test_a_configured_profile_that_never_polled_is_named(home: Path, fake: FakeBotApi) -> None:
    assert cli(home, "init").code == 0
    assert status(home, code=75)[1:] == [
        "Needs attention:",
        f"  {WHO}: never polled; add the cron line (README: Set up Telegram), or run:"
        f" piw-channels poll --once -v --profile {PROFILE}"]


def test_a_bot_api_never_reached_says_never(home: Path) -> None:
    configure_telegram_profile(home, unused_port_url())
    assert poll(home).code == 0  # down for less than --alert-after
    line = status(home)[1]
    assert re.fullmatch(rf"{WHO}: last pass \d+ s ago \({WHEN}\); last successful getUpdates"
                        " never", line), line


def test_a_broken_token_file_needs_attention_in_status_too(home: Path, fake: FakeBotApi) -> None:
    assert poll(home).code == 0
    token = home / "telegram.token"
    token.chmod(0o644)  # every poll now fails with 77
    lines = status(home, code=77)
    assert "Nothing needs attention." not in lines
    at = lines.index("Needs attention:")
    assert lines[at + 1].startswith("  Configuration: ") and "chmod 600" in lines[at + 1], lines
