"""Health, identity, users, budget, and the /AGENTS.md guide."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from posttrain_arena import __version__
from posttrain_arena.service import accounts, quotas
from posttrain_arena.service import budget as budget_mod
from posttrain_arena.service.api.deps import DbDep, PrincipalDep, SettingsDep
from posttrain_arena.service.auth import Role, create_user
from posttrain_arena.service.errors import NotFound
from posttrain_arena.service.models import User
from posttrain_arena.service.schemas import (
    BudgetOut,
    BudgetUpdate,
    QuotaOut,
    QuotaUpdate,
    TokenCreate,
    TokenCreated,
    TokenOut,
    UserCreate,
    UserCreated,
    UserOut,
    UserUpdate,
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
        user, token = create_user(s, body.name, body.role, body.expires_in_days)
        return UserCreated(user=UserOut.model_validate(user), token=token)


@router.patch("/api/users/{name}", response_model=UserOut, tags=["users"])
def change_user(name: str, body: UserUpdate, principal: PrincipalDep, db: DbDep) -> User:
    """Approve a user's launches, set their team or role (admins)."""
    with db.write() as s:
        return accounts.update_user(s, principal, name, body)


@router.get("/api/tokens", response_model=list[TokenOut], tags=["users"])
def my_tokens(principal: PrincipalDep, db: DbDep) -> list[TokenOut]:
    """Your API tokens: prefix, expiry, revoked (never the secrets)."""
    with db.read() as s:
        return accounts.list_tokens(s, principal)


@router.post("/api/tokens", response_model=TokenCreated, status_code=201, tags=["users"])
def new_token(body: TokenCreate, principal: PrincipalDep, db: DbDep) -> TokenCreated:
    """A new API token for you (shown once), expiring after `expires_in_days`."""
    with db.write() as s:
        return accounts.create_token(s, principal, body.expires_in_days)


@router.delete("/api/tokens/{prefix}", response_model=TokenOut, tags=["users"])
def revoke(prefix: str, principal: PrincipalDep, db: DbDep) -> TokenOut:
    """Revoke a token (its owner, or an admin): refused from the next request on."""
    with db.write() as s:
        return accounts.revoke_token(s, principal, prefix)


@router.get("/api/budget", response_model=BudgetOut, tags=["budget"])
def get_budget(db: DbDep, principal: PrincipalDep) -> BudgetOut:
    """Cap, reserved, spent and left; the quotas and use you may see: every quota for
    editors and admins, your own and your team's when signed in, none anonymously."""
    with db.read() as s:
        return budget_mod.get_budget(s, principal)


@router.put("/api/budget", response_model=BudgetOut, tags=["budget"])
def put_budget(body: BudgetUpdate, principal: PrincipalDep, db: DbDep) -> BudgetOut:
    """Change the global cap (admins)."""
    with db.write() as s:
        return budget_mod.set_cap(s, principal, body.cap)


@router.put("/api/budget/quotas", response_model=list[QuotaOut], tags=["budget"])
def put_quota(body: QuotaUpdate, principal: PrincipalDep, db: DbDep) -> list[QuotaOut]:
    """Set or remove (cap null) a user's or a team's quota (admins); every quota."""
    with db.write() as s:
        return quotas.set_quota(s, principal, body.kind, body.name, body.cap)


@router.get("/AGENTS.md", response_class=PlainTextResponse, tags=["system"])
def agents_md(settings: SettingsDep) -> str:
    """How an agent (or a script) uses the Arena headlessly."""
    del settings
    return resources.files("posttrain_arena.service").joinpath("AGENTS.md").read_text()
