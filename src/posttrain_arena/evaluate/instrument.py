"""What a challenge can detect: the protocol of controls' result, stored with the challenge.

A challenge's protocol of controls (for the micro challenge: `arena demo --compare` on
its declared seeds) runs the recipe on collections whose effect is known in advance and
writes what they measured to `controls.json` in the challenge's directory, beside its
held-out suite. It states:

* the **known-positive control**: a collection made of the suite's own families, which
  must raise the pass rate; its change and 95% interval;
* the **noise floor**: the A/A control runs that same collection again with another
  runtime seed (training order, sampling, evaluation seeds); how far apart the two
  changes land is what the run-to-run noise alone moves a score;
* the **minimum detectable effect** at 80% power for the suite, k and clustering: the
  largest of the controls' own (`evaluate.stats`, `Comparison.detectable_pp`), so a
  change of that size is detected whatever the collection's spread looked like.

`instrument_beside(suite_path, suite_hash)` is the one reader: score.json, the
challenge's web page and `arena demo` all show what it returns, and it returns nothing
for a suite the controls were not measured on (the file records the suite's hash).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

CONTROLS_FILE = "controls.json"
NOT_DISTINGUISHABLE = "not distinguishable from 0"


class ControlResult(BaseModel):
    """One control's run: its change on the held-out suite."""

    name: str = Field(description="Control (collection) name")
    role: str = Field(description="What the control is for: known positive, A/A, partial, "
                      "known negative")
    runtime_seed: int = Field(description="The run's [runtime] seed")
    base_rate: float = Field(description="Held-out pass rate of the base model (0..1)")
    final_rate: float = Field(description="Held-out pass rate after post-training (0..1)")
    delta_pp: float = Field(description="Change in percentage points")
    ci95_low_pp: float = Field(description="Lower end of the paired 95% interval")
    ci95_high_pp: float = Field(description="Upper end of the paired 95% interval")
    p_value: float = Field(description="Two-sided p-value of no change")
    detectable_pp: float = Field(description="This run's minimum detectable effect at 80% "
                                 "power (pp)")
    verdict: str = Field(description="'improved', 'regressed' or 'not distinguishable "
                         "from 0'")


class Instrument(BaseModel):
    """The content of controls.json: what the challenge's instrument can detect."""

    challenge: str = Field(description="Which challenge (and how it was generated)")
    suite_hash: str = Field(description="Sealed hash of the suite the controls ran on")
    seeds: dict[str, int] = Field(description="The protocol's declared seeds it ran on")
    tasks: int = Field(description="Held-out tasks")
    samples_per_task: int = Field(description="k")
    clusters: int = Field(description="Clusters of the suite (the interval's strata)")
    controls: list[ControlResult] = Field(description="Every control, in protocol order")
    known_positive: str = Field(description="Name of the known-positive control")
    aa: list[str] = Field(description="The A/A pair: the known positive and its rerun "
                          "with another runtime seed")
    noise_floor_pp: float = Field(description="How far apart the A/A pair's changes are "
                                  "(pp): what run-to-run noise alone moves a score")
    detectable_pp: float = Field(description="Minimum detectable effect at 80% power for "
                                 "this suite, k and clustering: the largest of the "
                                 "controls' own (pp)")
    code_hash: str | None = Field(default=None, description="Code that measured it")
    measured_at: str = Field(description="UTC time the protocol finished")

    def control(self, name: str) -> ControlResult:
        """The named control's result (KeyError when the protocol has none)."""
        for c in self.controls:
            if c.name == name:
                return c
        raise KeyError(name)

    def judge(self, change_pp: float, ci_low_pp: float | None = None,
              ci_high_pp: float | None = None) -> str:
        """A change on this challenge, read against what it can detect: 'not
        distinguishable from 0' when it is smaller than the detectable effect or its
        interval holds 0; otherwise 'improved' or 'regressed'."""
        holds_zero = (ci_low_pp is not None and ci_high_pp is not None
                      and ci_low_pp <= 0 <= ci_high_pp)
        if holds_zero or abs(change_pp) < self.detectable_pp:
            return NOT_DISTINGUISHABLE
        return "improved" if change_pp > 0 else "regressed"

    def statement(self) -> list[str]:
        """What the instrument can detect, in a few lines of words (CLI and pages)."""
        kp = self.control(self.known_positive)
        rerun = self.control(self.aa[1])
        return [
            f"known positive ({kp.name}, seed {kp.runtime_seed}): {kp.delta_pp:+.1f} pp "
            f"[{kp.ci95_low_pp:+.1f}, {kp.ci95_high_pp:+.1f}], {kp.verdict}",
            f"noise floor (A/A: the same collection, runtime seed {rerun.runtime_seed}: "
            f"{rerun.delta_pp:+.1f} pp): {self.noise_floor_pp:.1f} pp apart",
            f"minimum detectable effect at 80% power ({self.tasks} tasks in "
            f"{self.clusters} clusters, k = {self.samples_per_task}): "
            f"{self.detectable_pp:.1f} pp; a smaller change is {NOT_DISTINGUISHABLE}",
        ]


def measure(*, challenge: str, suite_hash: str, seeds: dict[str, int], tasks: int,
            samples_per_task: int, clusters: int, controls: list[ControlResult],
            known_positive: str, aa_rerun: str, code_hash: str | None,
            measured_at: str) -> Instrument:
    """The instrument from the protocol's controls: the noise floor is the distance
    between the known positive's change and its A/A rerun's; the detectable effect the
    largest of the controls' own."""
    by_name = {c.name: c for c in controls}
    if known_positive not in by_name or aa_rerun not in by_name:
        raise ValueError(f"the protocol needs its known positive ({known_positive}) and "
                         f"its A/A rerun ({aa_rerun}); it has {sorted(by_name)}")
    floor = abs(by_name[known_positive].delta_pp - by_name[aa_rerun].delta_pp)
    return Instrument(
        challenge=challenge, suite_hash=suite_hash, seeds=seeds, tasks=tasks,
        samples_per_task=samples_per_task, clusters=clusters, controls=controls,
        known_positive=known_positive, aa=[known_positive, aa_rerun],
        noise_floor_pp=floor, detectable_pp=max(c.detectable_pp for c in controls),
        code_hash=code_hash, measured_at=measured_at)


def write_instrument(instrument: Instrument, directory: Path) -> Path:
    """Write controls.json into `directory` (atomically); returns its path."""
    path = Path(directory) / CONTROLS_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(instrument.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_instrument(path: Path, suite_hash: str | None = None) -> Instrument | None:
    """The instrument in the controls.json at `path`, or None when there is none, it
    cannot be read, or it was measured on another suite than `suite_hash`."""
    try:
        inst = Instrument.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if suite_hash is not None and inst.suite_hash != suite_hash:
        return None
    return inst


def instrument_beside(suite_path: str | Path | None, suite_hash: str) -> Instrument | None:
    """What the challenge whose held-out suite is `suite_path` can detect: the
    controls.json stored with the challenge (in the suite folder's parent), when it was
    measured on this very suite (`suite_hash`); None otherwise."""
    if not suite_path or "://" in str(suite_path):
        return None
    return read_instrument(Path(suite_path).expanduser().parent / CONTROLS_FILE, suite_hash)

