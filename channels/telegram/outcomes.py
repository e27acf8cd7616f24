"""What a chat is told once a decision is settled: who answered, how, and when.

"Ada Lovelace chose Replan on Telegram at 16:05 UTC", the typed answer, the decision's title and
`Decision <fingerprint>`: each shortened with "…" so that the message always fits Telegram's
limits, whatever the title or the answer. The person's name is the one Telegram showed with the
press or reply (kept in the inbox row); it is said in the chat that allowlists them, never to a
model. Reads only, on the caller's connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw

from channels import inbox
from channels.decisions import history, records
from channels.decisions.deadline import clock_time
from channels.decisions.presentation import fingerprint
from channels.store import telegram_channel_id
from channels.telegram.identity import Channel
from channels.telegram.units import from_units, to_units
from channels.text import operator_safe_text

__all__ = ["Styled", "already_decided", "outcome_post", "shorten"]


_MAX_TITLE = 200
_MAX_ANSWER = 1_000
_MAX_NAME = 64


@dataclass(frozen=True, slots=True)
class Styled:
    """A message text with its entities (UTF-16 offsets)."""

    text: str
    entities: list[dict[str, Any]]


def shorten(text: str, limit: int) -> str:
    """`text` in at most `limit` UTF-16 units, cut with "…" (never inside a surrogate pair)."""
    units = to_units(text)
    if len(units) <= limit:
        return text
    end = limit - 1
    if 0xD800 <= ord(units[end - 1]) <= 0xDBFF:
        end -= 1
    return from_units(units[:end]) + "…"


def _answered_by(conn: apsw.Connection, channel: Channel, decision_id: str,
                 winner: history.Winner | None = None) -> str | None:
    """The name of the person whose answer won, as Telegram showed it (None when the answer
    did not come from a person on Telegram, or the name is not known); `winner`: the
    decision's, when the caller has read it already."""
    winner = winner or history.winner(conn, decision_id)
    if winner is None or winner.channel is None or not winner.channel.startswith("telegram:"):
        return None
    event = winner.event_id
    if event is None:
        return None
    profile = winner.channel.removeprefix("telegram:")
    row = inbox.get_inbox(conn, telegram_channel_id(profile), event)
    name = None if row is None else row.payload.get("userFullName")
    return shorten(operator_safe_text(name), _MAX_NAME) if isinstance(name, str) and name else None


def _how(channel_name: str | None) -> str:
    """Where an answer came from, in words."""
    if channel_name is None:
        return ""
    if channel_name.startswith("telegram:"):
        return "on Telegram"
    return "in Pi" if channel_name.startswith("pi") else f"on {channel_name}"


def _outcome_line(conn: apsw.Connection, channel: Channel, decision: records.StoredDecision,
                 resolution: records.Resolution | None, now: int) -> str:
    """One line: "Ada chose Replan on Telegram at 16:05 UTC", "No answer by 16:22 UTC: Stop
    (the default)", "Cancelled at 16:05 UTC: superseded"."""
    winner = history.winner(conn, decision.decision_id)
    if winner is None or resolution is None:
        return "Settled"
    at = clock_time(winner.resolved_at, now)
    label = _label(decision, resolution.choice)
    if winner.provenance == "human":
        who = _answered_by(conn, channel, decision.decision_id, winner) or "A person"
        return f"{who} chose {label} {_how(winner.channel)} at {at}".replace("  ", " ")
    if winner.provenance == "timeout_policy":
        return f"No answer by {at}: {label} (the default)"
    if winner.provenance == "expired_no_default":
        return f"Expired at {at} with no answer"
    return f"Cancelled at {at}: {shorten(resolution.reason or 'cancelled', _MAX_TITLE)}"


def outcome_post(conn: apsw.Connection, channel: Channel, decision: records.StoredDecision,
                 now: int, resolution: records.Resolution | None = None) -> Styled:
    """The outcome message posted in reply to the card (`resolution`: the decision's, when
    the caller has read it already)."""
    resolution = resolution or records.resolution_of(conn, decision.decision_id)
    lines = [_safe(_outcome_line(conn, channel, decision, resolution, now))]
    entered = None if resolution is None or resolution.response is None else \
        resolution.response.get("input")
    if isinstance(entered, dict):
        for value in entered.values():
            lines.append(f"“{_safe(shorten(str(value), _MAX_ANSWER))}”")
    title = _safe(shorten(str(decision.request.document["title"]).strip(), _MAX_TITLE))
    fp = fingerprint(decision.request.presentation_digest)
    text = "\n".join([*lines, title, f"Decision {fp}"])
    bold = len(to_units(lines[0]))
    code_at = len(to_units(text)) - len(fp)
    return Styled(text, [{"type": "bold", "offset": 0, "length": bold},
                         {"type": "code", "offset": code_at, "length": len(fp)}])


def already_decided(conn: apsw.Connection, channel: Channel,
                    decision: records.StoredDecision) -> str:
    """The short answer to a late press or reply: "Already decided: Continue, by Ada"."""
    resolution = records.resolution_of(conn, decision.decision_id)
    if resolution is None:
        return "This decision is still open."
    if resolution.outcome == "cancelled":
        return shorten(f"Already decided: cancelled ({resolution.reason})", 190)
    label = _label(decision, resolution.choice)
    if resolution.provenance == "timeout_policy":
        return shorten(f"Already decided: {label} (no answer in time)", 190)
    who = _answered_by(conn, channel, decision.decision_id)
    winner = history.winner(conn, decision.decision_id)
    where = _how(winner.channel if winner else None)
    by = f", by {who}" if who else (f", answered {where}" if where else "")
    return shorten(f"Already decided: {label}{by}", 190)


def _label(decision: records.StoredDecision, choice: str | None) -> str:
    found = decision.request.choices.get(choice or "")
    return shorten(found["label"] if found else str(choice), _MAX_TITLE)


def _safe(text: str) -> str:
    return operator_safe_text(text)
