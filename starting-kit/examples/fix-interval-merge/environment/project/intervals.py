"""Helpers for closed integer intervals, such as reserved time slots in minutes."""


def merge_intervals(intervals):
    """Merge overlapping or touching closed intervals.

    `intervals` is a list of (start, end) pairs with start <= end, in any order.
    Returns a new list of (start, end) tuples sorted by start in which no two
    intervals overlap or touch: (1, 3) and (3, 5) become (1, 5), while (1, 2) and
    (3, 4) stay separate. The input list is not modified.
    """
    merged = []
    for start, end in intervals:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def total_busy(intervals):
    """Total length covered by the intervals, counting shared stretches once."""
    return sum(end - start for start, end in merge_intervals(intervals))
