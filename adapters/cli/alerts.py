"""The lines `poll` prints for conditions that need a person: one line each, naming the
profile, the decision's fingerprint where there is one, and the command that fixes it.

Pure functions of an `AlertReport`; cron mails whatever they return.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from channels.config.model import CHANNELS_FILE
from channels.telegram.alerts import Alert, AlertReport

__all__ = ["alert_lines", "describe", "duration", "refused_settlement"]


_SETUP = "piw-channels setup telegram --profile {p} --token-file FILE --user ID --chat ID"


def alert_lines(report: AlertReport, config_dir: str, *, verbose: bool = False,
                token_file: str | None = None) -> list[str]:
    """What to print after one channel's pass, in order: new or due reminders, then (with
    `verbose`) the quiet ongoing ones, then the conditions that cleared."""
    def say(a: Alert) -> str:
        return describe(a, report.profile, report.now, config_dir, token_file=token_file)

    lines = [f"Error: {say(a)}" for a in report.reported]
    if verbose:
        lines += [f"Still: {say(a)}" for a in report.ongoing]
    lines += [f"Recovered: {_recovered(a, report.profile, report.now)}"
              for a in report.recovered]
    return lines


def describe(alert: Alert, profile: str, now: int, config_dir: str, *,
             token_file: str | None = None) -> str:
    """The one-line description of an ongoing condition, with its fix."""
    f = alert.facts
    who = f"telegram:{profile}"
    resend = f"piw-channels resend {f.get('decisionId')} --profile {profile}"
    chats = f"telegramProfiles.{profile}.allowedChatIds in {config_dir}/{CHANNELS_FILE}"
    if alert.kind == "token":
        where = token_file or "its token file"
        return (f"{who}: the Bot API rejected the token (HTTP {f.get('errorCode')}); put the"
                f" bot's current token in {where}, or run: {_SETUP.format(p=profile)}")
    if alert.kind == "conflict":
        return (f"{who}: another getUpdates poller is using this bot token; run only one"
                f" poller per bot: stop the other one, then run:"
                f" piw-channels poll --once -v --profile {profile}")
    if alert.kind == "webhook":
        return (f"{who}: a webhook is active for this bot, and Telegram refuses to be polled"
                f" while one is set; delete it (the updates waiting are kept), run:"
                f" {_SETUP.format(p=profile)} --delete-webhook")
    if alert.kind == "pass":
        return f"{who}: {f.get('description')}"
    if alert.kind == "expiry":  # not the channel's own: the same line from every profile
        return str(f.get("line"))
    if alert.kind == "unreachable":
        return (f"{who}: no successful getUpdates for {duration(now - alert.since)}"
                f" ({_error(f)}); check this machine's network and DNS and the Bot API, then"
                f" run: piw-channels poll --once -v --profile {profile}")
    if alert.kind == "held":
        until = int(f.get("until") or 0)
        return (f"{who}: the Bot API asked to wait {duration(until - alert.since)} (429"
                f" retry_after) before sending {_held_scope(f)} again; nothing is sent there"
                f" until {_utc(until)}, then it resumes by itself")
    if f.get("notificationId") is not None:
        return _notification(alert, who, chats)
    decision = f"{who}: Decision {f.get('fingerprint')}"
    if alert.kind == "ambiguous":
        unknown = [str(c) for c in f.get("chats") or []]
        where = (f" in chat {unknown[0]}" if len(unknown) == 1 else
                 f" in chats {', '.join(unknown)}" if unknown else "")
        check = "check the chat" if not unknown else \
            f"check {'that chat' if len(unknown) == 1 else 'those chats'}"
        return (f"{decision} may not have arrived{where} (a send's outcome is unknown);"
                f" {check}, and if a part is missing run: {resend}")
    if alert.kind == "failed":
        return (f"{decision} could not be delivered ({f.get('description')}); once that is"
                f" fixed, run: {resend}")
    if alert.kind == "migrated":
        return (f"{decision}: group {f.get('chat')} became supergroup {f.get('newChat')};"
                f" replace {f.get('chat')} with {f.get('newChat')} in {chats}, then run:"
                f" {resend}")
    if f.get("method") == "sendDocument":  # the card's attached file, its buttons after it
        return (f"{decision}: its attached file was refused for chat {f.get('chat')}"
                f" ({_error(f)}), so the card's buttons were not sent; answer it in Pi, or"
                f" once that is fixed run: {resend}")
    return (f"{decision} was refused for chat {f.get('chat')} ({_error(f)}); unblock the"
            f" bot or start it in that chat (or remove the chat from {chats}), then run:"
            f" {resend}")


def _recovered(alert: Alert, profile: str, now: int) -> str:
    """The one line saying a condition cleared."""
    f = alert.facts
    who = f"telegram:{profile}"
    lasted = duration(now - alert.since)
    if alert.kind == "token":
        return f"{who}: the Bot API accepts the token again"
    if alert.kind in ("conflict", "webhook"):
        return f"{who}: getUpdates works again (no conflict any more)"
    if alert.kind == "unreachable":
        return f"{who}: the Bot API is reachable again (after {lasted} without getUpdates)"
    if alert.kind == "pass":
        return f"{who}: a pass works again (after {lasted}; was: {f.get('description')})"
    if alert.kind == "config":  # the same line from every profile: said once
        return (f"the configuration can be read again (after {lasted}; was:"
                f" {f.get('description')})")
    if alert.kind == "expiry":
        return (f"decision {f.get('decisionId')}: its deadline no longer fails (after"
                f" {lasted})")
    if alert.kind == "held":
        return f"{who}: sending {_held_scope(f)} resumed (held {lasted} by a 429)"
    if f.get("notificationId") is not None:
        return f"{who}: {_note(f)} no longer needs attention (was: {alert.kind})"
    what = {"ambiguous": "an ambiguous delivery", "failed": "an undeliverable decision",
            "migrated": f"chat {f.get('chat')} migrated",
            "rejected": f"chat {f.get('chat')} refused it"}.get(alert.kind, alert.kind)
    return f"{who}: Decision {f.get('fingerprint')} no longer needs attention (was: {what})"


def _note(f: Mapping[str, Any]) -> str:
    return f"the {f.get('type')} notification {f.get('index')} of run {f.get('runId')}"


def _notification(alert: Alert, who: str, chats: str) -> str:
    """A notification's delivery that needs a person (it is never sent again by itself)."""
    f = alert.facts
    if alert.kind == "ambiguous":
        unknown = [str(c) for c in f.get("chats") or []]
        where = f" in chat {', '.join(unknown)}" if unknown else ""
        return (f"{who}: {_note(f)} may not have arrived{where} (a send's outcome is unknown);"
                f" check the chat: it is never sent twice (see: piw-channels show"
                f" {f.get('runId')})")
    if alert.kind == "failed":
        return f"{who}: {_note(f)} could not be delivered ({f.get('description')})"
    return (f"{who}: {_note(f)} was refused for chat {f.get('chat')} ({_error(f)}); unblock"
            f" the bot or start it in that chat (or remove the chat from {chats})")


def refused_settlement(refusal: Mapping[str, Any]) -> str:
    """The one line for a settlement the Bot API refused for good (said on that pass only)."""
    refused = list(refusal.get("refused") or [{}])
    return (f"Decision {refusal.get('fingerprint')} is settled, but Telegram refused to remove"
            f" its buttons or post its outcome ({_error(refused[0])}); remove the buttons in"
            " the chat by hand (pressing them changes nothing)")


def duration(ms: int) -> str:
    """A span in plain words: 45 s, 12 min, 3 h 5 min, 2 days."""
    seconds = max(0, ms // 1000)
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    if hours < 48:
        rest = minutes % 60
        return f"{hours} h" + (f" {rest} min" if rest else "")
    return f"{hours // 24} days"


def _held_scope(facts: Mapping[str, Any]) -> str:
    return "anything" if facts.get("scope") == "bot" else f"to chat {facts.get('chat')}"


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _error(facts: Mapping[str, Any]) -> str:
    code, text = facts.get("errorCode"), facts.get("description")
    if code is not None:
        return f"HTTP {code}: {text}" if text else f"HTTP {code}"
    outcome = {"not_sent": "not sent", "ambiguous": "no answer"}.get(
        str(facts.get("outcome")), str(facts.get("outcome") or "error"))
    return f"{outcome}: {text}" if text else outcome
