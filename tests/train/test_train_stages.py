"""Stages are content-addressed and resume after a kill, between stages or inside one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.train.stages import Stage, StageContext, StageEvent, StageRunner


class Killed(Exception):
    """Stands in for the process dying."""


def _graph(calls: list[str], config: str = "c1") -> list[Stage]:
    def first(ctx: StageContext) -> dict[str, Any]:
        calls.append("first")
        (ctx.work_dir / "out.txt").write_text(config)
        return {"n": 1}

    def second(ctx: StageContext) -> dict[str, Any]:
        calls.append("second")
        upstream = (ctx.output_of("first") / "out.txt").read_text()
        done = ctx.work_dir / "units.jsonl"
        have = done.read_text().splitlines() if done.exists() else []
        for unit in range(len(have), 4):  # durable units: the stage's own checkpoints
            with done.open("a") as fh:
                fh.write(json.dumps(unit) + "\n")
            ctx.checkpoint(f"unit {unit}")
        return {"upstream": upstream, "resumed": ctx.resumed}

    def third(ctx: StageContext) -> dict[str, Any]:
        calls.append("third")
        return {}

    return [Stage("first", first, config), Stage("second", second, "x", reads=("first",)),
            Stage("third", third, "y", reads=("second",))]


def _killer(stage: str, status: str, nth: int = 1) -> Any:
    seen = [0]

    def progress(e: StageEvent) -> None:
        if e.stage == stage and e.status == status:
            seen[0] += 1
            if seen[0] == nth:
                raise Killed(f"{stage} {status}")

    return progress


def _run(tmp: Path, calls: list[str], progress: Any = None, config: str = "c1") -> StageRunner:
    runner = StageRunner(tmp, progress=progress or (lambda e: None), resume=True)
    for stage in _graph(calls, config):
        runner.run(stage)
    return runner


def test_kill_between_stages_resumes_at_the_first_unfinished(tmp_path: Path) -> None:
    calls: list[str] = []
    with pytest.raises(Killed):
        _run(tmp_path, calls, _killer("third", "start"))
    assert calls == ["first", "second"]
    calls.clear()
    runner = _run(tmp_path, calls)
    assert calls == ["third"]  # first and second were not recomputed
    assert runner.computed == ["third"]
    assert (tmp_path / "stages" / "third" / "done.json").is_file()


def test_kill_inside_a_stage_continues_from_its_checkpoint(tmp_path: Path) -> None:
    calls: list[str] = []
    with pytest.raises(Killed):
        _run(tmp_path, calls, _killer("second", "checkpoint", nth=2))
    partial = tmp_path / "stages" / "second.partial" / "units.jsonl"
    assert partial.read_text().splitlines() == ["0", "1"]
    calls.clear()
    runner = _run(tmp_path, calls)
    assert calls == ["second", "third"]
    record = runner.records["second"]
    assert record.summary["resumed"] is True
    units = (tmp_path / "stages" / "second" / "units.jsonl").read_text().splitlines()
    assert units == ["0", "1", "2", "3"]  # each unit done exactly once
    assert not (tmp_path / "stages" / "second.partial").exists()


def test_changed_inputs_recompute_that_stage_and_everything_after(tmp_path: Path) -> None:
    calls: list[str] = []
    _run(tmp_path, calls)
    calls.clear()
    _run(tmp_path, calls)
    assert calls == []
    _run(tmp_path, calls, config="c2")
    assert calls == ["first", "second", "third"]
    assert (tmp_path / "stages" / "first" / "out.txt").read_text() == "c2"


def _shared_graph(calls: list[str], collection: str, base: str = "b1") -> list[Stage]:
    """snapshot (collection + base) -> baseline (depends on the base only) -> train."""

    def snapshot(ctx: StageContext) -> dict[str, Any]:
        (ctx.work_dir / "collection.txt").write_text(collection)
        return {"base": base, "collection": collection}

    def baseline(ctx: StageContext) -> dict[str, Any]:
        calls.append("baseline")
        (ctx.work_dir / "eval.json").write_text(json.dumps({"base": base, "calls": len(calls)}))
        return {"pass_rate": 0.5}

    def train(ctx: StageContext) -> dict[str, Any]:
        calls.append("train")
        return {"eval": (ctx.output_of("baseline") / "eval.json").read_text()}

    return [Stage("snapshot", snapshot, "s"),
            Stage("baseline", baseline, "b", reads=("snapshot",),
                  depends_on=lambda records: {"base": records["snapshot"].summary["base"]}),
            Stage("train", train, "t", reads=("snapshot", "baseline"))]


def _shared_run(run_dir: Path, shared: Path | None, calls: list[str], collection: str,
                base: str = "b1") -> tuple[StageRunner, list[StageEvent]]:
    seen: list[StageEvent] = []
    runner = StageRunner(run_dir, progress=seen.append, shared=shared)
    for stage in _shared_graph(calls, collection, base):
        runner.run(stage)
    return runner, seen


def test_runs_share_a_stage_that_depends_on_what_they_have_in_common(tmp_path: Path) -> None:
    shared, calls = tmp_path / "shared", []
    first, _ = _shared_run(tmp_path / "run-a", shared, calls, collection="a")
    assert calls == ["baseline", "train"]
    calls.clear()
    interrupted = tmp_path / "run-b" / "stages" / "baseline.partial"
    interrupted.mkdir(parents=True)  # run-b had begun its own baseline and died
    second, seen = _shared_run(tmp_path / "run-b", shared, calls, collection="b")
    assert calls == ["train"]  # another collection, the same base: the baseline is taken
    assert not interrupted.exists()
    assert second.records["baseline"] == first.records["baseline"]
    assert (tmp_path / "run-b" / "stages" / "baseline" / "eval.json").read_text() == (
        tmp_path / "run-a" / "stages" / "baseline" / "eval.json").read_text()
    taken = [e for e in seen if e.stage == "baseline"]
    assert [e.status for e in taken] == ["skip"] and "another run" in taken[0].message
    # What the stage depends on changed: measured again, and published beside the first.
    calls.clear()
    _shared_run(tmp_path / "run-c", shared, calls, collection="a", base="b2")
    assert calls == ["baseline", "train"]
    assert len(list((shared / "baseline").iterdir())) == 2


def test_a_shared_copy_whose_files_changed_is_not_taken(tmp_path: Path) -> None:
    shared, calls = tmp_path / "shared", []
    _shared_run(tmp_path / "run-a", shared, calls, collection="a")
    (copy,) = (shared / "baseline").iterdir()
    (copy / "eval.json").write_text(json.dumps({"base": "b1", "pass_rate": 1.0}))
    calls.clear()
    _shared_run(tmp_path / "run-b", shared, calls, collection="b")
    assert calls == ["baseline", "train"]  # measured, not the edited copy
    assert json.loads((tmp_path / "run-b" / "stages" / "baseline" / "eval.json")
                      .read_text())["calls"] == 1


def test_stages_without_depends_on_are_never_shared(tmp_path: Path) -> None:
    shared, calls = tmp_path / "shared", []
    _shared_run(tmp_path / "run-a", shared, calls, collection="a")
    assert sorted(p.name for p in shared.iterdir()) == ["baseline"]
    calls.clear()
    _shared_run(tmp_path / "run-b", None, calls, collection="b")
    assert calls == ["baseline", "train"]  # no shared folder: nothing is taken


def test_the_pipelines_baseline_key_covers_the_base_and_the_suite_not_the_collection() -> None:
    """A shared baseline is only as honest as its key: another base model or suite must
    measure its own, another collection must not matter."""
    from posttrain_arena.train.pipeline import _base_and_suite
    from posttrain_arena.train.stages import StageRecord

    def snapshot(collection: str, suite: str, model: str) -> dict[str, StageRecord]:
        summary = {"collection": {"content_hash": collection},
                   "suite": {"content_hash": suite},
                   "model": {"id": "m", "revision": None, "content_hash": model,
                             "location": "/m"}}
        return {"snapshot": StageRecord(name="snapshot", input_hash="i", output_hash=collection,
                                        summary=summary, started_at=0, finished_at=0)}

    key = _base_and_suite(snapshot("c1", "s1", "m1"))
    assert _base_and_suite(snapshot("c2", "s1", "m1")) == key
    assert _base_and_suite(snapshot("c1", "s2", "m1")) != key
    assert _base_and_suite(snapshot("c1", "s1", "m2")) != key
