"""No silent skips in CI: under `CI=true` a skipped test fails the run unless it is skipped
because the suite runs as root (a file mode root ignores), and the run ends with the count of
skipped tests and why, so a missing Pi or bubblewrap can never pass as green."""

from __future__ import annotations

import os
from collections import Counter

import pytest

__all__ = ["ALLOWED_PREFIXES", "reason_of", "unallowed"]

# Reasons a test may skip in CI: root reads and writes whatever the mode says.
ALLOWED_PREFIXES = ("root ", "only root ")


def reason_of(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def unallowed(reasons: list[str]) -> list[str]:
    """The skip reasons CI does not accept."""
    return [r for r in reasons if not r.startswith(ALLOWED_PREFIXES)]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CI") != "true" or hasattr(session.config, "workerinput"):
        return  # judged once, by the controller, which sees every worker's reports
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = [r for r in reporter.stats.get("skipped", []) if isinstance(r, pytest.TestReport)]
    reasons = [reason_of(r) for r in skipped]
    reporter.ensure_newline()  # after the progress dots, on a line of its own
    counts = ", ".join(f"{n} x {why}" for why, n in Counter(reasons).items())
    reporter.write_line(f"CI: {len(skipped)} skipped" + (f" ({counts})" if counts else ""))
    bad = unallowed(reasons)
    if bad:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter.write_line(f"CI: a test may skip only as root; {len(bad)} skipped for: "
                            + "; ".join(sorted(set(bad))), red=True)
