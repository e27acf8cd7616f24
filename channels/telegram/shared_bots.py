"""One bot serves one profile: two getUpdates consumers would split the bot's updates and
both deliver every decision. Profiles whose bot an earlier profile already polls are named."""

from __future__ import annotations

from channels.config.files import bot_id
from channels.config.model import ChannelsConfig, TelegramProfile
from channels.errors import ChannelsError

__all__ = ["shared_bots"]


def shared_bots(config: ChannelsConfig, profiles: list[TelegramProfile]) -> dict[str, str]:
    """The line for each profile whose bot an earlier profile already polls (it gets no pass).
    A token that cannot be read is left to its profile's own pass."""
    first: dict[tuple[str, str], str] = {}
    shared: dict[str, str] = {}
    if len(profiles) < 2:
        return shared  # the usual case reads no token twice
    for profile in profiles:
        try:
            bot = bot_id(config.read_token(profile))
        except ChannelsError:
            continue
        owner = first.setdefault((bot, profile.api_base_url), profile.name)
        if owner != profile.name:
            shared[profile.name] = (
                f"profile {profile.name} uses bot {bot}, which profile {owner} already"
                " polls; one bot serves one profile (two would split its updates and send"
                f" every decision twice): remove it (piw-channels setup telegram --remove"
                f" {profile.name}) or give it a bot of its own (setup telegram --profile"
                f" {profile.name} --credential {profile.name} --token-file ...)")
    return shared
