"""Start-up check: `state`, `channels` and `adapters` must be piw-channels' own packages.

The design names the import packages `state`, `channels` and `adapters`. Installed into a
shared environment next to another project that uses one of those names (Django Channels is
`channels`), one overwrites the other and both break in odd ways. Each of our packages carries
a marker line; this module finds the packages without importing them (`find_spec` runs no
package code) and reads that line. It imports nothing of piw-channels itself.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

__all__ = ["check_packages"]


_NAMES = ("state", "channels", "adapters")
_INSTALL_HINT = ("install piw-channels on its own: uv tool install /path/to/piw-channels"
                " (or pipx install /path/to/piw-channels); see the README")


def _foreign_packages() -> list[tuple[str, str]]:
    """(name, where) of each package of ours that is missing or is someone else's."""
    found = []
    for name in _NAMES:
        spec = importlib.util.find_spec(name)
        origin = None if spec is None else spec.origin
        marker = f'PIW_CHANNELS_PACKAGE = "{name}"'
        try:
            ours = origin is not None and marker in Path(origin).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            ours = False
        if not ours:
            found.append((name, str(origin or "nowhere")))
    return found


def check_packages() -> None:
    """Exit 1 with one line when a foreign package shadows one of ours."""
    foreign = _foreign_packages()
    if foreign:
        name, where = foreign[0]
        print(f"Error: the Python package {name!r} at {where} is not piw-channels' own (another"
              f" project, such as Django Channels, uses that name in this environment);"
              f" {_INSTALL_HINT}", file=sys.stderr)
        sys.exit(1)
