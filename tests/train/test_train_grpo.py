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
from posttrain_arena.train.episodes import Episode
from posttrain_arena.train.grpo import ROLLOUT_STATE, run_grpo
from posttrain_arena.train.grpo_trainer import grpo_trainer
from posttrain_arena.train.modeling import latest_checkpoint, load_causal_lm, load_tokenizer
from posttrain_arena.train.recipe import GrpoSection, LoraSpec, ModelSection
from posttrain_arena.train.rollout import AgentRollout


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


def _seeded(rewards: dict[str, Any], seeds: list[int]) -> Any:
    play = _scripted_episodes(rewards)

    def episode(task: _Task, agent: Any, seed: int) -> Episode:
        seeds.append(seed)
        return play(task, agent, seed)

    return episode


def _resampling(tiny_model: Path, rewards: dict[str, Any], budget: int,
                seeds: list[int]) -> tuple[AgentRollout, Any]:
    tok = load_tokenizer(str(tiny_model))
    model = load_causal_lm(str(tiny_model), ModelSection(id=str(tiny_model)), "cpu")
    tasks = {name: _Task(name, f"task {name}: write hello to out.txt") for name in rewards}
    rollout = AgentRollout(tasks, _seeded(rewards, seeds), settings=SETTINGS,
                           num_generations=2, max_completion_length=64, concurrency=1, seed=0,
                           resample_flat=budget)
    trainer = SimpleNamespace(model=model, processing_class=tok,
                              state=SimpleNamespace(global_step=3))
    return rollout, trainer


def test_flat_groups_are_replaced_by_groups_on_fresh_tasks(tiny_model: Path) -> None:
    """Dynamic sampling: a flat group gives its place to another task's group (again, if
    that one is flat too), so the batch trains on groups that carry signal."""
    one = lambda t, n: 1.0  # noqa: E731
    rewards = {"solved": one, "also-solved": one, "varied": _alternating,
               "other-varied": _alternating}
    seeds: list[int] = []
    rollout, trainer = _resampling(tiny_model, rewards, budget=2, seeds=seeds)
    out = rollout(["solved", "solved", "varied", "varied"], trainer)
    groups = [out["task"][i : i + 2] for i in (0, 2)]
    assert all(len(set(g)) == 1 for g in groups)  # a group is one task, whole
    assert sorted(g[0] for g in groups) == ["other-varied", "varied"]
    assert rollout.stats.zero_variance_groups == 0 and rollout.stats.groups == 2
    assert 1 <= rollout.stats.resampled_groups <= 2
    assert rollout.stats.episodes == 4 + 2 * rollout.stats.resampled_groups == len(seeds)
    assert len(set(seeds)) == len(seeds)  # every episode its own seed
    assert "solved" in rollout.flat_tasks
    assert all(any(m) for m in out["env_mask"])  # both groups are in the loss
    # Rewards, masks and tokens stay row-aligned after the swap.
    assert len(out["verifier_reward"]) == len(out["completion_ids"]) == 4


def test_resampling_stops_at_the_budget_and_keeps_a_flat_group_out(tiny_model: Path) -> None:
    one = lambda t, n: 1.0  # noqa: E731
    rewards = {f"solved-{i}": one for i in range(4)} | {"varied": _alternating}
    seeds: list[int] = []
    rollout, trainer = _resampling(tiny_model, rewards, budget=1, seeds=seeds)
    out = rollout(["solved-0", "solved-0", "solved-1", "solved-1"], trainer)
    assert rollout.stats.resampled_groups == 1  # the budget, though both groups were flat
    assert rollout.stats.episodes == 6 == len(seeds)
    flat = [g for g in (0, 2) if len(set(out["verifier_reward"][g : g + 2])) == 1]
    assert rollout.stats.zero_variance_groups == len(flat) >= 1
    in_loss = sum(sum(m) for g in flat for m in out["env_mask"][g : g + 2])
    assert in_loss <= (1 if rollout.last_batch_flat else 0)  # at most the no-op guard token
    # Without a budget nothing is replaced (the old behaviour).
    again, trainer = _resampling(tiny_model, rewards, budget=0, seeds=[])
    kept = again(["solved-0", "solved-0", "varied", "varied"], trainer)
    assert kept["task"] == ["solved-0", "solved-0", "varied", "varied"]
    assert again.stats.resampled_groups == 0 and again.stats.zero_variance_groups == 1


def test_a_group_lost_to_the_sandbox_is_replaced_counted_and_not_called_flat(
    tiny_model: Path,
) -> None:
    """Episodes that failed on infrastructure are counted even when their group is
    replaced, and such a group does not mark its task as flat (nothing was scored)."""
    lost = lambda t, n: None  # noqa: E731
    rewards = {"lost": lost, "varied": _alternating, "other-varied": _alternating}
    seeds: list[int] = []
    rollout, trainer = _resampling(tiny_model, rewards, budget=1, seeds=seeds)
    out = rollout(["lost", "lost", "varied", "varied"], trainer)
    assert rollout.stats.resampled_groups == 1
    assert sorted(set(out["task"])) == ["other-varied", "varied"]
    assert rollout.stats.infra_failures == 2  # the replaced group's two lost episodes
    assert "lost" not in rollout.flat_tasks
    assert rollout.stats.episodes == 6 == len(seeds)


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


class _Interrupted(Exception):
    pass


def _grpo_run(tiny_model: Path, work_dir: Path, played: list[tuple[str, int]],
              stop_at_checkpoint: bool) -> dict[str, Any] | None:
    one = lambda t, n: 1.0  # noqa: E731
    rewards = {f"solved-{i}": one for i in range(4)} | {"varied": _alternating}
    tasks = {name: _Task(name, f"task {name}: write hello to out.txt") for name in rewards}
    play = _scripted_episodes(rewards)

    def episode(task: _Task, agent: Any, seed: int) -> Episode:
        played.append((task.name, seed))
        return play(task, agent, seed)

    rollout = AgentRollout(tasks, episode, settings=SETTINGS, num_generations=2,
                           max_completion_length=64, concurrency=1, seed=0, resample_flat=1)
    cfg = GrpoSection(steps=4, tasks_per_step=1, num_generations=2, learning_rate=1e-2,
                      lora=LoraSpec(r=4, alpha=8), save_steps=1)

    def stop(message: str) -> None:
        if stop_at_checkpoint and message.endswith("step 2"):
            raise _Interrupted(message)

    try:
        return run_grpo(model_location=str(tiny_model),
                        model_section=ModelSection(id=str(tiny_model)), cfg=cfg,
                        rollout=rollout, task_names=sorted(tasks), work_dir=work_dir,
                        device="cpu", seed=0, on_checkpoint=stop)
    except _Interrupted:
        return None


@pytest.mark.slow
def test_a_resumed_grpo_stage_draws_what_an_uninterrupted_one_draws(
    tiny_model: Path, tmp_path: Path
) -> None:
    """The tasks seen flat before the checkpoint stay out of the replacements after it,
    and the counters cover every step."""
    whole: list[tuple[str, int]] = []
    straight = _grpo_run(tiny_model, tmp_path / "straight", whole, stop_at_checkpoint=False)
    first: list[tuple[str, int]] = []
    assert _grpo_run(tiny_model, tmp_path / "resumed", first, stop_at_checkpoint=True) is None
    rest: list[tuple[str, int]] = []
    resumed = _grpo_run(tiny_model, tmp_path / "resumed", rest, stop_at_checkpoint=False)
    assert straight is not None and resumed is not None
    assert resumed["resumed_from"] == "checkpoint-2"
    assert first + rest == whole
    keys = ("episodes", "groups", "varied_groups", "flat_groups_resampled")
    assert {k: resumed[k] for k in keys} == {k: straight[k] for k in keys}


def _alternating(t: Any, n: int) -> float:
    return float(n % 2)  # every group of an even size holds a 0 and a 1


def _trainer(tiny_model: Path, tmp_path: Path, reward: Any, steps: int) -> tuple[Any, Any]:
    tasks = {"a": _Task("a", "write hello to out.txt")}
    rollout = AgentRollout(tasks, _scripted_episodes({"a": reward}), settings=SETTINGS,
                           num_generations=2, max_completion_length=64, concurrency=1, seed=0)
    cfg = GrpoSection(method="full", steps=steps, tasks_per_step=1, num_generations=2,
                      learning_rate=1e-2, save_steps=100)
    trainer = grpo_trainer(model_location=str(tiny_model),
                           model_section=ModelSection(id=str(tiny_model)), cfg=cfg,
                           rollout=rollout, task_names=["a"], work_dir=tmp_path, device="cpu",
                           seed=0)
    return trainer, rollout


def _weights(model: Any) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.slow
def test_a_batch_of_flat_groups_takes_no_optimizer_step(tiny_model: Path,
                                                        tmp_path: Path) -> None:
    import torch

    results = {}
    for name, reward in (("flat", lambda t, n: 1.0), ("varied", _alternating)):
        trainer, rollout = _trainer(tiny_model, tmp_path / name, reward, steps=2)
        before = _weights(trainer.model)
        trainer.train()
        after = _weights(trainer.model)
        changed = [k for k in before if not torch.equal(before[k], after[k])]
        results[name] = (changed, len(trainer.optimizer.state),
                         trainer.lr_scheduler.last_epoch, rollout.stats.flat_batches_skipped)
    changed, opt_state, sched_epoch, skipped = results["flat"]
    assert changed == [] and opt_state == 0 and sched_epoch == 0 and skipped == 2
    # The control: the same trainer with signal moves weights, optimizer and schedule.
    changed, opt_state, sched_epoch, skipped = results["varied"]
    assert changed and opt_state > 0 and sched_epoch == 2 and skipped == 0


@pytest.mark.slow
def test_tool_output_tokens_get_no_gradient(tiny_model: Path, tmp_path: Path) -> None:
    trainer, rollout = _trainer(tiny_model, tmp_path, _alternating, steps=1)
    masks: list[list[list[int]]] = []
    original = rollout._to_trl

    def keep(episodes: Any, eos: int) -> dict[str, Any]:
        out = original(episodes, eos)
        masks.append([list(m) for m in out["env_mask"]])
        return out

    rollout._to_trl = keep  # type: ignore[method-assign]
    grads: list[Any] = []

    def capture(module: Any, args: Any, output: Any) -> None:
        if output.requires_grad:
            output.register_hook(lambda g: grads.append(g.detach().clone()))

    # The final norm's output at position p feeds only the log-probability of token p+1.
    handle = trainer.model.model.norm.register_forward_hook(capture)
    try:
        trainer.train()
    finally:
        handle.remove()
    (mask,) = masks
    (grad,) = grads
    prompt_len = grad.shape[1] - max(len(m) for m in mask)
    tool, model_tokens = 0, 0
    for i, m in enumerate(mask):
        assert 0 in m and 1 in m  # each episode has tool output between model turns
        for j, keep_token in enumerate(m):
            row = grad[i, prompt_len - 1 + j]
            if keep_token:
                model_tokens += int(bool(row.abs().sum() > 0))
            else:
                tool += 1
                assert row.abs().sum() == 0, (i, j)
    assert tool > 0 and model_tokens > 0


def test_only_a_checkpoint_holding_its_rollout_state_is_resumed(tmp_path: Path) -> None:
    """A stage killed between the Trainer's checkpoint and the rollout state written into
    it resumes from the checkpoint before (whose state matches it), never from a mismatch."""
    for step in (1, 2, 10):
        (tmp_path / f"checkpoint-{step}").mkdir()
    for step in (1, 2):
        (tmp_path / f"checkpoint-{step}" / ROLLOUT_STATE).write_text("{}")
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-10"
    assert latest_checkpoint(tmp_path, containing=ROLLOUT_STATE) == tmp_path / "checkpoint-2"
    (tmp_path / "checkpoint-1" / ROLLOUT_STATE).unlink()
    (tmp_path / "checkpoint-2" / ROLLOUT_STATE).unlink()
    assert latest_checkpoint(tmp_path, containing=ROLLOUT_STATE) is None


@pytest.mark.parametrize(("outcome", "reason", "reward"), [
    ("verifier_error", "the verifier found no out.txt it could read", 0.0),  # was masked
    ("agent_timeout", "the agent phase ran past its deadline", 0.0),
    ("infra_error", "agent failure: the model provider failed (m, turn 1): 503", None),
    ("build_failed", "the image did not build", None),
])
def test_trial_episodes_score_what_the_agent_caused(outcome: str, reason: str,
                                                    reward: float | None) -> None:
    """GRPO attributes as evaluation does (evaluate.attribution): a verifier error the
    agent's state caused is its 0, not a masked episode."""
    from posttrain_arena.agents.base import AgentRun
    from posttrain_arena.agents.transcript import Transcript
    from posttrain_arena.train.episodes import trial_episodes
    from posttrain_arena.trial.executor import TrialOutput
    from posttrain_arena.trial.result import Outcome, TrialResult

    result = TrialResult(trial_id="t", task_name="a", task_checksum="c", domain="d",
                         agent="m", backend="local", outcome=Outcome(outcome), reason=reason)
    out = TrialOutput(result, AgentRun(transcript=Transcript(messages=[])))
    episode = trial_episodes(lambda job: out)(_Task("a", "p"), None, 0)  # type: ignore[arg-type]
    assert episode.reward == reward
