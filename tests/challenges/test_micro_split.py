"""Split hygiene of the micro challenge, for several seeds: no held-out task can be
passed by replaying a training solution, held-out parameters are never training ones,
and the real leakage gate excludes a deliberately leaky collection."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from posttrain_arena.challenges.micro import RELEVANT, MicroSizes, build_micro
from posttrain_arena.challenges.micro.basebuild import write_tiny_model
from posttrain_arena.challenges.micro.build import plan_instances
from posttrain_arena.challenges.micro.families import SUITE_FAMILIES
from posttrain_arena.challenges.micro.pretrain_corpus import corpus_texts, pretraining_corpus
from posttrain_arena.challenges.micro.tokenizer import tokenizer_corpus
from posttrain_arena.evaluate.suite import load_suite
from posttrain_arena.task_format.collection import load_collection
from posttrain_arena.task_format.package import load_task
from posttrain_arena.train.leakage import doc_for_task, find_leaks

from .shellrun import command_of as _command
from .shellrun import reward_of as _reward

SEEDS = (0, 1, 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_no_held_out_task_is_passed_by_a_training_solution(seed: int, tmp_path: Path,
                                                           capsys) -> None:
    ch = build_micro(tmp_path / "micro", seed=seed, with_model=False)
    suite = load_suite(ch.suite)
    train = load_collection(ch.collections[RELEVANT]).tasks
    # Each family writes its own output file, so only a solution of the same family
    # could pass a held-out task; replay every one of those.
    solutions: dict[str | None, set[str]] = defaultdict(set)
    for t in train:
        solutions[t.frontmatter.metadata.subcategory].add(_command(t.root))
    assert len(solutions) == len(SUITE_FAMILIES)
    replayed = 0
    for task in suite.tasks:
        # The check can fail: the task's own oracle passes in the same harness.
        assert _reward(task.root, _command(task.root), tmp_path / "w") == 1.0, task.name
        mine = solutions[task.frontmatter.metadata.subcategory]
        assert len(mine) > 1
        for command in sorted(mine):
            replayed += 1
            assert _reward(task.root, command, tmp_path / "w") == 0.0, (task.name, command)
    capsys.readouterr()
    assert replayed >= 2 * len(suite.tasks)


@pytest.mark.parametrize("seed", SEEDS)
def test_held_out_parameters_are_never_training_parameters(seed: int) -> None:
    plan = plan_instances(seed, MicroSizes())
    suite = plan["suite"]
    assert len({i.command for i in suite}) == len(suite)  # every task its own solution
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for inst in plan[RELEVANT]:
        for key, value in inst.params.items():
            seen[(inst.family, key)].add(value)
    held: dict[tuple[str, str], set[str]] = defaultdict(set)
    for inst in suite:
        for key, value in inst.params.items():
            held[(inst.family, key)].add(value)
    varying = {k for k in held if len(held[k] | seen[k]) > 1}
    # Only the fixed output file of a family is shared; everything that varies is split.
    assert {k[1] for k in set(held) - varying} <= {"out"}
    assert varying, "no parameter varies: the check would be empty"
    for key in varying:
        assert not held[key] & seen[key], (key, held[key] & seen[key])


@pytest.mark.parametrize("seed", SEEDS)
def test_tokenizer_and_pretraining_corpora_hold_no_suite_text(seed: int) -> None:
    plan = plan_instances(seed, MicroSizes())
    blob = "\n".join(tokenizer_corpus(seed) + corpus_texts(pretraining_corpus(seed, 2000)))
    held = plan["suite"]
    assert all(i.command not in blob and i.prompt not in blob for i in held)
    # ...and not even a held-out file name (the rarest part of a held-out prompt).
    assert not [i for i in held for f in i.files if f"{f}" in blob]


def test_write_tiny_model_refuses_a_corpus_with_suite_text(tmp_path: Path) -> None:
    suite = plan_instances(0, MicroSizes())["suite"]
    corpus = [*tokenizer_corpus(0, per_family=2), f"notes {suite[3].prompt} more"]
    with pytest.raises(RuntimeError, match="held-out text"):
        write_tiny_model(tmp_path / "m", corpus=corpus,
                         forbidden=[t for i in suite for t in (i.prompt, i.command)])


def test_the_real_gate_excludes_a_leaky_collection(tmp_path: Path) -> None:
    ch = build_micro(tmp_path / "micro", seed=0, with_model=False)
    suite = load_suite(ch.suite)
    held_docs = [doc_for_task(t.name, t.checksum, t.prompt, t.root) for t in suite.tasks]
    train = load_collection(ch.collections[RELEVANT]).tasks
    # The collection as built passes the gate untouched.
    assert find_leaks([doc_for_task(t.name, t.checksum, t.prompt, t.root) for t in train],
                      held_docs) == []
    leaky = tmp_path / "leaky"
    victims = suite.tasks[:3]
    # 1. a held-out task copied under a new name with a reworded prompt
    copy = leaky / "fresh-looking-task"
    shutil.copytree(victims[0].root, copy)
    md = copy / "task.md"
    md.write_text(md.read_text().replace(victims[0].prompt,
                                         "Please do this: " + victims[0].prompt.lower()))
    # 2. a training task whose oracle is a held-out task's solution
    shutil.copytree(train[0].root, leaky / "replay")
    shutil.copy(victims[1].root / "oracle" / "solve.sh", leaky / "replay" / "oracle")
    # 3. a training task that ships a held-out task's data under another file name
    shutil.copytree(train[1].root, leaky / "data-copy")
    for f in (victims[2].root / "environment").iterdir():
        if f.name != "Dockerfile":
            target = leaky / "data-copy" / "environment" / f"copy-{f.name}"
            target.write_text(f.read_text())
    for f in (leaky / "data-copy" / "environment").iterdir():
        if f.name != "Dockerfile" and not f.name.startswith("copy-"):
            f.unlink()
    tasks = [*train[2:], *(load_task(p) for p in sorted(leaky.iterdir()))]
    found = find_leaks([doc_for_task(t.name, t.checksum, t.prompt, t.root) for t in tasks],
                       held_docs)
    by_task = {e.task: (e.reason, e.held_out_task) for e in found}
    assert by_task["replay"] == ("same-solution", victims[1].name)
    assert by_task["data-copy"] == ("same-environment", victims[2].name)
    assert by_task["fresh-looking-task"][1] == victims[0].name
    assert set(by_task) == {"replay", "data-copy", "fresh-looking-task"}
    assert json.loads(json.dumps([e.model_dump() for e in found]))  # serialisable



@pytest.mark.parametrize("seed", SEEDS)
def test_no_count_is_what_a_wrong_command_writes(seed: int, tmp_path: Path) -> None:
    # grep -c for a marker that is not in the file writes 0, so no count-markers task may
    # expect 0 (measured before: 11 to 13 of 20 training tasks did, and 3 of 5 held-out
    # tasks of seeds 1 and 2, all passed by a command with any absent marker).
    plan = plan_instances(seed, MicroSizes())
    tasks = [i for part in ("suite", RELEVANT) for i in plan[part]
             if i.family == "count-markers"]
    assert len(tasks) == 25
    for inst in tasks:
        (body,) = inst.files.values()
        want = int(inst.expect.files["count.txt"])
        assert want == sum(inst.params["marker"] in line for line in body.splitlines()) > 0
    # ...and through the tasks' own verifiers: the oracle passes, counting an absent
    # marker (what a model that ignores the prompt writes) does not.
    ch = build_micro(tmp_path / "micro", seed=seed, with_model=False)
    roots = [t.root for t in load_suite(ch.suite).tasks]
    roots += [t.root for t in load_collection(ch.collections[RELEVANT]).tasks]
    counted = [r for r in roots if r.name.startswith("count-markers-")]
    assert len(counted) == 25
    for root in counted:
        src = _command(root).split()[3]
        assert _reward(root, _command(root), tmp_path / "w") == 1.0, root.name
        wrong = f"grep -c NOSUCHMARKER {src} > count.txt"
        assert _reward(root, wrong, tmp_path / "w") == 0.0, root.name
