"""The micro challenge's generator: deterministic, balanced, disjoint, clean packages."""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest

from posttrain_arena.challenges.micro import (
    BROKEN,
    CONTROLS,
    OFFTOPIC,
    PARTIAL,
    RELEVANT,
    RELEVANT_SEED1,
    MicroSizes,
    build_micro,
)
from posttrain_arena.challenges.micro.build import plan_instances
from posttrain_arena.challenges.micro.families import (
    ALL_FAMILIES,
    OFFTOPIC_FAMILIES,
    SUITE_FAMILIES,
)
from posttrain_arena.evaluate.suite import load_suite
from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.collection import check_collection, load_collection
from posttrain_arena.task_format.domains import KNOWN_DOMAINS, composition_violations

from .shellrun import command_of, reward_of


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    return build_micro(tmp_path_factory.mktemp("micro"), seed=7, with_model=False)


def test_families_cover_every_domain_twice_with_disjoint_commands() -> None:
    assert {f.domain for f in SUITE_FAMILIES} == set(KNOWN_DOMAINS)
    assert {f.domain for f in OFFTOPIC_FAMILIES} == set(KNOWN_DOMAINS)
    assert len({f.name for f in ALL_FAMILIES}) == len(ALL_FAMILIES)
    rng = random.Random(0)

    def tools(families):  # the programs each group's solutions use
        return {word for f in families for _ in range(10)
                for word in f.generate(rng).command.replace("|", " ").split()
                if word.isalpha() and len(word) > 1}

    shared = tools(SUITE_FAMILIES) & tools(OFFTOPIC_FAMILIES)
    assert not shared & {"grep", "cut", "sort", "awk", "wc", "seq", "head", "tail", "chmod",
                         "sha256sum", "tac", "tr", "mkdir", "cp", "cat", "mv"}


def test_every_instance_states_the_parameters_its_command_needs() -> None:
    rng = random.Random(1)
    for fam in ALL_FAMILIES:
        for _ in range(20):
            inst = fam.generate(rng)
            for value in inst.params.values():
                assert value in inst.prompt, (fam.name, value, inst.prompt)
                assert value in inst.command, (fam.name, value, inst.command)


def test_generation_is_deterministic_for_a_seed(tmp_path: Path, built) -> None:
    again = build_micro(tmp_path / "again", seed=7, with_model=False)
    assert again.suite_hash == built.suite_hash
    assert again.collection_hashes == built.collection_hashes
    other = build_micro(tmp_path / "other", seed=8, with_model=False)
    assert other.suite_hash != built.suite_hash
    assert other.collection_hashes[RELEVANT] != built.collection_hashes[RELEVANT]


def test_suite_obeys_the_composition_rule(built) -> None:
    suite = load_suite(built.suite)
    counts = suite.domain_counts()
    assert len(suite.tasks) == len(SUITE_FAMILIES) * built.sizes.suite_per_family
    assert set(counts) == set(KNOWN_DOMAINS)
    assert composition_violations(counts) == []
    assert suite.hash == built.suite_hash
    recipe = Path(built.recipes[RELEVANT]).read_text()
    assert built.suite_hash in recipe


def test_collections_are_real_and_balanced(built) -> None:
    for name, families in ((RELEVANT, SUITE_FAMILIES), (OFFTOPIC, OFFTOPIC_FAMILIES)):
        report = check_collection(built.collections[name])
        assert report.ok, [f.render() for f in report.findings]
        coll = load_collection(built.collections[name])
        assert coll.content_hash == built.collection_hashes[name]
        fams = Counter(t.frontmatter.metadata.subcategory for t in coll.tasks)
        assert set(fams) == {f.name for f in families}
        assert set(fams.values()) == {built.sizes.collection_per_family}
        assert 50 <= len(coll.tasks) <= 200


def test_suite_and_collections_share_no_instance(built) -> None:
    suite = load_suite(built.suite)
    held = {t.checksum for t in suite.tasks} | {t.prompt for t in suite.tasks}
    for name in (RELEVANT, OFFTOPIC):
        coll = load_collection(built.collections[name])
        assert not {t.checksum for t in coll.tasks} & held
        assert not {t.prompt for t in coll.tasks} & held
        assert not {t.name for t in coll.tasks} & {t.name for t in suite.tasks}
    plan = plan_instances(7, MicroSizes())
    suite_keys = {i.key for i in plan["suite"]}
    for name, part in plan.items():
        keys = [i.key for i in part]
        assert len(keys) == len(set(keys)), name
        assert name == "suite" or not set(keys) & suite_keys, name


def test_packages_check_clean(built) -> None:
    for task in load_suite(built.suite).tasks:
        report = check_task(task.root)
        assert report.findings == [], [f.render() for f in report.findings]


def test_package_layout(built) -> None:
    task = load_suite(built.suite).tasks[0]
    dockerfile = task.dockerfile.read_text().splitlines()
    assert dockerfile[:2] == ["FROM posttrain-arena/python:bookworm", "WORKDIR /root"]
    solve = (task.oracle_dir / "solve.sh").read_text().splitlines()
    assert solve[0].startswith("#!") and len(solve) == 2
    expected = json.loads((task.verifier_dir / "expected.json").read_text())
    assert set(expected) == {"files", "absent", "executable", "dirs"}


def test_suite_clusters_are_its_families(built) -> None:
    clusters = load_suite(built.suite).clusters()
    assert set(clusters.values()) == {f"cluster:{f.name}" for f in SUITE_FAMILIES}
    assert set(Counter(clusters.values()).values()) == {built.sizes.suite_per_family}


def test_the_protocol_has_five_controls_with_recipes(built) -> None:
    assert CONTROLS == ("micro-relevant", "micro-relevant-seed1", "micro-partial",
                        "micro-broken-verifiers", "micro-off-topic")
    assert set(built.recipes) == set(CONTROLS)
    aa = Path(built.recipes[RELEVANT_SEED1]).read_text()
    assert built.collections[RELEVANT_SEED1] == built.collections[RELEVANT]
    assert f"seed = {built.seed + 1}" in aa
    assert f"seed = {built.seed}\n" in Path(built.recipes[RELEVANT]).read_text()
    partial = Counter(t.frontmatter.metadata.subcategory
                      for t in load_collection(built.collections[PARTIAL]).tasks)
    suite_names = {f.name for f in SUITE_FAMILIES}
    assert len(set(partial) & suite_names) == len(set(partial) - suite_names) == 4


def test_broken_verifiers_accept_the_wrong_answer_their_oracle_gives(built,
                                                                     tmp_path: Path) -> None:
    tasks = load_collection(built.collections[BROKEN]).tasks
    wrong_elsewhere = Counter()
    for task in tasks:
        wrong = command_of(task.root)
        assert reward_of(task.root, wrong, tmp_path / "w") == 1.0, task.name
        # With the alternative removed, the verifier is the good one: the oracle's answer
        # fails it (a mistake can coincide with the truth on some data, rarely).
        strict = tmp_path / "strict" / task.name
        shutil.copytree(task.root, strict)
        exp = json.loads((strict / "verifier" / "expected.json").read_text())
        assert exp.pop("alternatives")
        (strict / "verifier" / "expected.json").write_text(json.dumps(exp))
        wrong_elsewhere[task.frontmatter.metadata.subcategory] += (
            reward_of(strict, wrong, tmp_path / "w") == 0.0)
    per_family = built.sizes.collection_per_family
    assert set(wrong_elsewhere) == {f.name for f in SUITE_FAMILIES}
    assert min(wrong_elsewhere.values()) >= per_family // 2, wrong_elsewhere
    assert sum(wrong_elsewhere.values()) >= 0.9 * len(tasks), wrong_elsewhere
