"""`piw-channels setup telegram`: verify a bot token with getMe, then install the profile.

Everything that can be checked locally is checked before the one network call: the argument
syntax here (exit 2), the token file by channels.config's own rules (78, or 77 with the
`chmod 600` fix) and the token's shape by the Telegram client (78). Nothing is written unless
getMe succeeded; channels.config then merges and writes both private files atomically (0600,
directory 0700). The token stays in its file: it is never copied, printed or logged.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

from adapters.cli.errors import UsageError
from adapters.telegram.client import TelegramClient
from adapters.telegram.errors import InvalidTokenFormat
from adapters.telegram.results import CallOutcome, CallResult
from channels.config import install, loading, model, parsing
from channels.config.errors import ConfigInvalid
from channels.config.model import InstallResult
from channels.errors import ChannelsError
from channels.telegram import limits
from channels.telegram.text_answers import COMMANDS
from state.exit_codes import EXIT_OK, EXIT_TEMPORARY

__all__ = [
    "VERIFY_DEADLINE_SECONDS",
    "BotApiUnavailable",
    "VerifiedBot",
    "absolute_path_argument",
    "audience_argument",
    "cmd_setup_telegram",
    "id_argument",
    "name_argument",
    "read_token_file",
    "register",
    "url_argument",
    "verify_token",
]

VERIFY_DEADLINE_SECONDS: Final = 10.0
# Per-phase HTTP timeouts, all inside the total deadline above.
_CONNECT_TIMEOUT: Final = 5.0
_IO_TIMEOUT: Final = 5.0
_POOL_TIMEOUT: Final = 1.0
# One retry of a request that provably never left (a refused connection): a blip should not
# fail setup, but an operator waiting at a prompt should not wait through a long backoff.
_MAX_ATTEMPTS: Final = 2
_REJECTED_TOKEN_CODES: Final = frozenset({401, 404})  # what the Bot API answers a bad token

# config.py's own rules (names, audiences, IDs), applied here too so that a bad argument is
# a usage error naming the option, before any request; install_telegram_profile checks
# everything again before it writes.
_NUMERIC_ID: Final = model.ID_PATTERN
_NAME: Final = model.NAME_PATTERN
_AUDIENCE: Final = model.AUDIENCE_PATTERN
# Telegram usernames are 5-32 of these; anything else from the server is not printed.
_USERNAME: Final = re.compile(r"[A-Za-z0-9_]{1,64}")
_NOTHING_WRITTEN: Final = "nothing was written"


class BotApiUnavailable(ChannelsError):
    """getMe could not confirm or refuse the token (unreachable, no response); exit 75."""

    code: ClassVar[str] = "telegram_setup_unavailable"
    exit_code: ClassVar[int] = EXIT_TEMPORARY


@dataclass(frozen=True, slots=True)
class VerifiedBot:
    """The bot that getMe returned: enough to tell the operator which bot was verified."""

    id: int
    username: str | None
    commands_set: bool = True  # the `/pending` menu was registered (setMyCommands)

    @classmethod
    def from_user(cls, user: dict[str, Any], commands_set: bool = True) -> VerifiedBot:
        """Build from getMe's User object (the client already checked that `id` is an int)."""
        username = user.get("username")
        plain = isinstance(username, str) and _USERNAME.fullmatch(username) is not None
        return cls(id=int(user["id"]), username=username if plain else None,
                   commands_set=commands_set)

    @property
    def label(self) -> str:
        """`@username`, or `id <n>` for a bot without a printable username."""
        return f"@{self.username}" if self.username else f"id {self.id}"


# --- argument types ------------------------------------------------------------------------


def id_argument(text: str) -> str:
    """A numeric Telegram user or chat ID (negative for groups), kept as a string."""
    value = text.strip()
    if not _NUMERIC_ID.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a numeric Telegram ID (like 123456789 or -1001234567890)"
        )
    return value


def _matching(pattern: re.Pattern[str], what: str, rule: str) -> Callable[[str], str]:
    """An argparse type that accepts only values matching pattern."""

    def check(text: str) -> str:
        if not pattern.fullmatch(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {what}: {rule}")
        return text

    return check


name_argument = _matching(
    _NAME, "name", "use letters, digits, '.', '_' or '-', starting with a letter or digit "
    "(at most 200 characters)",
)  # fmt: skip
audience_argument = _matching(
    _AUDIENCE, "audience", "use letters, digits, '_' or '-', starting with a letter or '_' "
    "(at most 128 characters)",
)  # fmt: skip


def absolute_path_argument(text: str) -> Path:
    """An absolute path (the installed path is used from cron, whose directory is not yours)."""
    path = Path(text).expanduser()
    if not path.is_absolute():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an absolute path: give the full path, like {Path.cwd() / text}")
    return path


def url_argument(text: str) -> str:
    """An absolute http(s) URL with a host and no query, fragment or credentials."""
    problem = parsing.url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return text.rstrip("/")


# --- the steps -----------------------------------------------------------------------------


def read_token_file(token_file: Path, credential: str) -> str:
    """The trimmed token, after channels.config's checks: absolute, regular, private, non-empty.

    The check runs through `ChannelsConfig.read_token`, the very code the poller uses, so setup
    cannot accept a token file that the poller would later refuse.
    """
    entry = model.TelegramCredential(name=credential, token_file=token_file)
    # A stand-in profile: read_token only follows its credential reference.
    profile = model.TelegramProfile(
        name="setup", credential=credential, allowed_user_ids=(), allowed_chat_ids=()
    )
    return model.ChannelsConfig({}, {}, {credential: entry}).read_token(profile)


def verify_token(
    token: str, api_base_url: str, *, deadline_seconds: float = VERIFY_DEADLINE_SECONDS
) -> VerifiedBot:
    """Call getMe once (one retry if not sent) within the deadline; raise unless it succeeded."""
    try:
        client = TelegramClient(
            token, api_base_url=api_base_url, connect_timeout=_CONNECT_TIMEOUT,
            read_timeout=_IO_TIMEOUT, write_timeout=_IO_TIMEOUT, pool_timeout=_POOL_TIMEOUT,
            max_attempts=_MAX_ATTEMPTS,
        )  # fmt: skip
    except InvalidTokenFormat as exc:
        # The message describes the expected shape; it never holds the token itself.
        raise ConfigInvalid(f"Telegram setup: token file: {exc}; {_NOTHING_WRITTEN}") from None
    try:
        result, commands = asyncio.run(_get_me(client, deadline_seconds))
    except TimeoutError:
        raise BotApiUnavailable(
            f"Telegram getMe at {api_base_url} did not return a response within "
            f"{deadline_seconds:g} s; {_NOTHING_WRITTEN}"
        ) from None
    bot = _verified_bot(result, api_base_url)
    return VerifiedBot(bot.id, bot.username, commands is not None and commands.ok)


async def _get_me(client: TelegramClient, deadline_seconds: float
                  ) -> tuple[CallResult, CallResult | None]:
    """getMe, then (once the token works) the bot's command menu, so that `/pending` is
    offered in the chat."""
    # The hard timeout bounds a slow answer; the deadline stops retries from starting late.
    async with client:
        async with asyncio.timeout(deadline_seconds):
            me = await client.get_me(deadline=time.time() + deadline_seconds)
            if not me.ok:
                return me, None
            return me, await client.set_my_commands(COMMANDS,
                                                    deadline=time.time() + deadline_seconds)


def _verified_bot(result: CallResult, api_base_url: str) -> VerifiedBot:
    """The bot when getMe succeeded, otherwise the error for its outcome."""
    if result.ok:
        return VerifiedBot.from_user(result.result)
    if result.outcome is CallOutcome.REJECTED and result.error_code in _REJECTED_TOKEN_CODES:
        # The reference's wording; the description ("Unauthorized") adds nothing to it.
        raise ConfigInvalid(
            f"Telegram setup: the Bot API rejected the token (HTTP {result.error_code}); "
            f"check the --token-file; {_NOTHING_WRITTEN}"
        )
    detail = result.description or "no detail"
    if result.outcome is CallOutcome.REJECTED:
        raise BotApiUnavailable(
            f"Telegram getMe failed with HTTP {result.error_code} ({detail}); {_NOTHING_WRITTEN}"
        )
    if result.outcome is CallOutcome.NOT_SENT:
        raise BotApiUnavailable(
            f"could not reach the Telegram Bot API at {api_base_url} ({detail}); {_NOTHING_WRITTEN}"
        )
    raise BotApiUnavailable(
        f"Telegram getMe at {api_base_url} did not return a response that confirms the token "
        f"({detail}); {_NOTHING_WRITTEN}"
    )


def _summary(installed: InstallResult, bot: VerifiedBot) -> str:
    """A few lines for the operator: what was installed, never the token or its file content."""
    profile = installed.profile
    replaced = " (replacing the previous one)" if installed.replaced_profile else ""
    lines = [
        f"Verified Telegram bot {bot.label} and installed profile {profile.name}{replaced}.",
        f"Configuration: {installed.config_dir}",
        f"Audience {installed.audience.name} routes to: {', '.join(installed.audience.channels)}",
        f"Allowed: {_count(len(profile.allowed_user_ids), 'user')}, "
        f"{_count(len(profile.allowed_chat_ids), 'chat')}",
    ]
    if profile.api_base_url != limits.DEFAULT_API_BASE_URL:
        lines.append(f"Bot API: {profile.api_base_url}")
    return "\n".join(lines)


def _count(number: int, what: str) -> str:
    return f"{number} {what}" if number == 1 else f"{number} {what}s"


# --- command -------------------------------------------------------------------------------


def cmd_setup_telegram(args: argparse.Namespace) -> int:
    """Check the inputs, verify the token with getMe, then merge and write both files (or,
    with --remove, remove a profile)."""
    if args.remove is not None:
        return _remove(args)
    missing = [option for option, value in (("--token-file", args.token_file),
                                            ("--user", args.users), ("--chat", args.chats))
               if not value]
    if missing:
        raise UsageError(f"setup telegram needs {', '.join(missing)} (or --remove PROFILE)")
    token = read_token_file(args.token_file, args.credential or args.profile)
    bot = verify_token(token, args.api_base_url or limits.DEFAULT_API_BASE_URL)
    installed = install.install_telegram_profile(
        loading.resolve_config_dir(),
        token_file=args.token_file,
        user_ids=args.users,
        chat_ids=args.chats,
        profile=args.profile,
        audience=args.audience,
        credential=args.credential,
        api_base_url=args.api_base_url,
    )
    print(_summary(installed, bot))
    if not bot.commands_set:  # the profile works; only the chat's command menu is missing
        print("Note: the bot's command menu (/pending) could not be set; run setup again to"
              " retry. Typing /pending works without it.", file=sys.stderr)
    return EXIT_OK


def _remove(args: argparse.Namespace) -> int:
    """Remove a profile, its routes, and its credential when nothing else uses it."""
    given = [o for o, v in (("--token-file", args.token_file), ("--user", args.users),
                            ("--chat", args.chats), ("--credential", args.credential),
                            ("--api-base-url", args.api_base_url)) if v]
    if given:
        raise UsageError(f"--remove takes no {', '.join(given)}")
    removed = install.remove_telegram_profile(loading.resolve_config_dir(), args.remove)
    kept = "" if removed.credential is None else f" and credential {removed.credential}"
    routes = f" (routed from audience {', '.join(removed.audiences)})" if removed.audiences \
        else ""
    print(f"Removed Telegram profile {removed.profile}{kept}{routes}. Its token file is"
          " kept: delete it, and revoke the token with @BotFather, if no one uses it.")
    return EXIT_OK


_TELEGRAM_EPILOG: Final = """\
The token file must be an absolute path to a regular file of mode 0600 (or 0400) holding only
the bot token. Only its path is installed; the token is never copied. Other profiles,
audiences and credentials are kept. The configuration directory is $PI_WORKFLOWS_CONFIG_DIR,
or ~/.config/pi-workflows.

example:
  piw-channels setup telegram --token-file ~/.secrets/piw-bot.token \\
      --user 123456789 --chat 123456789 --chat -1001234567890
"""


def register(sub: Any) -> None:
    """Add `setup` and its `telegram` subcommand to the top-level parser."""
    setup = sub.add_parser(
        "setup", help="install a private channel profile (verifies it first)",
        description="Install a private human decision channel profile.",
    )  # fmt: skip
    channels = setup.add_subparsers(dest="channel", metavar="CHANNEL")
    channels.required = True
    p = channels.add_parser(
        "telegram", help="verify a bot token with getMe and install a Telegram profile",
        description="Verify a Telegram bot token with getMe, then merge the profile into\n"
        "channels.json and credentials.json (mode 0600, directory 0700).",
        epilog=_TELEGRAM_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    _add_telegram_arguments(p)
    p.set_defaults(handler=cmd_setup_telegram)


def _add_telegram_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--token-file",
        type=absolute_path_argument,
        required=False,
        metavar="ABS_PATH",
        help="absolute path of the mode-0600 file that holds the bot token",
    )
    p.add_argument(
        "--user",
        dest="users",
        type=id_argument,
        action="append",
        required=False,
        metavar="ID",
        help="numeric Telegram user ID allowed to answer (repeat)",
    )
    p.add_argument(
        "--chat",
        dest="chats",
        type=id_argument,
        action="append",
        required=False,
        metavar="ID",
        help="numeric Telegram chat ID to post in and accept (repeat)",
    )
    p.add_argument(
        "--profile",
        type=name_argument,
        default="default",
        metavar="NAME",
        help="private Telegram profile name (default: default)",
    )
    p.add_argument(
        "--audience",
        type=audience_argument,
        default="operator",
        metavar="NAME",
        help="logical audience routed to pi and this profile (default: operator)",
    )
    p.add_argument(
        "--credential",
        type=name_argument,
        default=None,
        metavar="NAME",
        help="private credential reference name (default: the profile's current credential,"
        " or the profile's own name for a new profile)",
    )
    p.add_argument(
        "--remove",
        type=name_argument,
        default=None,
        metavar="PROFILE",
        help="remove this profile (and its credential, when no other profile uses it)",
    )
    p.add_argument(
        "--api-base-url",
        type=url_argument,
        default=None,
        metavar="URL",
        help=f"Bot API server (default: {limits.DEFAULT_API_BASE_URL})",
    )
