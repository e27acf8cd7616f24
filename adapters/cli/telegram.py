"""CLI commands for the Telegram channel: poll (the cron job) and resend."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import signal
import sys
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from adapters.cli.alerts import alert_lines, refused_settlement
from adapters.cli.arguments import DECISION_ID_HELP
from adapters.cli.errors import Terminated, UsageError
from adapters.telegram.client import TelegramClient, prepare_tls_context
from channels.config.errors import SETUP_HINT
from channels.config.loading import load_config, resolve_config_dir
from channels.config.model import ChannelsConfig, TelegramProfile
from channels.decisions import workflows
from channels.errors import ChannelsError
from channels.telegram import config_failures, poll, reservations
from channels.telegram.ended import PassStatus
from channels.telegram.failures import ExpiryFailures, expiry_failure
from channels.telegram.identity import Channel
from channels.telegram.transport import BotApi
from state.database import Database
from state.errors import StateError
from state.exit_codes import ExitCode
from state.files import default_path
from state.resources import Actor, ActorType

__all__ = ["bot_api", "register"]


_T = TypeVar("_T")


@asynccontextmanager
async def bot_api(profile: TelegramProfile, token: str) -> AsyncIterator[BotApi]:
    """The real Bot API client for one profile (the token stays inside it); a 429 comes back
    at once, for the poll cycle's pacer to hold."""
    async with TelegramClient(token, api_base_url=profile.api_base_url,
                              retry_rate_limited=False) as client:
        yield client


async def _until_terminated(work: Coroutine[Any, Any, _T]) -> _T:
    """Run `work`; SIGTERM cancels it as Ctrl-C does, so the pass unwinds and releases its
    channel leases at once (a killed poller's lease would hold the channel for 60 s), and the
    command then exits 143."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        return await task
    except asyncio.CancelledError:
        if terminated:
            raise Terminated(signal.SIGTERM) from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _config_or_hint(*, check_tokens: bool = True) -> ChannelsConfig | None:
    config = load_config(check_tokens=check_tokens)
    if config is None or not config.profiles:
        print(f"Error: no Telegram channel is configured; run: {SETUP_HINT}", file=sys.stderr)
        return None
    return config


# Pass statuses that come without an alert report, and their exit codes: a conflict, a
# rejected token, a profile left unpolled because another profile polls its bot.
_UNALERTED: Final = {PassStatus.CONFLICT: ExitCode.TEMPORARY,
                     PassStatus.UNAUTHORIZED: ExitCode.CONFIG,
                     PassStatus.SHARED_BOT: ExitCode.CONFIG}


def _run_poll(config: ChannelsConfig, options: poll.PollOptions, verbose: bool,
             as_json: bool = False) -> int:
    """One poll pass; print what needs a person (one line each) and exit with the highest
    code of what is still wrong (README table); `as_json` adds what each channel did, and
    those lines, as one JSON document on stdout."""
    expiry: ExpiryFailures = {}
    if any(urlsplit(p.api_base_url).scheme == "https" for p in config.profiles.values()):
        prepare_tls_context()  # built while the pass opens its database and claims its lease
    with Database.open_writer() as db:
        reports = asyncio.run(_until_terminated(poll.poll(db, config, bot_api, options,
                                                            expiry_failures=expiry)))
    code: int = ExitCode.OK
    config_dir = str(resolve_config_dir())
    said: list[str] = []
    printed: set[str] = set()

    def say(line: str) -> None:  # one line for a person: stderr, and the JSON's lines
        if line not in printed:  # a decision's expiry comes from every profile: say it once
            print(line, file=sys.stderr)
            printed.add(line)
        said.append(line)

    # A decision whose deadline failed is a condition of every pass's alerts (said when it
    # starts, hourly, and when it clears); said here only when no pass could tell it.
    told = {a.facts.get("decisionId") for r in reports if r.alerts is not None
            for a in [*r.alerts.reported, *r.alerts.ongoing] if a.kind == "expiry"}
    for decision_id, failed in expiry.items():
        if decision_id not in told:
            say(f"Error: {failed.line}")
            code = max(code, failed.exit_code)
    passes: list[dict[str, Any]] = []
    for report in reports:
        said = []
        for problem in report.problems:  # a row or an effect that failed alone
            say(f"Error: {report.channel}: {problem.line}")
            code = max(code, problem.exit_code)
        if report.alerts is not None:
            lines = alert_lines(report.alerts, config_dir, verbose=verbose,
                                token_file=_token_file(config, report.alerts.profile))
            for line in lines:
                say(line)
            code = max(code, report.alerts.exit_code)
        elif report.status in _UNALERTED:  # not polled, lease lost, or an alerts bug
            say(f"Error: {report.channel}: {report.message}")
            code = max(code, _UNALERTED[report.status])
        elif report.status == PassStatus.FAILED:  # its claim or release failed: no alert report
            say(f"Error: {report.channel}: {report.message}")
            code = max(code, report.exit_code)
        for refusal in report.refused:  # a settlement refused for good: said once
            say(f"Error: {report.channel}: {refused_settlement(refusal)}")
            code = max(code, ExitCode.CONFIG)
        if report.status == PassStatus.BAD_BATCH:  # a getUpdates answer that cannot be stored
            say(f"Error: {report.channel}: {report.message}")
            code = max(code, ExitCode.TEMPORARY)
        for bug in (e["internal"] for e in report.errors
                    if str(e.get("internal", "")).startswith("alerts:")):
            say(f"Error: {report.channel}: {bug}")  # a bug: report it
            code = max(code, ExitCode.INTERNAL)
        if verbose:
            detail = report.message or (
                f"{report.updates} updates, {report.processed} processed, "
                f"{report.effects} effects, {len(report.errors)} provider errors")
            print(f"{report.channel}: {report.status}: {detail}", file=sys.stderr)
        passes.append({"channel": report.channel, "status": report.status,
                       "message": report.message, "updates": report.updates,
                       "processed": report.processed, "effects": report.effects,
                       "provider_errors": len(report.errors), "lines": said})
    if as_json:
        print(json.dumps({"exit_code": code, "channels": passes,
                          "expiry_failures": [f.line for f in expiry.values()]},
                         indent=2, sort_keys=True, ensure_ascii=False))
    return code


def _token_file(config: ChannelsConfig, profile: str) -> str | None:
    """Where the profile's token is read from (a path, never the token)."""
    found = config.profiles.get(profile)
    credential = None if found is None else config.credentials.get(found.credential)
    return None if credential is None else str(credential.token_file)


def _cmd_poll(args: argparse.Namespace) -> int:
    """The cron job: poll every configured profile once, or for a window of seconds."""
    try:
        config = _config_or_hint(check_tokens=False)  # each token file fails its profile alone
    except ChannelsError as exc:  # printed on every pass; noted for its Recovered: line
        _note_config_failure(exc)
        raise
    if config is None:
        _apply_deadlines()  # a Pi-only user's --timeout still fires
        return ExitCode.CONFIG
    options = poll.PollOptions(window_seconds=args.for_seconds or 0.0, profile=args.profile,
                                 alert_after_ms=int(args.alert_after * 60_000))
    return _run_poll(config, options, args.verbose, args.json)


def _note_config_failure(exc: ChannelsError) -> None:
    """Note the broken configuration in the database (when there is one): the first pass
    that reads it again says so. Best effort: the configuration's own line comes first."""
    if not default_path().exists():
        return
    with contextlib.suppress(StateError), Database.open_writer() as db:
        actor = Actor(ActorType.CONTROL, workflows.new_owner_id(db, "poll"))
        db.write(lambda c: config_failures.note(c, str(exc), exc.exit_code, actor,
                                                db.clock.now_ms()))


def _apply_deadlines() -> None:
    """Apply due deadlines without any Telegram profile (an existing database only)."""
    if not default_path().exists():
        return
    with Database.open_writer() as db:
        report = workflows.expire_overdue(db, workflows.new_owner_id(db, "poll"))
    for decision_id, exc in report.failed:
        print(f"Error: {expiry_failure(decision_id, exc).line}", file=sys.stderr)


def _resend_profile(config: ChannelsConfig, name: str | None) -> str:
    """--profile, or the one profile there is."""
    if name is not None:
        return name
    if len(config.profiles) == 1:
        return next(iter(config.profiles))
    raise UsageError("give --profile NAME (configured: "
                     f"{', '.join(sorted(config.profiles))})")


def _cmd_resend(args: argparse.Namespace) -> int:
    """Explicitly resend an ambiguous or failed delivery (or, with --all-failed, every failed
    one of the profile), then poll that profile once."""
    if (args.decision_id is None) == (not args.all_failed):
        raise UsageError("give a DECISION_ID or --all-failed (not both)")
    config = _config_or_hint()
    if config is None:
        return ExitCode.CONFIG
    args.profile = _resend_profile(config, args.profile)
    channel = Channel(config.profile(args.profile), config)
    with Database.open_writer() as db:
        if args.all_failed:
            chosen = db.read(lambda c: reservations.failed_deliveries(c, channel))
        else:
            chosen = [workflows.resolve_id(db, args.decision_id)]
        actor = Actor(ActorType.CONTROL, workflows.new_owner_id(db, "resend"))
        for decision_id in chosen:
            def reserve(c: Any, decision_id: str = decision_id) -> str:
                return reservations.reserve_resend(c, channel, decision_id, actor,
                                                   db.clock.now_ms())
            db.write(reserve)
            if not args.json:
                print(f"resend of {decision_id} on {channel.name} reserved")
    if not chosen:
        if args.json:
            print(json.dumps({"channel": channel.name, "reserved": [], "poll": None}))
        else:
            print(f"no failed delivery on {channel.name}")
        return ExitCode.OK
    if not args.json:
        return _run_poll(config, poll.PollOptions(profile=args.profile), args.verbose)
    with contextlib.redirect_stdout(io.StringIO()) as polled:
        code = _run_poll(config, poll.PollOptions(profile=args.profile), args.verbose, True)
    print(json.dumps({"channel": channel.name, "reserved": chosen,
                      "poll": json.loads(polled.getvalue())}, indent=2, sort_keys=True,
                     ensure_ascii=False))
    return code


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--for takes seconds between 1 and 3600, not {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError("--for takes seconds between 1 and 3600")
    return value


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--alert-after takes minutes (0 or more), not {text!r}"
                                         ) from None
    if not 0 <= value <= 10_080:
        raise argparse.ArgumentTypeError("--alert-after takes minutes between 0 and 10080")
    return value


def register(sub: Any) -> None:
    """Add poll and resend to the top-level parser."""
    p = sub.add_parser("poll", help="the cron job: deliver decisions and collect answers")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true",
                      help="one pass with a short getUpdates (the default)")
    mode.add_argument("--for", dest="for_seconds", type=_seconds, metavar="SECONDS",
                      help="keep long-polling for this many seconds (cron: --for 65)")
    p.add_argument("--profile", help="only this Telegram profile")
    p.add_argument("--alert-after", type=_minutes, default=10.0, metavar="MINUTES",
                   help="report an unreachable Bot API after this many minutes without a"
                   " successful getUpdates (default 10; 0 = at once)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="say what each channel did, and repeat conditions already reported")
    p.add_argument("--json", action="store_true", help="what each channel did, as JSON on"
                   " stdout (the lines that need a person stay on stderr too)")
    p.set_defaults(handler=_cmd_poll)

    p = sub.add_parser("resend", help="explicitly resend an ambiguous or failed delivery")
    p.add_argument("decision_id", nargs="?",
                   help=DECISION_ID_HELP)
    p.add_argument("--all-failed", action="store_true",
                   help="resend every failed or refused delivery of the profile (after fixing"
                   " the config; ambiguous ones are left for you to check)")
    p.add_argument("--profile", help="the Telegram profile to resend on (default: the only"
                   " one, when there is one)")
    p.add_argument("-v", "--verbose", action="store_true", help="say what the poll did")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_resend)
