"""Board routes: threads and messages."""

from __future__ import annotations

from fastapi import APIRouter

from posttrain_arena.service import board as svc
from posttrain_arena.service.api.deps import DbDep, PrincipalDep, SettingsDep
from posttrain_arena.service.schemas import (
    MessageCreate,
    MessageOut,
    ThreadCreate,
    ThreadDetail,
    ThreadOut,
)

router = APIRouter(prefix="/api/board", tags=["board"])


@router.get("/threads", response_model=list[ThreadOut])
def threads(db: DbDep, limit: int = 50, offset: int = 0) -> list[ThreadOut]:
    """Threads, most recently active first."""
    with db.read() as s:
        return svc.list_threads(s, min(limit, 200), offset)


@router.post("/threads", response_model=ThreadDetail, status_code=201)
def new_thread(body: ThreadCreate, principal: PrincipalDep, db: DbDep, settings: SettingsDep
               ) -> ThreadDetail:
    """Open a thread (signed in; rate-limited)."""
    with db.write() as s:
        thread = svc.create_thread(s, settings, principal, body)
        return svc.thread_detail(s, thread.id)


@router.get("/threads/{thread_id}", response_model=ThreadDetail)
def thread(thread_id: int, db: DbDep) -> ThreadDetail:
    """A thread and its messages."""
    with db.read() as s:
        return svc.thread_detail(s, thread_id)


@router.post("/threads/{thread_id}/messages", response_model=MessageOut, status_code=201)
def reply(thread_id: int, body: MessageCreate, principal: PrincipalDep, db: DbDep,
          settings: SettingsDep) -> MessageOut:
    """Reply in a thread (signed in; rate-limited)."""
    with db.write() as s:
        msg = svc.post_message(s, settings, principal, thread_id, body)
        return MessageOut.model_validate(msg).model_copy(update={"author": principal.name})
