"""Real Pi (RPC mode): the extension survives a broken bridge and says what to do about it."""

from __future__ import annotations

from pathlib import Path

from state.database import Database
from tests.adapters.pi.helpers import ask
from tests.adapters.pi.rpc import RpcClient, bridge_command, is_notice, is_shown, needs_pi

pytestmark = needs_pi


def test_a_line_that_is_not_json_does_not_crash_pi(home: Path, db: Database,
                                                   tmp_path: Path) -> None:
    # D4: the bridge (or a wrapper around it) prints something that is not a protocol line.
    handle = ask(db)
    client = RpcClient(home, bridge_command(tmp_path, before='echo "warming up (not json)"'))
    try:
        client.wait_for(is_notice("not a protocol line"), "the notice about the bad line")
        client.wait_for(is_shown(handle.decision_id), "the decision, shown all the same")
        assert client.proc.poll() is None
    finally:
        code = client.close()
    assert code == 0


def test_a_bridge_that_cannot_start_shows_its_fix(home: Path, db: Database,
                                                  tmp_path: Path) -> None:
    # D6: the bridge exits 77 and prints the fix; Pi shows the fix, not only the exit code.
    state_dir = home / ".pi" / "agent" / "workflows"
    state_dir.chmod(0o755)
    client = RpcClient(home, bridge_command(tmp_path))
    try:
        notice = client.wait_for(is_notice("piw-channels bridge exited (77)"), "the exit notice")
        assert f"fix: chmod 700 {state_dir}" in notice["message"]
        assert notice["notifyType"] == "error"
    finally:
        state_dir.chmod(0o700)
        code = client.close()
    assert code == 0
