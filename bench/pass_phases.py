"""Phase timer for one `poll --once` child (bench/pass_profile.py --phases starts it): wraps
the pass's steps and prints, at exit, when each began and how long it took (ms since start)."""

from __future__ import annotations

import atexit
import functools
import sys
import time
from typing import Any

T0 = time.perf_counter()
_MARKS: list[tuple[str, float, float]] = []


def _wrap(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)
    if hasattr(original, "__code__") and original.__code__.co_flags & 0x80:  # coroutine
        @functools.wraps(original)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                _MARKS.append((label, start - T0, time.perf_counter() - start))
        setattr(owner, name, timed_async)
    else:
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                _MARKS.append((label, start - T0, time.perf_counter() - start))
        setattr(owner, name, timed)


def _report() -> None:
    end = time.perf_counter() - T0
    for label, start, took in _MARKS:
        print(f"phase {label:28s} at {start * 1000:8.1f} ms took {took * 1000:8.1f} ms",
              file=sys.stderr)
    print(f"phase {'exit':28s} at {end * 1000:8.1f} ms", file=sys.stderr)


def main() -> None:
    import bench.unpaced as u
    from adapters.cli.main import main as cli_main

    u.install()
    from channels.telegram import deliverer, poll

    _MARKS.append(("imports", 0.0, time.perf_counter() - T0))
    for name, label in (("poll", "poll (all profiles)"),):
        _wrap(poll, name, label)
    for name in ("_claim_or_wait", "_receive", "_process_inbox", "_answered", "_release",
                 "_cycle"):
        _wrap(poll.ChannelPoll, name, name)
    for name in ("finish", "_settle", "_run"):
        _wrap(deliverer.Deliverer, name, f"deliverer.{name}")
    from channels.decisions import workflows

    _wrap(workflows, "expire_overdue", "expire_overdue")
    atexit.register(_report)
    cli_main()


if __name__ == "__main__":
    main()
