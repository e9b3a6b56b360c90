"""Write the micro challenge into a work directory, deterministically from a seed.

Layout of the work directory:

    micro.json                     what was built: seed, counts, suite and collection hashes
    suite/NAME/                    the sealed held-out suite (fresh instances, suite families)
    collections/micro-relevant/    submission.yaml + envs/: the suite's families, other instances
    collections/micro-partial/     half the suite's families, half the off-topic ones
    collections/micro-broken-verifiers/  the suite's families, each verifier also accepting a
                                   plausible wrong answer that its oracle produces
    collections/micro-off-topic/   submission.yaml + envs/: the other eight families
    model/                         the tiny model (tokenizer + random-init Qwen2 weights)
    recipes/NAME.toml              one recipe per control, from recipe.template.toml
                                   (micro-relevant-seed1: micro-relevant, another runtime
                                   seed: A/A; the seeds are declared in challenge.toml)
    controls.json                  what the protocol of controls measured on this suite
                                   (evaluate.instrument), when it was measured

Every package is a real task package: task.md, environment/Dockerfile with the seed
files, verifier/verifier.py with the expected final state, oracle/solve.sh with the one
command that solves it.
"""

from __future__ import annotations

import json
import random
import shutil
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, Field

from posttrain_arena.challenges.micro.basebuild import write_tiny_model
from posttrain_arena.challenges.micro.broken import break_verifier
from posttrain_arena.challenges.micro.families import (
    HELD_OUT,
    OFFTOPIC_FAMILIES,
    SUITE_FAMILIES,
    TRAIN,
    Family,
    Instance,
    Pools,
)
from posttrain_arena.challenges.micro.protocol import declared
from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec
from posttrain_arena.evaluate.instrument import CONTROLS_FILE, read_instrument
from posttrain_arena.evaluate.suite import CLUSTER_TAG
from posttrain_arena.task_format.collection import load_collection
from posttrain_arena.task_format.domains import composition_violations
from posttrain_arena.train.leakage import LeakageDoc, LeakGate
from posttrain_arena.train.stages import Progress, StageEvent, no_progress

BASE_IMAGE = "posttrain-arena/python:bookworm"
FORMAT_VERSION = 1
RELEVANT = "micro-relevant"
RELEVANT_SEED1 = "micro-relevant-seed1"
PARTIAL = "micro-partial"
BROKEN = "micro-broken-verifiers"
OFFTOPIC = "micro-off-topic"
# The protocol of controls, in the order `arena demo --compare` runs and reports them.
CONTROLS = (RELEVANT, RELEVANT_SEED1, PARTIAL, BROKEN, OFFTOPIC)
COLLECTIONS = (RELEVANT, PARTIAL, BROKEN, OFFTOPIC)  # the ones with their own folder
# micro-partial: every other suite family and the off-topic families between them, so
# the collection still spans the eight domains.
PARTIAL_FAMILIES = SUITE_FAMILIES[0::2] + OFFTOPIC_FAMILIES[1::2]
AUTHOR = ("PostTrain Arena micro generator", "micro@posttrain-arena.invalid")


class MicroSizes(BaseModel):
    """How many instances each part of the challenge holds."""

    suite_per_family: int = Field(default=5, ge=1, description="Held-out instances per family")
    collection_per_family: int = Field(
        default=20, ge=1, le=25, description="Training instances per family in each collection"
    )


class MicroChallenge(BaseModel):
    """A built micro challenge (written as micro.json)."""

    format: int = Field(default=FORMAT_VERSION, description="Layout version of the work dir")
    seed: int = Field(description="Seed everything was generated from")
    root: str = Field(description="The work directory")
    suite: str = Field(description="Held-out suite directory")
    suite_hash: str = Field(description="Sealed content hash of the suite")
    collections: dict[str, str] = Field(description="Control name -> collection directory")
    collection_hashes: dict[str, str] = Field(description="Control name -> content hash")
    recipes: dict[str, str] = Field(description="Control name -> recipe file")
    model: str = Field(description="The tiny model's directory")
    sizes: MicroSizes = Field(description="Instances per family")
    model_spec: TinyModelSpec = Field(description="Shape of the tiny model")


# ----------------------------------------------------------------------------- packages

_VERIFIER = '''\
"""Checks the final state of the workspace against expected.json; writes the reward."""
import json
import os
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
WORK = pathlib.Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
OUT_TXT = pathlib.Path(os.environ.get("BENCHFLOW_REWARD_TEXT", "/logs/verifier/reward.txt"))
OUT_JSON = pathlib.Path(os.environ.get("BENCHFLOW_REWARD_JSON", "/logs/verifier/reward.json"))


def norm(text):
    lines = [line.rstrip() for line in text.replace("\\r\\n", "\\n").split("\\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\\n".join(lines)


def check(expect):
    problems = []
    for rel, want in expect["files"].items():
        path = WORK / rel
        if not path.is_file():
            problems.append(f"{rel} is missing")
        elif norm(path.read_text(errors="replace")) != norm(want):
            problems.append(f"{rel} does not hold the expected content")
    for rel in expect["absent"]:
        if (WORK / rel).exists():
            problems.append(f"{rel} should no longer exist")
    for rel in expect["executable"]:
        if not os.access(WORK / rel, os.X_OK):
            problems.append(f"{rel} is not executable")
    for rel in expect["dirs"]:
        if not (WORK / rel).is_dir():
            problems.append(f"{rel}/ is not a directory")
    return problems


expect = json.loads((HERE / "expected.json").read_text())
problems = check(expect)
if problems and any(not check(alt) for alt in expect.get("alternatives", [])):
    problems = []
reward = 0.0 if problems else 1.0
OUT_TXT.parent.mkdir(parents=True, exist_ok=True)
OUT_TXT.write_text(f"{reward}\\n")
OUT_JSON.write_text(json.dumps({"reward": reward, "problems": problems}))
print("\\n".join(problems) or "all checks passed")
print(f"reward: {reward}")
'''


def task_md(inst: Instance) -> str:
    """task.md of an instance: frontmatter and the prompt."""
    # The family is the suite's cluster: its five instances share a program and succeed
    # or fail together, so the interval resamples families, not tasks.
    tags = ["micro", inst.family, "shell", f"{CLUSTER_TAG}{inst.family}"]
    return (
        "---\n"
        'version: "1.0"\n'
        "metadata:\n"
        f"  author_name: {AUTHOR[0]}\n"
        f"  author_email: {AUTHOR[1]}\n"
        f"  category: {inst.domain.value}\n"
        "  difficulty: easy\n"
        f"  tags: [{', '.join(tags)}]\n"
        "  license: Apache-2.0\n"
        "  origin: original\n"
        f"  subcategory: {inst.family}\n"
        "agent:\n"
        "  timeout_sec: 120\n"
        "verifier:\n"
        "  timeout_sec: 60\n"
        "environment:\n"
        "  build_timeout_sec: 120\n"
        "  cpus: 1\n"
        "  memory_mb: 512\n"
        "  storage_mb: 64\n"
        "  allow_internet: false\n"
        "---\n\n"
        f"# {inst.title}\n\n"
        "## prompt\n\n"
        f"{inst.prompt}\n"
    )


def dockerfile(inst: Instance) -> str:
    """The environment: the base image, /root as workdir, the seed files copied in."""
    lines = [f"FROM {BASE_IMAGE}", "WORKDIR /root"]
    lines += [f"COPY {name} /root/{name}" for name in sorted(inst.files)]
    return "\n".join(lines) + "\n"


def write_package(inst: Instance, dest: Path) -> Path:
    """Write one instance as a task package at `dest` (replaced if present)."""
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "environment").mkdir(parents=True)
    (dest / "verifier").mkdir()
    (dest / "oracle").mkdir()
    (dest / "task.md").write_text(task_md(inst), encoding="utf-8")
    (dest / "environment" / "Dockerfile").write_text(dockerfile(inst), encoding="utf-8")
    for name, text in sorted(inst.files.items()):
        (dest / "environment" / name).write_text(text, encoding="utf-8")
    (dest / "verifier" / "verifier.py").write_text(_VERIFIER, encoding="utf-8")
    (dest / "verifier" / "expected.json").write_text(
        json.dumps(inst.expect.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    solve = dest / "oracle" / "solve.sh"
    solve.write_text(f"#!/bin/bash\n{inst.command}\n", encoding="utf-8")
    solve.chmod(0o755)
    return dest


# ---------------------------------------------------------------------------- instances

def generate(families: tuple[Family, ...], per_family: int, rng: random.Random,
             taken: set[str], held_out: list[Instance] | None = None, *,
             pools: Pools = TRAIN, distinct_commands: bool = False) -> list[Instance]:
    """`per_family` instances of each family whose keys are not in `taken` (updated),
    parameters drawn from `pools`.

    With `distinct_commands`, no two instances share a solution (the held-out suite:
    every task must be solved on its own). With `held_out`, an instance that the
    pipeline's leakage gate would exclude is drawn again, so that the collection loses
    no task to the gate; the gate itself still runs in every pipeline.
    """
    gate = _LeakGate(held_out) if held_out else None
    commands: set[str] = set()
    out: list[Instance] = []
    for fam in families:
        made = 0
        tries = 0
        while made < per_family:
            tries += 1
            if tries > per_family * 200:
                raise RuntimeError(f"family {fam.name} cannot make {per_family} distinct "
                                   f"instances from the {pools.name} pools; lower the count")
            inst = fam.generate(rng, pools)
            if inst.key in taken or (distinct_commands and inst.command in commands):
                continue
            if gate is not None and gate.leaks(inst):
                continue
            taken.add(inst.key)
            commands.add(inst.command)
            out.append(inst)
            made += 1
    return out


class _LeakGate:
    """The pipeline's near-duplicate test, applied to instances before they are written."""

    def __init__(self, held_out: list[Instance]) -> None:
        self.gate = LeakGate([self._doc(i) for i in held_out])

    @staticmethod
    def _doc(inst: Instance) -> LeakageDoc:
        return LeakageDoc(name=inst.name, checksum=f"key:{inst.key}", prompt=inst.prompt,
                          verifier=_VERIFIER, solution=f"#!/bin/bash\n{inst.command}\n",
                          environment=inst.files)

    def leaks(self, inst: Instance) -> bool:
        return self.gate.check(self._doc(inst)) is not None


def plan_instances(seed: int, sizes: MicroSizes) -> dict[str, list[Instance]]:
    """The instances of the suite and of both collections, all distinct from each other.

    The suite is drawn first from its own stream and from the held-out pools, so a
    collection can never change it and never shares a parameter value with it.
    """
    held: set[str] = set()
    suite = generate(SUITE_FAMILIES, sizes.suite_per_family, random.Random(f"suite:{seed}"),
                     held, pools=HELD_OUT, distinct_commands=True)

    def part(name: str, families: tuple[Family, ...]) -> list[Instance]:
        # Each collection is drawn on its own: distinct within itself and from the suite
        # (the controls are separate runs, so they may share an instance).
        return generate(families, sizes.collection_per_family, random.Random(f"{name}:{seed}"),
                        set(held), suite)

    relevant = part("relevant", SUITE_FAMILIES)
    offtopic = part("off-topic", OFFTOPIC_FAMILIES)
    partial = part("partial", PARTIAL_FAMILIES)
    broken = [break_verifier(i) for i in part("broken", SUITE_FAMILIES)]
    return {"suite": suite, RELEVANT: relevant, PARTIAL: partial, BROKEN: broken,
            OFFTOPIC: offtopic}


# ------------------------------------------------------------------------------- build

def _submission(name: str, families: tuple[Family, ...]) -> str:
    what = ", ".join(f.name for f in families)
    return (f"team_name: {name}\n"
            f"contact_email: {AUTHOR[1]}\n"
            "track: environments\n"
            f"title: Micro challenge sample collection ({name})\n"
            "license: Apache-2.0\n"
            f"description: Generated instances of the families {what}.\n")


def recipe_text(control: str, ch: MicroChallenge) -> str:
    """The micro recipe filled in for one control of a built challenge."""
    template = resources.files("posttrain_arena.challenges.micro").joinpath("recipe.template.toml")
    text = template.read_text(encoding="utf-8")
    seed = declared().aa_seed_for(ch.seed) if control == RELEVANT_SEED1 else ch.seed
    return text.format(name=control, model=json.dumps(ch.model),
                       collection=json.dumps(ch.collections[control]),
                       suite=json.dumps(ch.suite), suite_hash=json.dumps(ch.suite_hash),
                       runs=json.dumps(str(Path(ch.root) / "runs")), seed=seed)


def shipped_controls() -> Path:
    """The protocol's result shipped with the package: `arena demo --compare` on the
    declared seeds (challenge.toml), measured once and checked in like the base."""
    return Path(str(resources.files("posttrain_arena.challenges.micro")
                    .joinpath(CONTROLS_FILE)))


def place_controls(root: Path, suite_hash: str) -> Path | None:
    """Store the protocol's result with the challenge: a controls.json the protocol
    wrote here for this suite is kept, else the shipped one when it was measured on this
    very suite; any other (another seed's, a stale one) is removed. Its path, or None."""
    here = root / CONTROLS_FILE
    if read_instrument(here, suite_hash) is not None:
        return here
    if read_instrument(shipped_controls(), suite_hash) is not None:
        shutil.copyfile(shipped_controls(), here)
        return here
    here.unlink(missing_ok=True)
    return None


def build_micro(workdir: Path | str, seed: int | None = None, *,
                sizes: MicroSizes | None = None,
                model_spec: TinyModelSpec | None = None, with_model: bool = True,
                progress: Progress = no_progress, device: str = "cpu") -> MicroChallenge:
    """Generate the whole challenge into `workdir` (its generated parts are replaced),
    from `seed` (default: the protocol's declared challenge seed), with the protocol's
    controls.json when one was measured on its suite (`place_controls`);
    `progress` hears the base model's pretraining steps (stage "pretrain"), which run on
    `device` when the base is not the shipped one nor cached (pass the recipe's device
    when it is an accelerator)."""
    from posttrain_arena.evaluate.suite import load_suite

    root = Path(workdir).expanduser().resolve()
    seed = declared().seed if seed is None else seed
    sizes = sizes or MicroSizes()
    model_spec = model_spec or TinyModelSpec()  # one base for every seed (shipped.py)
    plan = plan_instances(seed, sizes)
    suite_dir = root / "suite"
    for d in (suite_dir, root / "collections", root / "recipes"):
        if d.exists():
            shutil.rmtree(d)
    for inst in plan["suite"]:
        write_package(inst, suite_dir / inst.name)
    suite = load_suite(suite_dir)
    problems = composition_violations(suite.domain_counts())
    if problems:  # the families are balanced by construction; this guards edits to them
        raise RuntimeError("micro suite breaks the composition rule: " + "; ".join(problems))
    collections: dict[str, str] = {}
    hashes: dict[str, str] = {}
    for name, families in ((RELEVANT, SUITE_FAMILIES), (PARTIAL, PARTIAL_FAMILIES),
                           (BROKEN, SUITE_FAMILIES), (OFFTOPIC, OFFTOPIC_FAMILIES)):
        cdir = root / "collections" / name
        (cdir / "envs").mkdir(parents=True)
        (cdir / "submission.yaml").write_text(_submission(name, families), encoding="utf-8")
        for inst in plan[name]:
            write_package(inst, cdir / "envs" / inst.name)
        collections[name] = str(cdir)
        hashes[name] = load_collection(cdir).content_hash
    collections[RELEVANT_SEED1], hashes[RELEVANT_SEED1] = collections[RELEVANT], hashes[RELEVANT]
    model_dir = root / "model"
    if with_model:
        if model_dir.exists():
            shutil.rmtree(model_dir)
        held_text = [t for i in plan["suite"] for t in (i.prompt, i.command)]

        def pretraining(done: int, total: int) -> None:
            progress(StageEvent(stage="pretrain", status="step", done=done, total=total,
                                message="the base model (once per machine)"))

        write_tiny_model(model_dir, model_spec, forbidden=held_text, on_step=pretraining,
                         device=device)
    ch = MicroChallenge(seed=seed, root=str(root), suite=str(suite_dir), suite_hash=suite.hash,
                        collections=collections, collection_hashes=hashes, recipes={},
                        model=str(model_dir), sizes=sizes, model_spec=model_spec)
    (root / "recipes").mkdir(parents=True)
    for name in CONTROLS:
        path = root / "recipes" / f"{name}.toml"
        path.write_text(recipe_text(name, ch), encoding="utf-8")
        ch.recipes[name] = str(path)
    place_controls(root, ch.suite_hash)
    (root / "micro.json").write_text(ch.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return ch


def load_micro(workdir: Path | str) -> MicroChallenge | None:
    """The challenge recorded in `workdir`/micro.json, or None when there is none."""
    path = Path(workdir).expanduser() / "micro.json"
    if not path.is_file():
        return None
    try:
        return MicroChallenge.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
