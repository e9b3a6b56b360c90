"""The `arena` client and admin commands against a live server on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from posttrain_arena.cli.main import app as cli
from posttrain_arena.service.app import create_app
from posttrain_arena.service.config import Settings
from posttrain_arena.service.stage_plan import FunctionStage, RunContext, snapshot
from posttrain_arena.service.worker import Worker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def live(settings: Settings) -> Iterator[tuple[str, Settings]]:
    app = create_app(settings)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield f"http://127.0.0.1:{port}", settings
    server.should_exit = True
    thread.join(timeout=30)
    app.state.db.dispose()


def _env(settings: Settings, url: str, token: str | None = None) -> dict[str, str]:
    env = {"ARENA_URL": url, "ARENA_DATA_DIR": str(settings.data_dir)}
    if settings.database_url:
        env["ARENA_DATABASE_URL"] = settings.database_url
    if token:
        env["ARENA_TOKEN"] = token
    return env


def _run(env: dict[str, str], *args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exit_code == code, (args, result.output)
    return json.loads(result.stdout) if code == 0 and result.stdout.strip() else result


def test_headless_flow_through_the_cli(
    live: tuple[str, Settings], new_collection: Any, tmp_path: Path
) -> None:
    url, settings = live
    env = _env(settings, url)
    admin = _run(env, "admin", "create-user", "root", "--role", "admin")["token"]
    editor = _run(env, "admin", "create-user", "ed", "--role", "editor")["token"]
    author = _run(env, "admin", "create-user", "au", "--role", "participant")["token"]
    bad_role = CliRunner().invoke(cli, ["admin", "create-user", "x", "--role", "king"], env=env)
    assert bad_role.exit_code == 1 and "unknown role" in bad_role.output
    recipe = tmp_path / "micro.toml"
    recipe.write_text("name = 'micro'\n")
    ch = _run(
        env,
        "admin",
        "create-challenge",
        "micro",
        "--title",
        "Micro",
        "--base-model",
        "tiny",
        "--revision",
        "r1",
        "--recipe",
        str(recipe),
        "--suite",
        str(new_collection(n_tasks=2, team="suite")),
        "--price-per-hour",
        "5",
    )
    assert ch["suite_size"] == 2 and "suite_path" not in ch
    assert [c["slug"] for c in _run(_env(settings, url), "challenges")] == ["micro"]
    del admin

    as_author = _env(settings, url, author)
    local = new_collection(n_tasks=2)
    assert _run(as_author, "validate", str(local))["ok"] is True
    col = _run(as_author, "submit", "--archive", str(local), "--name", "mine")
    assert col["name"] == "mine" and col["eligible_count"] == 2
    pre = _run(as_author, "run", "--challenge", "micro", "--collection", str(col["id"]))
    assert pre["ok"] is True
    assert _run(as_author, "budget")["reserved"] == 0
    run = _run(
        as_author,
        "run",
        "--challenge",
        "micro",
        "--collection",
        str(col["id"]),
        "--execute",
        "--request-id",
        "r-1",
    )
    again = _run(
        as_author,
        "run",
        "--challenge",
        "micro",
        "--collection",
        str(col["id"]),
        "--execute",
        "--request-id",
        "r-1",
    )
    assert again["id"] == run["id"] and run["state"] == "queued"

    def score(ctx: RunContext) -> dict[str, Any]:
        return {
            "score": {
                "base_pass_rate": 0.0,
                "final_pass_rate": 0.5,
                "change_pp": 50.0,
                "n_tasks": ctx.challenge["suite_size"],
            }
        }

    db = create_app(settings).state.db
    Worker(
        db, settings, [FunctionStage("snapshot", snapshot), FunctionStage("pipeline", score)]
    ).poll_once()
    db.dispose()
    shown = _run(as_author, "runs", "--run-id", str(run["id"]))
    assert shown["state"] == "scored"
    assert _run(as_author, "runs")["total"] == 1
    assert _run(as_author, "result", "collect", str(run["id"]))["status"] == "pending"
    denied = _run(as_author, "review", str(run["id"]), "--accept", code=1)
    assert "403" in denied.output or "editor" in denied.output
    as_editor = _env(settings, url, editor)
    reviewed = _run(as_editor, "review", str(run["id"]), "--accept", "--note", "fine")
    assert reviewed["status"] == "accepted"
    board = _run(as_author, "leaderboard", "micro")
    assert board["ranked"][0]["collection_id"] == col["id"]
    thread = _run(as_author, "board", "post", "--title", "Hi", "hello all")
    _run(as_editor, "board", "post", "--thread", str(thread["id"]), "welcome")
    assert [t["title"] for t in _run(as_author, "board")] == ["Hi"]
    assert len(_run(as_author, "board", "show", str(thread["id"]))["messages"]) == 2


def test_cli_errors_are_json_and_exit_1(live: tuple[str, Settings], tmp_path: Path) -> None:
    url, settings = live
    env = _env(settings, url, "arena_bad_token")
    out = CliRunner().invoke(cli, ["runs", "--run-id", "5"], env=env)
    assert out.exit_code == 1 and '"status": 401' in out.output
    nowhere = _env(settings, "http://127.0.0.1:9")
    out = CliRunner().invoke(cli, ["challenges"], env=nowhere)
    assert out.exit_code == 1 and "cannot reach" in out.output
    usage = CliRunner().invoke(cli, ["submit"], env=env)
    assert usage.exit_code == 2
    bad = tmp_path / "bad"
    bad.mkdir()
    assert CliRunner().invoke(cli, ["validate", str(bad)], env=env).exit_code == 1


def test_arena_budget_shows_your_quota_and_use_and_organizers_every_quota(
    live: tuple[str, Settings], new_collection: Any, tmp_path: Path
) -> None:
    url, settings = live
    env = _env(settings, url)
    author = _run(env, "admin", "create-user", "au", "--role", "participant")["token"]
    editor = _run(env, "admin", "create-user", "ed", "--role", "editor")["token"]
    _run(env, "admin", "create-user", "mate", "--role", "participant")
    _run(env, "admin", "set-user", "mate", "--team", "crew")
    _run(env, "admin", "set-quota", "30", "--user", "au")
    quotas = _run(env, "admin", "set-quota", "70", "--team", "crew")
    assert {(q["kind"], q["name"], q["cap"]) for q in quotas} == {
        ("user", "au", 30.0), ("team", "crew", 70.0)}
    recipe = tmp_path / "micro.toml"
    recipe.write_text("name = 'micro'\n")
    _run(env, "admin", "create-challenge", "micro", "--title", "Micro", "--base-model", "tiny",
         "--revision", "r1", "--recipe", str(recipe), "--suite",
         str(new_collection(n_tasks=2, team="suite")), "--price-per-hour", "5")
    as_author = _env(settings, url, author)
    col = _run(as_author, "submit", "--archive", str(new_collection(n_tasks=2)))
    run = _run(as_author, "run", "--challenge", "micro", "--collection", str(col["id"]),
               "--execute")
    reserved = run["reserved"]
    assert reserved > 0

    mine = _run(as_author, "budget")
    assert mine["reserved"] == reserved  # the global figures, beside ...
    assert mine["quotas"] == [{"kind": "user", "name": "au", "cap": 30.0, "used": reserved,
                               "left": 30.0 - reserved}]  # ... the quota that caps you
    assert mine["you"] == {"user": "au", "used": reserved, "team": None, "team_used": None}
    anonymous = _run(env, "budget")
    assert anonymous["reserved"] == reserved
    assert anonymous["quotas"] == [] and anonymous["you"] is None
    organizer = _run(_env(settings, url, editor), "budget")
    assert {(q["kind"], q["name"], q["used"]) for q in organizer["quotas"]} == {
        ("user", "au", reserved), ("team", "crew", 0.0)}
