"""What the stages of one run share: the recipe, the device, the trial runner and the
executors trials run on, the snapshot's task sets, the agent's settings, and the
evaluation of a policy (its agent spec, its seeds, through a policy server or not).
The stage bodies (`steps.py`) use these."""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from pathlib import Path
from typing import Any

from posttrain_arena.agents.model import AgentSettings
from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.train.recipe import Recipe
from posttrain_arena.train.sources import TaskSet, load_taskset
from posttrain_arena.train.stages import StageContext, StageRunner
from posttrain_arena.trial.executor import ThreadExecutor, TrialExecutor, TrialJob, TrialOutput
from posttrain_arena.trial.journal import Journal


class RunResources:
    """One recipe's run: its trial runner, executors and loaded task sets, shared by the
    stage bodies."""

    def __init__(self, recipe: Recipe, run_dir: Path, runner: StageRunner,
                 executor: TrialExecutor | None = None) -> None:
        """`executor`: where trials of agents described by specs run (evaluations, the
        teacher); default: threads of this process. GRPO's rollouts always run here:
        their agent is the policy being trained, a live object of this process."""
        self.r = recipe
        self.run_dir = run_dir
        self.stages = runner
        self._runner: Any = None
        self._executor = executor
        self._in_process: ThreadExecutor | None = None
        self._device: str | None = None
        self._sets: dict[str, TaskSet] = {}
        self._lock = threading.Lock()

    @property
    def device(self) -> str:
        if self._device is None:
            from posttrain_arena.train.modeling import pick_device

            self._device = pick_device(self.r.runtime.device)
            threads = self.r.runtime.torch_threads or (1 if self._device == "cpu" else 0)
            if threads:
                import torch

                torch.set_num_threads(threads)
        return self._device

    @property
    def runner(self) -> Any:
        with self._lock:
            if self._runner is None:
                from posttrain_arena.trial.runner import TrialRunner

                self._runner = TrialRunner(self.r.runtime.sandbox,
                                           allow_network=self.r.runtime.allow_internet)
            return self._runner

    @property
    def in_process(self) -> ThreadExecutor:
        """Threads of this process on the local trial runner (live agents run here)."""
        runner = self.runner  # takes self._lock itself
        with self._lock:
            if self._in_process is None:
                self._in_process = ThreadExecutor(runner, slots=self.r.runtime.concurrency)
            return self._in_process

    @property
    def executor(self) -> TrialExecutor:
        """Where trials of spec-described agents run."""
        return self._executor if self._executor is not None else self.in_process

    def close(self) -> None:
        """Stop the trial runner's idle sandbox sessions."""
        if self._runner is not None and hasattr(self._runner, "close"):
            self._runner.close()

    def run_job(self, job: TrialJob, journal: Journal | None = None,
                executor: TrialExecutor | None = None) -> TrialOutput:
        """One trial with the recipe's agent time limit; with a journal (kept here, on
        the driver), a finished identical trial is not run again."""
        job = dataclasses.replace(job, agent_timeout=self.r.agent.timeout_sec)
        if journal is not None:
            done = journal.done(job.trial_id)
            if done is not None:
                return TrialOutput(done)
        out = (executor or self.executor).run(job)
        if journal is not None:
            journal.append(out.result)
        return out

    def load_taskset(self, root: Path, which: str) -> TaskSet:
        """The task set `which` ("collection" or "suite") at `root`; the collection capped
        at [train] max_tasks."""
        cap = self.r.train.max_tasks if which == "collection" else None
        return load_taskset(root, kind=which, max_tasks=cap)

    def taskset(self, which: str) -> TaskSet:
        """The snapshot's task set `which`, loaded once."""
        if which not in self._sets:
            self._sets[which] = self.load_taskset(self.stages.stages_dir / "snapshot" / which,
                                                  which)
        return self._sets[which]

    def kept_training(self) -> list[TaskPackage]:
        """The training tasks the leakage gate kept and the organizer gates found eligible
        (every kept task when [task_gates] is off)."""
        kept = set(json.loads((self.stages.stages_dir / "leakage" / "leakage.json")
                              .read_text())["kept"])
        gates = self.stages.stages_dir / "eligibility" / "eligibility.json"
        if gates.is_file():
            gated = json.loads(gates.read_text())
            kept &= set(gated["eligible"])
            if gated["ran"] and not kept:
                raise RuntimeError("the organizer gates found no training task eligible; "
                                   "see stages/eligibility/eligibility.json, or relax "
                                   "[task_gates.policy]")
        return [t for t in self.taskset("collection").tasks if t.name in kept]

    def settings(self, temperature: float | None = None) -> AgentSettings:
        a = self.r.agent
        return AgentSettings(max_turns=a.max_turns, max_new_tokens=a.max_new_tokens,
                             max_tokens=a.max_turns * a.max_new_tokens,
                             temperature=a.temperature if temperature is None else temperature)

    def policy_spec(self, location: str, name: str, served: tuple[str, str] | None = None
                    ) -> AgentSpec:
        """The model agent for the policy at `location`, as a spec any executor builds;
        through a server when `served` is (base URL, served model name)."""
        # In this process: the device picked here (which also applies the recipe's torch
        # thread count); on a cluster, each node picks its own unless the recipe says.
        device = self.device if self._executor is None else (
            None if self.r.runtime.device == "auto" else self.r.runtime.device)
        return AgentSpec(kind="model", name=name, settings=self.settings(),
                         model=f"openai:{served[1]}" if served else f"hf:{location}",
                         base_url=served[0] if served else None, device=device)

    def evaluate(self, ctx: StageContext, tasks: list[TaskPackage], location: str, name: str,
                 k: int, journal: str = "journal.jsonl") -> EvalReport:
        """k samples (seeds 0..k-1) of the policy at `location` on `tasks`, resumable.

        Through a policy server, the server answers with these weights or the stage does
        not start: the pipeline starts one on them ([runtime] serve_policy), or the
        recipe's endpoint must already serve them under their fingerprinted name."""
        from posttrain_arena.models.vllm_server import VllmServer, check_served, vllm_python

        rt = self.r.runtime
        if rt.serve_policy:
            with VllmServer(Path(location), python=vllm_python()) as server:
                return self._evaluate(ctx, tasks, location, name, k, journal,
                                      (server.base_url, server.model_name))
        served = None
        if rt.policy_endpoint:
            served = (rt.policy_endpoint, check_served(rt.policy_endpoint, Path(location)))
        return self._evaluate(ctx, tasks, location, name, k, journal, served)

    def _evaluate(self, ctx: StageContext, tasks: list[TaskPackage], location: str, name: str,
                  k: int, journal: str, served: tuple[str, str] | None) -> EvalReport:
        from posttrain_arena.evaluate.runner import evaluate
        from posttrain_arena.evaluate.suite import suite_from_tasks

        spec = self.policy_spec(location, name, served)
        return evaluate(
            suite_from_tasks(list(tasks), source=f"{ctx.name}:{name}"),
            lambda task: spec, k=k, jobs=self.r.runtime.concurrency,
            executor=self.executor, journal=Journal(ctx.work_dir / journal), model=location,
            agent_timeout=self.r.agent.timeout_sec, first_seed=self.eval_first_seed(k),
            progress=lambda d, n, _r: ctx.step(d, n, name))

    def eval_first_seed(self, k: int) -> int:
        """The run's evaluation seeds start here: runs with another [runtime] seed (the
        repeat-seed control) sample their own trials, their baseline too, instead of
        re-computing seeds 0..k-1 bit for bit; every evaluation of one run uses the
        same seeds, so they pair trial by trial."""
        return self.r.runtime.seed * k

    def gate_sample(self) -> list[TaskPackage]:
        tasks = self.kept_training()
        n = min(self.r.grpo.gate.tasks, len(tasks))
        picked = sorted(random.Random(self.r.runtime.seed).sample([t.name for t in tasks], n))
        return [t for t in tasks if t.name in picked]
