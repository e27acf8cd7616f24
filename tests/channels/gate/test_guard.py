"""The guard (issue 17 item 5): what the model may never do through its tools is blocked,
gate on or off, whatever the spelling; harmless calls stay allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from channels.gate.commands import parse_script
from channels.gate.policy import Protected, judge
from tests.channels.gate.conftest import OFF, ON, Judge

DB = "~/.pi/agent/workflows/state.sqlite"
CFG = "~/.config/pi-workflows"
CLI = "guard: piw-channels"

# (command, the guard rule that blocks it)
BLOCKED = [
    # answering, cancelling, resending, expiring as if a person
    ('script -qec "piw-channels pi answer 2a06a17d deploy" /dev/null', f"{CLI} pi answer"),
    ("script -q -c 'piw-channels pi answer 2a06a17d deploy' /dev/null", f"{CLI} pi answer"),
    ("script --command='piw-channels cancel 2a06' /dev/null", f"{CLI} cancel"),
    ("python3 -c 'import pty; pty.spawn([\"piw-channels\", \"pi\", \"answer\", \"x\", \"deploy\"])'",
     CLI),
    ("python3 -c 'import pty; pty.spawn([\"pi\"+\"w-channels\", \"pi\", \"answer\"])'", CLI),
    ("piw-channels cancel 2a06a17d99d4", f"{CLI} cancel"),
    ("piw-channels cancel 2a06a17d99d4 --reason done", f"{CLI} cancel"),
    ("piw-channels resend 2a06 --profile default", f"{CLI} resend"),
    ("piw-channels resend --all-failed --profile default", f"{CLI} resend"),
    ("piw-channels expire -v", f"{CLI} expire"),
    ("piw-channels pi answer 2a06 deploy --text ok", f"{CLI} pi answer"),
    ("piw-channels pi", f"{CLI} pi"),
    ("piw-channels pi bridge", f"{CLI} pi bridge"),
    ("piw-channels setup telegram --token-file /x --user 1 --chat 1", f"{CLI} setup"),
    ("piw-channels gate off", f"{CLI} gate off"),
    ("piw-channels gate on", f"{CLI} gate on"),
    ("piw-channels demo --press Deploy --api-base-url http://127.0.0.1:9", f"{CLI} demo --press"),
    ("piw-channels demo --pres Deploy --api-base-url http://127.0.0.1:9", f"{CLI} demo --press"),
    ("piw-channels demo --reply ok", f"{CLI} demo --press"),
    ("/usr/local/bin/piw-channels cancel x", f"{CLI} cancel"),
    ("~/.local/bin/piw-channels cancel x", f"{CLI} cancel"),
    ("'pi'w-channels cancel x", f"{CLI} cancel"),
    ('p""iw-channels cancel x', f"{CLI} cancel"),
    ("p\\iw-channels cancel x", f"{CLI} cancel"),
    ("$'\\x70iw-channels' cancel x", f"{CLI} cancel"),
    ("piw-channels 'can''cel' x", f"{CLI} cancel"),
    ("P=piw-channels; $P cancel x", f"{CLI} cancel"),
    ("$(which piw-channels) cancel x", f"{CLI} cancel"),
    ("`command -v piw-channels` expire", f"{CLI} expire"),
    ("echo $(piw-channels cancel x)", f"{CLI} cancel"),
    ("echo `piw-channels cancel x`", f"{CLI} cancel"),
    ('echo "$(piw-channels cancel x)"', f"{CLI} cancel"),
    ("diff <(piw-channels expire) /dev/null", f"{CLI} expire"),
    ("echo ${x:-$(piw-channels cancel x)}", f"{CLI} cancel"),
    ("echo $(( $(piw-channels expire) + 1 ))", f"{CLI} expire"),
    ("exec 3<> ~/.pi/agent/workflows/state.sqlite", "guard: state database"),
    ("(cd /tmp && piw-channels cancel x)", f"{CLI} cancel"),
    ("true && piw-channels cancel x || true", f"{CLI} cancel"),
    ("ls; piw-channels cancel x &", f"{CLI} cancel"),
    ("if true; then piw-channels cancel x; fi", f"{CLI} cancel"),
    ("for i in 1 2; do piw-channels expire; done", f"{CLI} expire"),
    ("sh <<EOF\npiw-channels cancel x\nEOF", f"{CLI} cancel"),
    ("bash <<'END'\n  piw-channels pi answer x deploy\nEND\necho done", f"{CLI} pi answer"),
    ("cat <<EOF\n$(piw-channels cancel x)\nEOF", f"{CLI} cancel"),
    ("sh <<< 'piw-channels cancel x'", f"{CLI} cancel"),
    ("echo 'piw-channels cancel x' | sh", f"{CLI} cancel"),
    ("printf 'piw-channels cancel x\\n' | bash", f"{CLI} cancel"),
    ("env FOO=1 sh -c 'piw-channels cancel x'", f"{CLI} cancel"),
    ("env -i PATH=/usr/bin piw-channels expire", f"{CLI} expire"),
    ("env -S 'piw-channels cancel x'", f"{CLI} cancel"),
    ("FOO=1 piw-channels cancel x", f"{CLI} cancel"),
    ("bash -lc 'piw-channels cancel x'", f"{CLI} cancel"),
    ("sh -c \"sh -c 'piw-channels cancel x'\"", f"{CLI} cancel"),
    ("zsh -c 'piw-channels cancel x'", f"{CLI} cancel"),
    ("dash -ec 'piw-channels cancel x'", f"{CLI} cancel"),
    ("eval 'piw-channels cancel x'", f"{CLI} cancel"),
    ("eval piw-channels cancel x", f"{CLI} cancel"),
    ("sudo -u me piw-channels cancel x", f"{CLI} cancel"),
    ("sudo -E -- piw-channels cancel x", f"{CLI} cancel"),
    ("nohup piw-channels expire &", f"{CLI} expire"),
    ("timeout 10 piw-channels cancel x", f"{CLI} cancel"),
    ("timeout -s KILL 10s piw-channels cancel x", f"{CLI} cancel"),
    ("nice -n 5 piw-channels cancel x", f"{CLI} cancel"),
    ("nice -5 piw-channels cancel x", f"{CLI} cancel"),
    ("stdbuf -oL piw-channels cancel x", f"{CLI} cancel"),
    ("setsid piw-channels cancel x", f"{CLI} cancel"),
    ("command piw-channels cancel x", f"{CLI} cancel"),
    ("exec piw-channels cancel x", f"{CLI} cancel"),
    ("echo x | xargs piw-channels cancel", f"{CLI} cancel"),
    ("piw-channels decisions --json | xargs -I{} piw-channels cancel {}", f"{CLI} cancel"),
    ("find . -name x -exec piw-channels cancel {} \\;", f"{CLI} cancel"),
    ("busybox sh -c 'piw-channels cancel x'", f"{CLI} cancel"),
    ("watch -n 1 piw-channels expire", f"{CLI} expire"),
    ("flock /tmp/l piw-channels cancel x", f"{CLI} cancel"),
    ("flock /tmp/l -c 'piw-channels cancel x'", f"{CLI} cancel"),
    ("su me -c 'piw-channels cancel x'", f"{CLI} cancel"),
    ("ssh localhost piw-channels cancel x", f"{CLI} cancel"),
    ("uv run piw-channels cancel x", f"{CLI} cancel"),
    ("uvx piw-channels cancel x", f"{CLI} cancel"),
    ("uv tool run piw-channels cancel x", f"{CLI} cancel"),
    ("npm exec -- piw-channels cancel x", f"{CLI} cancel"),
    ("npx -y pi --mode rpc", "guard: pi session"),
    ("expect -c 'spawn piw-channels pi answer x deploy; interact'", f"{CLI} pi answer"),
    ("python3 -m adapters.cli.main cancel x", f"{CLI} cancel"),
    ("python3 /usr/local/bin/piw-channels cancel x", f"{CLI} cancel"),
    ("python3 -c 'from adapters.cli.main import run; run([\"cancel\", \"x\"])'", CLI),
    ("python3 - <<EOF\nimport subprocess\nsubprocess.run(['piw-channels', 'cancel', 'x'])\nEOF",
     CLI),
    ("node -e \"require('child_process').execSync('piw-channels cancel x')\"", CLI),
    ("perl -e 'system(\"piw-channels cancel x\")'", CLI),
    ("ruby -e 'system(\"piw-channels\", \"cancel\", \"x\")'", CLI),
    ("awk 'BEGIN { system(\"piw-channels cancel x\") }'", CLI),
    # driving a Pi session or typing into a terminal
    ("pi --mode rpc --session ~/.pi/agent/sessions/x/s.jsonl", "guard: pi session"),
    ("pi --mode rpc", "guard: pi session"),
    ("pi --mode=rpc", "guard: pi session"),
    ("pi --session 1234abcd -p /decision", "guard: pi session"),
    ("pi --continue -p '/decision'", "guard: pi session"),
    ("pi -c", "guard: pi session"),
    ("pi --resume", "guard: pi session"),
    ("node ~/.npm/node_modules/@mariozechner/pi-coding-agent/dist/cli.js --mode rpc",
     "guard: pi session"),
    ("python3 -c 'import subprocess; subprocess.Popen([\"pi\", \"--mode\", \"rpc\"])'",
     "guard: pi session"),
    ("tmux send-keys -t main '/decision' Enter", "guard: terminal input"),
    ("screen -S pi -X stuff '/decision\\n'", "guard: terminal input"),
    ("xdotool type /decision", "guard: terminal input"),
    # the state database, its -wal/-shm, by any path
    (f'sqlite3 {DB} "DELETE FROM human_decisions"', "guard: state database"),
    ('sqlite3 $HOME/.pi/agent/workflows/state.sqlite .dump', "guard: state database"),
    ('sqlite3 "${HOME}/.pi/agent/workflows/state.sqlite" .dump', "guard: state database"),
    (f"cat {DB}-wal", "guard: state database"),
    (f"rm {DB}-shm", "guard: state database"),
    (f"cp /tmp/x {DB}", "guard: state database"),
    (f"mv {DB} /tmp/x", "guard: state database"),
    (f"echo x > {DB}", "guard: state database"),
    (f"echo x >> {DB}-wal", "guard: state database"),
    (f"sqlite3 < {DB}", "guard: state database"),
    (f"dd if={DB} of=/tmp/x", "guard: state database"),
    (f"ln -s {DB} db", "guard: state database"),
    ("cat ~/.pi/agent/workflows/state.sql*", "guard: state database"),
    ("cat ~/.pi/agent/workflows/*", "guard: state database"),
    ("cat ~/.pi/agent/workflows/state.{sqlite,sqlite-wal}", "guard: state database"),
    ("cat ~/.pi/agent/../agent/workflows/state.sqlite", "guard: state database"),
    ("cd ~/.pi/agent/workflows && sqlite3 state.sqlite .dump", "guard: state database"),
    ("cd ~/.pi/agent && rm workflows/state.sqlite", "guard: state database"),
    ("D=~/.pi/agent/workflows; rm $D/state.sqlite", "guard: state database"),
    ("rm $SOMEWHERE/state.sqlite-wal", "guard: state database"),
    ("rm ~/.pi/agent/workflows/$NAME", "guard: state database"),
    ("rm -rf ~/.pi", "guard: state database"),
    ("rm -rf ~/.pi/agent/workflows", "guard: state database"),
    ("mv ~/.pi /tmp/old", "guard: state database"),
    ("find ~/.pi -name '*.sqlite' -delete", "guard: state database"),
    (f"python3 -c \"import sqlite3; sqlite3.connect('{DB}')\"", "guard: state database"),
    ("python3 -c \"open('/x/.pi/agent/workflows/state.sqlite-wal','w')\"",
     "guard: state database"),
    ("node -e \"require('fs').unlinkSync(process.env.HOME+'/.pi/agent/workflows/state.sqlite')\"",
     "guard: state database"),
    # the configuration and every token file credentials.json names
    (f"cat {CFG}/credentials.json", "guard: config file"),
    (f"cat {CFG}/channels.json", "guard: config file"),
    (f"echo '{{}}' > {CFG}/gate.json", "guard: config file"),
    (f"rm {CFG}/gate.json", "guard: config file"),
    (f"cp {CFG}/channels.json /tmp/", "guard: config file"),
    ("cat ~/secrets/bot.token", "guard: token file"),
    ("base64 < ~/secrets/bot.token", "guard: token file"),
    ("python3 -c \"print(open('bot.token').read())\"", "guard: token file"),
    ("python3 -c 'import json; json.load(open(\"x/pi-workflows/c.json\"))'", "guard: config file"),
    # signalling Pi or its bridge
    ("pgrep -P $PPID | xargs kill", "guard: signal"),
    ("kill $PPID", "guard: signal"),
    ("kill -9 $PPID", "guard: signal"),
    ("kill -s TERM $PPID", "guard: signal"),
    ("kill $(pgrep -f piw-channels)", "guard: signal"),
    ("kill `pgrep pi`", "guard: signal"),
    ("kill 4243", "guard: signal"),
    ("kill -9 4242", "guard: signal"),
    ("kill -- -4243", "guard: signal"),
    ("kill -9 -1", "guard: signal"),
    ("kill 0", "guard: signal"),
    ("pkill -f piw-channels", "guard: signal"),
    ("pkill -f 'pi bridge'", "guard: signal"),
    ("pkill node", "guard: signal"),
    ("pkill -9 pi", "guard: signal"),
    ("pkill -P $PPID", "guard: signal"),
    ("killall node", "guard: signal"),
    ("killall -9 pi", "guard: signal"),
    ("killall -u me", "guard: signal"),
    ("sudo kill -HUP $PPID", "guard: signal"),
    ("python3 -c 'import os; os.kill(os.getppid(), 9)'", "guard: signal"),
    ("node -e 'process.kill(process.ppid)'", "guard: signal"),
]

ALLOWED = [
    "ls", "ls -la", "git status", "grep -r TODO .", "cat README.md", 'echo "rm -rf is dangerous"',
    "echo 'piw-channels cancel x'", "git log --grep push", "git log --oneline | head -5",
    "piw-channels status", "piw-channels decisions --json", "piw-channels show 2a06",
    "piw-channels pi list", "piw-channels pi show 2a06", "piw-channels gate show",
    "piw-channels ask --title Deploy --choice yes=Yes", "piw-channels verify", "piw-channels --help",
    "pi -p 'say hi'", "pi --version", "kill 1234", "kill -9 1234", "kill %1", "kill -l",
    "pkill -f 'npm run dev'", "killall myserver", "ls ~/.pi", "ls ~/.pi/agent/workflows",
    "python3 -c 'print(1 + 1)'", "node -e 'console.log(42)'", "grep -rn state.sqlite src",
    "cat src/state.sqlite.md", "echo $HOME", "for f in *.py; do wc -l $f; done",
    "cd src && ls", "find . -name '*.py'", "tmux ls", "rm -rf build", "cp -r src /tmp/copy",
    "du -sh ~", "echo done > /tmp/out.txt", "python3 -m pytest -q", "rm $BUILD/*.json",
]


@pytest.mark.parametrize(("command", "rule"), BLOCKED, ids=[c for c, _ in BLOCKED])
@pytest.mark.parametrize("policy", [ON, OFF], ids=["gate-on", "gate-off"])
def test_the_guard_blocks_each_attempt_whatever_the_spelling(
        judged: Judge, policy: object, command: str, rule: str) -> None:
    result = judged(policy, "bash", {"command": command})
    assert (result.action, result.rule) == ("block", rule), result.reason
    assert result.reason.startswith("Blocked: ") and "\n" not in result.reason


@pytest.mark.parametrize("command", ALLOWED)
def test_harmless_commands_pass_the_guard(judged: Judge, command: str) -> None:
    result = judged(OFF, "bash", {"command": command})
    assert (result.action, result.rule) == ("allow", None), result.reason


FILES = [
    (f"{DB}", "guard: state database"), (f"{DB}-wal", "guard: state database"),
    (f"{DB}-shm", "guard: state database"), (f"@{DB}", "guard: state database"),
    ("~/.pi/agent/./workflows/state.sqlite", "guard: state database"),
    (f"{CFG}/channels.json", "guard: config file"),
    (f"{CFG}/credentials.json", "guard: config file"), (f"{CFG}/gate.json", "guard: config file"),
    ("~/secrets/bot.token", "guard: token file"), ("../secrets/bot.token", "guard: token file"),
    # Another agent's hooks to the gate: in home, in the project, in a directory above it.
    ("~/.claude/settings.json", "guard: agent settings"),
    (".claude/settings.local.json", "guard: agent settings"),
    ("../.claude/settings.json", "guard: agent settings"),
    ("~/.codex/config.toml", "guard: agent settings"), (".codex/hooks.json", "guard: agent settings"),
]


@pytest.mark.parametrize("tool", ["read", "write", "edit", "grep", "find", "ls"])
@pytest.mark.parametrize(("path", "rule"), FILES)
def test_tools_with_a_path_cannot_touch_protected_files(
        judged: Judge, tool: str, path: str, rule: str) -> None:
    result = judged(OFF, tool, {"path": path, "content": "x", "oldText": "a", "newText": "b"})
    assert (result.action, result.rule) == ("block", rule)


def test_a_symbolic_link_to_the_database_is_the_database(
        judged: Judge, home: Path, project: Path) -> None:
    database = home / ".pi" / "agent" / "workflows" / "state.sqlite"
    database.parent.mkdir(parents=True)
    database.write_bytes(b"")
    (project / "innocent.txt").symlink_to(database)
    for tool in ("read", "write", "edit"):
        result = judged(ON, tool, {"path": "innocent.txt", "content": ""})
        assert (result.action, result.rule) == ("block", "guard: state database")
    result = judged(ON, "bash", {"command": "cat innocent.txt"})
    assert (result.action, result.rule) == ("block", "guard: state database")


def test_a_custom_tool_is_not_guarded_by_path(judged: Judge) -> None:
    result = judged(OFF, "ask_human", {"path": DB})
    assert (result.action, result.rule) == ("allow", None)


def test_a_path_tool_without_a_path_string_is_blocked(judged: Judge) -> None:
    result = judged(ON, "read", {"path": 3})
    assert (result.action, result.rule) == ("block", "guard: input")
    result = judged(ON, "bash", {"command": None})
    assert (result.action, result.rule) == ("block", "guard: input")


MORE_BLOCKED = [
    ("echo cancel x | xargs piw-channels", CLI),
    ("PC=$(which piw-channels); $PC cancel x", f"{CLI} cancel"),
    ('f() { piw-channels "$@"; }; f cancel x', CLI),
    ("cp $(which piw-channels) /tmp/pc", CLI),
    ("ln -s /usr/local/bin/piw-channels /tmp/pc", CLI),
    ("alias pc=piw-channels", CLI),
    ("cp $(which pi) /tmp/p", CLI),
    ("/tmp/p --mode rpc", "guard: pi session"),
    ("piw-channel? cancel x", f"{CLI} cancel"),
    ("{piw-channels,cancel} x", f"{CLI} cancel"),
    ("CMD='piw-channels cancel x'; bash -c \"$CMD\"", f"{CLI} cancel"),
    ("export CMD='piw-channels cancel x'; eval $CMD", f"{CLI} cancel"),
    ("cat <<EOF | sh\npiw-channels cancel x\nEOF", f"{CLI} cancel"),
    ("bash <(echo 'piw-channels cancel x')", f"{CLI} cancel"),
    ("python3 <(echo 'import os; os.system(\"piw-channels cancel x\")')", CLI),
    ("bash /dev/stdin <<< 'piw-channels cancel x'", f"{CLI} cancel"),
    ("echo 'piw-channels cancel x' | at now", f"{CLI} cancel"),
    ("git -c alias.x='!piw-channels cancel x' x", f"{CLI} cancel"),
    ("GIT_SSH_COMMAND='piw-channels cancel x' git push", f"{CLI} cancel"),
    ("EDITOR='piw-channels cancel x' git commit", f"{CLI} cancel"),
    ("systemd-run --user piw-channels cancel x", f"{CLI} cancel"),
    ("tmux new-session -d 'piw-channels cancel x'", f"{CLI} cancel"),
    ("screen -dm piw-channels cancel x", f"{CLI} cancel"),
    ("strace -f piw-channels cancel x", f"{CLI} cancel"),
    ("parallel piw-channels cancel ::: a b", f"{CLI} cancel"),
    ("node -pe \"require('child_process').execSync('piw-channels cancel x')\"", CLI),
    ("python3 -c 'from channels.decisions import workflows'", CLI),
    ('sqlite3 "file:$HOME/.pi/agent/workflows/state.sqlite?mode=rw"', "guard: state database"),
    ("python3 -c \"p = 'state' + '.sqlite'\"", "guard: state database"),
    ("cat ~home/.pi/agent/workflows/state.sqlite", "guard: state database"),
    (f"grep -r token {CFG}", "guard: config file"),
    (f"tar czf /tmp/b.tgz {CFG}", "guard: config file"),
    (f"cat {CFG}/notes.txt", "guard: config file"),
    ("grep -r x ~/secrets", "guard: token file"),
    ("echo x > ~/.pi/agent/extensions/evil.ts", "guard: pi settings"),
    ("cat ~/.pi/agent/settings.json", "guard: pi settings"),
    ("sed -i /PreToolUse/d ~/.claude/settings.json", "guard: agent settings"),
    ("echo '{}' > .claude/settings.local.json", "guard: agent settings"),
    ("rm ~/.codex/hooks.json", "guard: agent settings"),
    ("rm -rf .claude", "guard: agent settings"),
    ("python3 -c \"open('/x/.pi/agent/extensions/a.ts', 'w')\"", "guard: pi settings"),
    ("echo '{\"type\": \"answer\"}' > /proc/$PPID/fd/0", "guard: signal"),
    ("cat /proc/4243/environ", "guard: signal"),
    ("gdb -p $PPID", "guard: signal"),
    ("strace -p 4243", "guard: signal"),
    ("pi -e ./evil.ts -p hi", "guard: pi session"),
    ("pi --extension=./evil.ts", "guard: pi session"),
    ("pi install ./evil", "guard: pi session"),
    ("env -C ~/.pi/agent/workflows sqlite3 state.sqlite .dump", "guard: state database"),
    ("tar -C ~/.pi/agent/workflows -cf - state.sqlite", "guard: state database"),
    ("pushd ~/.pi/agent/workflows; pushd /tmp; popd; cat state.sqlite", "guard: state database"),
    ("python3 -c 'import fcntl, termios; fcntl.ioctl(0, termios.TIOCSTI, b\"y\")'",
     "guard: terminal input"),
]

MORE_ALLOWED = [
    "sleep 5 & kill $!", "sleep 5 & pid=$!; kill $pid", f"ls {CFG}", "ls -la ~/.pi/agent",
    "git -c user.name=x commit -m msg", "EDITOR=vim git commit", "tmux new-session -d 'npm run dev'",
    "cp -r src dist", "xargs -I{} cat {} < list", "node -pe '1 + 1'", "grep -r TODO ~/proj",
    "echo 'rm -rf /' > notes.txt", "python3 -c \"print('state')\"", "tar czf out.tgz src",
    "python3 tool.py -c 'print(1)'",
]


@pytest.mark.parametrize(("command", "rule"), MORE_BLOCKED, ids=[c for c, _ in MORE_BLOCKED])
def test_the_guard_sees_through_indirections(judged: Judge, command: str, rule: str) -> None:
    result = judged(OFF, "bash", {"command": command})
    assert (result.action, result.rule) == ("block", rule), result.reason


@pytest.mark.parametrize("command", MORE_ALLOWED)
def test_indirections_that_touch_nothing_protected_pass(judged: Judge, command: str) -> None:
    result = judged(OFF, "bash", {"command": command})
    assert (result.action, result.rule) == ("allow", None), result.reason


def test_a_script_file_a_shell_runs_is_read_and_judged(judged: Judge, project: Path) -> None:
    script = project / "run.sh"
    script.write_text("#!/bin/sh\nset -e\necho start\npiw-channels cancel x\n")
    script.chmod(0o755)
    harmless = project / "build.sh"
    harmless.write_text("#!/usr/bin/env bash\nmake all\n")
    harmless.chmod(0o755)
    for command in ["bash run.sh", "sh ./run.sh", "./run.sh", "source run.sh", ". ./run.sh",
                    "cd .. && bash proj/run.sh", "at -f run.sh now"]:
        result = judged(OFF, "bash", {"command": command})
        assert (result.action, result.rule) == ("block", f"{CLI} cancel"), command
    for command in ["bash build.sh", "./build.sh"]:
        assert judged(OFF, "bash", {"command": command}).action == "allow", command


@pytest.mark.parametrize("command", ["bash later.sh", "sh ./later.sh", "source later.sh",
                                     "at -f later.sh now", "cd sub && bash later.sh"])
def test_a_script_that_does_not_exist_yet_is_blocked(judged: Judge, command: str) -> None:
    """A sibling write in the same assistant message would create it after the judging."""
    result = judged(OFF, "bash", {"command": command})
    assert (result.action, result.rule) == ("block", "guard: unseen script"), result.reason
    assert "later.sh" in result.reason


PROTECTED_DIRECTORIES = [
    ("read", f"{CFG}/notes.txt", "guard: config file"),
    ("write", "~/.pi/agent/extensions/evil.ts", "guard: pi settings"),
    ("edit", "~/.pi/agent/settings.json", "guard: pi settings"),
    ("grep", CFG, "guard: config file"),
    ("grep", "~/secrets", "guard: token file"),
    ("write", "~/.pi/agent/workflows/other", "guard: state database"),
]


@pytest.mark.parametrize(("tool", "path", "rule"), PROTECTED_DIRECTORIES)
def test_tools_cannot_reach_into_protected_directories(judged: Judge, tool: str, path: str,
                                                        rule: str) -> None:
    result = judged(OFF, tool, {"path": path, "content": "x"})
    assert (result.action, result.rule) == ("block", rule)


@pytest.mark.parametrize("tool", ["ls", "find"])
def test_listing_a_protected_directory_is_allowed(judged: Judge, tool: str) -> None:
    assert judged(OFF, tool, {"path": CFG}).action == "allow"


EVEN_MORE_BLOCKED = [
    ("printf '\\x70\\x69\\x77-channels cancel x' | sh", f"{CLI} cancel"),
    ("echo -e 'piw\\x2dchannels cancel x' | bash", f"{CLI} cancel"),
    ('x="piw-channels cancel x"; $x', f"{CLI} cancel"),
    ("IFS=,; x=piw-channels,cancel,x; $x", f"{CLI} cancel"),
    ("a=piw; b=-channels; $a$b cancel x", f"{CLI} cancel"),
    ("eval \"$(printf 'piw-channels cancel x')\"", f"{CLI} cancel"),
    ("$(printf 'piw-channels cancel') x", f"{CLI} cancel"),
    ("pi\\\nw-channels cancel x", f"{CLI} cancel"),
    ("find /usr -name piw-channels -exec {} cancel x \\;", f"{CLI} cancel"),
    ("echo /usr/bin/piw-channels | xargs -I% % cancel x", f"{CLI} cancel"),
    ("sudo -s <<< 'piw-channels cancel x'", f"{CLI} cancel"),
    ("echo 'piw-channels cancel x' | su me", f"{CLI} cancel"),
    ("echo 'piw-channels cancel x' | script -q /dev/null", f"{CLI} cancel"),
    (f"export DB={DB}; python3 -c 'import os; open(os.environ[\"DB\"])'", "guard: state database"),
    (f"DB={DB} node -e 'require(\"fs\").readFileSync(process.env.DB)'", "guard: state database"),
    ("P='pi --mode rpc' node -e 'require(\"child_process\").execSync(process.env.P)'",
     "guard: pi session"),
]


@pytest.mark.parametrize(("command", "rule"), EVEN_MORE_BLOCKED,
                         ids=[c for c, _ in EVEN_MORE_BLOCKED])
def test_the_guard_sees_through_printed_and_split_words(judged: Judge, command: str,
                                                        rule: str) -> None:
    result = judged(OFF, "bash", {"command": command})
    assert (result.action, result.rule) == ("block", rule), result.reason


@pytest.mark.parametrize("tool", ["read", "write", "edit"])
@pytest.mark.parametrize("path", ["/proc/4243/fd/0", "/proc/4242/environ"])
def test_tools_cannot_reach_into_the_bridge_or_pi_process(judged: Judge, tool: str,
                                                          path: str) -> None:
    result = judged(OFF, tool, {"path": path, "content": "{}"})
    assert (result.action, result.rule) == ("block", "guard: signal")


def test_variables_that_hold_words_stay_harmless(judged: Judge) -> None:
    for command in ['MSG="pi is great"; git commit -m "$MSG"', "FILES='a b c'; ls $FILES",
                    "find . -name '*.py' -exec wc -l {} +", "ls | xargs -I{} echo {}"]:
        assert judged(OFF, "bash", {"command": command}).action == "allow", command


def test_discover_finds_the_database_the_token_files_and_this_process(
        home: Path, config_dir: Path) -> None:
    found = Protected.discover(home, config_dir)
    assert found.database == home / ".pi" / "agent" / "workflows" / "state.sqlite"
    assert found.config_dir == config_dir
    assert found.token_files == (home / "secrets" / "bot.token",)
    assert found.pids == (os.getpid(), os.getppid())
    (config_dir / "credentials.json").write_text("{broken")
    assert Protected.discover(home, config_dir).token_files == ()
    (config_dir / "credentials.json").write_text(json.dumps(
        {"telegram": {"a": {"tokenFile": "/abs/a.token"}, "b": {"tokenFile": "relative"},
                      "c": "nonsense"}}))
    assert Protected.discover(home, config_dir).token_files == (Path("/abs/a.token"),)


def test_a_token_file_named_in_a_broken_credentials_file_is_still_protected(
        judged: Judge, config_dir: Path, home: Path, project: Path) -> None:
    (config_dir / "credentials.json").write_text(json.dumps(
        {"schema": "wrong", "telegram": {"x": {"tokenFile": str(home / "t" / "bot.token")}}}))
    protected = Protected.discover(home, config_dir)
    result = judge(OFF, "read", {"path": "~/t/bot.token"}, cwd=project, home=home,
                   protected=protected)
    assert (result.action, result.rule) == ("block", "guard: token file")


def test_sourcing_a_real_virtualenv_is_read_and_allowed(judged: Judge, project: Path) -> None:
    """The script a shell runs is parsed like the command line: a real `activate` reads."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")],
                   check=True, timeout=120)
    text = (project / ".venv" / "bin" / "activate").read_text()
    assert parse_script(text).problem is None
    for policy in (ON, OFF):
        result = judged(policy, "bash", {"command": "source .venv/bin/activate && pytest -q"})
        assert (result.action, result.rule) == ("allow", None), result.reason


def test_the_token_files_are_reread_whenever_credentials_json_changes(
        home: Path, config_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from channels.config import files

    monkeypatch.setattr(files, "SETTLED_NS", 0)  # cached as soon as written
    path = config_dir / "credentials.json"
    for token in ("/abs/a.token", "/abs/b.token", "/abs/a.token"):  # same size, in place
        path.write_text(json.dumps({"telegram": {"a": {"tokenFile": token}}}))
        assert [Protected.discover(home, config_dir).token_files for _ in range(2)] == [
            (Path(token),)] * 2
    path.unlink()
    assert Protected.discover(home, config_dir).token_files == ()
