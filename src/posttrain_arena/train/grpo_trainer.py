"""TRL's GRPOTrainer set up for our rollouts (`rollout.py`), flat batches skipping their step.

Relied-on TRL semantics (pinned in pyproject.toml): `rollout_func(prompts, trainer)`
returning prompt_ids / completion_ids / logprobs plus extra fields; an `env_mask` extra
field multiplied into the loss mask (tool output gets no gradient); a None reward
zeroing that sample's advantage.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrain_arena.train.flatskip import HoldOnFlat, skip_flat_steps
from posttrain_arena.train.modeling import trainer_settings
from posttrain_arena.train.recipe import GrpoSection, ModelSection
from posttrain_arena.train.rollout import AgentRollout


def verifier_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[Any]:
    """TRL reward function: the verifier's reward the rollout recorded (None: unscorable)."""
    return list(kwargs["verifier_reward"])


def grpo_trainer(
    *,
    model_location: str,
    model_section: ModelSection,
    cfg: GrpoSection,
    rollout: AgentRollout,
    task_names: Sequence[str],
    work_dir: Path,
    device: str,
    seed: int,
    callbacks: Sequence[Any] = (),
) -> Any:
    """TRL's GRPOTrainer set up for our rollouts, with flat batches skipping their step."""
    import os

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from posttrain_arena.train import modeling

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = modeling.load_tokenizer(model_location)
    model = modeling.load_causal_lm(model_location, model_section, device)
    peft_config = modeling.lora_config(cfg.lora) if cfg.method == "lora" else None
    G = cfg.num_generations
    per_device, gen_batch = cfg.episodes_per_pass, cfg.episodes_per_step
    problem = cfg.batch_problem()  # again: a section made by model_copy is not validated
    if problem:
        raise ValueError(f"[grpo] {problem}")
    total = cfg.total_steps(len(task_names))
    vllm: dict[str, Any] = {}
    if cfg.policy_endpoint:
        vllm = {"use_vllm": True, "vllm_mode": "server",
                "vllm_server_base_url": cfg.policy_endpoint}
    args = GRPOConfig(
        output_dir=str(work_dir / "checkpoints"),
        max_steps=total,
        learning_rate=cfg.learning_rate,
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=gen_batch // per_device,
        # one generation per optimizer step: what skip_flat_steps relies on
        steps_per_generation=gen_batch // per_device,
        num_generations=G,
        max_completion_length=cfg.max_completion_length,
        loss_type=cfg.loss_type,
        beta=cfg.beta,
        temperature=cfg.temperature,
        log_completions=False,
        **trainer_settings(seed=seed, device=device, section=model_section,
                           save_steps=cfg.save_steps),
        **vllm,
    )
    rows = [{"prompt": name} for name in task_names]
    # Repeat the task list so that `total` steps never run out of prompts.
    need = total * cfg.tasks_per_step
    rows = (rows * (need // max(1, len(rows)) + 1))[: max(need, len(rows))]

    class _Trainer(GRPOTrainer):  # type: ignore[misc]
        def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
            if self.lr_scheduler is not None:
                return super().create_scheduler(num_training_steps, optimizer)
            # The optimizer and scheduler the loop will step, each wrapped once.
            skip_flat_steps(optimizer if optimizer is not None else self.optimizer, rollout)
            scheduler = super().create_scheduler(num_training_steps, optimizer)
            held = HoldOnFlat(scheduler, rollout)
            self.lr_scheduler = held  # type: ignore[assignment]  # a LambdaLR by delegation
            return held

    return _Trainer(model=model, reward_funcs=[verifier_reward], args=args,
                    train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                    peft_config=peft_config, rollout_func=rollout, callbacks=list(callbacks))
