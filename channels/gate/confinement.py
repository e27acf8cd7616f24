"""Where one tool call runs: the sandbox the agent's bash gets (or why it gets none), and the
fence the extension applies to read/write/edit/grep at the moment they run.

`probe` starts bubblewrap once to learn whether it works here; `confine` gives a call its
Confinement; `outside` is the one rule the sandbox adds to the policy (a write or edit the
sandbox would not allow is asked, or refused while the gate is off); `status` is the line
`/gate` and `piw-channels gate show` print.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from channels.config.gate import GatePolicy, SandboxMode
from channels.gate.paths import tool_path
from channels.gate.protected import PI_SETTINGS, Protected
from channels.gate.sandbox import Layout, arguments, layout
from channels.gate.verdict import Judgement, block

__all__ = ["BWRAP_ENV", "Confinement", "Probe", "confine", "outside", "probe", "status"]


BWRAP_ENV: Final = "PIW_BWRAP"  # another bubblewrap binary (tests name a broken one here)
_INSTALL: Final = "install it: sudo apt-get install -y bubblewrap"
_PROBE_SECONDS: Final = 10.0


@dataclass(frozen=True)
class Probe:
    """Whether bubblewrap starts here: its path and version, or why it does not."""

    bwrap: str | None
    version: str | None
    problem: str | None


def probe(env: Mapping[str, str] | None = None) -> Probe:
    """Start bubblewrap once with the sandbox's namespaces (a second or less)."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux"):
        return Probe(None, None, f"no sandbox on {sys.platform} (bubblewrap needs Linux)")
    named = env.get(BWRAP_ENV) or "bwrap"
    found = shutil.which(named, path=env.get("PATH"))
    if found is None:
        return Probe(None, None, f"bubblewrap ({named}) is not installed; {_INSTALL}")
    trial = [found, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
             "--new-session", "--die-with-parent", "--cap-drop", "ALL", "--", "true"]
    try:
        ran = subprocess.run(trial, capture_output=True, text=True, timeout=_PROBE_SECONDS,
                             check=False, stdin=subprocess.DEVNULL)
        shown = subprocess.run([found, "--version"], capture_output=True, text=True,
                               timeout=_PROBE_SECONDS, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(found, None, f"bubblewrap ({found}) cannot start: {type(exc).__name__}")
    if ran.returncode != 0:
        said = " ".join((ran.stderr or ran.stdout).split())[:160] or f"exit {ran.returncode}"
        return Probe(found, None, f"bubblewrap ({found}) cannot make the sandbox here: {said}")
    version = " ".join(shown.stdout.split()) or "bubblewrap"
    return Probe(found, version, None)


@dataclass(frozen=True)
class Confinement:
    """One call's sandbox (`argv` is None when its bash runs unsandboxed) and fence."""

    mode: SandboxMode
    layout: Layout | None  # what the sandbox would be (also without bubblewrap: the fence)
    argv: tuple[str, ...] | None  # bubblewrap and its arguments, up to `--chdir`
    problem: str | None  # why the sandbox cannot start (None: it can, or mode is off)
    secret: tuple[Path, ...]  # never read, listed or searched by a tool: state, config, tokens
    protected: tuple[Path, ...]  # never written by a tool, whoever allowed it

    def refusal(self) -> Judgement | None:
        """A bash call's refusal when the policy requires a sandbox that cannot start."""
        if self.mode is not SandboxMode.REQUIRE or self.problem is None:
            return None
        return block(f"Blocked: the gate policy requires the sandbox for bash, and it cannot "
                     f"start ({self.problem}).", "sandbox: required")

    def to_json(self) -> dict[str, object]:
        mounts = [] if self.layout is None else [[str(p), m.value] for p, m in self.layout.mounts]
        return {"mode": self.mode.value, "argv": None if self.argv is None else list(self.argv),
                "problem": self.problem,
                "fence": {"mounts": mounts, "secret": [str(p) for p in self.secret],
                          "protected": [str(p) for p in self.protected]}}


def confine(policy: GatePolicy, found: Probe, protected: Protected, *, cwd: Path, home: Path,
            env: Mapping[str, str] | None = None) -> Confinement:
    """The Confinement of a call made in `cwd` under `policy`."""
    secret = tuple(dict.fromkeys(
        [protected.database.parent, protected.config_dir, *protected.token_files,
         *(d for d, kind in protected.directories() if kind != PI_SETTINGS)]))
    guarded = tuple(dict.fromkeys(
        [*(p for p, _ in protected.files()), *(d for d, _ in protected.directories()),
         protected.pi_agent_dir]))
    if policy.sandbox is SandboxMode.OFF:
        return Confinement(policy.sandbox, None, None, None, secret, guarded)
    extra = [_expanded(p, home) for p in policy.sandbox_writable]
    shape = layout(protected, cwd=cwd, home=home, extra_writable=extra,
                   read_only=_runtime(), env=env)
    argv = None if found.bwrap is None or found.problem else tuple(arguments(found.bwrap, shape))
    return Confinement(policy.sandbox, shape, argv, found.problem, secret, guarded)


def outside(confinement: Confinement, tool: str, tool_input: Mapping[str, object], *,
            cwd: Path, home: Path, enabled: bool) -> Judgement | None:
    """A write or edit to a place the sandboxed bash could not write: a person decides (gate
    on) or it is refused (gate off); else the tools would be a way around the sandbox."""
    shape, path = confinement.layout, tool_input.get("path")
    if shape is None or tool not in ("write", "edit") or not isinstance(path, str):
        return None
    target = tool_path(path, cwd=cwd, home=home)
    if shape.may_write(target):
        return None
    reason = (f"{tool.capitalize()} {target}: outside what the agent may change (the project, "
              "/tmp and the policy's sandboxWritable).")
    if enabled:
        return Judgement("ask", reason, "sandbox: outside")
    return block(f"Blocked: {reason[0].lower()}{reason[1:]} Turn the gate on to ask a person, "
                 "or add the directory to sandboxWritable.", "sandbox: outside")


def status(mode: SandboxMode, found: Probe) -> str:
    """One line: whether the agent's bash runs in the sandbox, and what holds if not."""
    if mode is SandboxMode.OFF:
        return "sandbox: off in the policy; the guard alone judges bash"
    if found.problem is None:
        return (f"sandbox: on ({found.version}); bash cannot reach the decisions, the "
                "configuration or the tokens")
    if mode is SandboxMode.REQUIRE:
        return f"sandbox: cannot start ({found.problem}); bash calls are refused (require)"
    return f"sandbox: cannot start ({found.problem}); the guard alone judges bash"


def _expanded(text: str, home: Path) -> Path:
    return home / text[2:] if text.startswith("~/") else Path(text)


def _runtime() -> list[Path]:
    """Pi's own installation (this bridge's parent) and the `piw-channels` Pi starts: both
    run again outside the sandbox."""
    launchers = [os.environ.get("PIW_CHANNELS_BIN") or "", shutil.which("piw-channels") or ""]
    found = [Path(os.path.realpath(p)) for p in launchers if os.path.isabs(p)]
    try:
        parent = os.getppid()
        words = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")
        found.append(Path(os.path.realpath(f"/proc/{parent}/exe")).parent)
    except OSError:
        return found
    for word in words[1:3]:
        script = Path(os.path.realpath(os.fsdecode(word))) if word.startswith(b"/") else None
        if script is not None and "node_modules" in script.parts:
            index = len(script.parts) - 1 - script.parts[::-1].index("node_modules")
            found.append(Path(*script.parts[: index + 1]))
    return found
