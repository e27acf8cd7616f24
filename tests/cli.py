"""Run `piw-channels` as a test needs it: in this process, or as a real child process.

In this process (the default) the real `adapters.cli.main.run` parses the words and runs the
command with this HOME, the given environment and stdin, and its stdout, stderr and log lines
(what a child prints through logging's last-resort handler) captured: the same output and exit
code as a child, without starting an interpreter and importing the program again (most of the
suite's time once went there). Everything the run changes in this process (environment,
signal handlers, the clock, an injected bug, the pacer, the busy timeout) is put back.

`process=True` starts a real child where the process itself is what is tested: a signal, a
kill, a lock held by another process, its umask or session, a stdin that is not ours.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tests import token_guard
from tests.conftest import child_env
from tests.injected_bugs import BUG_ENV, CLI_WITH_BUG, injected
from tests.paths import ROOT
from tests.shifted_clock import CLI_SHIFTED, CLOCK_OFFSET_ENV, ShiftedClock

__all__ = ["CLI", "MINUTE", "Ran", "piw"]

CLI = [sys.executable, "-c", "from adapters.cli.main import main; main()"]
MINUTE = 60_000
Ran = subprocess.CompletedProcess  # what both ways return: args, returncode, stdout, stderr
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE)


def piw(home: Path, *args: str, input: str | None = None, env: Mapping[str, str] | None = None,
        minutes: float = 0, offset_ms: int = 0, bug: str | None = None, unpaced: bool = False,
        busy_timeout_ms: int | None = None, umask: int | None = None, process: bool = False,
        timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """`piw-channels ARGS` with this HOME (its clock `minutes` + `offset_ms` ahead, `bug` put in
    as `tests.injected_bugs` does, Telegram's message limits lifted when `unpaced`); in this
    process unless `process`. `busy_timeout_ms` shortens the wait on a locked database (only in
    this process: a child waits the product's own timeout); `umask` is the child's."""
    shift = int(minutes * MINUTE) + offset_ms
    if process or umask is not None:
        assert busy_timeout_ms is None, "a child waits the product's own busy timeout"
        return _child(home, list(args), input, env, shift, bug, unpaced, umask, timeout)
    return _in_process(home, list(args), input, env, shift, bug, unpaced, busy_timeout_ms)


def _child(home: Path, args: list[str], input: str | None, env: Mapping[str, str] | None,
           shift: int, bug: str | None, unpaced: bool, umask: int | None,
           timeout: float) -> subprocess.CompletedProcess[str]:
    environment = {**child_env(home), **(env or {})}
    launcher = CLI
    if shift:
        environment[CLOCK_OFFSET_ENV] = str(shift)
        launcher = CLI_SHIFTED
    if bug is not None:
        environment[BUG_ENV] = bug
        launcher = CLI_WITH_BUG
    if unpaced:
        assert launcher is CLI, "an unpaced child has neither a shifted clock nor a bug"
        from tests.unpaced import CLI_UNPACED
        launcher = CLI_UNPACED
    return subprocess.run([*launcher, *args], cwd=ROOT, env=environment, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=None if umask is None else lambda: os.umask(umask))


def _in_process(home: Path, args: list[str], input: str | None, env: Mapping[str, str] | None,
                shift: int, bug: str | None, unpaced: bool,
                busy_timeout_ms: int | None) -> subprocess.CompletedProcess[str]:
    from adapters.cli import main as cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_environment({**child_env(home), **(env or {})}))
        stack.enter_context(_signals_kept())
        stack.enter_context(_last_resort(err))
        stack.enter_context(_cwd(ROOT))
        if shift:
            stack.enter_context(_attribute("state.database", "SystemClock",
                                           lambda: ShiftedClock(shift)))
        if busy_timeout_ms is not None:
            stack.enter_context(_attribute("state.database", "_BUSY_TIMEOUT_MS",
                                           busy_timeout_ms))
        if unpaced:
            from tests.unpaced import unpaced_pacer
            stack.enter_context(_attribute("channels.telegram.pacing", "new_pacer",
                                           unpaced_pacer))
        if bug is not None:
            stack.enter_context(injected(bug))
        stack.enter_context(_stdin(io.StringIO(input or "")))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            code = cli.run(args)
        except SystemExit as exc:  # argparse's --help and usage errors
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    done = subprocess.CompletedProcess(["piw-channels", *args], code, out.getvalue(),
                                       err.getvalue())
    token_guard.scan_output(done.args, done.stdout, done.stderr)
    return done


@contextlib.contextmanager
def _environment(environment: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environment)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """A command may set its own handlers (SIGTERM unwinds `ask --wait`): put ours back."""
    saved = {number: signal.getsignal(number) for number in _SIGNALS}
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def _last_resort(err: io.StringIO) -> Iterator[None]:
    """What a child prints of its log records: WARNING and above, the message alone, on stderr
    (logging's last-resort handler; here the suite's token recorder is a handler already)."""
    handler = logging.StreamHandler(err)
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    saved = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def _stdin(stream: io.StringIO) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = stream
    try:
        yield
    finally:
        sys.stdin = saved


@contextlib.contextmanager
def _attribute(module: str, name: str, value: Any) -> Iterator[None]:
    import importlib

    owner = importlib.import_module(module)
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)
