"""`arena worker --ray-address` killed mid-evaluation: the run is requeued and the next
worker, also a Ray driver, resumes it from the journals.

Real processes: a Ray head on loopback started here (`ray.cluster_utils.Cluster`, one
node with one sandbox slot), and two `arena worker` processes on this test's data
directory. The first is SIGKILLed while the baseline evaluation is half journaled; the
second one's watchdog requeues the run, claims it and finishes it. Trials the first
worker journaled are not run again: the finished journal holds them unchanged, first,
and one entry per trial identity.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from tests.service.conftest import CHALLENGE
from tests.train.taskkit import make_word_task
from tests.train.tinymodel import build_tiny_model

from posttrain_arena.distributed.ray_executor import SLOT_RESOURCE
from posttrain_arena.service.models import Run
from posttrain_arena.train.sources import taskset_hash

if TYPE_CHECKING:
    from tests.service.conftest import Arena

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

ARENA = [sys.executable, "-m", "posttrain_arena.cli.main"]
STORE = 100 * 1024 * 1024
HEARTBEAT_TIMEOUT = 10.0  # the second worker's watchdog: a run silent this long is lost
WAIT_SEC = 400.0  # generous: the machine is shared; only a broken worker gets here
TRAIN = {"greet": "hello", "fruit": "apple"}
HELD = {"animal": "cat", "metal": "gold", "tree": "oak"}
K = 2  # samples per held-out task: 6 baseline trials, one at a time


@pytest.fixture
def ray_head(arena_cache_dir: Path) -> Iterator[str]:
    """A one-node Ray cluster (one sandbox slot) this process does not join; its address."""
    from ray.cluster_utils import Cluster

    for attempt in range(3):  # Ray gives a node 30 s to register; a loaded box may not
        try:
            cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False,
                "node_ip_address": "127.0.0.1", "resources": {SLOT_RESOURCE: 1}})
            break
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == 2:
                raise
    try:
        cluster.wait_for_nodes()
        assert cluster.address.startswith("127.0.0.1:"), cluster.address  # loopback only
        yield cluster.address
    finally:
        cluster.shutdown()


def _recipe(tmp: Path) -> tuple[Path, Path]:
    """A collection and a recipe whose pipeline evaluates through the model agent (no SFT,
    no GRPO: the baseline and final evaluations and the oracle teacher are the trials)."""
    model = build_tiny_model(tmp / "model")
    col, held = tmp / "collection", tmp / "suite"
    (col / "envs").mkdir(parents=True)
    (col / "submission.yaml").write_text(
        "team_name: tests\ncontact_email: t@example.org\ntrack: environments\n")
    for name, word in TRAIN.items():
        make_word_task(col / "envs" / name, word=word, prompt=f"Write {word} to answer.txt.")
    for name, word in HELD.items():
        make_word_task(held / name, word=word, prompt=f"Write {word} to answer.txt.")
    recipe = tmp / "recipe.toml"
    recipe.write_text(f"""\
name = "ray-worker-test"
[model]
id = "{model}"
[train]
collection = "{col}"
[eval]
suite = "{held}"
sha256 = "{taskset_hash(held)}"
[teacher]
kind = "oracle"
[sft]
enabled = false
[grpo]
enabled = false
[agent]
max_turns = 2
max_new_tokens = 8
timeout_sec = 60
[runtime]
sandbox = "local"
concurrency = 1
k = {K}
seed = 3
device = "cpu"
[output]
dir = "{tmp / 'runs'}"
""")
    return col, recipe


def _env(arena: Arena) -> dict[str, str]:
    env = {**os.environ, "ARENA_DATA_DIR": str(arena.settings.data_dir),
           "ARENA_HEARTBEAT_INTERVAL_SEC": "0.5",
           "ARENA_HEARTBEAT_TIMEOUT_SEC": str(HEARTBEAT_TIMEOUT),
           # Ray turns a loopback address into this machine's outward IP before it
           # connects (so a head bound to 127.0.0.1 is unreachable) unless told this is
           # a one-machine cluster, which is all this variable changes (ray 2.60).
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    if arena.settings.database_url:
        env["ARENA_DATABASE_URL"] = arena.settings.database_url
    return env


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def _run(arena: Arena, run_id: int) -> dict[str, Any]:
    with arena.db.read() as s:
        run = s.get(Run, run_id)
        assert run is not None
        return {"state": run.state, "attempts": run.attempts, "reason": run.detail,
                "stages_done": list(run.stages_done), "stage": run.stage}


def test_a_killed_ray_driver_worker_is_resumed_from_the_journals(
        arena: Arena, ray_head: str, tmp_path: Path) -> None:
    col, recipe = _recipe(tmp_path)
    resp = arena.call("POST", "/api/challenges", "admin", json={
        **CHALLENGE, "recipe": str(recipe), "suite_size": len(HELD),
        "suite_hash": taskset_hash(tmp_path / "suite"),
        "suite_domain_counts": {"software-engineering": len(HELD)}})
    assert resp.status_code == 201, resp.text
    upload = arena.upload(col)
    assert upload.status_code == 201, upload.text
    run = arena.call("POST", "/api/runs", "author",
                     json={"challenge": "micro", "collection_id": upload.json()["id"]})
    assert run.status_code == 201, run.text
    run_id = int(run.json()["id"])
    stages = arena.settings.runs_dir / str(run_id) / "pipeline" / "stages"
    partial = stages / "baseline.partial" / "journal.jsonl"
    env = _env(arena)
    worker = [*ARENA, "worker", "--ray-address", ray_head]
    log1 = (tmp_path / "worker1.log").open("w")
    first = subprocess.Popen(worker, env=env, stdout=log1, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + WAIT_SEC
        while len(_lines(partial)) < 2 and first.poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        assert first.poll() is None and len(_lines(partial)) >= 2, (
            sorted(str(p.relative_to(stages.parent)) for p in stages.rglob("*"))
            if stages.is_dir() else "no stages",
            (tmp_path / "worker1.log").read_text()[-3000:])
        first.send_signal(signal.SIGKILL)  # mid-stage: no clean-up, no last words
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
        log1.close()
    before = _lines(partial)
    assert 2 <= len(before) < len(HELD) * K, before  # killed mid-evaluation
    killed = _run(arena, run_id)
    assert killed["state"] == "running" and killed["stage"].startswith("pipeline"), killed

    time.sleep(HEARTBEAT_TIMEOUT + 1)  # the dead worker's heartbeats stopped this long ago
    second = subprocess.run([*worker, "--once"], env=env, capture_output=True, text=True,
                            timeout=WAIT_SEC)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "requeued" in second.stderr  # the second worker's watchdog took the run back

    done = _run(arena, run_id)
    assert done["state"] == "scored", (done, second.stderr[-3000:])
    assert done["attempts"] == 2
    journal = _lines(stages / "baseline" / "journal.jsonl")
    assert journal[:len(before)] == before  # what was journaled stayed, untouched
    ids = Counter(json.loads(line)["trial_id"] for line in journal)
    assert len(ids) == len(HELD) * K and set(ids.values()) == {1}  # none ran twice
    score = json.loads((arena.settings.runs_dir / str(run_id) / "score.json").read_text())
    assert score["base"]["tasks"] == len(HELD)
    assert score["provenance"]["sandbox_backend"] == "local"
