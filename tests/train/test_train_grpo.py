"""GRPO on a tiny model with our agent's rollouts: masks line up, the adapter moves,
unscorable episodes and zero-variance groups are kept out of the update."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from posttrain_arena.agents.base import AgentContext
from posttrain_arena.agents.model import AgentSettings
from posttrain_arena.train.grpo import AgentRollout, Episode, run_grpo
from posttrain_arena.train.modeling import load_causal_lm, load_tokenizer
from posttrain_arena.train.recipe import GrpoSection, LoraSpec, ModelSection


@dataclass
class _Out:
    exit_code: int = 0
    stdout: str = "ok"
    stderr: str = ""
    timed_out: bool = False


class _NoSandboxShell:
    """The scripted-reward path: commands are not executed (no sandbox needed)."""

    workdir = "/root"

    def exec(self, command: str, *, timeout: float | None = None, env: Any = None) -> _Out:
        return _Out()

    def copy_in(self, src: Path, dest: str) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class _Task:
    name: str
    prompt: str


def _scripted_episodes(rewards: dict[str, Any]) -> Any:
    """Episodes played by the real agent + policy; reward scripted per task."""
    counter = itertools.count()

    def episode(task: _Task, agent: Any, seed: int) -> Episode:
        run = agent.run(_NoSandboxShell(), AgentContext(
            task_name=task.name, prompt=task.prompt, deadline=time.monotonic() + 120, seed=seed))
        n = next(counter)
        reward = rewards[task.name](run.transcript, n)
        return Episode(task=task.name, transcript=run.transcript, reward=reward,
                       reason=None if reward is not None else "sandbox died",
                       model_sec=run.info["model_sec"])

    return episode


SETTINGS = AgentSettings(max_turns=2, max_new_tokens=6, max_tokens=12, temperature=1.0)


def _first_token_parity(t: Any, n: int) -> float:
    return float(t.token_ids[len(t.turns[0].prompt_ids)] % 2 == 0)


def test_rollout_tokens_line_up_with_the_transcript(tiny_model: Path) -> None:
    tok = load_tokenizer(str(tiny_model))
    model = load_causal_lm(str(tiny_model), ModelSection(id=str(tiny_model)), "cpu")
    transcripts: list[Any] = []

    def keep(t: Any, n: int) -> float | None:
        transcripts.append(t)
        return [1.0, 0.0, None][n] if n < 3 else 0.5

    tasks = {"a": _Task("a", "write hello to out.txt")}
    rollout = AgentRollout(tasks, _scripted_episodes({"a": keep}), settings=SETTINGS,
                           num_generations=3, max_completion_length=1024, concurrency=1, seed=0)
    trainer = SimpleNamespace(model=model, processing_class=tok,
                              state=SimpleNamespace(global_step=0))
    out = rollout(["a", "a", "a"], trainer)
    t = transcripts[0]
    assert out["prompt_ids"][0] == t.turns[0].prompt_ids
    model_tokens = [i for i, m in zip(out["completion_ids"][0], out["env_mask"][0],
                                      strict=True) if m]
    # Mask 1 on exactly the tokens the model generated, turn after turn.
    assert model_tokens == [i for turn in t.turns for i in turn.completion_ids]
    lps = [lp for lp, m in zip(out["logprobs"][0], out["env_mask"][0], strict=True) if m]
    assert lps == [lp for turn in t.turns for lp in turn.logprobs]
    assert len(t.turns) == 2 and 0 in out["env_mask"][0]  # the environment's tokens
    # The unscorable episode has no reward (never 0) and no loss tokens.
    assert out["verifier_reward"] == [1.0, 0.0, None]
    assert any(out["env_mask"][1]) and not any(out["env_mask"][2])
    assert rollout.stats.infra_failures == 1
    assert rollout.stats.zero_variance_groups == 0
    # A group whose rewards do not vary is kept out of the update, and counted.
    flat = rollout(["a", "a", "a"], trainer)
    assert flat["verifier_reward"] == [0.5, 0.5, 0.5]
    assert rollout.stats.zero_variance_groups == 1
    assert sum(sum(m) for m in flat["env_mask"]) <= 1  # at most the no-op guard token


@pytest.mark.slow
def test_grpo_moves_the_adapter_and_drops_flat_groups(tiny_model: Path, tmp_path: Path) -> None:
    tasks = {"varied": _Task("varied", "write hello to out.txt"),
             "flat": _Task("flat", "list the files")}
    rewards = {"varied": _first_token_parity, "flat": lambda t, n: 1.0}
    rollout = AgentRollout(tasks, _scripted_episodes(rewards), settings=SETTINGS,
                           num_generations=4, max_completion_length=64, concurrency=2, seed=0)
    cfg = GrpoSection(steps=2, tasks_per_step=2, num_generations=4, learning_rate=1e-2,
                      lora=LoraSpec(r=4, alpha=8), save_steps=10)
    metrics = run_grpo(model_location=str(tiny_model),
                       model_section=ModelSection(id=str(tiny_model)), cfg=cfg,
                       rollout=rollout, task_names=["varied", "flat"], work_dir=tmp_path,
                       device="cpu", seed=0)
    assert metrics["steps"] == 2
    assert metrics["episodes"] == 16
    assert metrics["zero_variance_groups_dropped"] >= 2  # "flat" never varies
    assert metrics["param_delta_norm"] > 0
    assert metrics["params_changed"] > 0
    assert (tmp_path / "policy" / "config.json").is_file()
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
