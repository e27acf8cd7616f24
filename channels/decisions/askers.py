"""Who asked a decision: the agent (`pi`, `claude-code`, `codex`, `mcp:<client>`, `workflow`)
and the host it runs on, as the inbox lists them.

The request's subject names them (`agent`, `host`) when the asker says so. A subject without
them (every decision stored before they existed) is read defensively: a gated Pi tool call's
run id starts with `gate-`, so its agent is `pi`, anything else is a `workflow`; the host is
the presentation's context line's `Host`, else `-`. Pure; a loaded decision says its own
(`records.StoredDecision.asker`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from channels.decisions.context import clean, split_context

__all__ = ["Asker", "asker_of"]


_UNKNOWN_HOST: Final = "-"
_GATE_RUN: Final = "gate-"


@dataclass(frozen=True, slots=True)
class Asker:
    """The agent that asked and its host (`-` when not known)."""

    agent: str = "workflow"
    host: str = _UNKNOWN_HOST

    def phrase(self) -> str:
        """`pi`, or `pi on laptop` when the host is known."""
        return self.agent if self.host == _UNKNOWN_HOST else f"{self.agent} on {self.host}"


def _named(subject: Mapping[str, Any], key: str) -> str | None:
    value = subject.get(key)
    return clean(value) if isinstance(value, str) else None


def asker_of(subject: Any, run_id: str, presentation: Any = None) -> Asker:
    """The agent and host of a decision from its stored subject, run id and presentation."""
    named = subject if isinstance(subject, Mapping) else {}
    agent = _named(named, "agent") or ("pi" if run_id.startswith(_GATE_RUN) else "workflow")
    host = _named(named, "host")
    if host is None and isinstance(presentation, Mapping) and \
            isinstance(presentation.get("blocks"), list):
        _, context = split_context(presentation["blocks"])
        host = None if context is None or context.host is None else clean(context.host)
    return Asker(agent, host or _UNKNOWN_HOST)
