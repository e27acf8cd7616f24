"""The benches' side-by-side line: the paced figure per press comes from the passes' wall time."""

from __future__ import annotations

import pytest

from bench.common import side_by_side


def test_paced_per_press_is_the_passes_wall_time_over_the_presses() -> None:
    lines = side_by_side(20.0, {"one chat": (4, [1.5, 2.5])})
    assert lines[0] == "  per press, unpaced (worker's own cost):      20.0 ms"
    assert "1000.0 ms (50.0x unpaced; 4 presses, 2 passes, 4.0 s with start-up)" in lines[1]
    assert lines[1].startswith("  per press, paced, one chat:")


def test_a_paced_figure_without_passes_is_refused() -> None:
    with pytest.raises(ValueError, match="no presses or no passes"):
        side_by_side(20.0, {"five chats": (5, [])})
