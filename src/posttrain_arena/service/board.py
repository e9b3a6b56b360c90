"""The collaboration board: threads and messages, rate-limited per user.

The limit counts a user's messages (a new thread's first message included) in a sliding
window, in the database, so it holds across server processes.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.config import Settings
from posttrain_arena.service.errors import NotFound, RateLimited
from posttrain_arena.service.models import Message, Thread, User, utcnow
from posttrain_arena.service.schemas import (
    MessageCreate,
    MessageOut,
    ThreadCreate,
    ThreadDetail,
    ThreadOut,
)


def _rate_limit(session: Session, settings: Settings, principal: Principal) -> None:
    since = utcnow() - timedelta(seconds=settings.board_rate_window_sec)
    recent = session.scalar(select(func.count(Message.id)).where(
        Message.author_id == principal.user_id, Message.created_at >= since)) or 0
    if recent >= settings.board_rate_limit:
        raise RateLimited(f"at most {settings.board_rate_limit} posts per "
                          f"{settings.board_rate_window_sec:.0f}s; try again shortly")


def create_thread(session: Session, settings: Settings, principal: Principal,
                  body: ThreadCreate) -> Thread:
    """Open a thread with its first message (signed-in users, rate-limited)."""
    principal.require(Role.PARTICIPANT, "posting on the board")
    assert principal.user_id is not None
    _rate_limit(session, settings, principal)
    now = utcnow()
    thread = Thread(title=body.title, author_id=principal.user_id, created_at=now,
                    last_post_at=now)
    session.add(thread)
    session.flush()
    session.add(Message(thread_id=thread.id, author_id=principal.user_id, body=body.body,
                        created_at=now))
    session.flush()
    return thread


def post_message(session: Session, settings: Settings, principal: Principal, thread_id: int,
                 body: MessageCreate) -> Message:
    """Reply in a thread (signed-in users, rate-limited)."""
    principal.require(Role.PARTICIPANT, "posting on the board")
    assert principal.user_id is not None
    thread = get_thread(session, thread_id)
    _rate_limit(session, settings, principal)
    now = utcnow()
    msg = Message(thread_id=thread.id, author_id=principal.user_id, body=body.body,
                  created_at=now)
    thread.last_post_at = now
    session.add(msg)
    session.flush()
    return msg


def get_thread(session: Session, thread_id: int) -> Thread:
    """A thread by id; NotFound otherwise."""
    thread = session.get(Thread, thread_id)
    if thread is None:
        raise NotFound(f"no thread {thread_id}")
    return thread


def list_threads(session: Session, limit: int = 50, offset: int = 0) -> list[ThreadOut]:
    """Threads, most recently active first."""
    rows = session.scalars(select(Thread).order_by(Thread.last_post_at.desc(), Thread.id.desc())
                           .limit(limit).offset(offset))
    return [ThreadOut.model_validate(t) for t in rows]


def thread_detail(session: Session, thread_id: int) -> ThreadDetail:
    """A thread with its messages, oldest first."""
    thread = get_thread(session, thread_id)
    rows = session.execute(
        select(Message, User.name).join(User, User.id == Message.author_id)
        .where(Message.thread_id == thread_id).order_by(Message.id)
    )
    messages = [MessageOut.model_validate(m).model_copy(update={"author": name})
                for m, name in rows]
    return ThreadDetail(**ThreadOut.model_validate(thread).model_dump(), messages=messages)
