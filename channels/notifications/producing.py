"""The producer API: a run says how far it got (`progress`) or what came of it (`final`).

`notify` writes, in one transaction, the `notifications` row, its text blob and its delivery
effects: `pi.notify` to the target Pi session (the row's own effect; cancelled at once when
there is no session to tell), and one `telegram.notify` per Telegram channel the audience
routes to (keyed by the channel id, so each poller finds its own). The key is the plan's
`(run_id, attempt_id, notification_index)`: the same index with the same text adopts what is
there; anything else under that index is a conflict and nothing is written. Without a run it
opens a one-off run of its own, as `ask` does, finished at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import apsw

from channels import store
from channels.config.model import ChannelsConfig, audience_routes
from channels.decisions import runs
from channels.notifications import records
from channels.notifications.records import NO_SESSION, Notification, NotificationType
from channels.text import is_blank, utf16_len
from state import blobs, effects
from state.clock import Entropy
from state.database import Database
from state.effects import OwnerScope
from state.errors import WriteRejected
from state.exit_codes import ExitCode
from state.resources import Actor, ActorType

__all__ = [
    "DEFAULT_AUDIENCE", "MAX_TEXT_CODE_UNITS", "PI_NOTIFY", "TELEGRAM_NOTIFY",
    "NotificationRefused", "Notified", "NotifySpec", "check", "notify", "telegram_routes",
]


PI_NOTIFY = "pi.notify"
TELEGRAM_NOTIFY = "telegram.notify"
_NOTIFY_WORKFLOW = "piw-channels.notify"
_NOTIFY_NODE = "notify"
MAX_TEXT_CODE_UNITS = 16_384  # far above one Telegram message: a final is split, not refused
_MAX_INDEX = 2**31 - 1
DEFAULT_AUDIENCE = "operator"

# Control characters other than TAB and LF (a terminal or a chat would misread them).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")


class NotificationRefused(WriteRejected):
    """A notification that cannot be written as asked (exit 2): nothing was written."""

    code: ClassVar[str] = "notification_refused"
    exit_code = ExitCode.USAGE


@dataclass(frozen=True, slots=True)
class NotifySpec:
    """What a producer says, and to whom."""

    kind: NotificationType
    text: str
    run_id: str | None = None  # None: a one-off run of its own
    index: int | None = None  # None: the attempt's next index
    audience: str = DEFAULT_AUDIENCE
    session_id: str | None = None  # None: the run's own Pi session, if it has one
    # The card's context line (project, session, host), as `ask` fills it in.
    context: Mapping[str, str | None] = field(default_factory=dict)
    title: str | None = None  # the run's title when the run has none (a one-off run)


@dataclass(frozen=True, slots=True)
class Notified:
    """The written (or adopted) notification and where it goes."""

    notification: Notification
    adopted: bool
    channels: tuple[str, ...]  # the routes of the audience (`pi`, `telegram:<profile>`)
    effect_ids: tuple[str, ...]


def check(spec: NotifySpec, config: ChannelsConfig | None) -> tuple[str, ...]:
    """Refuse bad input before anything is written; the audience's routes."""
    if spec.kind not in ("progress", "final"):
        raise NotificationRefused(f"notification type {spec.kind!r}: use progress or final")
    if is_blank(spec.text):
        raise NotificationRefused("the notification's text is empty")
    if _CONTROL.search(spec.text):
        raise NotificationRefused("the notification's text has a control character (only"
                                  " tab and line feed are allowed)")
    if utf16_len(spec.text) > MAX_TEXT_CODE_UNITS:
        raise NotificationRefused(f"the notification's text is {utf16_len(spec.text)} UTF-16"
                                  f" code units long; the limit is {MAX_TEXT_CODE_UNITS}")
    if spec.index is not None and not 0 <= spec.index <= _MAX_INDEX:
        raise NotificationRefused(f"--index {spec.index}: use 0 to {_MAX_INDEX}")
    if spec.run_id is not None and _RUN_ID.fullmatch(spec.run_id) is None:
        raise NotificationRefused(f"run id {spec.run_id!r} is not a valid run id")
    if spec.session_id is not None and (is_blank(spec.session_id)
                                        or _CONTROL.search(spec.session_id)):
        raise NotificationRefused("--session needs a Pi session id")
    names = [] if config is None else sorted(config.audiences)
    if spec.audience not in names and not (config is None and spec.audience == DEFAULT_AUDIENCE):
        raise NotificationRefused(
            f"audience {spec.audience!r} is not configured (configured:"
            f" {', '.join(names) or 'none'})")
    return audience_routes(config, spec.audience)


def notify(db: Database, spec: NotifySpec, config: ChannelsConfig | None,
           owner_id: str) -> Notified:
    """Write the notification, its blob and its delivery effects in one transaction."""
    routes = check(spec, config)
    recipients = _telegram_recipients(config, routes)
    return db.write(lambda c: _write(c, spec, routes, recipients, owner_id, db.clock.now_ms(),
                                     db.entropy))


def telegram_routes(config: ChannelsConfig | None,
                    routes: tuple[str, ...]) -> tuple[str, ...]:
    """The routes (`telegram:<profile>`) that name a configured Telegram profile: where a
    notification reaches a phone."""
    if config is None:
        return ()
    return tuple(route for route in routes if route.partition(":")[0] == "telegram"
                 and route.partition(":")[2] in config.profiles)


def _telegram_recipients(config: ChannelsConfig | None,
                         routes: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """channel id -> allowlisted chats, of each Telegram profile the audience routes to."""
    if config is None:
        return {}
    names = [route.partition(":")[2] for route in telegram_routes(config, routes)]
    return {store.telegram_channel_id(name):
            tuple(sorted(config.profiles[name].allowed_chat_ids)) for name in names}


def _write(conn: apsw.Connection, spec: NotifySpec, routes: tuple[str, ...],
           recipients: dict[str, tuple[str, ...]], owner_id: str, now: int,
           entropy: Entropy) -> Notified:
    actor = Actor(ActorType.HOST, owner_id)
    point = _run(conn, spec, owner_id, now, entropy)
    run_id, attempt_id, title = point.run_id, point.attempt_id, point.title or spec.title
    index = spec.index if spec.index is not None else records.next_index(conn, run_id,
                                                                         attempt_id)
    notification_id = records.notification_id_for(run_id, attempt_id, index)
    target = spec.session_id if spec.session_id is not None else \
        (point.origin_session_id or NO_SESSION)
    content = blobs.put_text(conn, spec.text, now)
    existing = records.get(conn, notification_id)
    if existing is not None:
        if (existing.content_hash, existing.notification_type, existing.target_session_id) \
                != (content, spec.kind, target):
            raise NotificationRefused(
                f"notification {index} of run {run_id} exists with another"
                f" {'text' if existing.content_hash != content else 'type or session'};"
                " a notification is never changed: use another --index")
        return Notified(existing, True, routes, ())
    source = runs.run_resource(run_id)
    common: dict[str, Any] = {"notificationId": notification_id, "runId": run_id,
                              "type": spec.kind, "title": title,
                              "context": dict(spec.context), "createdAt": now}
    pi_effect = effects.reserve(
        conn, source_resource_id=source, effect_type=PI_NOTIFY,
        idempotency_key=f"{target or 'none'}:{notification_id}",
        payload={**common, "targetSessionId": target}, owner_scope=OwnerScope.CHANNEL, actor=actor,
        now=now)
    if target == NO_SESSION or "pi" not in routes:
        # No Pi session hears of it: the row's effect is settled as not wanted, at once.
        effects.get(conn, pi_effect.effect_id).cancel(
            conn, actor, now,
            "no Pi session" if target == NO_SESSION else "audience has no pi route")
    stored = Notification(notification_id, pi_effect.effect_id, run_id, attempt_id, index,
                          target, spec.kind, content, now, spec.text)
    records.insert(conn, stored)
    point.touch(conn, now)  # found among the recently active runs (alerts, status)
    telegram = [effects.reserve(
        conn, source_resource_id=source, effect_type=TELEGRAM_NOTIFY,
        idempotency_key=f"{channel_id}:{notification_id}",
        payload={**common, "channelId": channel_id, "recipients": list(chats)},
        owner_scope=OwnerScope.CHANNEL, actor=actor, now=now).effect_id
        for channel_id, chats in sorted(recipients.items())]
    return Notified(stored, False, routes, (pi_effect.effect_id, *telegram))


def _run(conn: apsw.Connection, spec: NotifySpec, owner_id: str, now: int,
         entropy: Entropy) -> runs.RunPoint:
    """The run the notification belongs to, at its latest attempt."""
    if spec.run_id is not None:
        found = runs.latest_attempt(conn, spec.run_id)
        if found is None:
            raise NotificationRefused(f"run {spec.run_id!r} is not known")
        return found
    # The one-off run has nothing to wait for: it is over once it said what it had to say.
    return runs.create_finished_run(conn, "notify", _NOTIFY_WORKFLOW, _NOTIFY_NODE, spec.title,
                                    owner_id, now, entropy)
