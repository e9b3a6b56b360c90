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

Who is told (`detail_for`, `row_for`, `held_families`): a collection's owner and editors
see whether it is held and which collection it matched (by id, as the launch check says
it; never the matched collection's owner); everyone else sees none of it, so a public
page or answer never says who copied whose collection. Editors list the held families,
with the command that releases each.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from posttrain_arena.service import similarity
from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.errors import Conflict, NotFound
from posttrain_arena.service.models import Collection, User, utcnow
from posttrain_arena.service.schemas import (
    CheckStatus,
    CollectionDetail,
    CollectionOut,
    DuplicateOut,
    DuplicateState,
    HeldFamilyOut,
    PreflightCheck,
)
from posttrain_arena.service.views import user_names


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
            f"until an editor clears it (`{clear_command(first.id)}`, or POST "
            f"/api/collections/{first.id}/clear-duplicate); cleared, it launches as a "
            "family of its own, with limits of its own"))
    if first is col:
        return PreflightCheck(name=name, status=CheckStatus.OK, reason=(
            f"{matched}, another account's; an editor cleared it, so it launches as "
            f"family {col.id}, with limits of its own"))
    return PreflightCheck(name=name, status=CheckStatus.OK, reason=(
        f"{matched}, so it shares the active-run slot, cooldown and run count of family "
        f"{first.id}"))


def clear_command(first_id: int) -> str:
    """The command that lets the held family starting with `first_id` launch."""
    return f"arena admin clear-duplicate {first_id}"


def duplicate_view(session: Session, col: Collection) -> DuplicateOut | None:
    """Where `col` stands as a near-duplicate (None when it copies nothing): joined to its
    own side's family, held, or cleared; with the matched collection's id."""
    if col.near_duplicate_of is None:
        return None
    first = first_of_family(session, col)
    held = _held(first)
    if held:
        state = DuplicateState.HELD
    else:
        state = DuplicateState.CLEARED if first is col else DuplicateState.JOINED
    return DuplicateOut(
        state=state, near_duplicate_of=col.near_duplicate_of,
        similarity=col.similarity or 0.0, family_id=first.id,
        family_matches=None if first is col else first.near_duplicate_of,
        reason=near_duplicate_check(session, col).reason,
        clear_command=clear_command(first.id) if held else None)


def may_see_duplicate(principal: Principal, col: Collection) -> bool:
    """Whether `principal` is told where `col` stands as a near-duplicate: its owner and
    editors are."""
    return (principal.user_id is not None and principal.user_id == col.owner_id) or \
        principal.at_least(Role.EDITOR)


def row_for(principal: Principal, col: Collection) -> CollectionOut:
    """A collection as a list shows it to `principal`: the near-duplicate fields only
    for its owner and editors."""
    out = CollectionOut.model_validate(col)
    if not may_see_duplicate(principal, col):
        out.near_duplicate_of = out.similarity = out.duplicate_cleared_at = None
    return out


def detail_for(session: Session, principal: Principal, col: Collection) -> CollectionDetail:
    """A collection as its page and the API show it to `principal`: for its owner and
    editors with its near-duplicate standing (`duplicate`), for others without it."""
    out = CollectionDetail.model_validate(col)
    if may_see_duplicate(principal, col):
        out.duplicate = duplicate_view(session, col)
    else:
        out.near_duplicate_of = out.similarity = out.duplicate_cleared_at = None
    return out


def held_families(session: Session, principal: Principal) -> list[HeldFamilyOut]:
    """The families held as another account's near-duplicate, oldest first, with the
    collection each matched and the command that releases it (editors)."""
    principal.require(Role.EDITOR, "listing held near-duplicates")
    firsts = list(session.scalars(
        select(Collection).where(Collection.near_duplicate_of.is_not(None),
                                 Collection.duplicate_cleared_at.is_(None),
                                 Collection.family_id == Collection.id)
        .order_by(Collection.id)))
    if not firsts:
        return []
    matched = {c.id: c for c in session.scalars(select(Collection).where(
        Collection.id.in_({f.near_duplicate_of for f in firsts})))}
    owners = {c.owner_id for c in firsts} | {c.owner_id for c in matched.values()}
    names = user_names(session, owners)
    members: dict[int | None, int] = {
        family: n for family, n in session.execute(
            select(Collection.family_id, func.count()).where(
                Collection.family_id.in_([f.id for f in firsts]))
            .group_by(Collection.family_id))}
    out = []
    for f in firsts:
        m = matched.get(f.near_duplicate_of or 0)
        out.append(HeldFamilyOut(
            id=f.id, name=f.name, owner=names.get(f.owner_id, f"user {f.owner_id}"),
            near_duplicate_of=f.near_duplicate_of or 0,
            matched_name=m.name if m else "(removed)",
            matched_owner=names.get(m.owner_id, f"user {m.owner_id}") if m else "—",
            similarity=f.similarity or 0.0, members=members.get(f.id, 1),
            created_at=f.created_at, clear_command=clear_command(f.id)))
    return out


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
