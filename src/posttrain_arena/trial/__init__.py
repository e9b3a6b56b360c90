"""One attempt at one task: build, agent phase, verifier phase, TrialResult.

    from posttrain_arena.trial import TrialRunner, Journal
    runner = TrialRunner("auto", records_root=Path("records"), journal=Journal("j.jsonl"))
    result = runner.run(task, agent, seed=0)

Modules: `runner` (TrialRunner, image cache, journal resume), `plan` (TrialPlan),
`lifecycle` (the phases), `verification` (running a verifier and reading its verdict,
for both isolation modes), `supervise.c` (the verifier's top process: a static
program the harness compiles, run in the sandbox), `verifier` (entry points and reward
reading), `fresh` (fresh verification: one path on every backend), `shared`
(hardened in-session verification), `state` (what travels to a fresh verifier),
`pristine` (whether a pristine image may be trusted with that state), `hostfiles` (host
writes that never follow links), `harness` (the offline pytest runtime), `pool` (warm
sessions), `records`, `journal`, `replay`, `result`.
docs/threat-model.md says which defence stops which attack.
"""

from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.result import Outcome, TestDetail, TrialResult
from posttrain_arena.trial.runner import TrialRunner, trial_id

__all__ = ["Journal", "Outcome", "TestDetail", "TrialResult", "TrialRunner", "trial_id"]
