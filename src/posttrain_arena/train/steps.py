"""The stage bodies of the pipeline (what each stage does with its work folder)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import shutil
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from posttrain_arena.agents.model import AgentSettings
from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.codehash import code_hash, environment_hash
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.task_format.hashing import tree_hash
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.train import leakage, score
from posttrain_arena.train.recipe import Recipe, RecipeError
from posttrain_arena.train.sources import TaskSet, fetch, load_taskset
from posttrain_arena.train.stages import StageContext, StageRunner
from posttrain_arena.trial.executor import ThreadExecutor, TrialExecutor, TrialJob, TrialOutput
from posttrain_arena.trial.journal import Journal


class GateFailed(RuntimeError):
    """SFT made the model worse on the quick check, and the recipe says to stop."""


def policy_location(stage_dir: Path) -> str:
    """The model folder a training stage produced (or passed through)."""
    if (stage_dir / "policy" / "config.json").is_file():
        return str(stage_dir / "policy")
    return str(json.loads((stage_dir / "policy.json").read_text())["location"])


class Steps:
    """Stage bodies sharing one recipe, one trial runner and the loaded task sets."""

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

    # -- shared helpers --------------------------------------------------------------

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

    def taskset(self, which: str) -> TaskSet:
        if which not in self._sets:
            root = self.stages.stages_dir / "snapshot" / which
            cap = self.r.train.max_tasks if which == "collection" else None
            self._sets[which] = load_taskset(root, kind=which, max_tasks=cap)
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

    # -- stages ----------------------------------------------------------------------

    def snapshot(self, ctx: StageContext) -> dict[str, Any]:
        out: dict[str, Any] = {}
        loaded: dict[str, TaskSet] = {}
        for which, loc, commit in (("collection", self.r.train.collection, self.r.train.commit),
                                   ("suite", self.r.eval.suite, self.r.eval.commit)):
            src, pinned = fetch(self.r.resolve(loc), commit, ctx.work_dir / f"{which}.git")
            dest = ctx.work_dir / which
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(src, dest, symlinks=True,
                            ignore=shutil.ignore_patterns(".git", "__pycache__"))
            shutil.rmtree(ctx.work_dir / f"{which}.git", ignore_errors=True)
            ts = load_taskset(dest, kind=which,
                              max_tasks=self.r.train.max_tasks if which == "collection" else None)
            loaded[which] = ts
            out[which] = {"location": loc, "commit": pinned, "content_hash": ts.content_hash,
                          "tasks": len(ts.tasks), "domains": _domains(ts.tasks)}
        sealed = self.r.eval.sha256
        if sealed and sealed != out["suite"]["content_hash"]:
            raise RecipeError(f"[eval] sha256 is {sealed} but the suite hashes to "
                              f"{out['suite']['content_hash']}; the suite changed since it "
                              "was sealed (or the recipe names the wrong one)")
        out["suite"]["sealed"] = bool(sealed)
        from posttrain_arena.evaluate.suite import suite_from_tasks

        # A held-out suite should spread over domains; report, do not block (a recipe's
        # own suite may be small).
        out["suite"]["composition_warnings"] = suite_from_tasks(
            loaded["suite"].tasks).composition_violations()
        model_loc = self.r.model_location()
        local = Path(model_loc).exists()
        out["model"] = {"id": self.r.model.id, "revision": self.r.model.revision,
                        "content_hash": tree_hash(Path(model_loc)) if local else None,
                        "location": model_loc}
        (ctx.work_dir / "snapshot.json").write_text(json.dumps(out, indent=2))
        return out

    def leakage(self, ctx: StageContext) -> dict[str, Any]:
        train, held = self.taskset("collection").tasks, self.taskset("suite").tasks
        docs = [leakage.doc_for_task(t.name, t.checksum, t.prompt, t.root) for t in train]
        held_docs = [leakage.doc_for_task(t.name, t.checksum, t.prompt, t.root) for t in held]
        excl = leakage.find_leaks(docs, held_docs, threshold=self.r.train.leakage_threshold)
        kept = sorted({t.name for t in train} - {e.task for e in excl})
        out = {"exclusions": [e.model_dump() for e in excl], "kept": kept}
        (ctx.work_dir / "leakage.json").write_text(json.dumps(out, indent=2))
        return {"excluded": len(excl), "kept": len(kept)}

    def eligibility(self, ctx: StageContext) -> dict[str, Any]:
        """The organizer gates on the training tasks the leakage gate kept; only eligible
        tasks go on to the teacher, SFT and GRPO."""
        kept = set(json.loads((ctx.output_of("leakage") / "leakage.json").read_text())["kept"])
        tasks = [t for t in self.taskset("collection").tasks if t.name in kept]
        tg = self.r.task_gates
        if not tg.enabled:
            out: dict[str, Any] = {"ran": False, "eligible": sorted(kept), "excluded": []}
        else:
            from posttrain_arena.gates.run import gate_packages
            from posttrain_arena.models.vllm_server import check_served

            where, endpoint = self.r.model_location(), self.r.runtime.policy_endpoint
            served = (endpoint, check_served(endpoint, Path(where))) if endpoint else None
            base = self.policy_spec(where, "policy:base", served).chat_model()
            report = gate_packages(
                [t.root for t in tasks], self.runner, base,
                model_spec=f"policy:base@{self.r.model_location()}", k=tg.k,
                reruns=tg.reruns, jobs=self.r.runtime.concurrency, records_root=ctx.work_dir,
                policy=tg.policy, settings=self.settings(), source="[train] collection",
                on_done=lambda _e, _r: ctx.step(0, len(tasks), "tasks"))
            out = {"ran": True, "policy": tg.policy.model_dump(mode="json"),
                   "eligible": report.eligible, "trials": report.trials_run,
                   "excluded": [{"task": e.task, "reasons": e.verdict.reasons,
                                 "evidence": f"evidence/{e.key}.json"}
                                for e in report.evidence if not e.eligible]}
        (ctx.work_dir / "eligibility.json").write_text(json.dumps(out, indent=2))
        return {"ran": out["ran"], "eligible": len(out["eligible"]),
                "excluded": len(out["excluded"])}

    def baseline(self, ctx: StageContext) -> dict[str, Any]:
        report = self.evaluate(ctx, self.taskset("suite").tasks, self.r.model_location(),
                               "policy:base", self.r.runtime.k)
        report.save(ctx.work_dir / "eval.json")
        return _eval_summary(report)

    def teacher(self, ctx: StageContext) -> dict[str, Any]:
        from posttrain_arena.train.teacher import run_teacher

        t = self.r.teacher
        if t.kind == "oracle":
            spec = AgentSpec(kind="oracle-teacher", settings=self.settings())
        else:  # the teacher's key is read from t.api_key_env where the trial runs
            spec = AgentSpec(kind="model", model=f"openai:{t.model}", base_url=t.base_url,
                             api_key_env=t.api_key_env, name=f"teacher:{t.model}",
                             settings=self.settings(t.temperature), per_task_limits=False)
        j = Journal(ctx.work_dir / "journal.jsonl")
        return run_teacher(self.kept_training(), t,
                           run_job=lambda job: self.run_job(job, j),
                           make_agent=lambda task: spec, work_dir=ctx.work_dir,
                           concurrency=self.r.runtime.concurrency, seed=self.r.runtime.seed,
                           on_step=lambda d, n: ctx.step(d, n, "tasks"))

    def sft(self, ctx: StageContext) -> dict[str, Any]:
        base = self.r.model_location()
        if not self.r.sft.enabled:
            (ctx.work_dir / "policy.json").write_text(json.dumps({"location": base}))
            return {"skipped": "[sft] enabled = false"}
        from posttrain_arena.train.sft import read_trajectories, run_sft

        trajs = read_trajectories(ctx.output_of("teacher") / "trajectories.jsonl")
        if not trajs:
            raise RuntimeError("the teacher produced no verified trajectory, so SFT has "
                               "nothing to learn from; see stages/teacher/coverage.json")
        from posttrain_arena.train.modeling import cpu_threads, usable_cores

        # Trial stages keep torch to [runtime] torch_threads so that sandboxes have the
        # other cores; SFT runs alone and trains about 1.7x faster on two threads than one.
        threads = (self.r.runtime.train_threads or usable_cores()) if self.device == "cpu" else 0
        with cpu_threads(threads) if threads else contextlib.nullcontext():
            return run_sft(model_location=base, revision=self.r.model.revision,
                           model_section=self.r.model, cfg=self.r.sft, trajectories=trajs,
                           work_dir=ctx.work_dir, device=self.device, seed=self.r.runtime.seed,
                           on_step=lambda d, n: ctx.step(d, n, "steps"),
                           on_checkpoint=ctx.checkpoint)

    def after_sft(self, ctx: StageContext) -> dict[str, Any]:
        """The SFT policy on the held-out suite: GRPO's own change is final minus this."""
        if not (self.r.grpo.enabled and self.r.sft.enabled):
            return {"skipped": "GRPO or SFT is disabled: nothing to separate"}
        report = self.evaluate(ctx, self.taskset("suite").tasks,
                               policy_location(ctx.output_of("sft")), "policy:after-sft",
                               self.r.runtime.k)
        report.save(ctx.work_dir / "eval.json")
        return _eval_summary(report)

    def gate(self, ctx: StageContext) -> dict[str, Any]:
        g = self.r.grpo.gate
        if not (g.enabled and self.r.grpo.enabled and self.r.sft.enabled):
            out: dict[str, Any] = {"ran": False, "passed": True, "action": "continue"}
        else:
            sample = self.gate_sample()
            base = self.evaluate(ctx, sample, self.r.model_location(), "policy:gate-base",
                                 g.samples, "journal-base.jsonl")
            tuned = self.evaluate(ctx, sample, policy_location(ctx.output_of("sft")),
                                  "policy:gate-sft", g.samples, "journal-sft.jsonl")
            base_rate = base.overall.pass_rate or 0.0
            sft_rate = tuned.overall.pass_rate or 0.0
            drop = 100 * (base_rate - sft_rate)
            passed = drop <= g.max_drop_pp
            out = {"ran": True, "tasks": [t.name for t in sample], "base_rate": base_rate,
                   "sft_rate": sft_rate, "drop_pp": drop, "passed": passed,
                   "action": "continue" if passed else g.on_fail}
        (ctx.work_dir / "gate.json").write_text(json.dumps(out, indent=2))
        if not out["passed"] and g.on_fail == "fail":
            raise GateFailed(f"SFT lowered the training-task pass rate by {out['drop_pp']:.1f} "
                             f"points (allowed: {g.max_drop_pp}); see stages/gate/gate.json, "
                             "or set [grpo.gate] on_fail = 'skip_grpo' or 'continue'")
        return out

    def grpo(self, ctx: StageContext) -> dict[str, Any]:
        sft_policy = policy_location(ctx.output_of("sft"))
        gate = json.loads((ctx.output_of("gate") / "gate.json").read_text())
        skip = None if self.r.grpo.enabled else "[grpo] enabled = false"
        if skip is None and gate.get("action") == "skip_grpo":
            skip = "the gate failed (SFT made things worse) and on_fail = 'skip_grpo'"
        tasks = self.kept_training()
        if skip is None and not tasks:
            skip = "no training task left after the leakage gate"
        if skip is not None:
            (ctx.work_dir / "policy.json").write_text(json.dumps({"location": sft_policy}))
            return {"skipped": skip}
        from posttrain_arena.train.grpo import AgentRollout, run_grpo, trial_episodes

        cfg = self.r.grpo
        settings = self.settings(cfg.temperature).model_copy(
            update={"max_tokens": min(cfg.max_completion_length,
                                      self.r.agent.max_turns * self.r.agent.max_new_tokens)})
        rollout = AgentRollout({t.name: t for t in tasks}, trial_episodes(
            lambda job: self.run_job(job, executor=self.in_process)),
                               settings=settings, num_generations=cfg.num_generations,
                               max_completion_length=cfg.max_completion_length,
                               concurrency=self.r.runtime.concurrency, seed=self.r.runtime.seed,
                               resample_flat=cfg.resample_flat_groups)
        metrics = run_grpo(model_location=sft_policy, model_section=self.r.model, cfg=cfg,
                           rollout=rollout, task_names=[t.name for t in tasks],
                           work_dir=ctx.work_dir, device=self.device, seed=self.r.runtime.seed,
                           on_step=lambda d, n: ctx.step(d, n, "steps"),
                           on_checkpoint=ctx.checkpoint)
        sample = self.gate_sample()
        if gate.get("ran"):
            before = float(gate["sft_rate"])
        else:
            before = self.evaluate(ctx, sample, sft_policy, "policy:pre-grpo", cfg.gate.samples,
                                   "journal-before.jsonl").overall.pass_rate or 0.0
        after = self.evaluate(ctx, sample, str(ctx.work_dir / "policy"), "policy:post-grpo",
                              cfg.gate.samples, "journal-after.jsonl").overall.pass_rate or 0.0
        metrics["training_tasks_checked"] = [t.name for t in sample]
        metrics["training_pass_rate_before"] = before
        metrics["training_pass_rate_after"] = after
        (ctx.work_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
        return metrics

    def final(self, ctx: StageContext) -> dict[str, Any]:
        report = self.evaluate(ctx, self.taskset("suite").tasks,
                               policy_location(ctx.output_of("grpo")), "policy:final",
                               self.r.runtime.k)
        report.save(ctx.work_dir / "eval.json")
        return _eval_summary(report)

    def score(self, ctx: StageContext) -> dict[str, Any]:
        from posttrain_arena import __version__
        from posttrain_arena.evaluate.coverage import coverage_of
        from posttrain_arena.evaluate.stats import compare
        from posttrain_arena.evaluate.suite import suite_from_tasks

        base = EvalReport.load(ctx.output_of("baseline") / "eval.json")
        final = EvalReport.load(ctx.output_of("final") / "eval.json")
        reports = {"base": base, "final": final}
        sft_eval = ctx.output_of("after_sft") / "eval.json"
        if sft_eval.is_file():  # the same suite and seeds, so the two pair trial by trial
            reports["after_sft"] = EvalReport.load(sft_eval)
        coverage = {arm: coverage_of(r) for arm, r in reports.items()}
        need = self.r.eval.completeness
        short = [f"{arm}: {line}" for arm, cov in coverage.items()
                 for line in cov.shortfalls(need)]
        clusters = suite_from_tasks(self.taskset("suite").tasks).clusters()
        cmp = compare(base, final, clusters=clusters)
        after_sft, grpo_change = None, None
        if "after_sft" in reports:
            after_sft = score.pass_rates(reports["after_sft"])
            grpo_change = score.change_of(compare(reports["after_sft"], final,
                                                  clusters=clusters))
        snap = json.loads((ctx.output_of("snapshot") / "snapshot.json").read_text())
        leaks = json.loads((ctx.output_of("leakage") / "leakage.json").read_text())
        gated = json.loads((ctx.output_of("eligibility") / "eligibility.json").read_text())
        rt = self.r.runtime
        prov = score.Provenance(
            model_id=self.r.model.id, model_revision=self.r.model.revision,
            model_content_hash=snap["model"]["content_hash"], recipe_name=self.r.name,
            recipe_hash=self.r.recipe_hash(), collection=snap["collection"]["location"],
            collection_commit=snap["collection"]["commit"],
            collection_hash=snap["collection"]["content_hash"],
            suite=snap["suite"]["location"], suite_commit=snap["suite"]["commit"],
            suite_hash=snap["suite"]["content_hash"], suite_sealed=snap["suite"]["sealed"],
            package_version=__version__, code_hash=code_hash(),
            environment_hash=environment_hash(),
            seeds={"runtime": rt.seed, "eval_first_seed": self.eval_first_seed(rt.k),
                   "eval_last_seed": self.eval_first_seed(rt.k) + rt.k - 1},
            sandbox_backend=self.executor.backend_name,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"))
        records = {n: rec for n, rec in ctx.upstream.items()}
        complete = not short  # short of completeness: counts, and no number at all
        result = score.Score(
            status="scored" if complete else "incomplete", run_dir=str(self.run_dir),
            coverage=coverage, incomplete=short,
            base=score.pass_rates(base) if complete else None,
            final=score.pass_rates(final) if complete else None,
            change=score.change_of(cmp) if complete else None,
            after_sft=after_sft if complete else None,
            grpo_change=grpo_change if complete else None,
            per_domain=cmp.domains if complete else [],
            regressed_tasks=cmp.regressed_tasks if complete else [],
            improved_tasks=cmp.improved if complete else 0,
            teacher=records["teacher"].summary,
            sft=records["sft"].summary, gate=records["gate"].summary,
            grpo=records["grpo"].summary,
            exclusions=[leakage.Exclusion.model_validate(e) for e in leaks["exclusions"]],
            gate_exclusions=[score.GateExclusion.model_validate(e) for e in gated["excluded"]],
            task_gates={k: v for k, v in gated.items() if k not in ("excluded", "eligible")}
            | {"eligible": len(gated["eligible"])},
            stage_seconds={n: round(rec.seconds, 2) for n, rec in records.items()},
            provenance=prov)
        text = result.model_dump_json(indent=2)
        (ctx.work_dir / "score.json").write_text(text)
        tmp = self.run_dir / ".score.json.tmp"
        tmp.write_text(text)
        tmp.replace(self.run_dir / "score.json")
        return {"delta_pp": result.change.delta_pp if result.change else None}


def _eval_summary(report: EvalReport) -> dict[str, Any]:
    return {"pass_rate": report.overall.pass_rate, "infra_failures": report.infra_errors,
            "wall_sec": round(report.wall_sec, 2), "trial_sec": round(report.trial_sec, 2),
            "completion_tokens": report.completion_tokens}


def _domains(tasks: list[TaskPackage]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in tasks:
        out[t.domain.value] = out.get(t.domain.value, 0) + 1
    return dict(sorted(out.items()))
