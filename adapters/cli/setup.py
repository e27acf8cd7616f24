"""`piw-channels setup telegram`: verify a bot token with getMe, then install the profile.

Everything that can be checked locally is checked before the first network call: the argument
syntax here (exit 2), the token file by channels.config's own rules (78, or 77 with the
`chmod 600` fix) and the token's shape (78). The calls (`bot_checks`) go through
python-telegram-bot's `Bot` (`adapters.telegram.setup_bot`): getMe, getWebhookInfo,
deleteWebhook when a webhook would block polling and the operator agrees (`--delete-webhook`,
or yes at the prompt), and setMyCommands. Nothing is written unless getMe succeeded and no
webhook stays in the way; channels.config then merges and writes both private files
atomically (0600, directory 0700). The token stays in its file: it is never copied, printed
or logged.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from adapters.cli.bot_checks import prepare_polling, print_notes
from adapters.cli.errors import UsageError
from adapters.telegram.setup_steps import VerifiedBot, verify_token
from channels.config import install, loading
from channels.config.model import DEFAULT_API_BASE_URL, InstallResult
from state.exit_codes import ExitCode

__all__ = ["audience_argument", "id_argument", "name_argument", "register", "url_argument"]


# --- argument types ------------------------------------------------------------------------


def _argument(check: Callable[[str], str]) -> Callable[[str], str]:
    """An argparse type from one of channels.config's setup rules (a bad value is a usage
    error naming the option, before any request)."""

    def argument(text: str) -> str:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return argument


id_argument = _argument(lambda text: install.setup_argument("id", text))
name_argument = _argument(lambda text: install.setup_argument("name", text))
audience_argument = _argument(lambda text: install.setup_argument("audience", text))
url_argument = _argument(lambda text: install.setup_argument("url", text))


def _absolute_path_argument(text: str) -> Path:
    """An absolute path (the installed path is used from cron, whose directory is not yours)."""
    path = Path(text).expanduser()
    if not path.is_absolute():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an absolute path: give the full path, like {Path.cwd() / text}")
    return path


# --- the steps -----------------------------------------------------------------------------


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
    if profile.api_base_url != DEFAULT_API_BASE_URL:
        lines.append(f"Bot API: {profile.api_base_url}")
    return "\n".join(lines)


def _summary_json(installed: InstallResult, bot: VerifiedBot) -> dict[str, Any]:
    """The summary for scripts (`--json`): names and counts, never a token or an id."""
    profile = installed.profile
    return {"bot": bot.label, "profile": profile.name, "replaced": installed.replaced_profile,
            "credential": installed.credential.name, "config_dir": str(installed.config_dir),
            "audience": installed.audience.name, "routes": list(installed.audience.channels),
            "allowed_users": len(profile.allowed_user_ids),
            "allowed_chats": len(profile.allowed_chat_ids),
            "api_base_url": profile.api_base_url, "commands_set": bot.commands_set,
            "webhook_deleted": bot.webhook_deleted}


def _count(number: int, what: str) -> str:
    return f"{number} {what}" if number == 1 else f"{number} {what}s"


# --- command -------------------------------------------------------------------------------


def _cmd_setup_telegram(args: argparse.Namespace) -> int:
    """Check the inputs, verify the token with getMe, then merge and write both files (or,
    with --remove, remove a profile)."""
    if args.remove is not None:
        return _remove(args)
    if args.find_chat is not None:
        return _find_chat(args)
    missing = [option for option, value in (("--token-file", args.token_file),
                                            ("--user", args.users), ("--chat", args.chats))
               if not value]
    if missing:
        raise UsageError(f"setup telegram needs {', '.join(missing)} (or --remove PROFILE)")
    token = install.setup_token(args.token_file, args.credential or args.profile)
    api_base_url = args.api_base_url or DEFAULT_API_BASE_URL
    bot = verify_token(token, api_base_url)
    bot = prepare_polling(token, api_base_url, bot, delete_webhook=args.delete_webhook)
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
    if args.json:
        print(json.dumps(_summary_json(installed, bot), indent=2, sort_keys=True))
    else:
        print(_summary(installed, bot))
    print_notes(bot)
    return ExitCode.OK


def _find_chat(args: argparse.Namespace) -> int:
    """Wait for a message to the bot and print the chat and user ids it came from."""
    from adapters.cli.find_chat import find_chat

    given = [o for o, v in (("--user", args.users), ("--chat", args.chats),
                            ("--credential", args.credential)) if v]
    if given:
        raise UsageError(f"--find-chat takes no {', '.join(given)}")
    if args.token_file is None:
        raise UsageError("--find-chat needs --token-file (the bot's token file)")
    if not 1 <= args.find_chat <= 3600:
        raise UsageError("--find-chat waits between 1 and 3600 seconds")
    api_base_url = args.api_base_url or DEFAULT_API_BASE_URL
    token = install.setup_token(args.token_file, "find-chat")
    bot = verify_token(token, api_base_url)
    bot = prepare_polling(token, api_base_url, bot, delete_webhook=args.delete_webhook)
    print_notes(bot)
    return find_chat(token, bot.label, args.token_file, api_base_url, args.find_chat, args.json)


def _remove(args: argparse.Namespace) -> int:
    """Remove a profile, its routes, and its credential when nothing else uses it."""
    given = [o for o, v in (("--token-file", args.token_file), ("--user", args.users),
                            ("--chat", args.chats), ("--credential", args.credential),
                            ("--api-base-url", args.api_base_url),
                            ("--delete-webhook", args.delete_webhook)) if v]
    if given:
        raise UsageError(f"--remove takes no {', '.join(given)}")
    removed = install.remove_telegram_profile(loading.resolve_config_dir(), args.remove)
    if args.json:
        print(json.dumps({"removed": removed.profile, "credential": removed.credential,
                          "audiences": list(removed.audiences)}, indent=2, sort_keys=True))
        return ExitCode.OK
    kept = "" if removed.credential is None else f" and credential {removed.credential}"
    routes = f" (routed from audience {', '.join(removed.audiences)})" if removed.audiences \
        else ""
    print(f"Removed Telegram profile {removed.profile}{kept}{routes}. Its token file is"
          " kept: delete it, and revoke the token with @BotFather, if no one uses it.")
    return ExitCode.OK


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
    p.set_defaults(handler=_cmd_setup_telegram)


def _add_telegram_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--token-file",
        type=_absolute_path_argument,
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
        help=f"Bot API server (default: {DEFAULT_API_BASE_URL})",
    )
    p.add_argument(
        "--find-chat",
        type=float,
        nargs="?",
        const=300.0,
        default=None,
        metavar="SECONDS",
        help="wait (default 300 s) for a message to the bot and print the chat and user ids"
        " it came from; installs nothing and confirms no update",
    )
    p.add_argument(
        "--delete-webhook",
        action="store_true",
        help="delete the bot's webhook if it has one (Telegram refuses to be polled while one"
        " is set; the updates waiting are kept); without it, setup asks on a terminal and"
        " stops (exit 75) elsewhere",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
