"""`arena demo`: the whole loop on the micro challenge, end to end, and the protocol of
controls (`--compare`) with the ordering a trustworthy measurement must show, on the
protocol's declared seeds (challenges/micro/challenge.toml) and no other: the tests take
them from the challenge, never from a seed of their own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from posttrain_arena.challenges.micro import (
    BROKEN,
    CONTROLS,
    OFFTOPIC,
    PARTIAL,
    RELEVANT,
    RELEVANT_SEED1,
    load_micro,
)
from posttrain_arena.challenges.micro.protocol import declared
from posttrain_arena.cli.main import app
from posttrain_arena.evaluate.instrument import instrument_beside, read_instrument

# The two tests may run at once on two workers: the protocol runs all five of its runs
# itself, the demo's relevant run included, so the suite's longest chain is the protocol
# alone. Where one worker runs both (or `pytest -k`, in order), the protocol resumes the
# demo's run from the module's work dir.
pytestmark = [pytest.mark.slow, pytest.mark.bwrap]


SHAPE = {"collection", "base_rate", "final_rate", "delta_pp", "ci95_low_pp", "ci95_high_pp",
         "p_value", "tasks", "samples_per_task", "run_dir", "seconds", "after_sft_rate",
         "grpo_delta_pp", "grpo_ci95_low_pp", "grpo_ci95_high_pp", "detectable_pp",
         "verdict", "runtime_seed"}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One micro work dir for the module's tests on one worker. Run stages are
    content-addressed, so the protocol's `--resume` reuses each finished stage of the
    demo's run whose inputs are the same and redoes any whose inputs differ; on a worker
    of its own it runs them all."""
    return tmp_path_factory.mktemp("demo") / "micro"


def _score(run_dir: str) -> dict:
    return json.loads((Path(run_dir) / "score.json").read_text())


def test_demo_learns_from_the_relevant_collection(workdir: Path) -> None:
    proto = declared()
    # No --seed: the demo builds the protocol's declared seed, whose controls ship.
    result = CliRunner().invoke(app, ["demo", "--json", "--workdir", str(workdir)])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)  # stdout holds the JSON alone
    assert set(scores) == {RELEVANT}
    relevant = scores[RELEVANT]
    assert set(relevant) == SHAPE
    assert relevant["tasks"] == 40 and relevant["samples_per_task"] == 4
    ch = load_micro(workdir)
    assert ch is not None and ch.seed == proto.seed
    assert relevant["runtime_seed"] == proto.seed
    run = Path(relevant["run_dir"])
    assert run.name == f"{RELEVANT}-seed{proto.seed}"
    score = _score(relevant["run_dir"])
    assert score["change"]["clusters"] == 8 and "cluster" in score["change"]["method"]
    assert score["change"]["detectable_pp"] == relevant["detectable_pp"] > 0
    assert score["change"]["verdict"] == relevant["verdict"]
    # score.json states what the challenge can detect: the controls stored with it for
    # this very suite (the shipped ones on the declared seed), or none.
    stored = instrument_beside(ch.suite, ch.suite_hash)
    assert score["instrument"] == (stored.model_dump() if stored else None)
    assert score["exclusions"] == []  # the relevant collection leaks nothing
    assert score["grpo_change"]["paired_tasks"] == 40
    # Trainer step logs went to the run's log file, not the terminal.
    assert "'loss'" in (run / "run.log").read_text()
    assert "'loss'" not in result.stdout
    # ...and what libraries print while the challenge is built (a fresh base is saved and
    # loaded for pretraining) went to the build's log.
    assert (workdir / "build.log").is_file()
    assert "Loading weights" not in result.output
    # Not a terminal: plain progress lines on stderr, the plan first, then each stage.
    err = result.stderr.splitlines()
    assert "arena demo: builds the micro challenge" in err[0], err[:3]
    for stage in ("build", "baseline", "sft", "grpo", "final"):
        assert any(re.match(rf"\[\s*\d+:\d\d\] {stage}[ :]", line) for line in err), stage
    # The base is pretrained on generic shell use: it solves some suite tasks before
    # any training (a blank base would score 0 and no control could fail).
    assert relevant["base_rate"] > 0, relevant
    # What the README claims: post-training on the relevant collection raises the held-out
    # pass rate, the whole 95% interval above 0 and the change at least what the run can
    # detect. No expected failure: if this stops holding, the claim goes.
    assert relevant["ci95_low_pp"] > 0, relevant
    assert relevant["verdict"] == "improved", relevant
    assert relevant["final_rate"] > relevant["base_rate"], relevant


def test_protocol_of_controls_orders_as_expected(workdir: Path) -> None:
    proto = declared()
    # The known positive is the demo's run: resumed where this worker ran the demo.
    result = CliRunner().invoke(app, ["demo", "--compare", "--resume", "--json",
                                      "--workdir", str(workdir)])
    assert result.exit_code == 0, result.output
    s = json.loads(result.stdout)
    assert tuple(s) == CONTROLS and all(set(v) == SHAPE for v in s.values())
    # Every control ran on the declared seeds: the A/A rerun on its own runtime seed, and
    # it measured its own baseline on its own evaluation seeds (not the shared one).
    assert {n: v["runtime_seed"] for n, v in s.items()} == {
        n: proto.aa_seed if n == RELEVANT_SEED1 else proto.seed for n in CONTROLS}
    k = s[RELEVANT]["samples_per_task"]
    first_seeds = {n: _score(v["run_dir"])["provenance"]["seeds"]["eval_first_seed"]
                   for n, v in s.items()}
    assert first_seeds == {n: proto.aa_seed * k if n == RELEVANT_SEED1 else proto.seed * k
                           for n in CONTROLS}
    d = {name: v["delta_pp"] for name, v in s.items()}
    assert d[RELEVANT] > d[PARTIAL] > d[OFFTOPIC], d
    assert d[BROKEN] <= d[RELEVANT] - 10, d  # bad verifiers score well below good ones
    # A/A: the same collection with another seed lands within each other's interval.
    a, b = s[RELEVANT], s[RELEVANT_SEED1]
    assert a["ci95_low_pp"] <= b["delta_pp"] <= a["ci95_high_pp"], (a, b)
    assert b["ci95_low_pp"] <= a["delta_pp"] <= b["ci95_high_pp"], (a, b)
    for plot in ("intervals.png", "intervals.svg"):
        assert (workdir / plot).is_file()
    # The protocol wrote what the instrument can detect with the challenge, from these
    # very runs: the known positive, the A/A noise floor, the detectable effect.
    ch = load_micro(workdir)
    assert ch is not None
    inst = read_instrument(workdir / "controls.json", ch.suite_hash)
    assert inst is not None
    assert inst.seeds == proto.seeds() and inst.known_positive == RELEVANT
    assert [c.name for c in inst.controls] == list(CONTROLS)
    for c in inst.controls:
        assert (c.delta_pp, c.ci95_low_pp, c.ci95_high_pp, c.verdict, c.runtime_seed) == (
            s[c.name]["delta_pp"], s[c.name]["ci95_low_pp"], s[c.name]["ci95_high_pp"],
            s[c.name]["verdict"], s[c.name]["runtime_seed"])
    assert inst.noise_floor_pp == pytest.approx(abs(a["delta_pp"] - b["delta_pp"]))
    assert inst.detectable_pp == max(v["detectable_pp"] for v in s.values())
    assert (inst.tasks, inst.samples_per_task, inst.clusters) == (40, k, 8)
    # The known positive is detected above the noise floor: the instrument can see it.
    assert inst.control(RELEVANT).verdict == "improved"
    assert inst.control(RELEVANT).delta_pp > inst.noise_floor_pp
