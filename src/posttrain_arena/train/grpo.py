"""GRPO: the stage's run, from the SFT policy to `policy/`, resumable from checkpoints.

The model agent plays real trials with the policy being trained (`episodes.py`,
`rollout.py`, sampled in this process or on TRL's vLLM server: `vllm_policy.py`); TRL's
GRPOTrainer (`grpo_trainer.py`) updates it on the verifiers' rewards, and a batch with
no learning signal takes no optimizer step (`flatskip.py`). Each checkpoint holds the
rollout's state, so a resumed stage continues as an uninterrupted one would.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from posttrain_arena.train.grpo_trainer import grpo_trainer
from posttrain_arena.train.recipe import GrpoSection, ModelSection
from posttrain_arena.train.rollout import AgentRollout

ROLLOUT_STATE = "rollout_state.json"  # in each GRPO checkpoint (AgentRollout.state_dict)


def run_grpo(
    *,
    model_location: str,
    model_section: ModelSection,
    cfg: GrpoSection,
    rollout: AgentRollout,
    task_names: Sequence[str],
    work_dir: Path,
    device: str,
    seed: int,
    on_step: Callable[[int, int], None] | None = None,
    on_checkpoint: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train with GRPO; writes `policy/` (merged) and `adapter/`. Resumes from checkpoints."""
    import shutil

    import torch
    from transformers import TrainerCallback
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    from posttrain_arena.train import modeling

    total = cfg.total_steps(len(task_names))
    ckpt_dir = work_dir / "checkpoints"
    metrics_log: list[dict[str, float]] = []

    class _Report(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs:
                metrics_log.append({k: float(v) for k, v in logs.items()
                                    if isinstance(v, int | float)})
            if on_step is not None:
                on_step(int(state.global_step), total)

        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            # The rollout's state goes into the checkpoint just saved: a resumed run reports
            # every step and draws the replacements an uninterrupted one would, and only a
            # checkpoint holding its own rollout state is ever resumed.
            saved = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            (saved / ROLLOUT_STATE).write_text(json.dumps(rollout.state_dict()))
            if on_checkpoint is not None:
                on_checkpoint(f"checkpoint at step {state.global_step}")

    trainer = grpo_trainer(model_location=model_location, model_section=model_section,
                           cfg=cfg, rollout=rollout, task_names=task_names, work_dir=work_dir,
                           device=device, seed=seed, callbacks=[_Report()])
    tokenizer = trainer.processing_class
    peft = cfg.method == "lora"
    before_path = work_dir / "initial_trainable.pt"
    resume = modeling.latest_checkpoint(ckpt_dir, containing=ROLLOUT_STATE)
    if resume is not None:
        rollout.load_state_dict(json.loads((resume / ROLLOUT_STATE).read_text()))
    if resume is not None and before_path.is_file():
        before = torch.load(before_path)
    else:
        before = modeling.trainable_snapshot(trainer.model)
        torch.save(before, before_path)
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    change = modeling.delta_norm(before, trainer.model)
    modeling.save_policy(trainer.model, tokenizer, work_dir / "policy",
                         adapter_dir=work_dir / "adapter" if peft else None)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    before_path.unlink(missing_ok=True)
    return {
        "method": cfg.method,
        "steps": int(result.global_step),
        "optimizer_steps": int(result.global_step) - rollout.stats.flat_batches_skipped,
        "resumed_from": resume.name if resume else None,
        "train_loss": float(result.training_loss),
        "reward_by_step": [m["reward"] for m in metrics_log if "reward" in m],
        **rollout.stats.as_dict(),
        **change,
    }
