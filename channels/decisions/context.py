"""Who asked: the project, the Pi session (or `shell`) and the host of a decision.

The context travels inside the presentation, so that its digest binds it: it is the last block,
a `fields` block whose labels are all context labels, in this order. Other Pi Workflows
components that know nothing of it show it as ordinary fields. Pure functions, except
`automatic`, which reads the working directory and the host name.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from channels.decisions.presentation import MAX_BLOCKS, Block, FieldItem, FieldsBlock
from channels.text import is_blank

__all__ = [
    "MAX_VALUE_CODE_UNITS", "Context", "automatic", "clean", "split_context", "with_context",
]


_LABELS = ("Project", "Session", "Host")

_SHELL_SESSION = "shell"

MAX_VALUE_CODE_UNITS = 80

_CONTROL_RE = re.compile("[\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class Context:
    """The three facts of a context line; None leaves one out."""

    project: str | None = None
    session: str | None = None
    host: str | None = None

    def values(self) -> list[tuple[str, str]]:
        """(label, value) of the facts present, in display order."""
        found = zip(_LABELS, (self.project, self.session, self.host), strict=True)
        return [(label, value) for label, value in found if value is not None]

    def line(self) -> str:
        """The one line a card shows: `web-app · deploy-review · laptop`."""
        return " · ".join(value for _, value in self.values())


def clean(value: str) -> str | None:
    """A value fit for a fields block (one line, no control character, short), or None."""
    value = _CONTROL_RE.sub(" ", value).strip()
    if is_blank(value):
        return None
    return value if len(value) <= MAX_VALUE_CODE_UNITS else value[: MAX_VALUE_CODE_UNITS - 1] + "…"


def _block(context: Context) -> FieldsBlock | None:
    """The presentation block that carries a context (None when it has no fact)."""
    items: list[FieldItem] = [{"label": label, "value": value}
                              for label, value in context.values()]
    if not items:
        return None
    return {"kind": "fields", "items": items}


def with_context(presentation: Mapping[str, Any], context: Context) -> dict[str, Any]:
    """The presentation with the context block appended (replacing one already there); left
    out when the presentation has no room for another block."""
    blocks, _ = split_context(presentation["blocks"])
    extra = _block(context) if len(blocks) < MAX_BLOCKS else None  # full: no room for it
    return {**presentation, "blocks": [*blocks, *([extra] if extra is not None else [])]}


def split_context(blocks: Sequence[Block]) -> tuple[list[Block], Context | None]:
    """The blocks before the context block, and the context (None when there is none)."""
    if not blocks:
        return [], None
    last: Any = blocks[-1]  # may be a caller's document not yet normalized: look carefully
    items = last.get("items") if isinstance(last, Mapping) else None
    if not isinstance(items, list) or last.get("kind") != "fields" or \
            not all(isinstance(item, Mapping) for item in items):
        return list(blocks), None
    labels = [item.get("label") for item in items]
    if labels != [label for label in _LABELS if label in labels]:
        return list(blocks), None  # other labels, a repeat or another order: ordinary fields
    facts = {str(item["label"]): str(item.get("value")) for item in items}
    return list(blocks[:-1]), Context(facts.get("Project"), facts.get("Session"),
                                      facts.get("Host"))


def automatic(cwd: Path, session: str = _SHELL_SESSION) -> Context:
    """The context of a decision asked from `cwd`: the repository's (or folder's) name, the
    session, and this host's short name."""
    return Context(clean(_project_name(cwd)), clean(session),
                   clean(socket.gethostname().split(".")[0]))


def _project_name(cwd: Path) -> str:
    """The name of the git work tree holding `cwd` (no git process is run), else the folder's."""
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder.name or str(folder)
    return cwd.name or str(cwd)
