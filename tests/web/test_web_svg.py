"""The leaderboard plot: one row per ranked collection and per rejected result, positioned
by value, escaped labels, nothing for an empty board."""

from __future__ import annotations

import re

from posttrain_arena.service.schemas import Leaderboard, LeaderboardEntry, RejectedEntry
from posttrain_arena.service.web.svg import leaderboard_svg


def _entry(rank: int, name: str, mean: float, lo: float | None, hi: float | None
           ) -> LeaderboardEntry:
    return LeaderboardEntry(rank=rank, collection_id=rank, collection_name=name,
                            mean_change_pp=mean, n=1, ci_low=lo, ci_high=hi)


def test_empty_board_draws_nothing() -> None:
    assert leaderboard_svg(Leaderboard(challenge="c", ranked=[], ranked_total=0, rejected=[],
                                       pending=0)) == ""


def test_rows_are_placed_by_value_and_labels_escaped() -> None:
    board = Leaderboard(
        challenge="c",
        ranked=[_entry(1, "<b>best</b>", 10.0, 4.0, 16.0), _entry(2, "second", 2.0, None, None)],
        ranked_total=2,
        rejected=[RejectedEntry(result_id=9, run_id=9, collection_id=3, collection_name="bad",
                                change_pp=-5.0, note="leak")],
        pending=0,
    )
    svg = leaderboard_svg(board)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "<b>" not in svg and "&lt;b&gt;best&lt;/b&gt;" in svg
    dots = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg)]
    assert len(dots) == 3 and dots[2] < dots[1] < dots[0]  # -5 < 2 < 10
    assert svg.count('class="ci ranked"') == 1  # only the first has an interval
    zero = float(re.search(r'<line x1="([\d.]+)"[^>]*class="zero"', svg).group(1))  # type: ignore[union-attr]
    assert dots[2] < zero < dots[1]
    assert svg.count('class="dot rejected"') == 1
