"""One attempt at one task: build, agent phase, verifier phase, TrialResult.

    from posttrain_arena.trial import TrialRunner, Journal
    runner = TrialRunner("auto", records_root=Path("records"), journal=Journal("j.jsonl"))
    result = runner.run(task, agent, seed=0)

Modules: `runner` (TrialRunner, image cache, journal resume), `lifecycle` (the phases),
`verifier` (entry points and reward reading), `shared` (hardened in-session
verification), `state` (what travels to a fresh verifier), `harness` (the offline
pytest runtime), `pool` (warm sessions), `records`, `journal`, `replay`, `result`.
"""

from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.result import Outcome, TestDetail, TrialResult
from posttrain_arena.trial.runner import TrialRunner, trial_id

__all__ = ["Journal", "Outcome", "TestDetail", "TrialResult", "TrialRunner", "trial_id"]
