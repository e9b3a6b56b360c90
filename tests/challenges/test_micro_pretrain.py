"""The micro base model's pretraining corpus and build: generic shell use that shares no
held-out value, suite text or family wording with the challenge, and a pretrained base
that is built once per machine and reused."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from posttrain_arena.challenges.micro import MicroSizes, basebuild
from posttrain_arena.challenges.micro.build import plan_instances
from posttrain_arena.challenges.micro.corpus_leaks import pool_values_in
from posttrain_arena.challenges.micro.families import ALL_FAMILIES, HELD_OUT, TRAIN
from posttrain_arena.challenges.micro.generic_tasks import COPY, GENERIC
from posttrain_arena.challenges.micro.pretrain_corpus import corpus_texts, pretraining_corpus
from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec, build_model
from posttrain_arena.challenges.micro.tokenizer import build_tokenizer, tokenizer_corpus

SEEDS = (0, 1, 2)
TINY = TinyModelSpec(vocab_size=400, hidden_size=32, intermediate_size=64, num_layers=1,
                     num_heads=2, max_positions=512, seed=4, pretrain_episodes=32,
                     pretrain_epochs=1.0)


def _prompts(rows: list[dict]) -> list[str]:
    return [m["content"] for r in rows for m in r["messages"] if m["role"] == "user"]


def _skeleton(prompt: str, names: set[str]) -> list[str]:
    """The prompt's words with file names and numbers replaced by one placeholder."""
    words = [w.rstrip(".") for w in re.findall(r"[\w./-]+", prompt.split("\n\n[time left")[0])]
    return ["·" if w in names or re.fullmatch(r"[\w-]+\.\w+|\d+", w) else w.lower()
            for w in words]


def _grams(words: list[str], n: int = 5) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


@pytest.mark.parametrize("seed", SEEDS)
def test_corpus_shares_no_parameter_value_or_suite_text(seed: int) -> None:
    rows = pretraining_corpus(seed, 2000)
    texts = corpus_texts(rows)
    assert pool_values_in(texts) == []
    suite = plan_instances(seed, MicroSizes())["suite"]
    blob = "\n".join(texts)
    assert not [i.name for i in suite if i.prompt in blob or i.command in blob]
    # The guard the build runs can fail: a held-out stem used as a name is caught, and so
    # is a training marker (the base must have seen neither split's values).
    planted = [*texts, f"cp {HELD_OUT.stems[0]}.txt copy.txt", f"grep {TRAIN.markers[3]} a.py"]
    assert pool_values_in(planted) == sorted([HELD_OUT.stems[0], TRAIN.markers[3].lower()])


def test_corpus_uses_no_family_wording() -> None:
    # Generic tasks may do what a family does (sort a file), but never in its words: a
    # relevant collection must still have something to teach.
    rng = random.Random(0)
    family = set()
    for fam in ALL_FAMILIES:
        for _ in range(30):
            inst = fam.generate(rng, TRAIN)
            family |= _grams(_skeleton(inst.prompt, set(inst.files)))
    generic = set()
    for prompt in _prompts(pretraining_corpus(0, 3 * len(GENERIC) * 4)):
        generic |= _grams(_skeleton(prompt, set()))
    assert family and generic
    assert not family & generic, sorted(family & generic)[:5]


def test_corpus_teaches_copying_not_recall() -> None:
    rows = pretraining_corpus(0, 2000)
    calls = [json.loads(t) for t in corpus_texts(rows) if t.startswith("{")]
    commands = [c["command"] for c in calls if "command" in c]
    names = [w for c in commands for w in c.split() if "." in w]
    # Almost every name is new to the model when it has to copy it.
    assert len(set(names)) > 0.6 * len(names)
    assert {r["task"] for r in rows} == {g.name for g in GENERIC + COPY}


def test_copy_tasks_repeat_prompt_names_in_the_command() -> None:
    # The dense copy signal: each copy task's command repeats several words of its prompt,
    # and those words are fresh random strings, so only copying predicts them.
    rng = random.Random(3)
    copied = []
    for task in COPY * 20:
        prompt, command = task.sample(rng)
        names = [w for w in command.split()[1:] if w != ">"]
        assert names and all(n in prompt for n in names), (prompt, command)
        assert len(names) >= 2
        copied += names
    assert len(set(copied)) > 0.9 * len(copied)
    assert pool_values_in(copied) == []


def test_write_tiny_model_pretrains_and_reuses_the_cached_base(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from safetensors.torch import load_file

    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "cache"))  # nothing built before
    heard: list[tuple[int, int]] = []
    out = basebuild.write_tiny_model(tmp_path / "a", TINY,
                                     on_step=lambda d, t: heard.append((d, t)))
    report = json.loads((out / "pretraining.json").read_text())
    assert report["episodes"] == 32 and report["steps"] >= 1
    assert heard and heard[-1] == (report["steps"], report["steps"])  # progress to the end
    tok = __import__("transformers").AutoTokenizer.from_pretrained(out)
    init = build_model(tok, TINY).state_dict()
    trained = load_file(out / "model.safetensors")
    assert any(not torch.equal(trained[k], init[k]) for k in trained if k in init)

    def no_training(*a: object, **k: object) -> dict:
        raise AssertionError("the cached base should have been reused")

    monkeypatch.setattr(basebuild, "pretrain_base", no_training)
    again = basebuild.write_tiny_model(tmp_path / "b", TINY)
    assert (again / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()
    other = TINY.model_copy(update={"pretrain_learning_rate": 1e-3})
    with pytest.raises(AssertionError, match="cached base"):  # another spec: another key
        basebuild.write_tiny_model(tmp_path / "c", other)


def test_pretraining_corpus_with_suite_text_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = plan_instances(0, MicroSizes())["suite"]
    rows = pretraining_corpus(0, 4)
    rows[0]["messages"][1]["content"] = suite[5].prompt
    monkeypatch.setattr(basebuild, "pretraining_corpus", lambda seed, n: rows)
    with pytest.raises(RuntimeError, match="held-out text"):
        basebuild.write_tiny_model(tmp_path / "m", TINY,
                                   forbidden=[t for i in suite for t in (i.prompt, i.command)])


def test_a_tokenizer_corpus_with_a_split_value_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The count-markers files the tokenizer learned from once tagged lines with the
    # held-out markers, which made each of them one token. The build now checks the
    # tokenizer's corpus for any split's value, not only the pretraining text.
    assert pool_values_in(tokenizer_corpus(0)) == []
    monkeypatch.setattr(basebuild, "pretraining_corpus", lambda seed, n: pretraining_corpus(0, 4))
    corpus = [*tokenizer_corpus(0), f"x3 = 4  # {HELD_OUT.markers[0]}: tidy up"]
    with pytest.raises(RuntimeError, match=HELD_OUT.markers[0].lower()):
        basebuild.write_tiny_model(tmp_path / "m", TINY, corpus=corpus, cache=False)


def test_composed_wordings_drop_any_that_share_five_words_with_a_family() -> None:
    from posttrain_arena.challenges.micro.generic_tasks import _composed, family_grams, grams

    # Lifted from the first-lines family ("Copy the first 9 lines of survey.log to ..."):
    # every composed wording around it repeats five of its words, so none is kept.
    assert _composed("the first {n} lines of {a}") == ()
    kept = _composed("the opening {n} lines of {a}")
    assert len(kept) >= 10 and all("{o}" in w for w in kept)
    assert not any(grams(w) & family_grams() for w in kept)
    # Every generic task is asked in many ways (the point of composing them).
    assert sum(len(g.wordings) >= 20 for g in GENERIC) >= 15


def test_neither_splits_values_are_words_the_base_tokenizer_knows() -> None:
    # The tokenizer learns the families' words from instances with made-up names. Fitted
    # on training-pool instances, it had made the training stems one token each and left
    # the held-out stems in pieces, so SFT taught a copy the suite never asks for.
    generic = corpus_texts(pretraining_corpus(0, 3000))
    tok = build_tokenizer(tokenizer_corpus(0) + generic, 2048)

    def pieces(values: tuple[str, ...]) -> list[int]:
        return [len(tok(" " + v)["input_ids"]) for v in values]

    for split in (TRAIN, HELD_OUT):
        assert min(pieces(split.stems)) >= 2, split.name
        assert min(pieces(split.markers)) >= 2, split.name
    train, held = pieces(TRAIN.stems), pieces(HELD_OUT.stems)
    assert abs(sum(train) / len(train) - sum(held) / len(held)) < 1.5
    # ...while the families' own words are whole tokens ("alphabetically", "header").
    assert len(tok(" alphabetically")["input_ids"]) == 1
    # The check can fail: a tokenizer that saw the training instances merges their stems.
    rng = random.Random(0)
    seen = [fam.generate(rng, TRAIN).prompt for fam in ALL_FAMILIES for _ in range(60)]
    fitted = build_tokenizer([*tokenizer_corpus(0), *seen, *generic], 2048)
    assert min(len(fitted(" " + v)["input_ids"]) for v in TRAIN.stems) == 1


def test_a_full_size_corpus_of_another_seed_uses_no_split_value() -> None:
    # The build refuses a corpus with a split's value as a word, so a random name that
    # happens to be one (seed 1 drew "tbd", a training marker, before random names were
    # checked against the training values too) would make `arena demo --seed 1` fail.
    texts = corpus_texts(pretraining_corpus(1, TinyModelSpec().pretrain_episodes))
    assert pool_values_in(texts) == []
