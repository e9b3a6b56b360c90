"""Post-training runs: recipe in, score.json out.

* `recipe.py` — the Recipe (TOML, validated, hashed)
* `plan.py` — `plan(recipe)`: stages and sizes, nothing run
* `pipeline.py` — `run_recipe(recipe, run_dir=..., resume=..., dry_run=..., progress=...)`
* `stages.py` — content-addressed, resumable stage runner
* `steps.py` — the stage bodies: snapshot, leakage, eligibility, baseline, teacher, sft,
  after_sft, gate, grpo, final, score
* `run_resources.py` — what the stage bodies share: device, trial runner and executors,
  task sets, a policy's agent spec and evaluation
* `sources.py` — collections and suites as task sets (local or git at a commit)
* `leakage.py` — exact and near-duplicate detection against the held-out suite
* `teacher.py` — verified teacher trajectories in the model agent's message format
* `sft.py`, `modeling.py` — TRL + PEFT training (torch imported lazily)
* `grpo.py` — GRPO's run; `grpo_trainer.py` — TRL's GRPOTrainer set up for our rollouts;
  `rollout.py` — TRL's `rollout_func` (episodes to token rows, flat groups);
  `episodes.py` — an episode is a trial; `vllm_policy.py` — sampling on a vLLM server;
  `flatskip.py` — a batch with no signal takes no optimizer step
* `runlog.py` — what libraries print during a run goes to the run's log file
* `score.py` — score.json
"""
