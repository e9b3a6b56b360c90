"""Leaderboard tiers: collections whose intervals overlap the tier's best are not ranked
apart from it."""

from __future__ import annotations

from posttrain_arena.service.leaderboard import assign_tiers
from posttrain_arena.service.schemas import LeaderboardEntry


def _entry(i: int, mean: float, low: float | None, high: float | None) -> LeaderboardEntry:
    return LeaderboardEntry(rank=i, collection_id=i, collection_name=f"c{i}",
                            mean_change_pp=mean, n=1, ci_low=low, ci_high=high)


def test_overlapping_intervals_share_a_tier() -> None:
    entries = [_entry(1, 12.0, 6.0, 18.0), _entry(2, 9.0, 2.0, 16.0),  # overlaps the best
               _entry(3, 1.0, -4.0, 5.5),  # clear of the best: a new tier
               _entry(4, -1.0, -6.0, 4.0),  # overlaps the new tier's first
               _entry(5, -20.0, -30.0, -10.0), _entry(6, -25.0, None, None)]
    assign_tiers(entries)
    assert [e.tier for e in entries] == [1, 1, 2, 2, 3, 4]


def test_noise_is_one_tier() -> None:
    entries = [_entry(i, 5.0 - i, -20.0, 20.0) for i in range(1, 6)]
    assign_tiers(entries)
    assert {e.tier for e in entries} == {1}
