"""GRPO rollouts: TRL's `rollout_func`, played by our model agent in our sandboxes.

TRL's `rollout_func` hook hands us the batch's prompts (here: training task names,
each repeated `num_generations` times). For each one, the model agent plays a whole
episode with the policy being trained (`TransformersChatModel` over `trainer.model`, or
`VllmPolicy` when TRL samples on a vLLM server), inside a real trial (`episodes.py`),
and its transcript gives the exact token view GRPO needs: the first turn's prompt ids,
then every later token as the completion, with an environment mask (1 on model tokens,
0 on tool output and prompts of later turns) and the sampler's logprobs. The reward is
the verifier's; an episode whose failure the agent did not cause has none (None) and is
masked out of the loss.

Groups whose rewards do not vary carry no signal: with `resample_flat` (DAPO's dynamic
sampling) each is replaced, while the batch's budget lasts, by a group on another
training task (one not in the batch and not yet seen flat in this stage); the flat
groups left are masked out before the update. All are counted. A batch whose groups are
*all* flat is marked (`last_batch_flat`) so that it takes no optimizer step
(`flatskip.py`).
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from posttrain_arena.agents.model import AgentSettings, ModelAgent
from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.models.transformers_local import TransformersChatModel
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.train.episodes import Episode, EpisodeFn
from posttrain_arena.train.vllm_policy import VllmPolicy


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

