"""The benches' side-by-side line: the paced figure per press comes from the passes' wall time,
and says what it measured (presses, chats, passes)."""

from __future__ import annotations

import pytest

from bench.common import PacedFigure, presses_per_chat, side_by_side


def test_paced_per_press_is_the_passes_wall_time_over_the_presses() -> None:
    lines = side_by_side(20.0, [PacedFigure(4, 1, (1.5, 2.5))])
    assert lines[0] == "  per press, unpaced (worker's own cost):      20.0 ms"
    assert lines[1] == ("  per press, paced, 1 chat:                  1000.0 ms (50.0x unpaced;"
                        " 4 presses in 1 chat, 2 passes back to back: 1.5+2.5 = 4.0 s with start-up)")


def test_one_line_per_figure_naming_its_chats_and_what_each_took() -> None:
    lines = side_by_side(10.0, [PacedFigure(10, 1, (15.0, 5.0)), PacedFigure(10, 5, (3.0,)),
                                PacedFigure(7, 5, (2.0, 1.5))])
    assert len(lines) == 4
    assert lines[2] == ("  per press, paced, 5 chats:                  300.0 ms (30.0x unpaced;"
                        " 10 presses over 5 chats, 2 each, 1 pass: 3.0 s with start-up)")
    assert "7 presses over 5 chats, 1-2 each, 2 passes back to back: 2.0+1.5 = 3.5 s with start-up" in lines[3]
    assert lines[3].split("ms")[0].endswith(" 500.0 ")  # 3.5 s over 7 presses


def test_the_figures_line_up_under_the_unpaced_one() -> None:
    lines = side_by_side(1.5, [PacedFigure(3, 1, (2.0,)), PacedFigure(3, 12, (0.5,))])
    assert len({line.index(" ms") for line in lines}) == 1


def test_no_unpaced_cost_gives_no_ratio() -> None:
    [_, line] = side_by_side(0.0, [PacedFigure(2, 1, (1.0,))])
    assert "(n/a unpaced; 2 presses in 1 chat, 1 pass: 1.0 s with start-up)" in line


def test_a_paced_figure_without_passes_is_refused() -> None:
    with pytest.raises(ValueError, match="'5 chats' has no presses or no passes"):
        side_by_side(20.0, [PacedFigure(5, 5, ())])


@pytest.mark.parametrize(("presses", "chats", "expected"), [
    (10, 5, [2, 2, 2, 2, 2]), (7, 5, [2, 2, 1, 1, 1]), (3, 5, [1, 1, 1, 0, 0]), (4, 1, [4])])
def test_presses_spread_round_robin_over_the_chats(presses: int, chats: int,
                                                    expected: list[int]) -> None:
    assert presses_per_chat(presses, chats) == expected
    assert sum(presses_per_chat(presses, chats)) == presses


def test_no_presses_or_no_chats_is_refused() -> None:
    with pytest.raises(ValueError, match="0 presses over 5 chats"):
        presses_per_chat(0, 5)
    with pytest.raises(ValueError, match="3 presses over 0 chats"):
        presses_per_chat(3, 0)
