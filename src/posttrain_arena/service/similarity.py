"""Near-duplicate collections: which earlier collection a new one copies, by content.

The launch limits (one active run, the cooldown, the run count) would mean nothing if
each byte change made a new collection: one comment added to a task gives a new tree
hash. So they count runs per *family*: a collection whose packages are, up to small
edits, those of an earlier collection is that collection's near-duplicate. This module
says which collection that is; families.py says what follows (the same owner's copy
joins the family, anyone else's waits for an editor).

What "up to small edits" means, exactly:

- A package's text is every regular file under its directory (links are not followed),
  in path order, lower-cased and cut into words (runs of letters, digits and `_`);
  punctuation, white space and layout do not count. Its *shingles* are the runs of
  `SHINGLE` consecutive words.
- Two packages are similar when the Jaccard similarity of their shingle sets is at
  least `PACKAGE_SIMILAR`, estimated from MinHash signatures of `PERMUTATIONS` values
  (the share of equal values estimates it, within about ±0.06).
- A new collection N is a near-duplicate of an earlier collection C when at least
  `COLLECTION_SHARE` of N's packages each have a similar package in C. (So a copy with
  comments added, a few words changed, packages renamed or reordered, a subset of C's
  packages, or C plus a few new ones, are all near-duplicates of C; a collection most
  of whose packages are new is not.)

Candidates are found without reading every stored signature: each signature is cut
into `BANDS` bands of `ROWS` values, and each band's hash is stored in an indexed table
(locality-sensitive hashing). Two packages with Jaccard similarity 0.7 share at least
one band with probability 1 - (1 - 0.7^4)^16, about 0.99; at 0.3, a candidate is then
checked against its whole signatures and dropped. A candidate must share a key with
`COLLECTION_SHARE` of the new collection's packages, and candidates are ranked by how
many packages they reach (not by how many keys they share: decoys holding exact copies
of a few packages share many keys, yet would crowd out the real match). A lookup is one
indexed query plus a comparison with a handful of candidates' signatures
(benchmarks/bench_service.py --near-duplicates).
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Integer,
    any_,
    func,
    insert,
    literal,
    select,
    text,
)
from sqlalchemy.orm import Session, aliased

from posttrain_arena.service.models import Collection, PackageBand, PackagePrint

SHINGLE = 4
PERMUTATIONS = 64
BANDS, ROWS = 16, 4
PACKAGE_SIMILAR = 0.7
COLLECTION_SHARE = 0.8
#: what is read of one package, at most (a bound on hostile input; a collection's
#: registration bounds hold the whole tree too)
PACKAGE_READ_BYTES = 1 << 20
CANDIDATES = 8

_WORD = re.compile(rb"[a-z0-9_]+")
_MASK32 = np.uint64(0xFFFFFFFF)
_rng = np.random.default_rng(20261204)  # fixed: signatures must compare across processes
_A = _rng.integers(1, 2**63, PERMUTATIONS, dtype=np.uint64) | np.uint64(1)
_B = _rng.integers(0, 2**63, PERMUTATIONS, dtype=np.uint64)
_MIX = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                 0x27D4EB2F165667C5][:SHINGLE], dtype=np.uint64)
#: one query for the largest collection (200 packages x BANDS keys), within SQLite's
#: bound on parameters
_KEYS_PER_QUERY = 4000
_PG_LOCK = 724_312  # advisory lock: registrations are compared one at a time


@dataclass(frozen=True)
class PackagePrintData:
    """One package's MinHash signature (PERMUTATIONS unsigned 32-bit values)."""

    package: str
    signature: tuple[int, ...]

    def bands(self) -> list[int]:
        """The LSH band keys of the signature, as signed 64-bit integers (worked out once
        per signature: registration looks them up, then stores them)."""
        return list(self._bands)

    @functools.cached_property
    def _bands(self) -> tuple[int, ...]:
        keys = []
        for b in range(BANDS):
            part = self.signature[b * ROWS:(b + 1) * ROWS]
            digest = hashlib.blake2b(repr((b, part)).encode(), digest_size=8).digest()
            keys.append(int.from_bytes(digest, "big", signed=True))
        return tuple(keys)


@dataclass(frozen=True)
class Match:
    """The earlier collection a new one near-duplicates, and the share of its packages
    that have a similar package there."""

    collection_id: int
    family_id: int
    share: float


def package_text(path: Path, limit: int = PACKAGE_READ_BYTES) -> bytes:
    """A package's files, in path order (links not followed, at most `limit` bytes
    read)."""
    chunks: list[bytes] = []
    left = limit
    for dirpath, dirs, files in os.walk(path):  # never descends through a link
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(dirpath, name)
            try:
                info = os.lstat(full)
                if not stat.S_ISREG(info.st_mode):
                    continue
                with open(full, "rb") as fh:
                    data = fh.read(left)
            except OSError:
                continue
            chunks.append(data)
            left -= len(data)
            if left <= 0:
                return b"\n".join(chunks)
    return b"\n".join(chunks)


def signature(text_: bytes) -> tuple[int, ...] | None:
    """The MinHash signature of a text's word shingles (case ignored); None for a text
    without words."""
    words = _WORD.findall(text_.lower())
    if not words:
        return None
    ids = np.fromiter((zlib.crc32(w) for w in words), dtype=np.uint64, count=len(words))
    if len(ids) >= SHINGLE:
        windows = np.lib.stride_tricks.sliding_window_view(ids, SHINGLE)
        shingles = np.unique((windows * _MIX).sum(axis=1, dtype=np.uint64))
    else:
        shingles = np.unique(ids * _MIX[0])
    with np.errstate(over="ignore"):
        hashed = (shingles[:, None] * _A[None, :] + _B[None, :]) >> np.uint64(32)
    return tuple(int(v) for v in (hashed & _MASK32).min(axis=0))


def collection_prints(root: Path, packages: list[str]) -> list[PackagePrintData]:
    """The signature of each named package under `root/envs` (those with any words)."""
    out = []
    for name in packages:
        sig = signature(package_text(root / "envs" / name))
        if sig is not None:
            out.append(PackagePrintData(name, sig))
    return out


def _matrix(sigs: list[tuple[int, ...]] | list[list[int]]) -> np.ndarray:
    return np.asarray(sigs, dtype=np.uint32).reshape(len(sigs), PERMUTATIONS)


def shared_share(new: np.ndarray, old: np.ndarray) -> float:
    """The share of `new`'s packages (rows) that have a similar package in `old`."""
    if len(new) == 0 or len(old) == 0:
        return 0.0
    best = np.zeros(len(new))
    for start in range(0, len(old), 256):  # bounded memory: n x 256 x PERMUTATIONS
        block = old[start:start + 256]
        est = (new[:, None, :] == block[None, :, :]).mean(axis=2)
        best = np.maximum(best, est.max(axis=1))
    return float((best >= PACKAGE_SIMILAR).mean())


def find_match(session: Session, prints: list[PackagePrintData],
               family_owners: frozenset[int] | None = None) -> Match | None:
    """The earlier collection that `prints` (a new collection's) near-duplicates, or
    None. Among several, the one sharing most (then the oldest). With `family_owners`,
    only collections of families whose first collection one of those users owns count
    (families.py: a registrant's own families are looked for apart, so that nobody
    else's copies can crowd them out of the candidates)."""
    if not prints:
        return None
    # which of the new collection's packages carry each band key
    carriers: dict[int, list[int]] = {}
    for i, p in enumerate(prints):
        for k in set(p.bands()):
            carriers.setdefault(k, []).append(i)
    keys = sorted(carriers)
    reached: dict[int, set[int]] = {}  # collection -> the new packages it shares a key with
    for start in range(0, len(keys), _KEYS_PER_QUERY):
        q = (select(PackageBand.collection_id, PackageBand.band).distinct()
             .where(_one_of(session, keys[start:start + _KEYS_PER_QUERY])))
        if family_owners is not None:
            member, root = aliased(Collection), aliased(Collection)
            q = (q.join(member, member.id == PackageBand.collection_id)
                 .join(root, root.id == member.family_id)
                 .where(root.owner_id.in_(sorted(family_owners))))
        for cid, band in session.execute(q):
            reached.setdefault(cid, set()).update(carriers[band])
    # Each new package with a similar one in C shares at least one band key with C (with
    # high probability), so C must reach that many of the new packages. Candidates are
    # ranked by how many packages they reach, not by how many keys: a collection holding
    # exact copies of a few of the packages has many keys in common, yet reaches too few
    # packages to be a candidate, so such decoys cannot crowd the real match out.
    need = math.ceil(COLLECTION_SHARE * len(prints))
    candidates = sorted((c for c, pkgs in reached.items() if len(pkgs) >= need),
                        key=lambda c: (-len(reached[c]), c))[:CANDIDATES]
    new = _matrix([p.signature for p in prints])
    best: Match | None = None
    for cid in candidates:
        old = _matrix(list(session.scalars(
            select(PackagePrint.signature).where(PackagePrint.collection_id == cid))))
        share = shared_share(new, old)
        if share >= COLLECTION_SHARE and (best is None or share > best.share
                                          or (share == best.share and cid < best.collection_id)):
            family = session.scalar(select(Collection.family_id).where(Collection.id == cid))
            best = Match(cid, family or cid, share)
    return best


def _postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def _one_of(session: Session, keys: list[int]) -> ColumnElement[bool]:
    """`band` is one of `keys`: on PostgreSQL as one array parameter (`= ANY(...)`); a
    list of 3,200 placeholders costs the driver more to prepare than the lookup costs
    the server."""
    if _postgres(session):
        return PackageBand.band == any_(literal(keys, ARRAY(BigInteger)))
    return PackageBand.band.in_(keys)


def serialize(session: Session) -> None:
    """Make registrations compare and record one at a time (PostgreSQL: an advisory
    lock until the transaction ends; SQLite's write transactions already are)."""
    if _postgres(session):
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK})


def store(session: Session, collection_id: int, prints: list[PackagePrintData]) -> None:
    """Keep a recorded collection's signatures and band keys for later lookups (bulk
    inserts: a 200-package collection has 3,200 band keys, which as ORM objects cost
    registration most of its time; benchmarks/bench_service.py --near-duplicates)."""
    if not prints:
        return
    session.execute(insert(PackagePrint), [
        {"collection_id": collection_id, "package": p.package, "signature": list(p.signature)}
        for p in prints])
    keys = [k for p in prints for k in sorted(set(p.bands()))]
    if _postgres(session):  # one array parameter (see _one_of)
        session.execute(insert(PackageBand).from_select(
            ["collection_id", "band"],
            select(literal(collection_id, Integer),
                   func.unnest(literal(keys, ARRAY(BigInteger))))))
    else:
        session.execute(insert(PackageBand), [{"collection_id": collection_id, "band": k}
                                               for k in keys])
