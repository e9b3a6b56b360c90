"""Collection routes: register from git, an uploaded archive or a server path; read."""

from __future__ import annotations

import tempfile
from typing import IO

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from posttrain_arena.service import collections as svc
from posttrain_arena.service import evidence as evidence_svc
from posttrain_arena.service import families
from posttrain_arena.service.api.deps import DbDep, PrincipalDep, SettingsDep
from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.db import Database
from posttrain_arena.service.errors import BadRequest, TooLarge
from posttrain_arena.service.models import Collection, TaskEvidenceRow
from posttrain_arena.service.schemas import (
    CollectionDetail,
    CollectionOut,
    GitSource,
    HeldFamilyOut,
    HfSource,
    PathSource,
    TaskEvidenceDetail,
    TaskEvidenceOut,
)

router = APIRouter(prefix="/api/collections", tags=["collections"])


@router.get("", response_model=list[CollectionOut])
def list_collections(db: DbDep, principal: PrincipalDep, owner: str | None = None,
                     limit: int = 100, offset: int = 0) -> list[CollectionOut]:
    """Registered collections, newest first (`owner=me` for your own, or a user id); the
    near-duplicate fields only on your own (all of them for editors)."""
    owner_id: int | None = None
    if owner == "me":
        if principal.user_id is None:
            return []
        owner_id = principal.user_id
    elif owner is not None:
        if not owner.isdigit():
            raise BadRequest("owner must be 'me' or a user id")
        owner_id = int(owner)
    with db.read() as s:
        rows, _ = svc.list_collections(s, owner_id, min(limit, 500), offset)
        return [families.row_for(principal, c) for c in rows]


@router.get("/held", response_model=list[HeldFamilyOut])
def held(db: DbDep, principal: PrincipalDep) -> list[HeldFamilyOut]:
    """Families held as near-duplicates of another account's collection, with the
    collection each matched and the command that releases it (editors)."""
    with db.read() as s:
        return families.held_families(s, principal)


@router.get("/{collection_id}", response_model=CollectionDetail)
def get(collection_id: int, db: DbDep, principal: PrincipalDep) -> CollectionDetail:
    """One collection with its structural findings; for its owner and editors, also
    whether it is held as a near-duplicate and which collection it matched."""
    with db.read() as s:
        return families.detail_for(s, principal, svc.get_collection(s, collection_id))


@router.get("/{collection_id}/evidence", response_model=list[TaskEvidenceOut])
def evidence(collection_id: int, db: DbDep, sort: str = "task") -> list[TaskEvidenceRow]:
    """The organizer gates' evidence per task (sort: task, eligible, learnable, flaky,
    probes, base; the worst first where that applies)."""
    with db.read() as s:
        return evidence_svc.list_evidence(s, collection_id, sort)


@router.get("/{collection_id}/evidence/{task}", response_model=TaskEvidenceDetail)
def task_evidence(collection_id: int, task: str, db: DbDep) -> TaskEvidenceRow:
    """One task's whole evidence record: every gate, trial, probe and base sample."""
    with db.read() as s:
        return evidence_svc.get_evidence(s, collection_id, task)


@router.post("/{collection_id}/clear-duplicate", response_model=CollectionDetail)
def clear_duplicate(collection_id: int, principal: PrincipalDep, db: DbDep
                    ) -> CollectionDetail:
    """Let a collection that near-duplicates another account's (and the rest of its
    family) launch as a family of its own (editors); answers with the family's first
    collection."""
    with db.write() as s:
        return families.detail_for(s, principal,
                                   families.clear_duplicate(s, principal, collection_id))


def _registered(db: Database, principal: Principal, col: Collection) -> CollectionDetail:
    """The answer to a registration: the new collection as its owner sees it."""
    with db.read() as s:
        return families.detail_for(s, principal, svc.get_collection(s, col.id))


@router.post("/git", response_model=CollectionDetail, status_code=201)
def from_git(body: GitSource, principal: PrincipalDep, db: DbDep, settings: SettingsDep
             ) -> CollectionDetail:
    """Register a collection from a git URL and ref (pinned to the resolved commit)."""
    staged = svc.stage_git(settings, principal, body)
    return _registered(db, principal, svc.register(db, settings, principal, staged))


@router.post("/hf", response_model=CollectionDetail, status_code=201)
def from_hf(body: HfSource, principal: PrincipalDep, db: DbDep, settings: SettingsDep
            ) -> CollectionDetail:
    """Register a collection from a public Hugging Face dataset,
    `hf://datasets/ORG/NAME@REVISION[/FOLDER]` (pinned to the revision's commit)."""
    staged = svc.stage_hf(settings, principal, body)
    return _registered(db, principal, svc.register(db, settings, principal, staged))


@router.post("/path", response_model=CollectionDetail, status_code=201)
def from_path(body: PathSource, principal: PrincipalDep, db: DbDep, settings: SettingsDep
              ) -> CollectionDetail:
    """Register a collection from a folder on the server."""
    staged = svc.stage_path(settings, principal, body)
    return _registered(db, principal, svc.register(db, settings, principal, staged))


@router.post(
    "/upload", response_model=CollectionDetail, status_code=201,
    openapi_extra={"requestBody": {"content": {
        "application/gzip": {"schema": {"type": "string", "format": "binary"}},
        "multipart/form-data": {"schema": {"type": "object", "properties": {
            "file": {"type": "string", "format": "binary"}}}},
    }}},
)
async def upload(request: Request, principal: PrincipalDep, db: DbDep, settings: SettingsDep,
                 name: str | None = None, filename: str = "upload.tar.gz"
                 ) -> CollectionDetail:
    """Register a collection from a tar.gz or zip archive: the raw body, or a multipart
    form field `file`. Bounded in size, safe against path traversal and links."""
    principal.require(Role.PARTICIPANT, "registering a collection")
    limit = settings.upload_max_bytes  # the whole body was bounded before (guard.py)
    spool: IO[bytes]
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form()
        field = form.get("file")
        if not isinstance(field, UploadFile):
            raise BadRequest("the form needs a file field named 'file'")
        spool, filename = field.file, field.filename or filename
        name = name or _text(form.get("name"))
    else:
        spool = tempfile.SpooledTemporaryFile(max_size=1 << 20)  # noqa: SIM115 (closed by GC)
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the upload is larger than {limit} bytes; remove large files "
                               "or register the collection from git")
            spool.write(chunk)
        spool.seek(0)
    staged = await run_in_threadpool(svc.stage_archive, settings, principal, spool, filename,
                                     name)
    col = await run_in_threadpool(svc.register, db, settings, principal, staged)
    return await run_in_threadpool(_registered, db, principal, col)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
