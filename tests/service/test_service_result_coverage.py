"""A run's result is stored only from a complete score, and its coverage is counted in
trials (tasks x k), not tasks."""

from __future__ import annotations

import pytest

from posttrain_arena.service.errors import Conflict
from posttrain_arena.service.results import summarize_score


def test_an_incomplete_score_is_refused_with_its_counts() -> None:
    score = {"status": "incomplete", "incomplete": ["final: 0 of 160 trials scored"],
             "coverage": {"final": {"attempted": 160, "scored": 0}}}
    with pytest.raises(Conflict, match="0 of 160 trials scored"):
        summarize_score(score)


def test_trial_counts_are_read_from_the_pipelines_score() -> None:
    score = {"status": "scored", "base": {"pass_rate": 0.2, "samples_per_task": 4},
             "final": {"pass_rate": 0.3, "samples_per_task": 4},
             "change": {"delta_pp": 10.0, "ci95_low_pp": -2.0, "ci95_high_pp": 22.0,
                        "paired_tasks": 40, "paired_trials": 158},
             "coverage": {"final": {"attempted": 160, "scored": 159}}}
    s = summarize_score(score)
    assert (s.n_tasks, s.n_trials, s.trials_attempted, s.samples_per_task) == (40, 158, 160, 4)
