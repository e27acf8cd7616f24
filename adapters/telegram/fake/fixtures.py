"""Fixture files of recorded Bot API bodies: loading, ``{{placeholder}}`` filling, demo templates.

Filling placeholders is how the demo builds a button press for a message it
just sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Final

from adapters.telegram.errors import FixtureError

__all__ = [
    "demo_fixture_names", "fixture_updates", "load_demo_fixture", "load_fixture",
    "load_named_fixture", "updates_of",
]


_PLACEHOLDER: Final = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")


def _fill(value: Any, values: Mapping[str, object]) -> Any:
    """Replace ``{{name}}`` placeholders in every string of a parsed JSON value.

    A string that is exactly one placeholder becomes the value itself (so a
    number stays a number); a placeholder inside a longer string is formatted in.
    """
    if isinstance(value, dict):
        return {key: _fill(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, values) for item in value]
    if not isinstance(value, str):
        return value
    whole = _PLACEHOLDER.fullmatch(value)
    if whole is not None and whole[1] in values:
        return values[whole[1]]
    return _PLACEHOLDER.sub(lambda m: str(values[m[1]]) if m[1] in values else m[0], value)


def _unfilled(value: Any) -> set[str]:
    """Names of placeholders still present anywhere in a parsed JSON value."""
    if isinstance(value, dict):
        return set().union(*(_unfilled(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(_unfilled(item) for item in value))
    if isinstance(value, str):
        return set(_PLACEHOLDER.findall(value))
    return set()


def _parse_fixture(text: str, values: Mapping[str, object] | None, origin: str) -> Any:
    """Parse fixture text and fill its placeholders; every placeholder must be filled."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FixtureError(f"Telegram fixture {origin} is not valid JSON: {exc}") from None
    filled = _fill(data, values or {})
    missing = _unfilled(filled)
    if missing:
        names = ", ".join(sorted(missing))
        raise FixtureError(f"Telegram fixture {origin} has unfilled placeholders: {names}")
    return filled


def load_fixture(path: str | Path, values: Mapping[str, object] | None = None) -> Any:
    """Load a recorded fixture file, filling ``{{placeholder}}`` strings from values."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise FixtureError(f"cannot read Telegram fixture {source}: {exc.strerror}") from None
    return _parse_fixture(text, values, str(source))


def _demo_folder() -> Traversable:
    return resources.files(__package__ or "adapters.telegram.fake") / "demo_fixtures"


def demo_fixture_names() -> list[str]:
    """File names of the fixture templates shipped for the demo."""
    return sorted(item.name for item in _demo_folder().iterdir() if item.name.endswith(".json"))


def load_demo_fixture(name: str, values: Mapping[str, object] | None = None) -> Any:
    """Load a packaged demo fixture template (``demo_fixtures/<name>``) and fill it."""
    if name not in demo_fixture_names():
        raise FixtureError(f"no demo fixture named {name!r}")
    text = (_demo_folder() / name).read_text(encoding="utf-8")
    return _parse_fixture(text, values, f"demo:{name}")


def load_named_fixture(
    name: str | Path, fixtures_dir: Path | None, values: Mapping[str, object]
) -> Any:
    """A fixture by path, by name in ``fixtures_dir``, or by demo template name."""
    plain = str(name)
    if isinstance(name, Path) or "/" in plain or "\\" in plain:
        return load_fixture(name, values)
    if fixtures_dir is not None and (fixtures_dir / plain).is_file():
        return load_fixture(fixtures_dir / plain, values)
    return load_demo_fixture(plain, values)


def updates_of(data: Any, origin: str) -> list[dict[str, Any]]:
    """The updates in a parsed fixture: a getUpdates response, one update, or a list."""
    if isinstance(data, dict) and isinstance(data.get("result"), list):
        items: Any = data["result"]
    elif isinstance(data, dict):
        items = [data]
    else:
        items = data
    if not isinstance(items, list) or not all(_is_update(item) for item in items):
        raise FixtureError(f"Telegram fixture {origin} does not hold updates")
    return [dict(item) for item in items]


def _is_update(item: object) -> bool:
    return isinstance(item, dict) and isinstance(item.get("update_id"), int)


def fixture_updates(
    path: str | Path, values: Mapping[str, object] | None = None
) -> list[dict[str, Any]]:
    """Load the updates recorded in a fixture file (see ``updates_of``)."""
    return updates_of(load_fixture(path, values), str(path))
