"""Leaderboard per challenge: collections ranked by mean change over accepted runs.

The interval is the run's own paired 95% interval when a collection has one accepted run,
and a t-interval of the mean over runs when it has several. Rejected results stay
visible, unranked. Aggregation happens in SQL (sum and sum of squares), so the cost is
one grouped query however many runs there are.

Results and reviews are append-only, so the pair (count, max id) of a challenge's
results and of all reviews changes whenever the leaderboard can change. Reads check that
version with one indexed query and reuse the computed board (and its JSON) otherwise:
exact across server processes, with no time-based staleness.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from posttrain_arena.service.challenges import get_challenge
from posttrain_arena.service.models import Challenge, Collection, Result, Review
from posttrain_arena.service.schemas import (
    Decision,
    Leaderboard,
    LeaderboardEntry,
    RejectedEntry,
)

# Two-sided 97.5% quantiles of Student's t, by degrees of freedom (normal beyond 30).
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95% interval with `df` degrees of freedom."""
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.960


_CACHE_SIZE = 64
_cache: OrderedDict[tuple[str, int, object], tuple[tuple[object, ...], Leaderboard, bytes]] = (
    OrderedDict()
)
_lock = threading.Lock()


def _version(session: Session, challenge_id: int) -> tuple[object, ...]:
    mine = Result.challenge_id == challenge_id
    row = session.execute(select(
        select(func.count(Result.id)).where(mine).scalar_subquery(),
        select(func.max(Result.id)).where(mine).scalar_subquery(),
        select(func.count(Review.id)).scalar_subquery(),
        select(func.max(Review.id)).scalar_subquery(),
    )).one()
    return tuple(row)


def leaderboard_cached(session: Session, challenge: str) -> tuple[Leaderboard, bytes]:
    """The leaderboard and its JSON, recomputed only when results or reviews changed."""
    ch = get_challenge(session, challenge)
    bind = session.get_bind()
    url = bind.url if isinstance(bind, Engine) else bind.engine.url
    key = (str(url), ch.id, ch.created_at)
    version = _version(session, ch.id)
    with _lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == version:
        return hit[1], hit[2]
    board = _compute(session, ch)
    data = board.model_dump_json().encode()
    with _lock:
        _cache[key] = (version, board, data)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return board, data


def leaderboard(session: Session, challenge: str) -> Leaderboard:
    """The leaderboard of one challenge."""
    return leaderboard_cached(session, challenge)[0]


def _compute(session: Session, ch: Challenge) -> Leaderboard:
    accepted = session.execute(
        select(
            Result.collection_id, Collection.name, func.count(Result.id),
            func.sum(Result.change_pp), func.sum(Result.change_pp * Result.change_pp),
            func.min(Result.ci_low), func.max(Result.ci_high),
        )
        .join(Review, Review.result_id == Result.id)
        .join(Collection, Collection.id == Result.collection_id)
        .where(Result.challenge_id == ch.id, Review.decision == Decision.ACCEPT.value)
        .group_by(Result.collection_id, Collection.name)
    ).all()
    entries = []
    for col_id, name, n, total, squares, lo1, hi1 in accepted:
        mean = total / n
        if n == 1:
            lo, hi = lo1, hi1
        else:
            var = max(0.0, (squares - n * mean * mean) / (n - 1))
            half = t975(n - 1) * math.sqrt(var / n)
            lo, hi = mean - half, mean + half
        entries.append(LeaderboardEntry(rank=None, collection_id=col_id, collection_name=name,
                                        mean_change_pp=mean, n=n, ci_low=lo, ci_high=hi))
    entries.sort(key=lambda e: (-e.mean_change_pp, -e.n, e.collection_id))
    for i, e in enumerate(entries, 1):
        e.rank = i
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
    return Leaderboard(challenge=ch.slug, ranked=entries, rejected=rejected, pending=pending)
