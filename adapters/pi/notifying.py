"""The bridge's notification lines: what a run says reaches its Pi session, and a long agent
turn of the session reaches the phone.

    bridge -> extension                          extension -> bridge
    notify {notification_id, kind, title,        notified {notification_id, entry_id, adopted}
            text, run_id, context}               post {event_id, kind, text, run_id?,
                                                      session_name?, cwd?}
    posted {event_id, notification_id, run_id,   notify_state {event_id}
            adopted, delivered_to}
    notify_state {event_id, audience,
                  delivered_to, problem}

`notify` goes out for each pending `pi.notify` of the session once its attempt is written
(`channels.pi.notes.SessionNotes`: the intent before the line, never a second line for an
open attempt);
`notified` is its receipt (the Pi entry id; `adopted` when the extension found the entry in
the branch already). `post` is the extension's own notification (`/notify on`): a row made
with `channels.notifications.producing`, for the audience's Telegram chats (a session is not
told about its own turn). `notify_state` says where such a post would reach a phone (the
audience's Telegram routes, none when it has no Telegram profile), so that `/notify on` can say
at once that nothing would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from adapters.pi.decisiondesk import ConfigOf
from adapters.pi.framing import LineWriter, ProtocolError, identifier_field, text_field
from channels.config.model import ChannelsConfig, audience_routes
from channels.decisions import context
from channels.notifications import producing
from channels.notifications.records import NotificationType
from channels.pi.notes import SessionNotes
from channels.pi.owner import SessionOwner
from state.database import Database

__all__ = ["NoteDesk"]


@dataclass
class NoteDesk:
    """The notifications of one session's bridge: their lines, and the runs it posted to."""

    db: Database
    out: LineWriter
    owner_id: str
    notes: SessionNotes = field(init=False)  # the attempts open for the lines sent
    runs: set[str] = field(default_factory=set)  # the runs of this session's own posts

    def __post_init__(self) -> None:
        self.notes = SessionNotes(self.db, self.owner_id)

    def recover(self, owner: SessionOwner) -> None:
        """On claiming the session's channel: reopen what an earlier bridge left applying."""
        self.notes.recover(owner)

    def forget(self) -> None:
        """The channel's lease is lost: the next owner recovers the attempts left open."""
        self.notes.forget()

    def offer(self, owner: SessionOwner) -> None:
        """Send each due notification once, its attempt written first."""
        self.notes.offer(owner, lambda note: self.out.send({"type": "notify", **note.to_json()}))

    def handle(self, message: dict[str, Any], owner: SessionOwner,
               config_of: ConfigOf) -> None:
        """A `notified` or a `post` line (the bridge holds the session's channel)."""
        if message["type"] == "notified":
            self.notified(message, owner)
            return
        usable, config, problem = config_of()
        if not usable:
            raise ProtocolError("config_invalid", f"cannot route notifications: {problem}")
        name = message.get("session_name")
        self.post(message, owner.session_id, config,
                  name if isinstance(name, str) and name else None)

    def state(self, message: dict[str, Any], config_of: ConfigOf) -> None:
        """For `/notify on`: the Telegram routes the session's own posts would reach."""
        event_id = identifier_field(message, "event_id")
        usable, config, problem = config_of()
        audience = producing.DEFAULT_AUDIENCE
        routes = producing.telegram_routes(config, audience_routes(config, audience)) \
            if usable else ()
        self.out.send({"type": "notify_state", "event_id": event_id, "audience": audience,
                       "delivered_to": list(routes), "problem": problem})

    def notified(self, message: dict[str, Any], owner: SessionOwner) -> None:
        """The receipt: the Pi entry that shows the notification."""
        notification_id = identifier_field(message, "notification_id")
        entry_id = identifier_field(message, "entry_id")
        try:
            self.notes.confirm(owner, notification_id, entry_id, message.get("adopted") is True)
        except KeyError:
            raise ProtocolError("unknown_notification", f"{notification_id} is not a"
                                " notification this bridge offered to this session") from None

    def tick(self) -> None:
        """Renew the attempts whose line waits in the extension (Pi busy with a turn)."""
        self.notes.renew()

    def post(self, message: dict[str, Any], session_id: str, config: ChannelsConfig | None,
             session_name: str | None) -> None:
        """Write the extension's own notification and say where it went."""
        event_id = identifier_field(message, "event_id")
        kind = text_field(message, "kind")
        if kind not in ("progress", "final"):
            raise ProtocolError("malformed", "post.kind must be progress or final")
        text = text_field(message, "text")
        run_id = message.get("run_id")
        if run_id is not None and (not isinstance(run_id, str) or run_id not in self.runs):
            raise ProtocolError("malformed", "post.run_id must name a run this bridge posted to")
        name = session_name or session_id[:8]
        cwd = message.get("cwd")  # Pi's own folder: the project the card names
        found = context.automatic(Path(cwd) if isinstance(cwd, str) and cwd.startswith("/")
                                  else Path.cwd(), name)
        spec = producing.NotifySpec(
            kind=cast(NotificationType, kind), text=text, run_id=run_id,
            title=f"Pi session {name}",
            context={"project": found.project, "session": found.session, "host": found.host})
        done = producing.notify(self.db, spec, config, self.owner_id)
        self.runs.add(done.notification.run_id)
        self.out.send({"type": "posted", "event_id": event_id,
                       "notification_id": done.notification.notification_id,
                       "run_id": done.notification.run_id, "adopted": done.adopted,
                       "delivered_to": [r for r in done.channels if r != "pi"]})

