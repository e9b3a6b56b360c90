"""What the micro challenge's protocol of controls measured, written with the challenge.

After `arena demo --compare` has run the five controls, `measure_controls` turns their
scores into the challenge's instrument (`evaluate.instrument`): the known positive
(micro-relevant), the noise floor (micro-relevant against its A/A rerun,
micro-relevant-seed1) and the minimum detectable effect at 80% power, with every
control's own figures; and writes it to `controls.json` in the challenge's work
directory, where score.json, the challenge's page and `arena demo` read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol as TypingProtocol

from posttrain_arena.challenges.micro.build import (
    BROKEN,
    CONTROLS,
    OFFTOPIC,
    PARTIAL,
    RELEVANT,
    RELEVANT_SEED1,
    MicroChallenge,
)
from posttrain_arena.challenges.micro.protocol import declared
from posttrain_arena.evaluate.instrument import ControlResult, measure, write_instrument
from posttrain_arena.train.score import Score

ROLES = {
    RELEVANT: "known positive: the suite's own families, other instances",
    RELEVANT_SEED1: "A/A: the known positive again, another runtime seed",
    PARTIAL: "partial: half the suite's families",
    BROKEN: "known negative: verifiers that accept a plausible wrong answer",
    OFFTOPIC: "known negative: none of the suite's families",
}


class RunScore(TypingProtocol):
    """What `measure_controls` needs of a control's score (demo.CollectionScore)."""

    run_dir: str
    runtime_seed: int


def measure_controls(ch: MicroChallenge, scores: Mapping[str, RunScore]) -> Path:
    """Write the instrument that the protocol's `scores` (every control, by name)
    measured into `ch.root`/controls.json; returns its path."""
    missing = [n for n in CONTROLS if n not in scores]
    if missing:
        raise ValueError(f"the protocol of controls is incomplete: no {', '.join(missing)}")
    results: list[ControlResult] = []
    first: Score | None = None
    for name in CONTROLS:
        score = Score.model_validate_json(
            (Path(scores[name].run_dir) / "score.json").read_text(encoding="utf-8"))
        if score.base is None or score.final is None or score.change is None:
            raise ValueError(f"{name}: the run has no score ({score.status})")
        first = first or score
        c = score.change
        results.append(ControlResult(
            name=name, role=ROLES[name], runtime_seed=scores[name].runtime_seed,
            base_rate=score.base.pass_rate, final_rate=score.final.pass_rate,
            delta_pp=c.delta_pp, ci95_low_pp=c.ci95_low_pp, ci95_high_pp=c.ci95_high_pp,
            p_value=c.p_value, detectable_pp=c.detectable_pp, verdict=c.verdict))
    assert first is not None and first.change is not None and first.final is not None
    proto = declared()
    seeds = {"challenge": ch.seed, "runtime": ch.seed,
             "aa_runtime": proto.aa_seed_for(ch.seed)}
    what = "the declared protocol seeds" if seeds == proto.seeds() else "not the declared seeds"
    inst = measure(
        challenge=f"micro, challenge seed {ch.seed} ({what}, challenge.toml)",
        suite_hash=ch.suite_hash, seeds=seeds, tasks=first.change.paired_tasks,
        samples_per_task=first.final.samples_per_task, clusters=first.change.clusters,
        controls=results, known_positive=RELEVANT, aa_rerun=RELEVANT_SEED1,
        code_hash=first.provenance.code_hash if first.provenance else None,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"))
    return write_instrument(inst, Path(ch.root))
