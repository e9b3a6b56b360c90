"""GRPO: TRL's GRPOTrainer, with rollouts made by our model agent in our sandboxes.

TRL's `rollout_func` hook hands us the batch's prompts (here: training task names,
each repeated `num_generations` times). For each one, the model agent plays a whole
episode with the policy being trained (`TransformersChatModel` over `trainer.model`),
inside a real trial, and its transcript gives the exact token view GRPO needs: the
first turn's prompt ids, then every later token as the completion, with an
environment mask (1 on model tokens, 0 on tool output and prompts of later turns) and
the sampler's logprobs. The reward is the verifier's.

Who caused a failed episode decides its reward, as in evaluation and the gates
(evaluate.attribution): what the agent did (a timeout, a state the verifier cannot
read, a conversation past the model's context) is its 0; only what the harness, host or
provider did carries no reward (None, so TRL zeroes its advantage) and is masked out of
the loss. Groups whose rewards do not vary carry no signal: with
`resample_flat` (DAPO's dynamic sampling) each is replaced, while the batch's budget
lasts, by a group on another training task (one not in the batch and not yet seen flat in
this stage); the flat groups left are masked out before the update. All are counted. A
batch whose groups are *all* flat takes no optimizer step at all: the optimizer's and the
LR scheduler's step are skipped, so weights, optimizer state (Adam moments, step counts)
and schedule stay as they were.

Relied-on TRL semantics (pinned in pyproject.toml): `rollout_func(prompts, trainer)`
returning prompt_ids / completion_ids / logprobs plus extra fields; an `env_mask` extra
field multiplied into the loss mask (tool output gets no gradient); a None reward
zeroing that sample's advantage.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrain_arena.agents.model import AgentSettings, ModelAgent
from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.evaluate.attribution import training_reward
from posttrain_arena.models.base import SamplingParams
from posttrain_arena.models.transformers_local import TransformersChatModel
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.train.flatskip import HoldOnFlat, skip_flat_steps
from posttrain_arena.train.recipe import GrpoSection, ModelSection
from posttrain_arena.trial.executor import TrialJob, TrialOutput


@dataclass
class Episode:
    """One rollout: its transcript and the verifier's reward (None: not scorable)."""

    task: str
    transcript: Transcript | None
    reward: float | None
    reason: str | None = None
    model_sec: float = 0.0
    env_sec: float = 0.0
    wall_sec: float = 0.0


EpisodeFn = Callable[[TaskPackage, Any, int], Episode]
ROLLOUT_STATE = "rollout_state.json"  # in each GRPO checkpoint (AgentRollout.state_dict)


def trial_episodes(run_job: Callable[[TrialJob], TrialOutput]) -> EpisodeFn:
    """Episodes as real trials (on whatever executor `run_job` uses): the verifier's
    reward; infrastructure failures -> None."""

    def episode(task: TaskPackage, agent: Any, seed: int) -> Episode:
        t0 = time.monotonic()
        out = run_job(TrialJob(task, agent, seed, capture=True))
        wall = time.monotonic() - t0
        result, run = out.result, out.run
        info = run.info if run is not None else {}
        # Who caused a failure decides (evaluate.attribution): the agent's doing (a
        # timeout, a state the verifier cannot read, an outgrown context) is its 0;
        # only what the harness or provider did is masked.
        reward = training_reward(result.outcome, result.reward, result.reason)
        reason = result.reason
        if run is None:
            reward, reason = None, reason or "the agent never ran"
        return Episode(task=task.name, transcript=run.transcript if run else None,
                       reward=reward, reason=reason, model_sec=float(info.get("model_sec", 0)),
                       env_sec=wall - float(info.get("model_sec", 0)), wall_sec=wall)

    return episode


@dataclass
class RolloutStats:
    """Counters across the whole GRPO stage."""

    batches: int = 0
    episodes: int = 0
    groups: int = 0
    zero_variance_groups: int = 0
    infra_failures: int = 0
    token_view_missing: int = 0
    flat_batches_skipped: int = 0
    resampled_groups: int = 0  # flat groups replaced by another task's group (not trained)
    model_sec: float = 0.0
    env_sec: float = 0.0
    wall_sec: float = 0.0
    batch_mean_reward: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        minutes = self.wall_sec / 60 if self.wall_sec else 0.0
        busy = self.model_sec + self.env_sec
        return {
            "batches": self.batches, "episodes": self.episodes, "groups": self.groups,
            "zero_variance_groups_dropped": self.zero_variance_groups,
            "varied_groups": self.groups - self.zero_variance_groups,
            "flat_groups_resampled": self.resampled_groups,
            "infra_failures_masked": self.infra_failures,
            "token_view_missing": self.token_view_missing,
            "flat_batches_skipped": self.flat_batches_skipped,
            "rollouts_per_min": self.episodes / minutes if minutes else None,
            "model_share": self.model_sec / busy if busy else None,
            "sandbox_share": self.env_sec / busy if busy else None,
            "rollout_wall_sec": self.wall_sec,
            "batch_mean_reward": self.batch_mean_reward,
        }


class AgentRollout:
    """A TRL `rollout_func`: episodes of our model agent, scored by our verifiers."""

    def __init__(self, tasks: dict[str, TaskPackage], episode: EpisodeFn, *,
                 settings: AgentSettings, num_generations: int, max_completion_length: int,
                 concurrency: int, seed: int, resample_flat: int = 0) -> None:
        """`resample_flat`: most flat groups per batch replaced by another task's group."""
        if resample_flat < 0:
            raise ValueError(f"resample_flat must be >= 0 (got {resample_flat})")
        self.tasks = tasks
        self.episode = episode
        self.settings = settings
        self.G = num_generations
        self.max_len = max_completion_length
        self.concurrency = max(1, concurrency)
        self.seed = seed
        self.resample_flat = resample_flat
        self.stats = RolloutStats()
        self.last_batch_flat = False  # no group of the latest batch carries signal
        self.flat_tasks: set[str] = set()  # tasks whose group came out flat in this stage
        self._lock = threading.Lock()

    def state_dict(self) -> dict[str, Any]:
        """What a resumed stage needs to continue as an uninterrupted one would: the
        counters and the tasks seen flat (replacements are never drawn from them)."""
        return {"stats": dataclasses.asdict(self.stats), "flat_tasks": sorted(self.flat_tasks)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stats = RolloutStats(**state["stats"])
        self.flat_tasks = set(state["flat_tasks"])

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        model = trainer.model
        policy: TransformersChatModel
        if getattr(trainer, "use_vllm", False):
            # TRL has just synced the policy's weights to the vLLM server; sample there.
            policy = VllmPolicy(model, trainer.processing_class,
                                trainer.vllm_generation.vllm_client)
        else:
            # Turns of the step's concurrent episodes are generated as one batch.
            policy = TransformersChatModel(model, trainer.processing_class, name="policy",
                                           max_batch=self.concurrency)
        agent = ModelAgent(policy, self.settings, name="policy")
        step = int(trainer.state.global_step)
        names = [str(p) for p in prompts]
        was_training = model.training
        model.eval()
        first_seed = self.seed * 1_000_003 + step * 10_007
        t0 = time.monotonic()
        try:
            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:

                def play(seeded: list[tuple[int, str]]) -> list[Episode]:
                    return list(pool.map(
                        lambda ix: self.episode(self.tasks[ix[1]], agent, first_seed + ix[0]),
                        seeded))

                episodes = play(list(enumerate(names)))
                episodes = self._replace_flat(episodes, play, step)
        finally:
            model.train(was_training)
        self.stats.wall_sec += time.monotonic() - t0
        eos = policy.eos_ids[0]
        return self._to_trl(episodes, eos)

    def _replace_flat(self, episodes: list[Episode],
                      play: Callable[[list[tuple[int, str]]], list[Episode]],
                      step: int) -> list[Episode]:
        """Replace flat groups by groups on fresh tasks, in waves, while the budget lasts.
        Replacements are drawn in a seeded order from the training tasks neither in this
        batch nor seen flat before; each episode gets a seed of its own."""
        G, budget = self.G, self.resample_flat
        episodes = list(episodes)
        used = {ep.task for ep in episodes}
        next_seed = len(episodes)
        order = random.Random(self.seed * 1_000_003 + step)
        while True:
            flat = [g for g in range(0, len(episodes), G) if _flat(episodes[g : g + G])]
            # A group with no scorable episode says nothing about its task (the sandbox
            # failed, not the task): it is replaced, but its task may be drawn again.
            self.flat_tasks.update(episodes[g].task for g in flat
                                   if any(_scorable(ep) is not None for ep in episodes[g : g + G]))
            fresh = sorted(set(self.tasks) - used - self.flat_tasks)
            order.shuffle(fresh)
            swaps = list(zip(flat, fresh, strict=False))[:budget]
            if not swaps:
                return episodes
            seeded = [(next_seed + i, name)
                      for i, name in enumerate(n for _, n in swaps for _ in range(G))]
            next_seed += len(seeded)
            played = play(seeded)
            for j, (g, name) in enumerate(swaps):
                for ep in episodes[g : g + G]:  # run, counted, not trained on
                    self.stats.episodes += 1
                    self.stats.infra_failures += int(ep.reward is None)
                    self.stats.model_sec += ep.model_sec
                    self.stats.env_sec += ep.env_sec
                episodes[g : g + G] = played[j * G : (j + 1) * G]
                used.add(name)
            self.stats.resampled_groups += len(swaps)
            budget -= len(swaps)

    def _to_trl(self, episodes: Sequence[Episode], eos: int) -> dict[str, Any]:
        s = self.stats
        s.batches += 1
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [],
                                     "env_mask": [], "verifier_reward": []}
        rewards: list[float | None] = []
        for ep in episodes:
            s.episodes += 1
            s.model_sec += ep.model_sec
            s.env_sec += ep.env_sec
            t = ep.transcript
            reward = ep.reward
            if reward is None:
                s.infra_failures += 1
            if t is None or not _has_token_view(t):  # (None spelled out for mypy)
                if reward is not None:
                    s.token_view_missing += 1
                    reward = None
                out["prompt_ids"].append([eos])
                out["completion_ids"].append([eos])
                out["logprobs"].append([0.0])
                out["env_mask"].append([0])
                rewards.append(reward)
                continue
            plen = len(t.turns[0].prompt_ids)
            comp = t.token_ids[plen:][: self.max_len] or [eos]
            mask = t.token_mask[plen:][: self.max_len] or [0]
            lps = t.token_logprobs[plen:][: self.max_len] or [0.0]
            if reward is None:
                mask = [0] * len(mask)
            out["prompt_ids"].append(list(t.token_ids[:plen]))
            out["completion_ids"].append(list(comp))
            out["logprobs"].append(list(lps))
            out["env_mask"].append(list(mask))
            rewards.append(reward)
        for g in range(0, len(episodes), self.G):
            s.groups += 1
            if _flat_rewards(rewards[g : g + self.G]):  # no signal: keep it out of the loss
                s.zero_variance_groups += 1
                for i in range(g, min(g + self.G, len(episodes))):
                    out["env_mask"][i] = [0] * len(out["env_mask"][i])
        self.last_batch_flat = not any(any(m) for m in out["env_mask"])
        if self.last_batch_flat:
            # Every group was dropped: the optimizer step is skipped (skip_flat_steps);
            # one token stays in so that TRL's loss normaliser is not zero.
            out["env_mask"][0][0] = 1
        out["verifier_reward"] = rewards
        out["task"] = [ep.task for ep in episodes]  # what each row played (after resampling)
        scored = [r for r in rewards if r is not None]
        s.batch_mean_reward.append(sum(scored) / len(scored) if scored else float("nan"))
        return out


def _has_token_view(t: Transcript | None) -> bool:
    """There is a transcript and it holds the exact tokens GRPO trains on."""
    return t is not None and bool(t.turns) and bool(t.token_ids)


def _scorable(ep: Episode) -> float | None:
    """The episode's reward as the update sees it: None without a token view."""
    return ep.reward if _has_token_view(ep.transcript) else None


def _flat_rewards(rewards: Sequence[float | None]) -> bool:
    """No variance among the scorable rewards: the group carries no learning signal."""
    return len({r for r in rewards if r is not None}) <= 1


def _flat(group: Sequence[Episode]) -> bool:
    return _flat_rewards([_scorable(ep) for ep in group])


class VllmPolicy(TransformersChatModel):
    """The local chat client's rendering, with tokens sampled by TRL's vLLM server (kept in
    sync with the policy's weights): token ids in, token ids and logprobs out, no lock."""

    def __init__(self, model: Any, tokenizer: Any, client: Any) -> None:
        super().__init__(model, tokenizer, name="policy-vllm")
        self.client = client

    def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> tuple[
            list[int], list[float]]:
        """Sample on the server; the sampled token's logprob per position."""
        extra = {"seed": sampling.seed} if sampling.seed is not None else None
        out = self.client.generate([prompt_ids], temperature=sampling.temperature,
                                   top_p=sampling.top_p, max_tokens=sampling.max_new_tokens,
                                   logprobs=0, generation_kwargs=extra)
        ids = [int(t) for t in out["completion_ids"][0]]
        lps = [float(lp[0]) if lp else 0.0 for lp in out["logprobs"][0]]
        return ids, lps


def verifier_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[Any]:
    """TRL reward function: the verifier's reward the rollout recorded (None: unscorable)."""
    return list(kwargs["verifier_reward"])


def grpo_steps(cfg: GrpoSection, n_tasks: int) -> int:
    """Optimizer steps: `steps`, else epochs over the tasks at `tasks_per_step`."""
    if cfg.steps is not None:
        return cfg.steps
    return max(1, math.ceil(n_tasks * cfg.epochs / cfg.tasks_per_step))


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
    per_device = cfg.per_device_batch_size or G
    gen_batch = cfg.tasks_per_step * G
    if gen_batch % per_device:
        raise ValueError(f"[grpo] tasks_per_step * num_generations ({gen_batch}) must be a "
                         f"multiple of per_device_batch_size ({per_device})")
    total = grpo_steps(cfg, len(task_names))
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
        logging_steps=1,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=1,
        report_to=[],
        seed=seed,
        data_seed=seed,
        use_cpu=device == "cpu",
        bf16=device == "cuda" and model_section.dtype in ("auto", "bfloat16"),
        disable_tqdm=True,
        dataloader_num_workers=0,
        log_completions=False,
        gradient_checkpointing=device == "cuda",  # TRL's default is on: recompute on CPU
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

    total = grpo_steps(cfg, len(task_names))
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
