"""ORM tables of the Arena service. Times are naive UTC (`utcnow()`), on every backend."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    """The current time as naive UTC, the form stored in every table."""
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON, datetime: DateTime()}


USER_NAME_MAX = 100
"""Longest user name the users table holds (local names and `hf:NAME` alike)."""


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(USER_NAME_MAX), unique=True)
    role: Mapped[str] = mapped_column(String(20))
    external_id: Mapped[str | None] = mapped_column(String(200), unique=True)
    #: whether the account may launch runs: local accounts are; an external sign-in's
    #: account is once an admin approves it or its name is on the allowlist (auth.py)
    approved: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    team: Mapped[str | None] = mapped_column(String(100), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class WebSession(Base):
    """A web sign-in (sessions.py): the browser holds a signed cookie naming it; signing
    out revokes the row, and it ends at `expires_at` whatever the cookie says."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_at: Mapped[datetime] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Quota(Base):
    """An organizer's cap on what one user or one team may spend (budget.py), on top
    of the global cap."""

    __tablename__ = "quotas"
    __table_args__ = (UniqueConstraint("kind", "name", name="uq_quotas_kind_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(10))
    name: Mapped[str] = mapped_column(String(USER_NAME_MAX))
    cap: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class Challenge(Base):
    __tablename__ = "challenges"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    base_model: Mapped[str] = mapped_column(String(300))
    base_model_revision: Mapped[str] = mapped_column(String(100))
    recipe: Mapped[str] = mapped_column(String(500))
    recipe_hash: Mapped[str] = mapped_column(String(80))
    suite_path: Mapped[str | None] = mapped_column(String(1000))
    suite_hash: Mapped[str] = mapped_column(String(80))
    suite_size: Mapped[int] = mapped_column(Integer)
    suite_domain_counts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    public_sample: Mapped[list[Any]] = mapped_column(default=list)
    price_per_hour: Mapped[float] = mapped_column(Float)
    timeout_sec: Mapped[int] = mapped_column(Integer)
    cooldown_sec: Mapped[int] = mapped_column(Integer, default=0)
    pipeline_version: Mapped[str] = mapped_column(String(100))
    health: Mapped[str] = mapped_column(String(20), default="open")
    health_reason: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Collection(Base):
    __tablename__ = "collections"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    source_kind: Mapped[str] = mapped_column(String(20))
    source_url: Mapped[str | None] = mapped_column(String(1000))
    source_ref: Mapped[str | None] = mapped_column(String(300))
    commit: Mapped[str | None] = mapped_column(String(64))
    content_hash: Mapped[str] = mapped_column(String(80), index=True)
    #: the first collection of this one's family (its own id when it starts one): every
    #: launch limit counts runs per family; a near-duplicate joins the family of the
    #: collection it copies only when the same owner or team holds it (families.py)
    family_id: Mapped[int | None] = mapped_column(Integer, index=True)
    near_duplicate_of: Mapped[int | None] = mapped_column(Integer)
    similarity: Mapped[float | None] = mapped_column(Float)
    #: when (and by whom) an editor let a family that starts with another account's
    #: near-duplicate launch as a family of its own; until then it cannot launch
    duplicate_cleared_at: Mapped[datetime | None] = mapped_column()
    duplicate_cleared_by: Mapped[str | None] = mapped_column(String(USER_NAME_MAX))
    storage_path: Mapped[str] = mapped_column(String(1000))
    task_count: Mapped[int] = mapped_column(Integer, default=0)
    eligible_count: Mapped[int] = mapped_column(Integer, default=0)
    domain_counts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    error_count: Mapped[int] = mapped_column(Integer, default=0)
    warning_count: Mapped[int] = mapped_column(Integer, default=0)
    findings: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("created_by", "request_id", name="uq_runs_request"),
        Index("ix_runs_collection_state", "collection_id", "state"),
        Index("ix_runs_challenge_id", "challenge_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    challenge_id: Mapped[int] = mapped_column(ForeignKey("challenges.id"))
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id"))
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    request_id: Mapped[str] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(20), index=True)
    stage: Mapped[str | None] = mapped_column(String(50))
    stages_done: Mapped[list[Any]] = mapped_column(default=list)
    #: why it failed, was canceled or requeued: a class with fixed public text
    #: (reasons.py); `detail` is the full text, for editors only
    reason_class: Mapped[str | None] = mapped_column(String(30))
    detail: Mapped[str | None] = mapped_column("reason", Text)
    reserved: Mapped[float] = mapped_column(Float, default=0.0)
    cost: Mapped[float | None] = mapped_column(Float)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker_id: Mapped[str | None] = mapped_column(String(100))
    heartbeat_at: Mapped[datetime | None] = mapped_column()
    run_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    score: Mapped[dict[str, Any] | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()


class Result(Base):
    """A collected run result. Append-only: never updated; reviews are separate rows."""

    __tablename__ = "results"
    __table_args__ = (Index("ix_results_challenge", "challenge_id", "collection_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), unique=True)
    challenge_id: Mapped[int] = mapped_column(ForeignKey("challenges.id"))
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id"))
    base_pass_rate: Mapped[float] = mapped_column(Float)
    final_pass_rate: Mapped[float] = mapped_column(Float)
    change_pp: Mapped[float] = mapped_column(Float)
    ci_low: Mapped[float | None] = mapped_column(Float)
    ci_high: Mapped[float | None] = mapped_column(Float)
    per_domain: Mapped[dict[str, Any]] = mapped_column(default=dict)
    n_tasks: Mapped[int] = mapped_column(Integer)
    suite_size: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Review(Base):
    """An editor's decision on a result; one per result, append-only."""

    __tablename__ = "reviews"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("results.id"), unique=True)
    editor_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    decision: Mapped[str] = mapped_column(String(10))
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Budget(Base):
    """The single global compute budget (row id 1)."""

    __tablename__ = "budget"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cap: Mapped[float] = mapped_column(Float)
    reserved: Mapped[float] = mapped_column(Float, default=0.0)
    spent: Mapped[float] = mapped_column(Float, default=0.0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class DataVersion(Base):
    """Change counters (one row, id 1; a column per table) that database triggers raise
    with every committed change to that table (migration 0002). A reader that sees the
    same counters as before knows those tables are as they were (readcache.py)."""

    __tablename__ = "data_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    challenges: Mapped[int] = mapped_column(BigInteger, server_default="0")
    collections: Mapped[int] = mapped_column(BigInteger, server_default="0")
    runs: Mapped[int] = mapped_column(BigInteger, server_default="0")
    results: Mapped[int] = mapped_column(BigInteger, server_default="0")
    reviews: Mapped[int] = mapped_column(BigInteger, server_default="0")
    #: raised by changes that can move a run between pages or filters (migration 0003)
    run_members: Mapped[int] = mapped_column(BigInteger, server_default="0")


class RunChange(Base):
    """Which run each change to `runs` touched, under the `data_version.runs` value it
    raised the counter to (triggers of migration 0003; the last 100,000 are kept)."""

    __tablename__ = "run_changes"

    version: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    run_id: Mapped[int] = mapped_column(Integer)


class PackagePrint(Base):
    """One task package's MinHash signature (similarity.py), for checking a collection
    against a candidate's packages."""

    __tablename__ = "package_prints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id"), index=True)
    package: Mapped[str] = mapped_column(String(200))
    signature: Mapped[list[Any]] = mapped_column()


class PackageBand(Base):
    """One LSH band key of a package's signature: collections sharing a key are the
    candidates a new collection is compared with."""

    __tablename__ = "package_bands"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id"))
    band: Mapped[int] = mapped_column(BigInteger, index=True)


class Thread(Base):
    __tablename__ = "threads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    title: Mapped[str] = mapped_column(String(200))
    author_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_post_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_author_time", "author_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    thread_id: Mapped[int] = mapped_column(ForeignKey("threads.id"), index=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class TaskEvidenceRow(Base):
    """The latest gate evidence of one task of a collection (posttrain_arena.gates): the
    sortable summary in columns, the whole TaskEvidence record in `record`."""

    __tablename__ = "task_evidence"
    __table_args__ = (UniqueConstraint("collection_id", "task", name="uq_task_evidence"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id"), index=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    task: Mapped[str] = mapped_column(String(200))
    task_checksum: Mapped[str] = mapped_column(String(80))
    evidence_key: Mapped[str] = mapped_column(String(64))
    harness_version: Mapped[str] = mapped_column(String(100))
    eligible: Mapped[bool] = mapped_column(Boolean)
    learnable: Mapped[str] = mapped_column(String(20))
    flake_rate: Mapped[float | None] = mapped_column(Float)
    probe_failures: Mapped[int] = mapped_column(Integer, default=0)
    base_pass_rate: Mapped[float | None] = mapped_column(Float)
    reasons: Mapped[list[Any]] = mapped_column(default=list)
    record: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
