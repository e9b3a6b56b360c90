"""Challenges: a pinned base model, recipe and sealed held-out suite, created by admins."""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath

from sqlalchemy import select
from sqlalchemy.orm import Session

from posttrain_arena import __version__
from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.errors import BadRequest, Conflict, NotFound
from posttrain_arena.service.models import Challenge
from posttrain_arena.service.schemas import ChallengeCreate, ChallengeOut, Health, HealthUpdate


def allowance(ch: Challenge) -> float:
    """Compute reserved per run: price per hour x timeout."""
    return ch.price_per_hour * ch.timeout_sec / 3600.0


def to_out(ch: Challenge) -> ChallengeOut:
    """The public view of a challenge (the suite's location and contents stay sealed)."""
    data = {c: getattr(ch, c) for c in ChallengeOut.model_fields if c != "allowance"}
    data.update(base_model=public_name(ch.base_model), recipe=public_name(ch.recipe))
    return ChallengeOut(**data, allowance=allowance(ch))


def public_name(value: str) -> str:
    """A model or recipe as everyone may see it: a server path (absolute, relative or
    under ~) shows only its last part, so the server's folders stay its own; a hub id such
    as `org/model` is shown whole. The hash beside it says exactly which one it is."""
    if value.startswith(("/", "./", "../", "~")) or "\\" in value:
        return PurePosixPath(value.replace("\\", "/")).name or "(server file)"
    return value


def inspect_suite(path: Path) -> tuple[str, int, dict[str, int]]:
    """(hash, size, tasks per domain) of a suite, computed as the pipeline computes them."""
    from posttrain_arena.evaluate.suite import SuiteError, load_suite

    try:
        suite = load_suite(path)
    except SuiteError as exc:
        raise BadRequest(str(exc)) from None
    counts = {d.value: n for d, n in sorted(suite.domain_counts().items())}
    return suite.hash, len(suite.tasks), counts


def create_challenge(session: Session, principal: Principal, body: ChallengeCreate) -> Challenge:
    """Create a challenge (admins only); hashes are computed from server paths if given."""
    principal.require(Role.ADMIN, "creating a challenge")
    if session.scalar(select(Challenge).where(Challenge.slug == body.slug)) is not None:
        raise Conflict(f"challenge {body.slug!r} already exists; pick another slug")
    recipe_hash = body.recipe_hash
    recipe_file = Path(body.recipe)
    if recipe_hash is None:
        if not recipe_file.is_file():
            raise BadRequest("give recipe_hash, or make `recipe` a server path to the recipe file")
        recipe_hash = "sha256:" + hashlib.sha256(recipe_file.read_bytes()).hexdigest()
    suite_hash, size, counts = body.suite_hash, body.suite_size, body.suite_domain_counts
    if body.suite_path is not None:
        suite_hash, size, counts = inspect_suite(Path(body.suite_path))
    if suite_hash is None or size is None or counts is None:
        raise BadRequest("give suite_path, or all of suite_hash, suite_size and "
                         "suite_domain_counts")
    ch = Challenge(
        slug=body.slug, title=body.title, description=body.description,
        base_model=body.base_model, base_model_revision=body.base_model_revision,
        recipe=body.recipe, recipe_hash=recipe_hash, suite_path=body.suite_path,
        suite_hash=suite_hash, suite_size=size, suite_domain_counts=counts,
        public_sample=body.public_sample, price_per_hour=body.price_per_hour,
        timeout_sec=body.timeout_sec, cooldown_sec=body.cooldown_sec,
        pipeline_version=body.pipeline_version or __version__, health=Health.OPEN.value,
        created_by=principal.user_id,
    )
    session.add(ch)
    session.flush()
    return ch


def list_challenges(session: Session) -> list[Challenge]:
    """Every challenge, oldest first."""
    return list(session.scalars(select(Challenge).order_by(Challenge.id)))


def get_challenge(session: Session, ref: str | int) -> Challenge:
    """A challenge by slug or numeric id; NotFound otherwise."""
    ch: Challenge | None = None
    if isinstance(ref, int) or str(ref).isdigit():
        ch = session.get(Challenge, int(ref))
    if ch is None:
        ch = session.scalar(select(Challenge).where(Challenge.slug == str(ref)))
    if ch is None:
        raise NotFound(f"no challenge {ref!r}; `arena challenges` lists them")
    return ch


def set_health(
    session: Session, principal: Principal, ref: str | int, update: HealthUpdate
) -> Challenge:
    """Open or pause a challenge (admins); pausing needs a reason."""
    principal.require(Role.ADMIN, "changing a challenge's health")
    ch = get_challenge(session, ref)
    if update.health is Health.PAUSED and not update.reason:
        raise BadRequest("pausing a challenge needs a reason")
    ch.health = update.health.value
    ch.health_reason = update.reason if update.health is Health.PAUSED else None
    return ch
