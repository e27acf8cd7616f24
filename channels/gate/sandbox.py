"""The sandbox the agent's bash runs in: which paths it may write, which it sees read-only,
which it cannot see at all, and the bubblewrap arguments that build it.

Pure: `layout` reads only the file system's shape (which paths exist, where links point),
`arguments` nothing. The sandbox sees the whole file system as it is, read-only, except:

- writable: the project (the working directory; the home directory when the project holds
  it), /tmp, /var/tmp, ~/.cache, ~/.npm and the policy's `sandboxWritable` directories;
- read-only even inside a writable root: what would run outside the sandbox later with the
  person's rights (Pi's agent directory with its settings and extensions, the project's
  `.pi`, `.git/hooks` and `.git/config`, piw-channels' and Python's installation, the dot
  files at the top of the home directory) and the home directory itself when it lies in a
  writable root (a home under /tmp);
- hidden (an empty read-only directory, or /dev/null for a file): the state directory, the
  configuration directory, every token file and the sockets through which a process could act
  outside (tmux, screen, X11, Wayland, D-Bus, systemd, docker).

Why bubblewrap (not Landlock, not a sandbox runtime package): Landlock cannot hide a path
(only deny access) nor give the command its own pid namespace, so signals, `ptrace` and
`/proc/<pid>` would still reach Pi and its bridge; a runtime package (`@anthropic-ai/
sandbox-runtime`) adds a network proxy and a dependency tree in Pi's process for what one
Debian package and one argument list do here. bubblewrap builds the mounts, the pid namespace
and the new session in one unprivileged call and fails closed when it cannot.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from channels.gate.paths import is_within
from channels.gate.protected import TOKEN, Protected

__all__ = ["Layout", "Mount", "arguments", "layout"]


class Mount(StrEnum):
    """What the sandbox makes of one path."""

    RW = "rw"  # writable, as it is
    RO = "ro"  # read-only, as it is
    RO_EMPTY = "ro-empty"  # an empty read-only directory where none exists (a placeholder)
    HIDDEN = "hidden"  # a directory replaced by an empty read-only one
    HIDDEN_FILE = "hidden-file"  # a file replaced by an empty one (/dev/null)


_FIXED_WRITABLE: Final = ("/tmp", "/var/tmp")
_HOME_WRITABLE: Final = (".cache", ".npm")
# Directories that hold sockets or state through which a sandboxed process could act outside
# it: type into Pi's terminal (tmux, screen, X11, Wayland) or start a job (D-Bus, systemd).
_SOCKET_DIRS: Final = ("/tmp/.X11-unix", "/tmp/.ICE-unix", "/run/screen", "/var/run/screen")
_RUNTIME_ENTRIES: Final = ("bus", "systemd", "tmux", "wayland-0", "wayland-1", "docker.sock",
                           "podman")
_SOCKET_FILES: Final = ("/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock")


@dataclass(frozen=True)
class Layout:
    """The sandbox's mounts, in the order bubblewrap applies them (a parent before what lies
    in it, so the deeper mount wins)."""

    mounts: tuple[tuple[Path, Mount], ...]

    def kind(self, path: Path) -> Mount:
        """What the sandbox makes of `path` (an absolute, resolved path)."""
        found = Mount.RO
        for place, mount in self.mounts:
            if is_within(path, place):
                found = mount
        return found

    def may_write(self, path: Path) -> bool:
        return self.kind(path) is Mount.RW

    def of(self, *kinds: Mount) -> tuple[Path, ...]:
        return tuple(place for place, mount in self.mounts if mount in kinds)


def layout(protected: Protected, *, cwd: Path, home: Path,
           extra_writable: Iterable[Path] = (), read_only: Iterable[Path] = (),
           env: Mapping[str, str] | None = None) -> Layout:
    """The sandbox for a command run in `cwd` (every path resolved; only what exists);
    `read_only` adds what else runs outside it later (Pi's own installation)."""
    env = os.environ if env is None else env
    cwd, home = _real(cwd), _real(home)
    hidden_dirs, hidden_files = _hidden(protected, home, env)
    hidden = hidden_dirs + hidden_files
    guarded = [protected.pi_agent_dir]

    def usable(path: Path) -> bool:  # never a writable root inside what is hidden or guarded
        return not any(is_within(path, p) for p in [*hidden, *guarded])

    project = home if is_within(home, cwd) else cwd
    candidates = [project, *map(Path, _FIXED_WRITABLE), *(home / n for n in _HOME_WRITABLE),
                  *extra_writable]
    # Every root, nested ones too: a project under /tmp stays writable in a home made read-only.
    writable = list(dict.fromkeys(p for p in map(_real, candidates) if p.is_dir() and usable(p)))
    mounts: dict[Path, Mount] = {p: Mount.RW for p in writable}

    def inside_writable(path: Path) -> bool:
        return any(is_within(path, w) for w in writable)

    fixed = [*guarded, *read_only, *_installation(), project / ".pi",
             project / ".git" / "hooks", project / ".git" / "config"]
    if any(is_within(home, w) and home != w for w in writable):
        fixed.append(home)  # a home under /tmp stays read-only but where it is writable
    if home in writable:
        fixed += [e for e in _home_dot_entries(home) if e.name not in _HOME_WRITABLE]
    for path in map(_real, fixed):
        if path.exists() and inside_writable(path) and path not in writable:
            mounts.setdefault(path, Mount.RO)
    dot_pi = project / ".pi"
    if not dot_pi.exists() and not dot_pi.is_symlink():
        mounts[dot_pi] = Mount.RO_EMPTY  # else the agent could add an extension Pi loads
    for path in hidden_dirs:
        mounts[path] = Mount.HIDDEN
    for path in hidden_files:
        mounts[path] = Mount.HIDDEN_FILE
    # Nothing is mounted inside a hidden directory (it would show what lies there).
    kept = {p: m for p, m in mounts.items()
            if not any(h != p and is_within(p, h) for h in hidden_dirs)}
    ordered = sorted(kept.items(), key=lambda item: (len(item[0].parts), str(item[0])))
    return Layout(tuple(ordered))


def arguments(bwrap: str, layout: Layout) -> list[str]:
    """bubblewrap's arguments for `layout`, up to (not including) `--chdir` and the command."""
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path, mount in layout.mounts:
        text = str(path)
        if mount is Mount.RW:
            args += ["--bind", text, text]
        elif mount is Mount.RO:
            args += ["--ro-bind", text, text]
        elif mount is Mount.HIDDEN_FILE:
            args += ["--ro-bind", "/dev/null", text]
        else:
            mode = "0700" if mount is Mount.HIDDEN else "0755"
            args += ["--perms", mode, "--tmpfs", text, "--remount-ro", text]
    # Its own pid namespace and /proc (no signal, ptrace or /proc/<pid> reaches Pi), a new
    # session (no TIOCSTI into Pi's terminal), gone when Pi is, and no capabilities.
    return [*args, "--unshare-pid", "--new-session", "--die-with-parent", "--cap-drop", "ALL"]


def _hidden(protected: Protected, home: Path, env: Mapping[str, str],
            ) -> tuple[list[Path], list[Path]]:
    """The directories and files the sandbox hides (those that exist)."""
    directories = [protected.database.parent, protected.config_dir]
    directories += [d for d, kind in protected.directories() if kind == TOKEN]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    directories += [Path(f"/tmp/tmux-{uid}"), Path(f"/tmp/screen-{uid}"),
                    *map(Path, _SOCKET_DIRS), home / ".screen"]
    runtime = env.get("XDG_RUNTIME_DIR") or f"/run/user/{uid}"
    runtime_entries = [Path(runtime) / name for name in _RUNTIME_ENTRIES]
    files = [*protected.token_files, *map(Path, _SOCKET_FILES), home / ".Xauthority",
             home / ".ICEauthority"]
    if env.get("XAUTHORITY"):
        files.append(Path(env["XAUTHORITY"]))
    if env.get("TMUX"):
        directories.append(Path(env["TMUX"].split(",")[0]).parent)
    found_dirs: list[Path] = []
    found_files: list[Path] = []
    for path in map(_real, [*directories, *files, *runtime_entries]):
        if path.is_dir():
            found_dirs.append(path)
        elif path.exists() and path != Path("/dev/null"):
            found_files.append(path)
    dirs = _outermost(found_dirs)
    kept_files = [f for f in dict.fromkeys(found_files)
                  if not any(is_within(f, d) for d in dirs)]
    return dirs, kept_files


def _installation() -> list[Path]:
    """What runs outside the sandbox with the person's rights: piw-channels' packages (an
    editable install's source), this Python's library and scripts, the program on argv[0]."""
    root = Path(__file__).resolve().parents[2]  # where state/, channels/, adapters/ lie
    found = [root / name for name in ("state", "channels", "adapters")]
    paths = sysconfig.get_paths()
    found += [Path(paths[k]) for k in ("stdlib", "purelib", "platlib", "scripts") if k in paths]
    found += [Path(sys.prefix), Path(sys.executable).parent]
    return found


def _home_dot_entries(home: Path) -> list[Path]:
    try:
        return sorted(p for p in home.iterdir() if p.name.startswith("."))
    except OSError:
        return []


def _outermost(paths: list[Path]) -> list[Path]:
    """The paths none of the others holds, without repeats, in their order."""
    unique = list(dict.fromkeys(paths))
    return [p for p in unique if not any(o != p and is_within(p, o) for o in unique)]


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))
