"""The README's rehearsal, run word for word by bash on a fresh HOME (tests.readme_blocks)."""

from __future__ import annotations

import re
from pathlib import Path

from tests import readme_blocks

SECTION = "### Rehearse the setup against the fake Bot API"
README_PORT = "8765"


def test_the_readme_rehearsal_runs_to_the_end_on_a_fresh_home(tmp_path: Path) -> None:
    script = readme_blocks.block(SECTION)
    assert "demo --reply" in script and "--text-choice" in script
    port = readme_blocks.free_port()
    done = readme_blocks.run(tmp_path, script, README_PORT, port)
    out = done.stdout
    assert (done.returncode, done.stderr) == (0, ""), out
    assert f"Fake Bot API: http://127.0.0.1:{port}" in out
    assert "typed reply (text): use the staging db" in out
    assert re.search(r"^decision-\S+ +\S+ +\d+ s +workflow +\S+ +operator +accepted +Replan"
                     r" +telegram:default ",
                     out, re.M), out
    # The chat transcript, printed by the background demo --serve into the same terminal.
    assert re.search(r"^\d\d:\d\d:\d\d Ada pressed \[ Replan \] on “.+”$", out, re.M), out
    assert re.search(r"^\d\d:\d\d:\d\d Ada ↪ replying to “Replan: What should change\?”:\n"
                     r"    use the staging db$", out, re.M), out
    assert re.search(r"^\d\d:\d\d:\d\d buttons of “.+” are now:$", out, re.M), out
    assert re.search(r"^    \[ ✓ Replan \]$", out, re.M), out
    assert re.search(r"^\d\d:\d\d:\d\d PiW Decisions reacted 👍 to “use the staging db”$",
                     out, re.M), out
    assert not (tmp_path / "home").exists()
    assert list(tmp_path.glob("tmp.*/piw-demo.token")) == []  # kill %1 removed it
