"""What the benches share: an alternating raw-commit baseline, a loopback TLS front for the fake
Bot API (so cold starts pay for https as against real Telegram; in its own process, so its
relaying is not counted as ours), and fdatasync counting.

Honesty rules the benches follow:
- the raw durable commit is timed in chunks alternating with the work, on a connection with the
  same pragmas as `Database`, whose WAL has already wrapped (a fresh WAL appends, a wrapped one
  overwrites: 1.4-1.7x dearer), so both see the same machine load and the same WAL phase;
- fdatasync is counted by `strace -f -c` attached to the process for the measured region (the
  kernel's view; every commit in WAL mode with synchronous=FULL is one, checkpoints add more),
  and commits by an apsw commit hook; figures name their source.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import apsw

from state.database import COMMON_PRAGMAS

T = TypeVar("T")
TOKEN = "7123456789:AAF-benchTokenNotASecret_0123456789ab"
USER = 5123456789
_UNPACED = False  # see unpaced()


class RawCommits:
    """One-row durable INSERT commits on a WAL file with `Database`'s pragmas, warmed past the
    first checkpoint so the WAL is in its steady (wrapped) phase before any chunk is timed."""

    def __init__(self, path: Path, warm: int = 3000) -> None:
        self.conn = apsw.Connection(str(path))
        self.conn.set_busy_timeout(5000)
        for name, value in COMMON_PRAGMAS:
            self.conn.execute(f"PRAGMA {name} = {value}")
        self.conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
        self.seconds = 0.0
        self.count = 0
        self._commit(warm)

    def _commit(self, n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            self.conn.execute("INSERT INTO t (v) VALUES (?)", (os.urandom(32),))
        return time.perf_counter() - start

    def chunk(self, n: int) -> None:
        """Time `n` commits (call between chunks of the work)."""
        self.seconds += self._commit(n)
        self.count += n

    @property
    def ms(self) -> float:
        return self.seconds * 1000 / max(1, self.count)

    def close(self) -> None:
        self.conn.close()


def count_commits(conn: apsw.Connection) -> list[int]:
    """Install a commit hook; the returned one-item list counts commits that wrote rows (an
    empty write transaction writes no WAL frame: no fdatasync)."""
    counter = [0]
    seen = [conn.total_changes()]

    def hook() -> bool:
        if conn.total_changes() != seen[0]:
            counter[0] += 1
            seen[0] = conn.total_changes()
        return False  # never veto

    conn.set_commit_hook(hook)
    return counter


@contextlib.contextmanager
def fdatasync_counter(pid: int | None = None) -> Iterator[dict[str, int]]:
    """Count fsync/fdatasync calls of `pid` (default: this process, all threads) with strace;
    the dict is filled on exit ({} when strace is missing or may not attach)."""
    counts: dict[str, int] = {}
    strace = shutil.which("strace")
    if strace is None:
        yield counts
        return
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        proc = subprocess.Popen(
            [strace, "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", out.name,
             "-p", str(pid or os.getpid())], stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        time.sleep(0.5)  # strace reports "Process N attached" once it is
        try:
            yield counts
        finally:
            time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            proc.wait(10)
            for line in Path(out.name).read_text().splitlines():
                m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)$",
                             line)
                if m:
                    counts[m.group(2)] = int(m.group(1))


# -- https ---------------------------------------------------------------------------------------


def self_signed(directory: Path) -> tuple[Path, Path, Path]:
    """(certificate, key, CA bundle) for 127.0.0.1; the bundle is certifi's roots plus this
    certificate, so a client loads as many roots as it would against api.telegram.org."""
    import certifi

    cert, key, bundle = directory / "fake.crt", directory / "fake.key", directory / "ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    bundle.write_text(Path(certifi.where()).read_text() + cert.read_text())
    return cert, key, bundle


class TlsFront:
    """A loopback TLS terminator in front of the plain-http fake, https://127.0.0.1:<port>, in
    a process of its own: the server side of TLS is Telegram's work, so it must not share the
    measured process's interpreter (its relay threads would take the GIL from the pass)."""

    def __init__(self, upstream_url: str, cert: Path, key: Path) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.tls_front", upstream_url, str(cert), str(key)],
            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("https://"):
            self._proc.kill()
            raise RuntimeError(f"the TLS front did not start: {line!r}")
        self.base_url = line

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(10)


# -- honest figures ------------------------------------------------------------------------------


def abba(names: Sequence[T], round_: int) -> list[T]:
    """The sides' order in one round: as given in even rounds, reversed in odd ones, so over
    two rounds each side runs first and last equally often (A B, B A: ABBA)."""
    return list(names) if round_ % 2 == 0 else list(reversed(names))


def spread(values: list[float], unit: str = "ms", digits: int = 3) -> str:
    """A median with its spread: `median (min-max, IQR q1-q3, n)`."""
    ordered = sorted(values)
    if not ordered:
        return "no samples"
    q1, med, q3 = (statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1
                   else [ordered[0]] * 3)
    f = f"{{:.{digits}f}}"
    return (f"{f.format(med)} {unit} (min-max {f.format(ordered[0])}-{f.format(ordered[-1])},"
            f" IQR {f.format(q1)}-{f.format(q3)}, n={len(ordered)})")


def machine_load() -> str:
    """The load averages, to read a figure against (the machine is shared)."""
    one, five, fifteen = os.getloadavg()
    return (f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min) on"
            f" {os.cpu_count()} cores")


def unpaced() -> str:
    """Lift Telegram's message limits in this process and, through the test launcher
    (bench/unpaced.py), in the children `piw.poll_command()` starts (holds still apply): a
    bench measures the worker's own cost of a 100-press batch in one chat; paced, that batch
    would take 200 s (1 message a second), all of it waiting."""
    from bench import unpaced as launcher

    global _UNPACED
    launcher.install()
    _UNPACED = True
    return ("Telegram's message limits lifted (bench/unpaced.py): the figures are the worker's"
            " own cost; paced, each message to one chat waits up to 1 s")


def is_unpaced() -> bool:
    """Whether `unpaced()` ran: the CLI's children are then started through its launcher."""
    return _UNPACED


def presses_per_chat(presses: int, chats: int) -> list[int]:
    """How `presses` spread over `chats` round robin (press k to chat k mod chats): the
    first chats take one more when they do not divide evenly."""
    if presses <= 0 or chats <= 0:
        raise ValueError(f"{presses} presses over {chats} chats")
    return [presses // chats + (1 if k < presses % chats else 0) for k in range(chats)]


@dataclass(frozen=True, slots=True)
class PacedFigure:
    """What one paced measurement settled: `presses` spread over `chats`, by cron passes
    with Telegram's limits on, each pass's wall seconds (start-up included)."""

    presses: int
    chats: int
    passes: tuple[float, ...]

    @property
    def label(self) -> str:
        return "1 chat" if self.chats == 1 else f"{self.chats} chats"

    def what(self) -> str:
        """The presses, chats and passes it measured, in words."""
        counts = presses_per_chat(self.presses, self.chats)
        each = (str(counts[0]) if min(counts) == max(counts)
                else f"{min(counts)}-{max(counts)}")
        where = ("in 1 chat" if self.chats == 1
                 else f"over {self.chats} chats, {each} each")
        total = f"{sum(self.passes):.1f} s"
        if len(self.passes) == 1:
            return f"{self.presses} presses {where}, 1 pass: {total}"
        each_pass = "+".join(f"{seconds:.1f}" for seconds in self.passes)
        return (f"{self.presses} presses {where}, {len(self.passes)} passes back to back:"
                f" {each_pass} = {total}")


def side_by_side(unpaced_ms: float, paced: Sequence[PacedFigure]) -> list[str]:
    """The worker's own cost per press next to the paced figures a user meets (one chat, five
    chats): each is what the user waits, the passes' whole wall time (start-up included) over
    the presses."""
    lines = [f"  per press, unpaced (worker's own cost): {unpaced_ms:9.1f} ms"]
    for figure in paced:
        if figure.presses <= 0 or not figure.passes:
            raise ValueError(f"paced figure {figure.label!r} has no presses or no passes")
        each = sum(figure.passes) * 1000 / figure.presses
        ratio = f"{each / unpaced_ms:.1f}x" if unpaced_ms > 0 else "n/a"
        lines.append(f"  per press, paced, {figure.label + ':':9s}{each:22.1f} ms ({ratio}"
                     f" unpaced; {figure.what()} with start-up)")
    return lines
