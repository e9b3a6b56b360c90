"""`arena serve`, `arena worker` and `arena admin ...`: run and administer an Arena server.

The admin commands act on the server's database directly (run them on the server host),
so the first admin can be created before anyone holds a token.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer

from posttrain_arena.cli.groups import admin_app

_DATA_DIR = typer.Option(None, "--data-dir", help="Data directory (default: $ARENA_DATA_DIR)")
_DB_URL = typer.Option(None, "--database-url",
                       help="Database URL (default: $ARENA_DATABASE_URL, else SQLite in the "
                       "data directory)")


def _settings(data_dir: Path | None, database_url: str | None = None) -> Any:
    from posttrain_arena.service.config import Settings

    overrides: dict[str, Any] = {}
    if data_dir is not None:
        overrides["data_dir"] = data_dir
    if database_url is not None:
        overrides["database_url"] = database_url
    return Settings(**overrides)


def _fail(message: str) -> NoReturn:
    typer.echo(json.dumps({"error": message}), err=True)
    raise typer.Exit(1)


def _as_system(data_dir: Path | None, database_url: str | None,
               action: Callable[[Any], Any]) -> Any:
    """Run `action(session)` in one write transaction of the arena's database and return
    what it returns; a service error (bad name, conflict) ends the command with its
    message instead of a traceback."""
    from posttrain_arena.service.app import open_database
    from posttrain_arena.service.errors import ServiceError

    db = open_database(_settings(data_dir, database_url))
    try:
        with db.write() as s:
            return action(s)
    except ServiceError as exc:
        _fail(exc.message)


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on"),
    port: int = typer.Option(8000, "--port", help="Port to listen on"),
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
    workers: int = typer.Option(1, "--workers", min=1,
                                help="Server processes (one per core suits PostgreSQL)"),
    access_log: bool = typer.Option(True, "--access-log/--no-access-log",
                                    help="Log every request (a line per request costs CPU "
                                    "on a busy server)"),
) -> None:
    """Run the Arena API (and web pages) with uvicorn; migrates the database first."""
    import os

    import uvicorn

    from posttrain_arena.service.app import create_app

    settings = _settings(data_dir, database_url)
    app = create_app(settings)  # migrates once, here, before any worker process starts
    typer.echo(f"arena: serving {settings.resolved_database_url.split('@')[-1]} on "
               f"http://{host}:{port} with {workers} process(es) (data in "
               f"{settings.data_dir})", err=True)
    if workers == 1:
        uvicorn.run(app, host=host, port=port, log_level="info", access_log=access_log)
        return
    app.state.db.dispose()
    # Worker processes build their own app from the environment: pass the choices on.
    os.environ["ARENA_DATA_DIR"] = str(settings.data_dir)
    if settings.database_url:
        os.environ["ARENA_DATABASE_URL"] = settings.database_url
    uvicorn.run("posttrain_arena.service.app:create_app", factory=True, host=host,
                port=port, workers=workers, log_level="info", access_log=access_log)


def worker(
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
    once: bool = typer.Option(False, "--once", help="Process the queue, then exit when empty"),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="Be a Ray driver: fan each run's trials out over this "
        "cluster (also ARENA_RAY_ADDRESS); the database keeps claims and heartbeats."),
) -> None:
    """Take queued runs and drive them through their stages (resumable)."""
    import contextlib
    import logging
    import signal
    import threading

    from posttrain_arena.service.app import open_database
    from posttrain_arena.service.worker import Worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = _settings(data_dir, database_url)
    if ray_address:
        settings = settings.model_copy(update={"ray_address": ray_address})
    w = Worker(open_database(settings), settings)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    typer.echo(f"arena worker {w.worker_id}: stages {[s.name for s in w.stages]}", err=True)
    with contextlib.suppress(KeyboardInterrupt):
        w.serve(stop, once=once)


@admin_app.command("create-user")
def create_user(
    name: str = typer.Argument(..., help="Unique user name"),
    role: str = typer.Option("participant", "--role", help="participant, editor or admin"),
    expires_days: float | None = typer.Option(
        None, "--expires-days", help="Days until its token expires (default: never)"),
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
) -> None:
    """Create a user and print its token (shown only once)."""
    from posttrain_arena.service import auth

    def create(s: Any) -> dict[str, Any]:
        user, token = auth.create_user(s, name, role, expires_days)
        return {"id": user.id, "name": user.name, "role": user.role, "token": token}

    typer.echo(json.dumps(_as_system(data_dir, database_url, create), indent=2))


@admin_app.command("create-challenge")
def create_challenge(
    slug: str = typer.Argument(..., help="URL-safe id, e.g. micro"),
    title: str = typer.Option(..., "--title", help="Display title"),
    base_model: str = typer.Option(..., "--base-model", help="Base model id or path"),
    revision: str = typer.Option(..., "--revision", help="Pinned base model revision"),
    recipe: str = typer.Option(..., "--recipe", help="Server path to the recipe TOML"),
    recipe_hash: str | None = typer.Option(
        None, "--recipe-hash", help="Recipe hash (default: sha256 of the --recipe file)"
    ),
    suite: str | None = typer.Option(None, "--suite", help="Server path to the sealed suite"),
    suite_hash: str | None = typer.Option(None, "--suite-hash", help="Suite hash (no --suite)"),
    suite_size: int | None = typer.Option(None, "--suite-size", help="Suite size (no --suite)"),
    price: float = typer.Option(1.0, "--price-per-hour", help="Compute units per run-hour"),
    timeout: int = typer.Option(3600, "--timeout", help="Longest a run may take (s)"),
    cooldown: int = typer.Option(0, "--cooldown", help="Seconds between counted runs"),
    sample: list[str] = typer.Option([], "--public-sample", help="Suite task names to show"),
    description: str = typer.Option("", "--description", help="Markdown description"),
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
) -> None:
    """Create a challenge pinning model, recipe and suite (hashes computed from paths)."""
    from posttrain_arena.service.auth import SYSTEM
    from posttrain_arena.service.challenges import create_challenge as create
    from posttrain_arena.service.challenges import to_out
    from posttrain_arena.service.schemas import ChallengeCreate

    try:
        body = ChallengeCreate(
            slug=slug, title=title, description=description, base_model=base_model,
            base_model_revision=revision, recipe=recipe, recipe_hash=recipe_hash,
            suite_path=suite,
            suite_hash=suite_hash, suite_size=suite_size,
            suite_domain_counts={} if suite is None and suite_hash else None,
            public_sample=sample, price_per_hour=price, timeout_sec=timeout,
            cooldown_sec=cooldown,
        )
        out = _as_system(data_dir, database_url, lambda s: to_out(create(s, SYSTEM, body)))
    except ValueError as exc:  # a bad field, or a recipe or suite path that cannot be read
        _fail(str(exc))
    typer.echo(out.model_dump_json(indent=2))


@admin_app.command("set-budget")
def set_budget(
    cap: float = typer.Argument(..., help="New global compute cap"),
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
) -> None:
    """Set the global compute cap."""
    from posttrain_arena.service.auth import SYSTEM
    from posttrain_arena.service.budget import set_cap

    out = _as_system(data_dir, database_url, lambda s: set_cap(s, SYSTEM, cap))
    typer.echo(out.model_dump_json(indent=2))


@admin_app.command("set-user")
def set_user(
    name: str = typer.Argument(..., help="User name (hf:NAME for a Hugging Face sign-in)"),
    approve: bool | None = typer.Option(
        None, "--approve/--unapprove", help="Allow (or stop) this user launching runs"),
    team: str | None = typer.Option(None, "--team", help="Team, for team quotas ('' removes)"),
    role: str | None = typer.Option(None, "--role", help="participant, editor or admin"),
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
) -> None:
    """Approve a user's launches (external sign-ins wait for this), set their team or role."""
    from posttrain_arena.service.accounts import update_user
    from posttrain_arena.service.auth import SYSTEM
    from posttrain_arena.service.schemas import UserOut, UserUpdate

    update = UserUpdate(approved=approve, team=team, role=role)
    out = _as_system(data_dir, database_url, lambda s: UserOut.model_validate(
        update_user(s, SYSTEM, name, update)))
    typer.echo(out.model_dump_json(indent=2))


@admin_app.command("set-quota")
def set_quota(
    cap: float | None = typer.Argument(None, help="The cap (omit with --remove)"),
    user: str | None = typer.Option(None, "--user", help="The user it caps"),
    team: str | None = typer.Option(None, "--team", help="The team it caps"),
    remove: bool = typer.Option(False, "--remove", help="Remove the quota"),
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
) -> None:
    """Cap what one user or one team may spend, on top of the global cap."""
    from posttrain_arena.service.auth import SYSTEM
    from posttrain_arena.service.quotas import set_quota as set_q

    if (user is None) == (team is None) or (cap is None) != remove:
        _fail("give one of --user NAME or --team NAME, and a CAP or --remove")
    out = _as_system(data_dir, database_url, lambda s: set_q(
        s, SYSTEM, "user" if user else "team", user or team or "", cap))
    typer.echo(json.dumps([q.model_dump() for q in out], indent=2))


@admin_app.command("clear-duplicate")
def clear_duplicate(
    collection_id: int = typer.Argument(..., help="The held collection (or any collection "
                                        "of its family)"),
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
) -> None:
    """Let a near-duplicate of another account's collection launch as a family of its
    own (its `near_duplicate` launch check fails until then)."""
    from posttrain_arena.service.auth import SYSTEM
    from posttrain_arena.service.families import clear_duplicate as clear
    from posttrain_arena.service.schemas import CollectionOut

    out = _as_system(data_dir, database_url, lambda s: CollectionOut.model_validate(
        clear(s, SYSTEM, collection_id)))
    typer.echo(out.model_dump_json(indent=2))


@admin_app.command("held-duplicates")
def held_duplicates(
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
) -> None:
    """List the families held as near-duplicates of another account's collection: each
    with the collection it matched and the `arena admin clear-duplicate` command that
    releases it."""
    from posttrain_arena.service.auth import SYSTEM
    from posttrain_arena.service.families import held_families

    out = _as_system(data_dir, database_url, lambda s: held_families(s, SYSTEM))
    typer.echo(json.dumps([h.model_dump(mode="json") for h in out], indent=2))


@admin_app.command("revoke-token")
def revoke_token(
    prefix: str = typer.Argument(..., help="The token's prefix (arena_PREFIX_...)"),
    data_dir: Path | None = _DATA_DIR,
    database_url: str | None = _DB_URL,
) -> None:
    """Revoke any user's token."""
    from posttrain_arena.service.accounts import revoke_token as revoke
    from posttrain_arena.service.auth import SYSTEM

    out = _as_system(data_dir, database_url, lambda s: revoke(s, SYSTEM, prefix))
    typer.echo(out.model_dump_json(indent=2))


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.command("serve")(serve)
    app.command("worker")(worker)
