"""The micro challenge's protocol of controls: its seeds are declared in the challenge
(challenge.toml) and what it measured is stored with the challenge (controls.json), from
which score.json, the challenge's page and `arena demo` state what it can detect."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from posttrain_arena.challenges.micro import CONTROLS, RELEVANT, RELEVANT_SEED1, build_micro
from posttrain_arena.challenges.micro.build import place_controls, shipped_controls
from posttrain_arena.challenges.micro.demo import CollectionScore, DemoResult
from posttrain_arena.challenges.micro.protocol import Protocol, declared
from posttrain_arena.cli import demo as cli_demo
from posttrain_arena.cli.main import app
from posttrain_arena.evaluate.instrument import (
    NOT_DISTINGUISHABLE,
    ControlResult,
    Instrument,
    instrument_beside,
    measure,
    read_instrument,
    write_instrument,
)
from posttrain_arena.service.app import create_app
from posttrain_arena.service.config import Settings


def _control(name: str, delta: float, low: float, high: float, detectable: float,
             seed: int = 1, verdict: str = "improved") -> ControlResult:
    return ControlResult(name=name, role="test", runtime_seed=seed, base_rate=0.2,
                         final_rate=0.2 + delta / 100, delta_pp=delta, ci95_low_pp=low,
                         ci95_high_pp=high, p_value=0.01, detectable_pp=detectable,
                         verdict=verdict)


def _instrument(suite_hash: str, *, kp: float = 20.0, aa: float = 14.5) -> Instrument:
    controls = [_control(RELEVANT, kp, kp - 8, kp + 8, 11.0),
                _control(RELEVANT_SEED1, aa, aa - 8, aa + 8, 12.5, seed=2),
                _control("micro-off-topic", -9.0, -13.0, -5.0, 7.0, verdict="regressed")]
    return measure(challenge="micro, test", suite_hash=suite_hash,
                   seeds={"challenge": 1, "runtime": 1, "aa_runtime": 2}, tasks=40,
                   samples_per_task=4, clusters=8, controls=controls, known_positive=RELEVANT,
                   aa_rerun=RELEVANT_SEED1, code_hash=None, measured_at="2026-12-04T00:00:00")


def test_the_protocol_seeds_are_declared_in_the_challenge_and_every_build_uses_them(
        tmp_path: Path) -> None:
    proto = declared()
    text = (Path(shipped_controls()).parent / "challenge.toml").read_text()
    assert f"seed = {proto.seed}\n" in text and f"aa_seed = {proto.aa_seed}\n" in text
    assert "never used to choose the recipe" in text
    assert proto.seed != proto.aa_seed
    with pytest.raises(ValueError):
        Protocol.model_validate({"seed": 1, "aa_seed": 2, "k": 3})  # nothing undeclared
    # A build without a seed is the declared one, and its recipes carry the declared
    # runtime seeds: the A/A rerun its own, every other control the challenge's.
    ch = build_micro(tmp_path / "micro", with_model=False)
    assert ch.seed == proto.seed
    seeds = {n: re.search(r"^seed = (\d+)$", Path(ch.recipes[n]).read_text(), re.M)
             for n in CONTROLS}
    assert {n: int(m.group(1)) for n, m in seeds.items() if m} == {
        n: proto.aa_seed if n == RELEVANT_SEED1 else proto.seed for n in CONTROLS}
    # The shipped controls are the protocol's result on exactly this suite and seeds,
    # so every build of the declared seed carries them.
    shipped = read_instrument(shipped_controls(), ch.suite_hash)
    assert shipped is not None, "controls.json is not the declared seed's suite's"
    assert shipped.seeds == proto.seeds()
    assert [c.name for c in shipped.controls] == list(CONTROLS)
    assert instrument_beside(ch.suite, ch.suite_hash) == shipped


def test_the_instrument_is_the_known_positive_the_aa_distance_and_the_largest_mde() -> None:
    inst = _instrument("sha256:x")
    assert inst.noise_floor_pp == pytest.approx(5.5)
    assert inst.detectable_pp == 12.5  # the largest of the controls' own
    assert inst.aa == [RELEVANT, RELEVANT_SEED1]
    lines = "\n".join(inst.statement())
    assert "known positive (micro-relevant, seed 1): +20.0 pp [+12.0, +28.0]" in lines
    assert "5.5 pp apart" in lines and "12.5 pp" in lines
    # A change smaller than the detectable effect, or whose interval holds 0, is not
    # distinguishable from 0, whatever its sign; larger ones keep their direction.
    assert inst.judge(10.0, 3.0, 17.0) == NOT_DISTINGUISHABLE
    assert inst.judge(-12.0) == NOT_DISTINGUISHABLE
    assert inst.judge(20.0, -1.0, 41.0) == NOT_DISTINGUISHABLE
    assert inst.judge(13.0, 5.0, 21.0) == "improved"
    assert inst.judge(-13.0) == "regressed"
    with pytest.raises(ValueError):
        measure(challenge="x", suite_hash="x", seeds={}, tasks=1, samples_per_task=1,
                clusters=1, controls=inst.controls[:1], known_positive=RELEVANT,
                aa_rerun=RELEVANT_SEED1, code_hash=None, measured_at="x")


def test_controls_are_read_only_for_the_suite_they_were_measured_on(tmp_path: Path) -> None:
    challenge = tmp_path / "challenge"
    (challenge / "suite").mkdir(parents=True)
    write_instrument(_instrument("sha256:aaa"), challenge)
    assert instrument_beside(challenge / "suite", "sha256:aaa") == _instrument("sha256:aaa")
    assert instrument_beside(challenge / "suite", "sha256:bbb") is None  # another suite
    assert instrument_beside(None, "sha256:aaa") is None
    assert instrument_beside("https://example.invalid/suite", "sha256:aaa") is None
    (challenge / "controls.json").write_text("{not json")
    assert instrument_beside(challenge / "suite", "sha256:aaa") is None
    # A build keeps the controls measured here for its suite, else takes the shipped
    # ones for its suite, else removes a stale file.
    mine = _instrument("sha256:mine")
    write_instrument(mine, challenge)
    assert place_controls(challenge, "sha256:mine") == challenge / "controls.json"
    assert read_instrument(challenge / "controls.json") == mine
    assert place_controls(challenge, "sha256:other") is None
    assert not (challenge / "controls.json").exists()


def _score(name: str, delta: float, low: float, high: float, detectable: float,
           verdict: str) -> CollectionScore:
    return CollectionScore(collection=name, base_rate=0.2, final_rate=0.2 + delta / 100,
                           delta_pp=delta, ci95_low_pp=low, ci95_high_pp=high, p_value=0.04,
                           detectable_pp=detectable, verdict=verdict, runtime_seed=1,
                           tasks=40, samples_per_task=4, run_dir="/runs/x", seconds=1.0)


def test_the_demo_says_what_it_can_detect_and_what_it_cannot(
        capsys: pytest.CaptureFixture[str]) -> None:
    scores = {RELEVANT: _score(RELEVANT, 20.0, 12.0, 28.0, 11.0, "improved"),
              "small": _score("small", 6.0, 1.0, 11.0, 9.0, NOT_DISTINGUISHABLE),
              "spans": _score("spans", 4.0, -2.0, 10.0, 9.0, NOT_DISTINGUISHABLE)}
    result = DemoResult(seed=1, workdir="/w", suite_hash="sha256:x", backend="local",
                        scores=scores, instrument=_instrument("sha256:x"))
    cli_demo._print_human(result)
    out = capsys.readouterr().out
    assert "detectable" in out and "11.0 pp" in out  # the run's own MDE, in the table
    assert re.search(r"small: \+6\.0 pp is not distinguishable from 0 \(it is smaller "
                     r"than the 9\.0 pp", out), out
    assert re.search(r"spans: \+4\.0 pp is not distinguishable from 0 \(its 95% interval "
                     r"holds 0", out), out
    assert f"{RELEVANT}: +20.0 pp is not" not in out
    assert "known positive (micro-relevant, seed 1): +20.0 pp" in out
    assert "noise floor" in out and "5.5 pp apart" in out
    assert "minimum detectable effect at 80% power" in out and "12.5 pp" in out
    bare = result.model_copy(update={"instrument": None})
    cli_demo._print_human(bare)
    assert "no protocol of controls was measured on this suite (seed 1)" in (
        capsys.readouterr().out)


def test_the_challenge_page_states_what_the_challenge_can_detect(
        tmp_path: Path, arena_cache_dir: Path) -> None:
    data = tmp_path / "arena"
    made = CliRunner().invoke(app, ["admin", "create-micro-challenge", "--data-dir", str(data)])
    assert made.exit_code == 0, made.output
    suite_hash = json.loads(made.stdout)["suite_hash"]
    challenge = data / "challenges" / f"micro-seed{declared().seed}"
    assert (challenge / "suite").is_dir()
    # What the page shows is the controls.json stored with the challenge: replace it with
    # known figures (the shipped one holds the protocol's own) and read them back.
    shutil.copyfile(challenge / "controls.json", tmp_path / "shipped.json")
    write_instrument(_instrument(suite_hash), challenge)
    with TestClient(create_app(Settings(data_dir=data))) as client:
        page = client.get("/arena/challenges/micro").text
    assert "What this challenge can detect" in page
    assert re.search(r"Known positive</dt><dd>micro-relevant \(runtime seed 1\): "
                     r"<span class=\"num\">\+20\.0", page), page
    assert re.search(r"Noise floor \(A/A\)</dt><dd>5\.5 pp", page), page
    assert re.search(r"Minimum detectable effect</dt><dd>12\.5 pp at 80% power \(40 tasks "
                     r"in 8 clusters, k = 4\); a smaller change is not distinguishable", page)
    # Measured on another suite: the page says none were measured, and states no figure.
    write_instrument(_instrument("sha256:another"), challenge)
    with TestClient(create_app(Settings(data_dir=data))) as client:
        page = client.get("/arena/challenges/micro").text
    assert "No protocol of controls was measured on this suite" in page
    assert "Noise floor" not in page
    # The shipped controls were measured on this very suite: the page shows their figures.
    shutil.copyfile(tmp_path / "shipped.json", challenge / "controls.json")
    shipped = read_instrument(challenge / "controls.json", suite_hash)
    assert shipped is not None
    with TestClient(create_app(Settings(data_dir=data))) as client:
        page = client.get("/arena/challenges/micro").text
    assert f"Noise floor (A/A)</dt><dd>{shipped.noise_floor_pp:.1f} pp" in page
