"""A configured Telegram channel: its profile, its channel id and its allowlists."""

from __future__ import annotations

from dataclasses import dataclass

from channels.config.model import ChannelsConfig, TelegramProfile
from channels.store import telegram_channel_id

__all__ = ["TELEGRAM_CURSOR", "Channel"]


@dataclass(frozen=True, slots=True)
class Channel:
    """One configured Telegram profile as a channel."""

    profile: TelegramProfile
    config: ChannelsConfig

    @property
    def channel_id(self) -> str:
        return telegram_channel_id(self.profile.name)

    @property
    def name(self) -> str:
        """The route name used in audiences and submissions: `telegram:<profile>`."""
        return f"telegram:{self.profile.name}"

    def routes_to_me(self, audience: str) -> bool:
        return self.name in self.config.routes(audience)

    @property
    def recipients(self) -> tuple[str, ...]:
        """Allowlisted chats in a stable order; recipient indexes are zero-based."""
        return tuple(sorted(self.profile.allowed_chat_ids))


TELEGRAM_CURSOR = "telegram_update"
