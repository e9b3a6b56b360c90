"""Read helpers the web pages need beyond the API's: a collection's task list and origin,
and user names.

A collection's tasks are read from its pinned tree on the server (never from a challenge's
sealed suite); the list is cached per content hash, since a registered tree never changes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from posttrain_arena.service.hfsource import parse_hf_url
from posttrain_arena.service.models import Collection, User
from posttrain_arena.service.schemas import SourceKind
from posttrain_arena.task_format.collection import check_collection


class TaskRow(BaseModel):
    """One task package of a registered collection, as the pages list it."""

    name: str = Field(description="The package's folder name under envs/")
    domain: str | None = Field(description="metadata.category slug, when it parsed")
    eligible: bool = Field(description="Whether the package passed the structural checks")
    errors: int = Field(description="Blocking findings for this package")
    warnings: int = Field(description="Warnings for this package")


@functools.lru_cache(maxsize=256)
def _tasks(storage_path: str, content_hash: str) -> tuple[TaskRow, ...]:
    del content_hash  # part of the cache key only
    root = Path(storage_path)
    if not root.is_dir():
        return ()
    report = check_collection(root)
    return tuple(
        TaskRow(name=t.name, domain=t.domain, eligible=not t.errors, errors=len(t.errors),
                warnings=len(t.warnings))
        for t in report.tasks
    )


def collection_tasks(col: Collection) -> list[TaskRow]:
    """The task packages of a registered collection: names, domains, check status."""
    return list(_tasks(col.storage_path, col.content_hash))


def collection_names(session: Session, ids: Iterable[int | None]) -> dict[int, str]:
    """Collection id -> name for the given ids (unknown ids are left out)."""
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    rows = session.execute(select(Collection.id, Collection.name)
                           .where(Collection.id.in_(wanted)))
    return {cid: name for cid, name in rows}


def user_names(session: Session, ids: Iterable[int | None]) -> dict[int, str]:
    """User id -> name for the given ids (unknown ids are left out)."""
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    rows = session.execute(select(User.id, User.name).where(User.id.in_(wanted)))
    return {uid: name for uid, name in rows}


class Origin(BaseModel):
    """Where a collection's files came from, as its page shows it."""

    label: str = Field(description="What the source is, in words")
    href: str | None = Field(default=None, description="A page showing the pinned files")


def collection_origin(col: Collection, hf_endpoint: str) -> Origin:
    """The origin of a registered collection: a Hugging Face dataset at its pinned commit
    (linked on the hub), a git repository, an upload or a server folder."""
    if col.source_kind == SourceKind.HF.value and col.source_url and col.commit:
        ds = parse_hf_url(col.source_url)
        folder = f", folder {ds.path}" if ds.path else ""
        return Origin(label=f"Hugging Face dataset {ds.repo_id} at {ds.revision}{folder}",
                      href=ds.tree_url(hf_endpoint, col.commit))
    if col.source_kind == SourceKind.GIT.value:
        return Origin(label=f"git repository {col.source_url} at {col.source_ref}")
    if col.source_kind == SourceKind.PATH.value:
        return Origin(label=f"server folder {col.source_url}")
    return Origin(label=f"uploaded archive {col.source_url or ''}".strip())
