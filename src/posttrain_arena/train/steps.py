"""The stage bodies of the pipeline (what each stage does with its work folder)."""

from __future__ import annotations

import contextlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.codehash import code_hash, environment_hash
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.task_format.hashing import tree_hash
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.train import leakage, score
from posttrain_arena.train.recipe import RecipeError
from posttrain_arena.train.run_resources import RunResources
from posttrain_arena.train.sources import TaskSet, fetch
from posttrain_arena.train.stages import StageContext
from posttrain_arena.trial.journal import Journal


class GateFailed(RuntimeError):
    """SFT made the model worse on the quick check, and the recipe says to stop."""


def policy_location(stage_dir: Path) -> str:
    """The model folder a training stage produced (or passed through)."""
    if (stage_dir / "policy" / "config.json").is_file():
        return str(stage_dir / "policy")
    return str(json.loads((stage_dir / "policy.json").read_text())["location"])


class Steps(RunResources):
    """The stage bodies, on one run's shared resources (`run_resources.RunResources`)."""

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
            ts = self.load_taskset(dest, which)
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
        from posttrain_arena.train.episodes import trial_episodes
        from posttrain_arena.train.grpo import run_grpo
        from posttrain_arena.train.rollout import AgentRollout

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
        from posttrain_arena.evaluate.instrument import instrument_beside
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
            provenance=prov,
            instrument=instrument_beside(snap["suite"]["location"], prov.suite_hash))
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
