"""`arena` client commands: talk to an Arena server over HTTP, print JSON.

The server comes from ARENA_URL and the token from ARENA_TOKEN. `arena validate` runs
the structural checks locally and needs no server.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from posttrain_arena.cli.groups import result_app

board_app = typer.Typer(help="The collaboration board: list threads, read, post.",
                        invoke_without_command=True)
token_app = typer.Typer(help="Your API tokens: list, make (with an expiry), revoke.",
                        no_args_is_help=True)


def _print(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def _call(fn: Callable[[Any], Any]) -> Any:
    """Run fn(client); on an API error print it as JSON on stderr and exit 1."""
    from posttrain_arena.service.client import ArenaApiError, ArenaClient

    try:
        return fn(ArenaClient())
    except ArenaApiError as exc:
        typer.echo(json.dumps(exc.to_json(), indent=2), err=True)
        raise typer.Exit(1) from None


def challenges() -> None:
    """List the server's challenges."""
    _print(_call(lambda c: c.challenges()))


def validate(path: Path = typer.Argument(..., help="Collection directory")) -> None:
    """Check a collection locally with the server's structural checks (no upload)."""
    from posttrain_arena.task_format.collection import check_collection

    report = check_collection(path)
    _print(report.to_json())
    raise typer.Exit(0 if report.ok else 1)


def submit(
    git: str | None = typer.Option(None, "--git", help="git URL of the collection"),
    ref: str = typer.Option("HEAD", "--ref", help="Branch, tag or commit (with --git)"),
    hf: str | None = typer.Option(None, "--hf",
                                  help="hf://datasets/ORG/NAME@REVISION[/FOLDER]"),
    archive: Path | None = typer.Option(None, "--archive",
                                        help="tar.gz/zip file, or a directory to pack"),
    path: str | None = typer.Option(None, "--path", help="Directory on the server"),
    name: str | None = typer.Option(None, "--name", help="Display name"),
) -> None:
    """Register a collection from git, a Hugging Face dataset, an archive upload, or a
    server path."""
    chosen = [x for x in (git, hf, archive, path) if x is not None]
    if len(chosen) != 1:
        typer.echo("give exactly one of --git URL, --hf URL, --archive FILE or --path DIR",
                   err=True)
        raise typer.Exit(2)
    if git is not None:
        _print(_call(lambda c: c.submit_git(git, ref, name)))
    elif hf is not None:
        _print(_call(lambda c: c.submit_hf(hf, name)))
    elif archive is not None:
        if not archive.exists():
            typer.echo(f"{archive}: no such file or directory", err=True)
            raise typer.Exit(2)
        _print(_call(lambda c: c.submit_archive(archive, name)))
    else:
        _print(_call(lambda c: c.submit_path(str(path), name)))


def run(
    challenge: str = typer.Option(..., "--challenge", help="Challenge slug"),
    collection: int = typer.Option(..., "--collection", help="Collection id"),
    execute: bool = typer.Option(False, "--execute", help="Launch (default: preflight only)"),
    request_id: str | None = typer.Option(None, "--request-id",
                                          help="Idempotency key; a retry returns the same run"),
) -> None:
    """Preflight a run (reserves nothing), or launch it with --execute."""
    if not execute:
        pre = _call(lambda c: c.preflight(challenge, collection))
        _print(pre)
        raise typer.Exit(0 if pre["ok"] else 1)
    rid = request_id or uuid.uuid4().hex
    _print(_call(lambda c: c.launch(challenge, collection, rid)))


def runs(
    run_id: int | None = typer.Option(None, "--run-id", help="Show one run"),
    challenge: str | None = typer.Option(None, "--challenge", help="Filter by challenge"),
    collection: int | None = typer.Option(None, "--collection", help="Filter by collection"),
    state: str | None = typer.Option(None, "--state", help="queued, running, scored, ..."),
    limit: int = typer.Option(50, "--limit", help="Most runs to list"),
) -> None:
    """List runs (newest first), or show one."""
    if run_id is not None:
        _print(_call(lambda c: c.run(run_id)))
    else:
        _print(_call(lambda c: c.runs(challenge=challenge, collection_id=collection,
                                      state=state, limit=limit)))


def cancel(run_id: int = typer.Argument(..., help="Run id")) -> None:
    """Cancel a queued or running run."""
    _print(_call(lambda c: c.cancel(run_id)))


@result_app.command("collect")
def result_collect(run_id: int = typer.Argument(..., help="Run id")) -> None:
    """Check suite coverage and store the scored run's pending result."""
    _print(_call(lambda c: c.collect(run_id)))


@result_app.command("show")
def result_show(run_id: int = typer.Argument(..., help="Run id")) -> None:
    """Show a run's result and review status."""
    _print(_call(lambda c: c.result(run_id)))


def review(
    run_id: int = typer.Argument(..., help="Run id"),
    accept: bool = typer.Option(False, "--accept", help="Accept the result"),
    reject: bool = typer.Option(False, "--reject", help="Reject the result"),
    note: str = typer.Option("", "--note", help="Why (required to reject)"),
) -> None:
    """Accept or reject a run's result (editors)."""
    if accept == reject:
        typer.echo("give exactly one of --accept or --reject", err=True)
        raise typer.Exit(2)
    _print(_call(lambda c: c.review(run_id, "accept" if accept else "reject", note)))


def leaderboard(challenge: str = typer.Argument(..., help="Challenge slug")) -> None:
    """A challenge's leaderboard: ranked collections, rejected results unranked."""
    _print(_call(lambda c: c.leaderboard(challenge)))


def budget() -> None:
    """The compute budget: the global cap, reserved, spent and left; with a token, your
    own use (`you`) and the quotas that cap you or your team (editors and admins: every
    per-user and per-team quota), each with what it has used."""
    _print(_call(lambda c: c.budget()))


@board_app.callback()
def board(ctx: typer.Context) -> None:
    """List board threads (most recently active first)."""
    if ctx.invoked_subcommand is None:
        _print(_call(lambda c: c.threads()))


@board_app.command("show")
def board_show(thread_id: int = typer.Argument(..., help="Thread id")) -> None:
    """Show a thread and its messages."""
    _print(_call(lambda c: c.thread(thread_id)))


@board_app.command("post")
def board_post(
    body: str = typer.Argument(..., help="Message text"),
    title: str | None = typer.Option(None, "--title", help="Open a new thread with this title"),
    thread: int | None = typer.Option(None, "--thread", help="Reply in this thread"),
) -> None:
    """Open a thread (--title) or reply in one (--thread)."""
    if (title is None) == (thread is None):
        typer.echo("give exactly one of --title (new thread) or --thread ID (reply)", err=True)
        raise typer.Exit(2)
    if title is not None:
        _print(_call(lambda c: c.post_thread(title, body)))
    else:
        _print(_call(lambda c: c.post_message(thread, body)))


@token_app.command("list")
def token_list() -> None:
    """Your tokens: prefix, expiry, revoked (never the secrets)."""
    _print(_call(lambda c: c._call("GET", "/api/tokens")))


@token_app.command("create")
def token_create(
    days: float = typer.Option(90, "--expires-days", help="Days until it expires"),
) -> None:
    """Make a new token for you (printed once)."""
    _print(_call(lambda c: c._call("POST", "/api/tokens", json={"expires_in_days": days})))


@token_app.command("revoke")
def token_revoke(prefix: str = typer.Argument(..., help="The token's prefix (arena_PREFIX_...)")
                 ) -> None:
    """Revoke a token: refused from the next request on."""
    _print(_call(lambda c: c._call("DELETE", f"/api/tokens/{prefix}")))


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    for fn in (challenges, validate, submit, run, runs, cancel, review, leaderboard, budget):
        app.command(fn.__name__)(fn)
    app.add_typer(board_app, name="board")
    app.add_typer(token_app, name="token")
