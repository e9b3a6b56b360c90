"""Health, identity, users, budget, and the /AGENTS.md guide."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from posttrain_arena import __version__
from posttrain_arena.service import budget as budget_mod
from posttrain_arena.service.api.deps import DbDep, PrincipalDep, SettingsDep
from posttrain_arena.service.auth import Role, create_user
from posttrain_arena.service.errors import NotFound
from posttrain_arena.service.models import User
from posttrain_arena.service.schemas import (
    BudgetOut,
    BudgetUpdate,
    UserCreate,
    UserCreated,
    UserOut,
)

router = APIRouter()


@router.get("/api/health", tags=["system"])
async def health(request: Request) -> dict[str, str]:
    """Liveness: the database answers (one indexed row: the change counters)."""
    await request.app.state.read_cache.versions()
    return {"status": "ok", "version": __version__}


@router.get("/api/me", response_model=UserOut, tags=["users"])
def me(principal: PrincipalDep, db: DbDep) -> User:
    """The signed-in user."""
    principal.require(Role.PARTICIPANT, "reading your profile")
    with db.read() as s:
        user = s.get(User, principal.user_id)
        if user is None:
            raise NotFound("your user no longer exists")
        return user


@router.post("/api/users", response_model=UserCreated, status_code=201, tags=["users"])
def add_user(body: UserCreate, principal: PrincipalDep, db: DbDep) -> UserCreated:
    """Create a user and its token (admins)."""
    principal.require(Role.ADMIN, "creating users")
    with db.write() as s:
        user, token = create_user(s, body.name, body.role)
        return UserCreated(user=UserOut.model_validate(user), token=token)


@router.get("/api/budget", response_model=BudgetOut, tags=["budget"])
def get_budget(db: DbDep) -> BudgetOut:
    """Cap, reserved, spent and left."""
    with db.read() as s:
        return budget_mod.get_budget(s)


@router.put("/api/budget", response_model=BudgetOut, tags=["budget"])
def put_budget(body: BudgetUpdate, principal: PrincipalDep, db: DbDep) -> BudgetOut:
    """Change the global cap (admins)."""
    with db.write() as s:
        return budget_mod.set_cap(s, principal, body.cap)


@router.get("/AGENTS.md", response_class=PlainTextResponse, tags=["system"])
def agents_md(settings: SettingsDep) -> str:
    """How an agent (or a script) uses the Arena headlessly."""
    del settings
    return resources.files("posttrain_arena.service").joinpath("AGENTS.md").read_text()
