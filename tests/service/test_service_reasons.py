"""A run's reason: published as a fixed class, the full message for editors only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from posttrain_arena.evaluate.suite import load_suite
from posttrain_arena.service.auth import Principal
from posttrain_arena.service.models import Challenge
from posttrain_arena.service.stage_plan import FunctionStage, RunContext, snapshot
from posttrain_arena.service.worker import Worker
from posttrain_arena.task_format.scaffold import new_task

from .conftest import Arena

SECRET_TASK = "heldout-ledger-reconcile-7f3a"


def _sealed_suite_with_a_broken_task(root: Path) -> Path:
    """A held-out suite on the server, one of whose tasks does not load: what a suite
    change, a bad disk or a bad deploy gives, and whose error names the task and path."""
    suite = root / "sealed-suite-2026"
    suite.mkdir(parents=True)
    new_task("heldout-fine-task", "software-engineering", suite)
    new_task(SECRET_TASK, "finance-economics", suite)
    task_md = suite / SECRET_TASK / "task.md"
    task_md.write_text(task_md.read_text().replace("version:", "version: [broken", 1))
    return suite


def _load_the_suite(ctx: RunContext) -> None:
    load_suite(ctx.challenge["suite_path"])  # as the pipeline's evaluation stages do


def _cookie(arena: Arena, who: str) -> dict[str, str]:
    session, _ = arena.client.app.state.sessions.start(
        Principal(user_id=arena.ids[who], name=who))
    return {"cookie": f"arena_session={session}"}


def test_a_suite_side_failure_publishes_no_task_name_or_server_path(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any], tmp_path: Path
) -> None:
    suite = _sealed_suite_with_a_broken_task(tmp_path / "server-data")
    with arena.db.write() as s:
        ch = s.get(Challenge, challenge["id"])
        assert ch is not None
        ch.suite_path = str(suite)
    run = arena.call("POST", "/api/runs", "author",
                     json={"challenge": "micro", "collection_id": collection["id"]}).json()
    # read before and after the failure, so that cached answers are tested as well
    public = ["/api/runs", f"/api/runs/{run['id']}", "/api/runs?state=failed",
              f"/api/runs?collection_id={collection['id']}", "/api/runs?challenge=micro"]
    pages = ["/arena", f"/arena/runs/{run['id']}", "/arena/challenges/micro",
             f"/arena/collections/{collection['id']}"]
    for url in public:
        arena.client.get(url)
    Worker(arena.db, arena.settings, [FunctionStage("snapshot", snapshot),
                                      FunctionStage("baseline", _load_the_suite)]).poll_once()

    secrets = (SECRET_TASK, str(tmp_path), "sealed-suite-2026", "Traceback", "SuiteError")
    seen: list[tuple[str, str]] = []
    for _ in range(2):  # the second time from the caches
        for url in public:
            for who in (None, "author", "other"):
                seen.append((url, arena.call("GET", url, who).text))
        for url in pages:
            seen.append((url, arena.client.get(url).text))
            seen.append((url, arena.client.get(url, headers=_cookie(arena, "author")).text))
    for url, text in seen:
        for secret in secrets:
            assert secret not in text, (url, secret)
    got = arena.call("GET", f"/api/runs/{run['id']}").json()
    assert got["state"] == "failed" and got["reason_class"] == "internal"
    assert got["reason"] == "the run failed on the organizers' side; an editor can see why"

    # Editors read the whole message, on the API and on the run's page.
    assert arena.call("GET", f"/api/runs/{run['id']}/failure", "author").status_code == 403
    assert arena.call("GET", f"/api/runs/{run['id']}/failure").status_code == 401
    full = arena.call("GET", f"/api/runs/{run['id']}/failure", "editor").json()
    assert SECRET_TASK in full["detail"] and full["reason_class"] == "internal"
    page = arena.client.get(f"/arena/runs/{run['id']}", headers=_cookie(arena, "editor"))
    assert SECRET_TASK in page.text and "editors only" in page.text


def test_a_canceled_run_says_so_without_naming_who(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    run = arena.call("POST", "/api/runs", "author",
                     json={"challenge": "micro", "collection_id": collection["id"]}).json()
    arena.call("POST", f"/api/runs/{run['id']}/cancel", "editor")
    got = arena.call("GET", f"/api/runs/{run['id']}").json()
    assert got["reason_class"] == "canceled" and "by editor" not in got["reason"]
    full = arena.call("GET", f"/api/runs/{run['id']}/failure", "editor").json()
    assert full["detail"] == "canceled by editor"
