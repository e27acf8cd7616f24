"""What the guard protects: the state database and its companions, the configuration files,
the token files credentials.json names, Pi's settings and extensions (which load the gate
itself), the settings of the other agents whose hooks call the gate (Claude Code's and Codex's,
in the home directory and in the project and each directory above it: an agent that edited
them could take its hook away), the directories that hold them, and the processes of Pi and
its bridge."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Final

from channels.config.files import file_identity
from channels.gate.paths import is_within, resolve
from channels.gate.verdict import Judgement, block
from state.files import default_path

__all__ = ["AGENT_SETTINGS", "AGENT_SETTINGS_FILES", "CONFIG", "DATABASE", "PI_SETTINGS", "TOKEN",
           "Place", "Protected", "file_block"]


_CONFIG_FILES: Final = ("channels.json", "credentials.json", "gate.json")
_DATABASE_SUFFIXES: Final = ("", "-wal", "-shm", "-journal")
DATABASE: Final = "state database"
CONFIG: Final = "config file"
TOKEN: Final = "token file"
PI_SETTINGS: Final = "pi settings"
AGENT_SETTINGS: Final = "agent settings"
_WHAT: Final = {DATABASE: "the decision state database", CONFIG: "the piw-channels configuration",
                TOKEN: "a bot token file", PI_SETTINGS: "Pi's settings or extensions",
                AGENT_SETTINGS: "an agent's settings (where its hook to the gate is set)"}
# Where Claude Code and Codex read their hooks, under home and in a project's directories.
AGENT_SETTINGS_FILES: Final = (".claude/settings.json", ".claude/settings.local.json",
                               ".codex/config.toml", ".codex/hooks.json")

Place = tuple[Path, str]  # a path and the kind of thing it is


@dataclass(frozen=True)
class Protected:
    """What the guard protects, computed once per session."""

    database: Path  # ~/.pi/agent/workflows/state.sqlite
    config_dir: Path
    token_files: tuple[Path, ...]
    pids: tuple[int, ...] = ()  # the bridge and its Pi (their numbers, for `kill N`)
    project: Path | None = None  # the call's working directory: its agents' settings too

    @classmethod
    def discover(cls, home: Path, config_dir: Path, project: Path | None = None) -> Protected:
        """The database under `home`, the config dir, the token files credentials.json names
        (read leniently: a broken file still protects the paths it mentions), this process
        and its parent (in the bridge: the bridge and its Pi), and the agents' settings in
        `project` and above."""
        return cls(default_path(home), config_dir, _token_files(config_dir),
                   (os.getpid(), os.getppid()), project)

    @property
    def pi_agent_dir(self) -> Path:
        return self.database.parent.parent  # ~/.pi/agent

    def files(self) -> tuple[Place, ...]:
        """Every protected file with its kind, as named and as resolved."""
        return self._files

    def directories(self) -> tuple[Place, ...]:
        """Directories whose whole content is protected (listing them stays allowed)."""
        return self._directories

    @cached_property
    def _files(self) -> tuple[Place, ...]:
        found = [(Path(f"{self.database}{s}"), DATABASE) for s in _DATABASE_SUFFIXES]
        found += [(self.config_dir / name, CONFIG) for name in _CONFIG_FILES]
        found += [(path, TOKEN) for path in self.token_files]
        found += [(self.pi_agent_dir / "settings.json", PI_SETTINGS)]
        found += [(d / name, AGENT_SETTINGS) for d in self._agent_directories()
                  for name in AGENT_SETTINGS_FILES]
        return _with_resolved(found)

    def _agent_directories(self) -> list[Path]:
        """Home, and the project with every directory above it (Claude Code reads a
        project's `.claude` where it was started, which may be above the call's cwd)."""
        home = self.pi_agent_dir.parent.parent
        found = [home]
        if self.project is not None:
            project = Path(os.path.abspath(self.project))
            found += [project, *project.parents]
        return list(dict.fromkeys(found))

    @cached_property
    def _directories(self) -> tuple[Place, ...]:
        home = self.pi_agent_dir.parent.parent
        found = [(self.database.parent, DATABASE), (self.config_dir, CONFIG),
                 (self.pi_agent_dir / "extensions", PI_SETTINGS)]
        # A token file's own directory, unless it is home or above (too wide to refuse).
        found += [(path.parent, TOKEN) for path in self.token_files
                  if not is_within(home, path.parent)]
        return _with_resolved(found)


def _with_resolved(places: list[Place]) -> tuple[Place, ...]:
    both = places + [(resolve(str(p), cwd=p.parent, home=p.parent), k) for p, k in places]
    return tuple(dict.fromkeys(both))


# credentials.json's token files, by file: (its file_identity when read, the paths). The Pi
# bridge discovers the protected set for every tool call; the file is reread when it changed.
_READ: dict[Path, tuple[tuple[int, ...], tuple[Path, ...]]] = {}


def _token_files(config_dir: Path) -> tuple[Path, ...]:
    path = config_dir / "credentials.json"
    identity = file_identity(path)
    cached = _READ.get(path)
    if identity is not None and cached is not None and cached[0] == identity:
        return cached[1]
    found = _read_token_files(path)
    if identity is not None and identity == file_identity(path):  # unchanged while read
        _READ[path] = (identity, found)
    return found


def _read_token_files(path: Path) -> tuple[Path, ...]:
    try:
        document = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return ()
    table = document.get("telegram") if isinstance(document, dict) else None
    entries = table.values() if isinstance(table, dict) else ()
    return tuple(Path(e["tokenFile"]) for e in entries
                 if isinstance(e, dict) and isinstance(e.get("tokenFile"), str)
                 and os.path.isabs(e["tokenFile"]))


def file_block(kind: str, shown: str) -> Judgement:
    """The judgement for a call that touches a protected file or directory."""
    return block(f"Blocked: this call touches {_WHAT[kind]} ({shown}); the agent may not read "
                 "or change decisions, channel state, configuration, tokens or Pi's settings.",
                 f"guard: {kind}")
