"""The shipped micro base: one base for every challenge seed, made by the project's own
code (a rebuild gives it again), never pretrained twice at once, never from held-out
values of any seed."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from posttrain_arena.challenges.micro import basebuild, build_micro
from posttrain_arena.challenges.micro.corpus_leaks import held_out_numbers, held_out_numbers_in
from posttrain_arena.challenges.micro.families import (
    COMMON,
    HELD_OUT,
    SUITE_FAMILIES,
    TRAIN,
)
from posttrain_arena.challenges.micro.pretrain_corpus import corpus_texts, pretraining_corpus
from posttrain_arena.challenges.micro.shipped import WEIGHTS, shipped_dir, shipped_key
from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec
from posttrain_arena.challenges.micro.tokenizer import tokenizer_corpus
from posttrain_arena.train.stages import StageEvent

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "micro_base.py"
# A reduced spec: the cheap version of `scripts/micro_base.py check` (the full rebuild
# takes 15-25 minutes on two cores; the suite rebuilds this one instead).
REDUCED = TinyModelSpec(vocab_size=400, hidden_size=32, intermediate_size=64, num_layers=1,
                        num_heads=2, pretrain_episodes=64, pretrain_batch_size=8)


def _full_corpus() -> tuple[list[str], list[str]]:
    spec = TinyModelSpec()
    pre = corpus_texts(pretraining_corpus(spec.seed, spec.pretrain_episodes))
    return tokenizer_corpus(spec.seed) + pre, pre


def test_the_shipped_base_is_what_the_code_builds_now() -> None:
    # Its key is the hash of the spec, both corpora and the pretraining format: any change
    # to them makes the shipped base stale, and this fails until it is rebuilt.
    corpus, _ = _full_corpus()
    assert shipped_key() == basebuild.base_model_key(TinyModelSpec(), corpus)
    report = json.loads((shipped_dir() / "pretraining.json").read_text())
    assert report["steps"] == 1000 and report["last_loss"] < report["first_loss"]


def test_every_seed_gets_the_shipped_base_without_pretraining(
        tmp_path: Path, arena_cache_dir: Path) -> None:
    def no_pretraining(ev: StageEvent) -> None:
        assert ev.stage != "pretrain", f"the base was pretrained: {ev}"

    shipped = (shipped_dir() / WEIGHTS).read_bytes()
    for seed in (0, 5):
        ch = build_micro(tmp_path / f"s{seed}", seed=seed, progress=no_pretraining)
        assert ch.model_spec == TinyModelSpec()  # not the challenge's seed
        assert (Path(ch.model) / WEIGHTS).read_bytes() == shipped


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args,
                           "--spec", REDUCED.model_dump_json()],
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_a_rebuild_is_bit_identical_and_a_changed_base_is_caught(tmp_path: Path) -> None:
    base = tmp_path / "base"
    assert _script("build", "--out", str(base)).returncode == 0
    same = _script("check", "--against", str(base))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "PASS: identical" in same.stdout
    # One weight nudged: the rebuild no longer matches it bit for bit, and the probe's
    # logits differ by more than the tolerance.
    from safetensors.torch import load_file, save_file

    tensors = load_file(base / WEIGHTS)
    name = next(k for k in tensors if "embed" in k)
    tensors[name] = tensors[name] + 0.5
    save_file(tensors, base / WEIGHTS, metadata={"format": "pt"})
    changed = _script("check", "--against", str(base))
    assert changed.returncode == 1 and "FAIL" in changed.stdout, changed.stdout
    assert name in changed.stdout


_RACER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from posttrain_arena.challenges.micro import basebuild
    from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec
    steps = []
    spec = TinyModelSpec.model_validate_json(sys.argv[2])
    basebuild.write_tiny_model(Path(sys.argv[1]), spec, on_step=lambda d, t: steps.append(d))
    print("pretrained" if steps else "copied")
""")


@pytest.mark.slow
def test_two_processes_never_pretrain_one_base_at_once(tmp_path: Path) -> None:
    env = {**os.environ, "ARENA_CACHE_DIR": str(tmp_path / "cache")}
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, str(tmp_path / f"m{i}"),
                                REDUCED.model_dump_json()], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
              for i in range(2)]
    said = sorted((p.communicate(timeout=600)[0] or "").strip() for p in racers)
    assert said == ["copied", "pretrained"], said
    assert (tmp_path / "m0" / WEIGHTS).read_bytes() == (tmp_path / "m1" / WEIGHTS).read_bytes()


def _abstract(command: str) -> str:
    """A command with its file names and words abstracted, its numbers kept."""
    return re.sub(r"[A-Za-z_][\w-]*\.\w+|\b[A-Z]{2,}\b", "·", command)


def test_no_held_out_number_or_abstracted_command_is_in_either_corpus() -> None:
    # The whole corpora, not a sample: the full pretraining corpus and the tokenizer's.
    corpus, pre = _full_corpus()
    # Once, `head -n 7|8|9` and held-out `seq` ranges were pretraining commands.
    assert held_out_numbers_in(pre) == []
    # The tokenizer's instances use COMMON values only: none of its prompts or commands
    # asks for a held-out number (their files hold data, not parameters).
    rng = random.Random(0)
    for fam in SUITE_FAMILIES:
        for _ in range(60):
            inst = fam.generate(rng, COMMON)
            numbers = {int(v) for v in inst.params.values() if v.isdigit()}
            assert not numbers & held_out_numbers(), inst.prompt
    # Every held-out command any seed can draw that asks for a held-out number, names
    # abstracted and numbers kept: none is a command of either corpus, abstracted the same
    # way (`cut -f 1`, `tail -n 1` are the families' programs, not held-out values).
    held = {_abstract(fam.generate(random.Random(i), HELD_OUT).command)
            for fam in SUITE_FAMILIES for i in range(300)}
    held = {c for c in held if held_out_numbers_in([c])}
    assert held  # head -n 7, awk $8, seq 9 22, ...
    commands = {_abstract(json.loads(t)["command"]) for t in corpus
                if t.startswith('{"command"')}
    commands |= {_abstract(json.loads(t)["arguments"]["command"]) for t in corpus
                 if t.startswith('{"name": "bash"')}
    assert len(commands) > 1000
    assert not held & commands, sorted(held & commands)[:5]
    # ...and the check would see one: a planted held-out command is found.
    planted = f"head -n {HELD_OUT.heads[0]} {TRAIN.stems[0]}.log > out.txt"
    assert _abstract(planted) in held and held_out_numbers_in([planted])
