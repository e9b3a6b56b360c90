from intervals import merge_intervals, total_busy


def test_disjoint_sorted_intervals_are_kept():
    assert merge_intervals([(1, 2), (5, 8)]) == [(1, 2), (5, 8)]


def test_overlapping_pair_merges():
    assert merge_intervals([(1, 4), (2, 6)]) == [(1, 6)]


def test_total_busy_of_disjoint_intervals():
    assert total_busy([(0, 30), (60, 90)]) == 60
