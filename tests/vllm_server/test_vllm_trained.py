"""A fine-tuned policy served by vLLM (CPU build): the model agent's episodes through the
server against the same weights in process.

A blank model passes nothing through either path, so parity on it proves nothing. Here
the micro challenge's tiny model is first fine-tuned with the project's own SFT
(oracle-teacher trajectories of a handful of micro training tasks, enough epochs to
memorise them) and saved; the tests then run the model agent on those tasks and on two
it was not trained on, through a vLLM server on the saved weights and in process.
Greedy decoding (temperature 0): sampled turns cannot be compared across two samplers,
greedy ones can. One server for the module. Marked `vllm` (CI installs vLLM's own
environment with scripts/vllm-env.sh), `bwrap` (the local sandbox runs the trials) and
`slow` (minutes on two cores: SFT, a server start, four evaluations).
"""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.agents.model import TOOLS, AgentSettings, ModelAgent
from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.challenges.micro.basebuild import write_tiny_model
from posttrain_arena.challenges.micro.build import write_package
from posttrain_arena.challenges.micro.families import SUITE_FAMILIES, TRAIN
from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.evaluate.runner import evaluate, model_agent_specs, model_agents
from posttrain_arena.evaluate.suite import suite_from_tasks
from posttrain_arena.models.openai import OpenAIChatModel
from posttrain_arena.models.transformers_local import TransformersChatModel
from posttrain_arena.models.vllm_server import VllmServer
from posttrain_arena.task_format.package import TaskPackage, load_task
from posttrain_arena.train.recipe import ModelSection, SftSection, TeacherSection
from posttrain_arena.train.sft import run_sft
from posttrain_arena.train.teacher import run_teacher
from posttrain_arena.trial.executor import ThreadExecutor, TrialJob
from posttrain_arena.trial.runner import TrialRunner

# One worker runs the module: its server (a module fixture) starts once, not on
# every worker that draws one of its tests (scripts/test.sh: --dist loadgroup).
pytestmark = [pytest.mark.vllm, pytest.mark.bwrap, pytest.mark.slow,
              pytest.mark.xdist_group("vllm-server-trained")]

FAMILIES = 4  # one training instance of each of the first suite families is trained on
UNTRAINED = 2  # and one more of each of the first two families is not (it likely fails)
SFT = SftSection(method="full", learning_rate=3e-3, epochs=30, per_device_batch_size=4,
                 gradient_accumulation_steps=1, max_length=512, warmup_ratio=0.1,
                 save_steps=10_000)
GREEDY = AgentSettings(temperature=0.0, max_turns=3, max_new_tokens=48)


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner("local")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> list[TaskPackage]:
    """The trained tasks first, then the untrained ones (other training-pool instances)."""
    root = tmp_path_factory.mktemp("tasks")
    rng = random.Random(0)
    families = SUITE_FAMILIES[:FAMILIES] + SUITE_FAMILIES[:UNTRAINED]
    out: list[TaskPackage] = []
    for fam in families:
        inst = fam.generate(rng, TRAIN)
        out.append(load_task(write_package(inst, root / f"{len(out)}-{inst.name}")))
    assert len({t.checksum for t in out}) == len(out)
    return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, tasks: list[TaskPackage],
           runner: TrialRunner) -> Path:
    """The tiny model after the project's SFT on the tasks' oracle-teacher trajectories."""
    root = tmp_path_factory.mktemp("sft")
    base = write_tiny_model(root / "base", TinyModelSpec(seed=0, pretrain_episodes=0))
    teacher_dir = root / "teacher"
    teacher_dir.mkdir()
    spec = AgentSpec(kind="oracle-teacher", settings=GREEDY)
    coverage = run_teacher(tasks[:FAMILIES], TeacherSection(kind="oracle", attempts=1),
                           run_job=ThreadExecutor(runner).run, make_agent=lambda t: spec,
                           work_dir=teacher_dir, concurrency=2, seed=0)
    assert coverage["covered"] == FAMILIES, coverage
    trajectories = [json.loads(line) for line in
                    (teacher_dir / "trajectories.jsonl").read_text().splitlines()]
    run_sft(model_location=str(base), revision=None,
            model_section=ModelSection(id=str(base), dtype="float32"), cfg=SFT,
            trajectories=trajectories, work_dir=root / "work", device="cpu", seed=0)
    return root / "work" / "policy"


def _episode(runner: TrialRunner, task: TaskPackage, model: Any) -> tuple[Transcript, dict[
        str, Any]]:
    job = TrialJob(task, ModelAgent(model, GREEDY.for_task(task.frontmatter.agent)), seed=0,
                   capture=True)
    out = ThreadExecutor(runner).run(job)
    assert out.run is not None, out.result
    return out.run.transcript, out.run.info


def _wire(transcript: Transcript, upto: int) -> list[dict[str, Any]]:
    return [m.model_dump(exclude_none=True) for m in transcript.messages[:upto]]


def test_an_episode_token_view_is_consistent(runner: TrialRunner, tasks: list[TaskPackage],
                                            local: TransformersChatModel,
                                            remote: OpenAIChatModel) -> None:
    """The token view the agent records from the server is the one GRPO and SFT assume:
    each prompt continues the previous prompt + completion exactly and is the chat
    template's rendering of the conversation so far; each completion is the template's
    rendering of the assistant message recorded for it, one logprob per token, equal to
    a forward pass of the same weights; the whole-episode mask is 1 on exactly the
    completions and 0 on the prompt and the tool outputs between them."""
    import torch

    checked = 0
    for task in tasks:
        transcript, info = _episode(runner, task, remote)
        calls = [m for m in transcript.messages if m.role == "assistant" and m.tool_calls]
        if len(calls) < 2:
            continue  # the policy wrote fewer than two calls here: nothing multi-turn
        checked += 1
        assert info["token_episode"] == "exact", (task.name, info)
        turns = transcript.turns
        assistant_at = [i for i, m in enumerate(transcript.messages) if m.role == "assistant"]
        assert len(turns) == len(assistant_at) >= 2
        ids: list[int] = []
        for turn, at in zip(turns, assistant_at, strict=True):
            assert turn.prompt_ids[: len(ids)] == ids, f"{task.name}: a prompt re-tokenised"
            assert turn.prompt_ids == local.prompt_ids(_wire(transcript, at), TOOLS)
            assert turn.completion_ids == local.completion_ids(_wire(transcript, at + 1), TOOLS)
            assert len(turn.logprobs) == len(turn.completion_ids)
            ids = turn.prompt_ids + turn.completion_ids
        assert transcript.token_ids == ids
        # Mask: 1 exactly on the completions, in order; the tool outputs lie in the 0s.
        mask = transcript.token_mask
        assert len(mask) == len(ids) == len(transcript.token_logprobs)
        model_spans = [(len(t.prompt_ids), len(t.prompt_ids) + len(t.completion_ids))
                       for t in turns]
        assert [i for i, m in enumerate(mask) if m] == [i for a, b in model_spans
                                                        for i in range(a, b)]
        tokenizer = local.tokenizer
        env_text = "".join(tokenizer.decode(ids[b:a])
                           for (_, b), (a, _) in itertools.pairwise(model_spans))
        # (the episode's view ends with the last completion: a tool result after it, as
        # submit's, is not part of it)
        for message in transcript.messages[: assistant_at[-1]]:
            if message.role == "tool":
                assert message.content in env_text
        # Logprobs: the server's, equal to a forward pass of the same weights.
        with torch.no_grad():
            logits = local.model(torch.tensor([ids])).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        for i, m in enumerate(mask):
            if m:
                mine = float(logp[i - 1, ids[i]])
                assert math.isclose(transcript.token_logprobs[i], mine, abs_tol=2e-3), i
            else:
                assert transcript.token_logprobs[i] == 0.0
        # The same episode in process: the same token view, token for token.
        mine_transcript, mine_info = _episode(runner, task, local)
        assert mine_info["token_episode"] == "exact"
        assert mine_transcript.token_ids == transcript.token_ids
        assert mine_transcript.token_mask == transcript.token_mask
    assert checked, "no episode of the fine-tuned policy made two tool calls"


def test_micro_pass_rate_through_the_server_equals_in_process(
        runner: TrialRunner, tasks: list[TaskPackage], local: TransformersChatModel,
        server: VllmServer) -> None:
    """The same tasks, seeds and greedy agent, once per path: the same outcome per trial,
    and a rate above zero (the fine-tuned policy solves the tasks it was trained on, so
    the agreement is not 0 = 0). The served side goes the pipeline's way: an agent spec
    `openai:FOLDER` with the endpoint, as `[runtime] policy_endpoint` builds it."""
    suite = suite_from_tasks(tasks)
    served = evaluate(suite, model_agent_specs(f"openai:{server.model_name}", GREEDY,
                                               base_url=server.base_url),
                      k=2, jobs=2, runner=runner)
    mine = evaluate(suite, model_agents(local, GREEDY), k=2, jobs=2, runner=runner)

    def per_trial(report: EvalReport) -> dict[tuple[str, int], tuple[str, float | None]]:
        return {(t.task_name, t.seed): (t.outcome, t.reward) for t in report.trials}

    assert len(served.trials) == len(mine.trials) == 2 * len(tasks)
    assert per_trial(served) == per_trial(mine)
    assert served.infra_errors == 0
    assert served.overall.pass_rate == mine.overall.pass_rate
    print(f"micro parity: {served.overall.passes}/{served.overall.n} trials passed on each "
          f"path; served {served.wall_sec:.1f} s, in process {mine.wall_sec:.1f} s")
    assert (served.overall.pass_rate or 0.0) > 0, served.overall
