"""Post-training runs: recipe in, score.json out.

* `recipe.py` — the Recipe (TOML, validated, hashed)
* `plan.py` — `plan(recipe)`: stages and sizes, nothing run
* `pipeline.py` — `run_recipe(recipe, run_dir=..., resume=..., dry_run=..., progress=...)`
* `stages.py` — content-addressed, resumable stage runner
* `steps.py` — the stage bodies: snapshot, leakage, baseline, teacher, sft, gate, grpo,
  final, score
* `sources.py` — collections and suites as task sets (local or git at a commit)
* `leakage.py` — exact and near-duplicate detection against the held-out suite
* `teacher.py` — verified teacher trajectories in the model agent's message format
* `sft.py`, `grpo.py`, `modeling.py` — TRL + PEFT training (torch imported lazily)
* `score.py` — score.json
"""
