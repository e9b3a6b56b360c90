"""Collection families: whose launch limits a near-duplicate shares, and who may launch it.

A family is a collection and the later near-duplicates of it (similarity.py) that join
it; the launch limits (one active run, the cooldown, the run count) are the family's
(runs.py). A family belongs to the owner of its first collection, and to that owner's
team (`arena admin set-user NAME --team T`):

- A near-duplicate registered by the family's owner or a teammate joins the family and
  shares its limits: nobody multiplies their slots, cooldowns or runs by copying.
- A near-duplicate registered by anyone else registers (it loses nothing), but starts a
  family of its own, *held*: its `near_duplicate` check fails until an editor clears it
  (`clear_duplicate`), and cleared it launches with limits of its own. So copying a
  victim's collection and launching first cannot take the victim's slot, cooldown or
  run count (the copy's runs are never the victim's family's), and a copy registered
  from a second account cannot launch at all, so more accounts gain nothing.
- The held family's owner can add to it (a copy of their own held copy joins it), and
  everything in it is held with it: copying one's own copy does not escape the hold.

Which family a new collection joins: the best match over all collections decides,
unless that match's family belongs to someone else; then the registrant's own (or team's)
families are searched apart, so that others' copies of the registrant's work, however
many or however close, never decide it. Only when none of those matches is the new
collection another's copy. Registrations are compared one at a time
(`similarity.serialize`), so two near-copies cannot both start a family.

The decision is taken at registration, with the teams as they are then; an editor's
clearing settles any case it gets wrong (say, a fork made with the author's consent).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from posttrain_arena.service import similarity
from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.errors import Conflict, NotFound
from posttrain_arena.service.models import Collection, User, utcnow
from posttrain_arena.service.schemas import CheckStatus, PreflightCheck


@dataclass(frozen=True)
class Placement:
    """Where a new collection goes: the family it joins (None: it starts its own) and
    the earlier collection it near-duplicates, if any, with the share of its packages
    that are near-copies of that one's."""

    family_id: int | None
    near_duplicate_of: int | None = None
    similarity: float | None = None


def kin(session: Session, user_id: int) -> frozenset[int]:
    """The users whose families `user_id`'s near-duplicates join: the user and, when
    the user has a team, its members."""
    team = session.scalar(select(User.team).where(User.id == user_id))
    if not team:
        return frozenset({user_id})
    return frozenset(session.scalars(select(User.id).where(User.team == team))) | {user_id}


def place(session: Session, owner_id: int,
          prints: list[similarity.PackagePrintData]) -> Placement:
    """The family a collection of `owner_id` with package signatures `prints` joins."""
    match = similarity.find_match(session, prints)
    if match is None:
        return Placement(None)
    owners = kin(session, owner_id)
    first_owner = session.scalar(select(Collection.owner_id)
                                 .where(Collection.id == match.family_id))
    if first_owner not in owners:
        own = similarity.find_match(session, prints, family_owners=owners)
        if own is None:  # another's copy: a family of its own, held
            return Placement(None, match.collection_id, match.share)
        match = own
    return Placement(match.family_id, match.collection_id, match.share)


def first_of_family(session: Session, col: Collection) -> Collection:
    """The first collection of `col`'s family (`col` itself when it starts one)."""
    if col.family_id is None or col.family_id == col.id:
        return col
    return session.get(Collection, col.family_id) or col


def _held(first: Collection) -> bool:
    # Only a family started by another account's near-duplicate has a first collection
    # that near-duplicates anything: a copy by the owner's side joins, never starts one.
    return first.near_duplicate_of is not None and first.duplicate_cleared_at is None


def near_duplicate_check(session: Session, col: Collection) -> PreflightCheck:
    """The `near_duplicate` launch check: skip when `col` copies nothing, ok when it
    shares its own side's family (or an editor cleared it), FAIL while held."""
    name = "near_duplicate"
    if col.near_duplicate_of is None:
        return PreflightCheck(name=name, status=CheckStatus.SKIP,
                              reason="no earlier collection holds most of its packages")
    share = f"{100 * (col.similarity or 0):.0f}%"
    matched = (f"matches collection {col.near_duplicate_of}: {share} of its packages are "
               "near-copies of that collection's")
    first = first_of_family(session, col)
    if _held(first):
        whose = "" if first is col else (
            f"; its family's first collection, {first.id}, matches collection "
            f"{first.near_duplicate_of}")
        return PreflightCheck(name=name, status=CheckStatus.FAIL, reason=(
            f"{matched}{whose}, which another account registered first. It cannot launch "
            f"until an editor clears it (`arena admin clear-duplicate {first.id}`, or POST "
            f"/api/collections/{first.id}/clear-duplicate); cleared, it launches as a "
            "family of its own, with limits of its own"))
    if first is col:
        return PreflightCheck(name=name, status=CheckStatus.OK, reason=(
            f"{matched}, another account's; an editor cleared it, so it launches as "
            f"family {col.id}, with limits of its own"))
    return PreflightCheck(name=name, status=CheckStatus.OK, reason=(
        f"{matched}, so it shares the active-run slot, cooldown and run count of family "
        f"{first.id}"))


def clear_duplicate(session: Session, principal: Principal, collection_id: int) -> Collection:
    """Let the held family of `collection_id` launch as a family of its own (editors);
    returns the family's first collection. Clearing a cleared family changes nothing."""
    principal.require(Role.EDITOR, "clearing a near-duplicate")
    col = session.get(Collection, collection_id)
    if col is None:
        raise NotFound(f"no collection {collection_id}; `arena submit` registers one")
    first = first_of_family(session, col)
    if first.near_duplicate_of is None:
        raise Conflict(f"collection {collection_id} waits for no editor: its family starts "
                       f"with collection {first.id}, which copies no other account's "
                       "collection")
    if first.duplicate_cleared_at is None:
        first.duplicate_cleared_at, first.duplicate_cleared_by = utcnow(), principal.name
        session.flush()
    return first
