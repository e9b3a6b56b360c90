"""Leaderboard per challenge: collections ranked by mean change over accepted runs.

An entry is a content hash (a tree), shown under its first registration: every scored
run of that tree on the challenge has a result (results.py), so every accepted run
counts, whichever registration of the tree it ran under.

The interval is the run's own paired 95% interval when a collection has one accepted run;
over several it combines the runs' task-sampling width with their seed spread
(`evaluate.stats.runs_interval`), so it never collapses when reruns agree. Rejected
results stay visible, unranked. Ranks order by mean, but a rank is not a difference:
entries are grouped into tiers, each holding the entries whose intervals overlap its
first (best) entry's, so collections the board cannot tell apart share a tier.
Aggregation happens in SQL (sum and sum of squares), so the cost is one grouped query
however many runs there are. The API serves it through the read cache (readcache.py),
which recomputes it only after the data changed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from posttrain_arena.evaluate.stats import runs_interval
from posttrain_arena.service.challenges import get_challenge
from posttrain_arena.service.models import Challenge, Collection, Result, Review
from posttrain_arena.service.schemas import (
    Decision,
    Leaderboard,
    LeaderboardEntry,
    RejectedEntry,
)


def leaderboard(session: Session, challenge: str, limit: int | None = None,
                offset: int = 0) -> Leaderboard:
    """The leaderboard of one challenge (by slug or id); ranked entries from `offset`,
    at most `limit` of them (all when None). Ranks count from the top of the board."""
    board = _compute(session, get_challenge(session, challenge))
    end = None if limit is None else offset + limit
    board.ranked = board.ranked[offset:end]
    return board


def assign_tiers(entries: list[LeaderboardEntry]) -> None:
    """Tiers over entries sorted best first: an entry whose interval overlaps the current
    tier's first entry's joins that tier; one clear of it (or without an interval, when
    the tier's first has one) starts the next."""
    head: LeaderboardEntry | None = None
    tier = 0
    for e in entries:
        if head is None or not _overlap(head, e):
            head, tier = e, tier + 1
        e.tier = tier


def _overlap(a: LeaderboardEntry, b: LeaderboardEntry) -> bool:
    if a.ci_low is None or a.ci_high is None or b.ci_low is None or b.ci_high is None:
        return False
    return a.ci_low <= b.ci_high and b.ci_low <= a.ci_high


def first_registrations(session: Session, hashes: list[str]) -> dict[str, tuple[int, str]]:
    """(id, name) of the first collection registered with each content hash."""
    if not hashes:
        return {}
    firsts = (select(func.min(Collection.id)).where(Collection.content_hash.in_(hashes))
              .group_by(Collection.content_hash))
    rows = session.execute(select(Collection.content_hash, Collection.id, Collection.name)
                           .where(Collection.id.in_(firsts)))
    return {h: (i, n) for h, i, n in rows}


def _compute(session: Session, ch: Challenge) -> Leaderboard:
    # One entry per content hash: the same tree registered again (under a new id, by
    # anyone) adds its runs to the entry of its first registration, never a second entry.
    grouped = session.execute(
        select(
            Collection.content_hash, func.count(Result.id),
            func.sum(Result.change_pp), func.sum(Result.change_pp * Result.change_pp),
            func.min(Result.ci_low), func.max(Result.ci_high),
            func.count(Result.ci_low),
            func.sum((Result.ci_high - Result.ci_low) * (Result.ci_high - Result.ci_low)),
        )
        .join(Review, Review.result_id == Result.id)
        .join(Collection, Collection.id == Result.collection_id)
        .where(Result.challenge_id == ch.id, Review.decision == Decision.ACCEPT.value)
        .group_by(Collection.content_hash)
    ).all()
    first = first_registrations(session, [row[0] for row in grouped])
    accepted: list[tuple[Any, ...]] = [(*first[content_hash], *rest)
                                       for content_hash, *rest in grouped]
    entries = []
    for col_id, name, n, total, squares, lo1, hi1, n_ci, widths_sq in accepted:
        mean = total / n
        if n == 1:
            lo, hi = lo1, hi1
        else:
            var = max(0.0, (squares - n * mean * mean) / (n - 1))
            mean_sq_half = (widths_sq or 0.0) / (4 * n_ci) if n_ci else 0.0
            lo, hi = runs_interval(n, mean, var, mean_sq_half)
        entries.append(LeaderboardEntry(rank=None, collection_id=col_id, collection_name=name,
                                        mean_change_pp=mean, n=n, ci_low=lo, ci_high=hi))
    entries.sort(key=lambda e: (-e.mean_change_pp, -e.n, e.collection_id))
    for i, e in enumerate(entries, 1):
        e.rank = i
    assign_tiers(entries)
    rejected = [
        RejectedEntry(result_id=rid, run_id=run_id, collection_id=col_id,
                      collection_name=name, change_pp=change, note=note)
        for rid, run_id, col_id, change, name, note in session.execute(
            select(Result.id, Result.run_id, Result.collection_id, Result.change_pp,
                   Collection.name, Review.note)
            .join(Review, Review.result_id == Result.id)
            .join(Collection, Collection.id == Result.collection_id)
            .where(Result.challenge_id == ch.id, Review.decision == Decision.REJECT.value)
            .order_by(Result.id.desc()).limit(200)
        )
    ]
    pending = session.scalar(
        select(func.count(Result.id)).outerjoin(Review, Review.result_id == Result.id)
        .where(Result.challenge_id == ch.id, Review.id.is_(None))
    ) or 0
    return Leaderboard(challenge=ch.slug, ranked=entries, ranked_total=len(entries),
                       rejected=rejected, pending=pending)
