"""SFT runs alone, so it trains on every usable core; trial stages keep torch to
[runtime] torch_threads (1 on CPU) so that sandboxes have the other cores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.train.modeling import cpu_threads, usable_cores
from posttrain_arena.train.recipe import parse_recipe
from posttrain_arena.train.stages import StageContext, StageRunner, no_progress
from posttrain_arena.train.steps import Steps

torch = pytest.importorskip("torch")


def _steps(tmp: Path, runtime: dict[str, Any]) -> Steps:
    recipe = parse_recipe({
        "name": "threads", "model": {"id": str(tmp / "model")},
        "train": {"collection": str(tmp / "collection")}, "eval": {"suite": str(tmp / "suite")},
        "runtime": {"device": "cpu", "sandbox": "local", **runtime},
        "output": {"dir": str(tmp / "runs")}}, base_dir=tmp)
    return Steps(recipe, tmp / "run", StageRunner(tmp / "run"))


def _threads_seen_by_sft(tmp: Path, monkeypatch: pytest.MonkeyPatch,
                         runtime: dict[str, Any]) -> tuple[int, int]:
    from posttrain_arena.train import sft

    seen: list[int] = []
    monkeypatch.setattr(sft, "read_trajectories", lambda path: ["one trajectory"])
    monkeypatch.setattr(sft, "run_sft", lambda **kw: seen.append(torch.get_num_threads()) or {})
    steps = _steps(tmp, runtime)
    assert steps.device == "cpu"  # applies torch_threads for the trial stages
    ctx = StageContext(name="sft", work_dir=tmp / "work", upstream={},
                       stages_dir=tmp / "run" / "stages", progress=no_progress)
    with cpu_threads(torch.get_num_threads()):  # the test leaves the process as it was
        steps.sft(ctx)
        return seen[0], torch.get_num_threads()


def test_sft_trains_on_the_recipes_thread_count_and_hands_trials_back_theirs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    during, after = _threads_seen_by_sft(tmp_path, monkeypatch,
                                         {"torch_threads": 1, "train_threads": 3})
    assert (during, after) == (3, 1)


def test_sft_uses_every_usable_core_by_default(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if usable_cores() < 2:
        pytest.skip("one usable core: every count is 1")
    during, after = _threads_seen_by_sft(tmp_path, monkeypatch, {})
    assert (during, after) == (usable_cores(), 1)
