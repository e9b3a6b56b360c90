"""Gate evidence in the service: a run's gate stage stores it; the API, the collection
page (sortable), the task page and the run (review) page show it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gates.kit import make_package  # tests/ is on sys.path (rootdir import)
from posttrain_arena.gates import gate_collection
from posttrain_arena.gates.cheats import CHEATS
from posttrain_arena.gates.probes import PROBES
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.service import evidence
from posttrain_arena.service.stage_plan import (
    FunctionStage,
    RunContext,
    run_gates,
    snapshot,
    structural_check,
)
from posttrain_arena.service.worker import Worker
from posttrain_arena.train.sources import taskset_hash
from posttrain_arena.trial.runner import TrialRunner
from train.tinymodel import build_tiny_model

from .conftest import CHALLENGE
from .test_service_worker import launch, plan, run_json, scripted_pipeline

if TYPE_CHECKING:
    from tests.service.conftest import Arena


def _gate_stage(records: Path) -> FunctionStage:
    """The gates on the run's snapshot with a scripted base model that never solves."""

    def stage(ctx: RunContext) -> dict[str, Any]:
        model = ScriptedModel([{"bash": "true"}, {"submit": True}])
        with TrialRunner("local", records_root=records) as runner:
            report = gate_collection(ctx.snapshot_dir, runner, model, model_spec="never",
                                     k=2, reruns=2, jobs=2, records_root=records)
        return {"evidence": [e.model_dump(mode="json") for e in report.evidence]}

    return FunctionStage("gates", stage)


@pytest.mark.bwrap
def test_the_gate_stage_stores_evidence_that_every_view_shows(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any],
        tmp_path: Path, arena_cache_dir: Path) -> None:
    stages = plan()
    stages.insert(2, _gate_stage(tmp_path / "records"))
    run = launch(arena, collection)
    assert Worker(arena.db, arena.settings, stages).poll_once() == run["id"]
    assert run_json(arena, run["id"])["state"] == "scored"
    cid = collection["id"]

    rows = arena.call("GET", f"/api/collections/{cid}/evidence").json()
    assert [r["task"] for r in rows] == sorted(r["task"] for r in rows) and len(rows) == 2
    for r in rows:  # the template's oracle works, but the base model never solves
        assert r["eligible"] is False and r["learnable"] == "fail"
        assert r["flake_rate"] == 0.0 and r["probe_failures"] == 0
        assert r["base_pass_rate"] == 0.0 and r["run_id"] == run["id"]
        assert any("not learnable" in why for why in r["reasons"])
    one = rows[0]["task"]
    detail = arena.call("GET", f"/api/collections/{cid}/evidence/{one}").json()
    assert detail["record"]["task"] == one and len(detail["record"]["oracle"]) == 2
    kinds = {start: [p["kind"] for p in detail["record"]["probes"] if p["start"] == start]
             for start in ("oracle", "empty")}  # every known-bad probe, then every cheat
    assert kinds == {"oracle": [k.name for k in PROBES], "empty": [k.name for k in CHEATS]}
    assert arena.call("GET", f"/api/collections/{cid}/evidence?sort=probes").status_code == 200
    bad = arena.call("GET", f"/api/collections/{cid}/evidence?sort=nonsense")
    assert bad.status_code == 400 and "sort must be one of" in bad.text
    assert arena.call("GET", f"/api/collections/{cid}/evidence/nope").status_code == 404
    assert arena.call("GET", "/api/collections/9999/evidence").status_code == 404

    page = arena.call("GET", f"/arena/collections/{cid}?sort=flaky").text
    assert 'id="evidence-table"' in page and f'data-task="{one}"' in page
    assert "Flake rate ▾" in page and "not learnable" in page
    task_page = arena.call("GET", f"/arena/collections/{cid}/tasks/{one}").text
    assert "oracle rerun 1" in task_page
    assert [k.name for k in (*PROBES, *CHEATS) if f"probe {k.name}<" not in task_page] == []
    run_page = arena.call("GET", f"/arena/runs/{run['id']}", "editor").text
    assert 'id="evidence-table"' in run_page and f'data-task="{one}"' in run_page


def test_a_second_gate_run_replaces_a_tasks_row_and_bad_records_are_refused(
        arena: Arena, collection: dict[str, Any]) -> None:
    from posttrain_arena.gates.evidence import TaskEvidence, Verdict

    def record(task: str, eligible: bool) -> dict[str, Any]:
        return TaskEvidence(key=task, task=task, task_checksum="sha256:x",
                            harness_version="h", backend="local", model="m", k=2, reruns=1,
                            created_at="now",
                            verdict=Verdict(eligible=eligible)).model_dump(mode="json")

    cid = collection["id"]
    with arena.db.write() as s:
        assert evidence.store(s, cid, None, [record("a", False), record("b", True)]) == 2
        assert evidence.store(s, cid, None, [record("a", True)]) == 1
        with pytest.raises(ValueError, match="not TaskEvidence"):
            evidence.store(s, cid, None, [{"task": "c"}])
    rows = arena.call("GET", f"/api/collections/{cid}/evidence?sort=eligible").json()
    assert [(r["task"], r["eligible"]) for r in rows] == [("a", True), ("b", True)]


@pytest.mark.bwrap
@pytest.mark.slow
def test_the_default_gates_stage_runs_the_recipes_gates_and_stores_them(
        arena: Arena, collection: dict[str, Any], tmp_path: Path,
        arena_cache_dir: Path) -> None:
    model = build_tiny_model(tmp_path / "tiny")
    suite = tmp_path / "suite"  # unlike the collection's tasks, or leakage drops them all
    make_package(suite, "held-out")
    recipe = tmp_path / "gated.toml"
    recipe.write_text(
        f'name = "gated"\n[model]\nid = "{model}"\n[train]\ncollection = "unused"\n'
        f'[eval]\nsuite = "{suite}"\nsha256 = "{taskset_hash(suite)}"\n'
        '[agent]\nmax_turns = 1\nmax_new_tokens = 4\ntimeout_sec = 60\n'
        '[runtime]\nsandbox = "local"\nconcurrency = 2\ndevice = "cpu"\n'
        '[task_gates]\nenabled = true\nreruns = 1\nk = 2\n')
    body = {**CHALLENGE, "slug": "gated", "recipe": str(recipe)}
    assert arena.call("POST", "/api/challenges", "admin", json=body).status_code == 201
    resp = arena.call("POST", "/api/runs", "author",
                      json={"challenge": "gated", "collection_id": collection["id"]})
    assert resp.status_code == 201, resp.text
    stages = [FunctionStage("snapshot", snapshot), FunctionStage("check", structural_check),
              FunctionStage("gates", run_gates), scripted_pipeline()]
    Worker(arena.db, arena.settings, stages).poll_once()
    run = run_json(arena, resp.json()["id"])
    assert run["state"] == "scored", run
    rows = arena.call("GET", f"/api/collections/{collection['id']}/evidence").json()
    assert len(rows) == collection["task_count"] and all(r["run_id"] == run["id"] for r in rows)
    for r in rows:  # the default recipe policy does not require learnable
        assert r["eligible"] is True, r["reasons"]
        detail = arena.call("GET", f"/api/collections/{collection['id']}/evidence/{r['task']}")
        assert detail.json()["record"]["base"]["k"] == 2
