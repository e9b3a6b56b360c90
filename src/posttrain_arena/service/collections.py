"""Collections: registered from git, a Hugging Face dataset, an uploaded archive or a server
path; checked; pinned.

Registration happens in two steps so that slow file work (a git fetch, unpacking) never
holds a database transaction: `stage_*` produces a checked tree in a staging folder,
then `record` stores the row and moves the tree to `DATA_DIR/collections/<id>`.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from posttrain_arena.service import families, similarity
from posttrain_arena.service.archive import extract_archive
from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.checking import CollectionSummary, check_collection_dir
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database
from posttrain_arena.service.errors import BadRequest, Forbidden, NotFound, TooLarge
from posttrain_arena.service.gitsource import fetch_git
from posttrain_arena.service.hfsource import hub_remote, parse_hf_url, resolve_revision
from posttrain_arena.service.models import Collection
from posttrain_arena.service.schemas import GitSource, HfSource, PathSource, SourceKind
from posttrain_arena.service.sourceurl import SourcePolicy, check_git_url


@dataclass
class Staged:
    """A fetched and checked collection tree, not yet recorded."""

    staging: Path
    root: Path
    kind: SourceKind
    name: str
    summary: CollectionSummary
    url: str | None = None
    ref: str | None = None
    commit: str | None = None
    prints: list[similarity.PackagePrintData] = field(default_factory=list)


def _staging_dir(settings: Settings) -> Path:
    d = settings.collections_dir / f".staging-{uuid.uuid4().hex}"
    d.mkdir(parents=True)
    return d


def _finish(staging: Path, root: Path, kind: SourceKind, name: str, **kw: str | None) -> Staged:
    try:
        summary = check_collection_dir(root)
        prints = similarity.collection_prints(root, summary.eligible)
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Staged(staging=staging, root=root, kind=kind, name=name[:200], summary=summary,
                  prints=prints, **kw)


def source_policy(settings: Settings, principal: Principal) -> SourcePolicy:
    """What `principal` may fetch: editors and admins also reach the server's disk."""
    return SourcePolicy(trusted=principal.at_least(Role.EDITOR),
                        https_hosts=tuple(settings.git_https_hosts),
                        http_hosts=tuple(settings.git_http_hosts))


def stage_git(settings: Settings, principal: Principal, src: GitSource) -> Staged:
    """Fetch a git repository at a ref (pinned to its commit) and check it."""
    principal.require(Role.PARTICIPANT, "registering a collection")
    remote = check_git_url(src.url, source_policy(settings, principal))
    staging = _staging_dir(settings)
    try:
        root, commit = fetch_git(remote, src.ref, staging / "tree",
                                 settings.unpacked_max_bytes, settings.max_files,
                                 settings.git_timeout_sec)
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    name = src.name or src.url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    return _finish(staging, root, SourceKind.GIT, name, url=src.url, ref=src.ref, commit=commit)


def stage_hf(settings: Settings, principal: Principal, src: HfSource) -> Staged:
    """Resolve a Hugging Face dataset revision to its commit, fetch that commit from the
    hub's git server (the same bounds as git) and check the folder asked for."""
    principal.require(Role.PARTICIPANT, "registering a collection")
    ds = parse_hf_url(src.url)
    commit = resolve_revision(settings.hf_endpoint, ds, settings.git_timeout_sec)
    staging = _staging_dir(settings)
    try:
        root, commit = fetch_git(hub_remote(settings.hf_endpoint, ds),
                                 ds.revision,
                                 staging / "tree", settings.unpacked_max_bytes,
                                 settings.max_files, settings.git_timeout_sec,
                                 subdir=ds.path, expect=commit)
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    name = src.name or (ds.path or ds.repo_id).rstrip("/").rsplit("/", 1)[-1]
    return _finish(staging, root, SourceKind.HF, name, url=src.url.strip(), ref=ds.revision,
                   commit=commit)


def save_upload(stream: IO[bytes], dest: Path, max_bytes: int) -> None:
    """Copy an uploaded stream to `dest`, refusing more than `max_bytes`."""
    total = 0
    with dest.open("wb") as out:
        for chunk in _chunks(stream):
            total += len(chunk)
            if total > max_bytes:
                raise TooLarge(f"the upload is larger than {max_bytes} bytes; remove large "
                               "files or register the collection from git")
            out.write(chunk)
    if total == 0:
        raise BadRequest("the upload is empty; send a tar.gz or zip archive")


def _chunks(stream: IO[bytes]) -> Iterator[bytes]:
    while chunk := stream.read(1 << 16):
        yield chunk


def stage_archive(
    settings: Settings, principal: Principal, stream: IO[bytes], filename: str,
    name: str | None = None,
) -> Staged:
    """Save and safely unpack an uploaded tar.gz/zip archive, then check it."""
    principal.require(Role.PARTICIPANT, "registering a collection")
    staging = _staging_dir(settings)
    try:
        archive = staging / "upload"
        save_upload(stream, archive, settings.upload_max_bytes)
        root = extract_archive(archive, staging / "tree", settings.unpacked_max_bytes,
                               settings.max_files)
        archive.unlink()
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    default = Path(filename or "upload").name
    for suffix in (".tar.gz", ".tgz", ".tar", ".zip"):
        default = default.removesuffix(suffix)
    return _finish(staging, root, SourceKind.ARCHIVE, name or default, url=filename or None)


def stage_path(settings: Settings, principal: Principal, src: PathSource) -> Staged:
    """Copy a server folder (links kept as links, never followed) and check it."""
    principal.require(Role.PARTICIPANT, "registering a collection")
    path = Path(src.path).resolve()
    if not principal.at_least(Role.EDITOR) and not any(
        path.is_relative_to(r.resolve()) for r in settings.path_roots
    ):
        raise Forbidden("registering a server path is for editors, or for paths under the "
                        "configured ARENA_PATH_ROOTS; upload an archive instead")
    if not path.is_dir():
        raise BadRequest(f"{src.path} is not a directory on the server")
    files = 0
    for _dirpath, dirs, names in os.walk(path):
        files += len(names) + len(dirs)  # a folder costs an inode as a file does
        if files > settings.max_files:
            raise TooLarge(f"{src.path} holds more than {settings.max_files} files and "
                           "folders")
    staging = _staging_dir(settings)
    try:
        shutil.copytree(path, staging / "tree", symlinks=True,
                        ignore=shutil.ignore_patterns(".git"))
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _finish(staging, staging / "tree", SourceKind.PATH, src.name or path.name,
                   url=str(path))


def record(session: Session, settings: Settings, principal: Principal, st: Staged) -> Collection:
    """Store a staged collection in its family (families.py: the family of the earlier
    collection it near-duplicates when that family is its owner's or team's, a family of
    its own otherwise) and move its tree into place."""
    assert principal.user_id is not None
    s = st.summary
    similarity.serialize(session)
    placed = families.place(session, principal.user_id, st.prints)
    col = Collection(
        name=st.name, owner_id=principal.user_id, source_kind=st.kind.value, source_url=st.url,
        source_ref=st.ref, commit=st.commit, content_hash=s.content_hash, storage_path="",
        task_count=s.task_count, eligible_count=len(s.eligible), domain_counts=s.domain_counts,
        error_count=s.errors, warning_count=s.warnings, findings=s.findings_json(st.root),
    )
    col.family_id, col.near_duplicate_of = placed.family_id, placed.near_duplicate_of
    col.similarity = placed.similarity
    session.add(col)
    session.flush()
    if col.family_id is None:
        col.family_id = col.id
    similarity.store(session, col.id, st.prints)
    final = settings.collections_dir / str(col.id)
    if final.exists():  # left over from a transaction that rolled back
        shutil.rmtree(final)
    st.root.rename(final)
    shutil.rmtree(st.staging, ignore_errors=True)
    col.storage_path = str(final)
    return col


def register(db: Database, settings: Settings, principal: Principal, st: Staged) -> Collection:
    """Record a staged collection in its own transaction."""
    try:
        with db.write() as session:
            return record(session, settings, principal, st)
    finally:
        shutil.rmtree(st.staging, ignore_errors=True)


def list_collections(
    session: Session, owner_id: int | None = None, limit: int = 100, offset: int = 0
) -> tuple[list[Collection], int]:
    """Collections, newest first, optionally one owner's; with the total count."""
    q = select(Collection)
    if owner_id is not None:
        q = q.where(Collection.owner_id == owner_id)
    total = session.scalar(select(func.count()).select_from(q.subquery())) or 0
    rows = session.scalars(q.order_by(Collection.id.desc()).limit(limit).offset(offset))
    return list(rows), total


def get_collection(session: Session, collection_id: int) -> Collection:
    """A collection by id; NotFound otherwise."""
    col = session.get(Collection, collection_id)
    if col is None:
        raise NotFound(f"no collection {collection_id}; `arena submit` registers one")
    return col
