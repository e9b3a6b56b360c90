"""`arena demo`: the whole loop on the micro challenge, on a laptop.

Builds the challenge into a work directory (deterministic from the seed; by default the
protocol's declared seed, `protocol.declared()`), runs the micro recipe on the relevant
collection (and, with `compare`, the whole protocol of controls: relevant, relevant with
another runtime seed, partial, broken verifiers, off-topic) with the real pipeline
(`train.pipeline.run_recipe`), and returns each control's score. The controls share one
baseline evaluation (same base model, suite, agent and runtime), measured by the first
run; the A/A control's runtime seed differs, so it measures its own. The protocol writes
what it measured to `controls.json` in the work directory (`controls.py`); the result
carries the instrument stored with the challenge (that file, or the shipped one for the
declared seed). What libraries print goes to `build.log` in the work directory while the
challenge is built and to the run's `run.log` during a run; the caller's progress sink
sees stages and steps.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from posttrain_arena.challenges.micro.build import (
    CONTROLS,
    RELEVANT,
    MicroChallenge,
    build_micro,
)
from posttrain_arena.challenges.micro.protocol import declared
from posttrain_arena.evaluate.instrument import (
    NOT_DISTINGUISHABLE,
    Instrument,
    instrument_beside,
)
from posttrain_arena.paths import cache_home
from posttrain_arena.train.runlog import library_output_to
from posttrain_arena.train.stages import Progress, StageEvent, no_progress

if TYPE_CHECKING:
    from posttrain_arena.train.recipe import Recipe


def default_workdir() -> Path:
    """Where `arena demo` builds the challenge unless told: $ARENA_CACHE_DIR/micro."""
    return cache_home() / "micro"


class CollectionScore(BaseModel):
    """One collection's headline result on the micro suite."""

    collection: str = Field(description="Collection name")
    base_rate: float = Field(description="Held-out pass rate of the base model (0..1)")
    final_rate: float = Field(description="Held-out pass rate after post-training (0..1)")
    delta_pp: float = Field(description="Change in percentage points")
    ci95_low_pp: float = Field(description="Lower end of the paired 95% interval, points")
    ci95_high_pp: float = Field(description="Upper end of the paired 95% interval, points")
    p_value: float | None = Field(default=None, description="Two-sided p-value of no change")
    after_sft_rate: float | None = Field(default=None,
                                         description="Held-out pass rate after SFT (0..1)")
    grpo_delta_pp: float | None = Field(default=None,
                                        description="GRPO's own change (final - after SFT)")
    grpo_ci95_low_pp: float | None = Field(default=None, description="Its 95% interval, low")
    grpo_ci95_high_pp: float | None = Field(default=None, description="Its 95% interval, high")
    detectable_pp: float = Field(description="This run's minimum detectable effect at 80% "
                                 "power, points")
    verdict: str = Field(description="'improved', 'regressed', or 'not distinguishable "
                         "from 0' (the interval holds 0, or the change is smaller than "
                         "the detectable effect)")
    runtime_seed: int = Field(description="The run's [runtime] seed")
    tasks: int = Field(description="Held-out tasks paired in the comparison")
    samples_per_task: int = Field(description="k: samples per held-out task")
    run_dir: str = Field(description="The run folder (score.json and every stage's files)")
    seconds: float = Field(description="Wall-clock time of the run")

    @property
    def learned(self) -> bool:
        """The change is an improvement: the whole 95% interval lies above zero and the
        change is at least the smallest this design detects."""
        return self.verdict == "improved"


class DemoResult(BaseModel):
    """What `arena demo` ran and found."""

    seed: int = Field(description="Seed of the challenge and the runs")
    workdir: str = Field(description="Where the challenge and runs live")
    suite_hash: str = Field(description="Sealed hash of the held-out suite")
    backend: str = Field(description="Sandbox backend the trials ran in")
    scores: dict[str, CollectionScore] = Field(description="Control name -> score")
    plots: list[str] = Field(default_factory=list,
                             description="The intervals plot (PNG, SVG), with --compare")
    instrument: Instrument | None = Field(
        default=None, description="What the challenge can detect: its protocol of "
        "controls' result stored with it (controls.json), when one was measured on this "
        "suite")
    controls_file: str | None = Field(default=None, description="controls.json that this "
                                      "invocation's protocol wrote, with --compare")

    def statement(self) -> list[str]:
        """In words: each change that is not distinguishable from 0 and why, then what
        the challenge can detect (its controls), or that none were measured for it."""
        lines = []
        for s in self.scores.values():
            if s.verdict != NOT_DISTINGUISHABLE:
                continue
            why = ("its 95% interval holds 0" if s.ci95_low_pp <= 0 <= s.ci95_high_pp
                   else f"it is smaller than the {s.detectable_pp:.1f} pp this run detects "
                   "at 80% power")
            lines.append(f"{s.collection}: {s.delta_pp:+.1f} pp is {NOT_DISTINGUISHABLE} "
                         f"({why}; {s.tasks} tasks, k = {s.samples_per_task})")
        if self.instrument is None:
            lines.append(f"no protocol of controls was measured on this suite (seed "
                         f"{self.seed}): `arena demo --compare --seed {self.seed}` measures "
                         "what it can detect")
        else:
            lines.append(f"what this challenge can detect ({self.instrument.challenge}, "
                         f"measured {self.instrument.measured_at[:10]}):")
            lines += [f"  {line}" for line in self.instrument.statement()]
        if self.controls_file:
            lines.append(f"the protocol's result: {self.controls_file}")
        return lines


def _with_backend(recipe: Recipe, backend: str) -> Recipe:
    runtime = recipe.runtime.model_copy(update={"sandbox": backend})
    return recipe.model_copy(update={"runtime": runtime})


def shared_stages(ch: MicroChallenge) -> Path:
    """Where the challenge's runs share what no collection changes (the baseline)."""
    return Path(ch.root) / "runs" / ".shared"


def run_collection(ch: MicroChallenge, collection: str, *, backend: str = "local",
                   resume: bool = False, progress: Progress = no_progress) -> CollectionScore:
    """Run the micro recipe on one collection of a built challenge; return its score. The
    baseline is taken from another run of the challenge when one measured it already."""
    from posttrain_arena.train.pipeline import run_recipe
    from posttrain_arena.train.recipe import load_recipe

    recipe = _with_backend(load_recipe(ch.recipes[collection]), backend)
    run_dir = Path(ch.root) / "runs" / f"{collection}-seed{ch.seed}"
    if run_dir.exists() and not resume:
        shutil.rmtree(run_dir)
    start = time.monotonic()
    with library_output_to(run_dir / "run.log"):
        score = run_recipe(recipe, run_dir=run_dir, resume=resume, progress=progress,
                           shared=shared_stages(ch))
    if score.base is None or score.final is None or score.change is None:
        raise RuntimeError(f"{run_dir}: the run finished without a score ({score.status})")
    g = score.grpo_change
    return CollectionScore(
        collection=collection, base_rate=score.base.pass_rate, final_rate=score.final.pass_rate,
        after_sft_rate=score.after_sft.pass_rate if score.after_sft else None,
        grpo_delta_pp=g.delta_pp if g else None, grpo_ci95_low_pp=g.ci95_low_pp if g else None,
        grpo_ci95_high_pp=g.ci95_high_pp if g else None,
        delta_pp=score.change.delta_pp, ci95_low_pp=score.change.ci95_low_pp,
        ci95_high_pp=score.change.ci95_high_pp, p_value=score.change.p_value,
        detectable_pp=score.change.detectable_pp, verdict=score.change.verdict,
        runtime_seed=recipe.runtime.seed, tasks=score.change.paired_tasks,
        samples_per_task=score.final.samples_per_task,
        run_dir=str(run_dir), seconds=time.monotonic() - start)


def run_demo(workdir: Path | str | None = None, *, seed: int | None = None,
             compare: bool = False, backend: str = "local", resume: bool = False,
             progress: Progress = no_progress) -> DemoResult:
    """Build the micro challenge (default: on the protocol's declared seed) and
    post-train on the relevant collection (with `compare`: every control of the
    protocol, plot their intervals and write what they measured to controls.json);
    scores keyed by control name."""
    from posttrain_arena.challenges.micro.controls import measure_controls

    seed = declared().seed if seed is None else seed
    root = Path(workdir).expanduser() if workdir else default_workdir()
    progress(StageEvent(stage="build", status="start",
                        message=f"generating the micro challenge (seed {seed}) in {root}"))
    root.mkdir(parents=True, exist_ok=True)
    with library_output_to(root / "build.log"):
        ch = build_micro(root, seed=seed, progress=progress)
    progress(StageEvent(stage="build", status="done", message=f"suite {ch.suite_hash[:19]}"))
    if not resume:  # starting over: nothing measured by an earlier invocation is reused
        shutil.rmtree(shared_stages(ch), ignore_errors=True)
    scores: dict[str, CollectionScore] = {}
    for name in CONTROLS if compare else (RELEVANT,):
        scores[name] = run_collection(ch, name, backend=backend, resume=resume,
                                      progress=progress)
    plots: list[str] = []
    controls_file = None
    if compare:
        from posttrain_arena.challenges.micro.plot import plot_intervals

        plots = [str(p) for p in plot_intervals(
            scores, root, f"micro challenge, seed {seed}: the protocol of controls")]
        controls_file = str(measure_controls(ch, scores))
    return DemoResult(seed=seed, workdir=str(root), suite_hash=ch.suite_hash, backend=backend,
                      scores=scores, plots=plots, controls_file=controls_file,
                      instrument=instrument_beside(ch.suite, ch.suite_hash))

