"""The trial's side of verifier.md rubrics (issue 14): one call where the reward is read.

The rubric itself is `spec.rubric` (a pure function of the verifier's output). This
module only applies it to a finished verifier's reading, and only when that verifier
exited normally, its reward.json scores the rubric's dimensions and any reward it wrote
was read without a problem; otherwise the reading is returned unchanged, so a verifier
that writes one number is read exactly as before. Each dimension becomes a detail
`rubric:NAME` of the trial.
"""

from __future__ import annotations

from pathlib import Path

from posttrain_arena.task_format.rubric import Rubric, read_reward_json, score, scores_dimensions
from posttrain_arena.trial.result import TestDetail
from posttrain_arena.trial.verifier import VerifierReading, read_reward_file


def apply_rubric(rubric: Rubric | None, logs: Path, reading: VerifierReading, *,
                 exited_normally: bool) -> VerifierReading:
    """`reading` with its reward made by `rubric` from reward.json's dimension scores."""
    if rubric is None or not exited_normally:
        return reading
    data = read_reward_json(logs)
    if not scores_dimensions(rubric, data):
        return reading
    if reading.reward is None and isinstance(data, dict) and "reward" in data:
        # the verifier wrote a reward that failed (two files disagreeing, a bad value):
        # its dimensions add detail to a verdict, they never stand in for one
        return reading
    number = data.get("reward") if isinstance(data, dict) else None
    written = float(number) if isinstance(number, int | float) \
        and not isinstance(number, bool) else None
    if written is None:
        # reward.json holds only dimensions: reward.txt, when there is one, must agree with
        # their sum (the reward has one source; a second file never goes unchecked)
        written, problem = read_reward_file(logs / "reward.txt")
        if problem is not None:
            return VerifierReading(None, problem, reading.details)
    result = score(rubric, data, written)
    details = [*reading.details, *(
        TestDetail(name=f"rubric:{d.name}", status="scored",
                   message=f"score {d.score:g} x weight {d.weight:g}")
        for d in result.dimensions)]
    return VerifierReading(result.reward, result.reason, details)
