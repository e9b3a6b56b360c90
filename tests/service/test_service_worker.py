"""The worker: stages, heartbeats, a worker lost mid-run (resume or fail), cancel."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from posttrain_arena.service import lifecycle
from posttrain_arena.service.models import Run, utcnow
from posttrain_arena.service.stage_plan import (
    FunctionStage,
    RunContext,
    StageError,
    snapshot,
    structural_check,
)
from posttrain_arena.service.worker import StepOutcome, Worker

if TYPE_CHECKING:
    from tests.service.conftest import Arena


def scripted_pipeline(change_pp: float = 12.5, cost: float | None = None) -> FunctionStage:
    """A stand-in for the training pipeline: writes a marker and a full-coverage score."""

    def stage(ctx: RunContext) -> dict[str, Any]:
        marker = ctx.run_dir / "pipeline.calls"
        marker.write_text(marker.read_text() + "x" if marker.exists() else "x")
        base = 0.25
        score = {
            "base_pass_rate": base,
            "final_pass_rate": base + change_pp / 100,
            "change_pp": change_pp,
            "interval": [change_pp - 5, change_pp + 5],
            "n_tasks": ctx.challenge["suite_size"],
            "suite_hash": ctx.challenge["suite_hash"],
            "per_domain": {"software-engineering": {"base": 0.25, "final": 0.5}},
        }
        if cost is not None:
            score["cost"] = cost
        return {"score": score}

    return FunctionStage("pipeline", stage)


def plan(**kw: Any) -> list[FunctionStage]:
    return [
        FunctionStage("snapshot", snapshot),
        FunctionStage("check", structural_check),
        scripted_pipeline(**kw),
    ]


def launch(arena: Arena, collection: dict[str, Any]) -> dict[str, Any]:
    resp = arena.call(
        "POST",
        "/api/runs",
        "author",
        json={"challenge": "micro", "collection_id": collection["id"]},
    )
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def run_json(arena: Arena, run_id: int) -> dict[str, Any]:
    return dict(arena.call("GET", f"/api/runs/{run_id}").json())


def test_worker_runs_every_stage_and_reconciles(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    run = launch(arena, collection)
    worker = Worker(arena.db, arena.settings, plan(cost=3.0))
    assert worker.poll_once() == run["id"]
    done = run_json(arena, run["id"])
    assert done["state"] == "scored", done
    assert done["stages_done"] == ["snapshot", "check", "pipeline"]
    assert done["score"]["change_pp"] == 12.5 and done["cost"] == 3.0
    run_dir = arena.settings.runs_dir / str(run["id"])
    assert (run_dir / "collection" / "submission.yaml").is_file()
    assert (run_dir / "check.json").is_file()
    budget = arena.call("GET", "/api/budget").json()
    assert budget["reserved"] == 0 and budget["spent"] == 3.0
    assert worker.poll_once() is None


def detail(arena: Arena, run_id: int) -> str:
    """The run's full failure message, as editors read it."""
    resp = arena.call("GET", f"/api/runs/{run_id}/failure", "editor")
    assert resp.status_code == 200, resp.text
    return str(resp.json()["detail"])


def test_stage_failure_fails_the_run_with_a_reason(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    run = launch(arena, collection)

    def broken(ctx: RunContext) -> None:
        raise StageError("the teacher produced no trajectories")

    worker = Worker(
        arena.db,
        arena.settings,
        [FunctionStage("snapshot", snapshot), FunctionStage("teacher", broken)],
    )
    worker.poll_once()
    failed = run_json(arena, run["id"])
    assert failed["state"] == "failed" and failed["stage"] == "teacher"
    assert failed["reason_class"] == "internal"  # a stage's own words are for editors
    assert "no trajectories" in detail(arena, run["id"])
    assert arena.call("GET", "/api/budget").json()["reserved"] == 0


def test_without_a_pipeline_the_run_fails_saying_so(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    run = launch(arena, collection)
    Worker(arena.db, arena.settings, plan()[:2]).poll_once()
    out = run_json(arena, run["id"])
    assert out["state"] == "failed" and out["reason_class"] == "no_score"
    assert "pipeline" in detail(arena, run["id"])
    assert out["stages_done"] == ["snapshot", "check"]


def test_lost_worker_is_resumed_from_the_last_finished_stage(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    run = launch(arena, collection)
    dead = Worker(arena.db, arena.settings, plan(), worker_id="dead")
    assert dead.claim() == run["id"]
    assert dead.run_stage(run["id"]) is StepOutcome.STAGE_DONE  # snapshot finished
    with arena.db.write() as s:  # it starts `check` and dies: no more heartbeats
        lifecycle.begin_stage(s, run["id"], "dead", "check")
    later = utcnow() + timedelta(seconds=arena.settings.heartbeat_timeout_sec + 1)
    with arena.db.write() as s:
        actions = lifecycle.watchdog(s, arena.settings, now=later)
    assert [(a.run_id, a.action) for a in actions] == [(run["id"], "requeued")]
    requeued = run_json(arena, run["id"])
    assert requeued["state"] == "queued" and requeued["stages_done"] == ["snapshot"]
    assert requeued["reason_class"] == "requeued"
    assert "dead" in detail(arena, run["id"]) and "snapshot" in detail(arena, run["id"])
    assert arena.call("GET", "/api/budget").json()["reserved"] == challenge["allowance"]
    # The dead worker cannot write any more.
    assert dead.run_stage(run["id"]) is StepOutcome.LOST
    snap = arena.settings.runs_dir / str(run["id"]) / "collection"
    mtime = snap.stat().st_mtime_ns
    assert Worker(arena.db, arena.settings, plan()).poll_once() == run["id"]
    final = run_json(arena, run["id"])
    assert final["state"] == "scored" and final["attempts"] == 2
    assert final["stages_done"] == ["snapshot", "check", "pipeline"]
    assert snap.stat().st_mtime_ns == mtime  # snapshot was not redone


def test_lost_worker_after_max_attempts_fails_and_releases(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    run = launch(arena, collection)
    for attempt in range(arena.settings.max_attempts):
        w = Worker(arena.db, arena.settings, plan(), worker_id=f"w{attempt}")
        assert w.claim() == run["id"]
        later = utcnow() + timedelta(seconds=arena.settings.heartbeat_timeout_sec + 1)
        with arena.db.write() as s:
            lifecycle.watchdog(s, arena.settings, now=later)
    out = run_json(arena, run["id"])
    assert out["state"] == "failed" and out["reason_class"] == "worker_lost"
    assert "gave up" in detail(arena, run["id"])
    assert out["attempts"] == arena.settings.max_attempts
    budget = arena.call("GET", "/api/budget").json()
    assert budget["reserved"] == 0 and budget["left"] == budget["cap"] - budget["spent"]


def test_cancel_while_running_stops_the_worker(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    run = launch(arena, collection)
    seen: list[bool] = []

    def long_stage(ctx: RunContext) -> None:
        arena.call("POST", f"/api/runs/{ctx.run_id}/cancel", "author")
        seen.append(ctx.should_stop())

    w = Worker(arena.db, arena.settings, [FunctionStage("slow", long_stage)])
    w.poll_once()
    assert seen == [True]
    out = run_json(arena, run["id"])
    assert out["state"] == "canceled" and out["stages_done"] == []
    assert arena.call("GET", "/api/budget").json()["reserved"] == 0


def test_heartbeats_are_sent_during_a_stage(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    launch(arena, collection)
    beats: list[Any] = []

    def watch(ctx: RunContext) -> None:
        import time

        deadline = time.monotonic() + 10
        while len({b for b in beats}) < 3 and time.monotonic() < deadline:
            with arena.db.read() as s:
                r = s.get(Run, ctx.run_id)
                assert r is not None
                beats.append(r.heartbeat_at)
            time.sleep(0.05)

    Worker(arena.db, arena.settings, [FunctionStage("watch", watch)]).poll_once()
    assert len(set(beats)) >= 3


def test_missing_collection_files_fail_the_snapshot(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    import shutil

    run = launch(arena, collection)
    shutil.rmtree(Path(arena.settings.collections_dir / str(collection["id"])))
    Worker(arena.db, arena.settings, plan()).poll_once()
    out = run_json(arena, run["id"])
    assert out["state"] == "failed" and out["reason_class"] == "internal"
    assert "missing" in detail(arena, run["id"])


def test_the_server_runs_the_watchdog_without_workers(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    import time

    from fastapi.testclient import TestClient

    from posttrain_arena.service.app import create_app

    run = launch(arena, collection)
    assert Worker(arena.db, arena.settings, plan(), worker_id="gone").claim() == run["id"]
    fast = arena.settings.model_copy(
        update={"watchdog_interval_sec": 0.1, "heartbeat_timeout_sec": 0.3}
    )
    app = create_app(fast, db=arena.db)
    with TestClient(app) as client:  # the lifespan starts the watchdog loop
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = client.get(f"/api/runs/{run['id']}").json()
            if state["state"] != "running":
                break
            time.sleep(0.1)
    assert state["state"] == "queued" and state["reason_class"] == "requeued"
    assert "gone" in detail(arena, run["id"])
