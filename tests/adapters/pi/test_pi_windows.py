"""One bridge per Pi session, with real Pi (RPC mode, the scripted model): a second window on
the same session (`pi --continue`) waits while the first lives, also across the first's
`/reload` (whose old bridge keeps the lease for its new one), and takes over once the first
has gone."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from channels.decisions import workflows
from state.database import Database
from tests.adapters.pi.helpers import ask
from tests.adapters.pi.mock_model import MockModel, say
from tests.adapters.pi.rpc import RpcClient, bridge_command, is_notice, needs_pi, wait_until
from tests.adapters.pi.test_pi_defects import _answer_through_decision, _owner_of

pytestmark = needs_pi


def _window(db: Database, session_id: str) -> int | None:
    owner = _owner_of(db, session_id)
    return None if owner is None else workflows.owner_window(owner)


def test_a_second_window_waits_through_the_first_ones_reload_and_serves_once_it_has_gone(
        home: Path, db: Database, tmp_path: Path, model: MockModel) -> None:
    model.add(say("Hello."))
    bridge = bridge_command(tmp_path)
    first = RpcClient(home, bridge, session=())  # a session Pi keeps in a file
    second: RpcClient | None = None
    seen: list[int | None] = []
    stop = threading.Event()

    def watch() -> None:  # every owner the session's lease has, from now on
        with Database.open_reader(db.path) as reader:
            while not stop.is_set():
                seen.append(_window(reader, session_id))
                time.sleep(0.02)

    try:
        session_id = first.session_id()
        first.send({"id": "go", "type": "prompt", "message": "Hi"})
        first.wait_for(lambda m: m.get("type") == "agent_end", "the first turn")
        handle = ask(db)  # shown in the window that serves the session
        wait_until(lambda: _window(db, session_id) == first.proc.pid, "the first window's bridge")
        second = RpcClient(home, bridge, session=("--continue",))
        assert second.session_id() == session_id
        second.wait_for(is_notice("another bridge serves this Pi session; waiting for it"),
                        "the second window to wait")
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        old_owner = _owner_of(db, session_id)
        first.send({"id": "reload", "type": "prompt", "message": "/test-reload"})
        wait_until(lambda: _owner_of(db, session_id) not in (None, old_owner),
                   "the first window's new bridge to serve the session", timeout=30)
        assert _window(db, session_id) == first.proc.pid
        _answer_through_decision(first, "Approve the plan?")  # answered in the first window
        stop.set()
        watcher.join()
        assert second.proc.pid not in seen  # never, not even for a moment during the reload
        assert first.close() == 0
        wait_until(lambda: _window(db, session_id) == second.proc.pid,
                   "the second window to take over once the first has gone", timeout=30)
    finally:
        stop.set()
        code = first.close()
        if second is not None:
            second.close()
    assert code == 0
    resolution = db.conn.execute(
        "SELECT outcome, actor_id FROM human_decision_resolutions WHERE decision_id = ?",
        (handle.decision_id,)).fetchall()
    assert [r[0] for r in resolution] == ["accepted"]
