"""Docker-only behaviour: content-hashed builds under a lock, labels, the orphan reaper."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from posttrain_arena.sandbox import BuildError, Limits, get_backend
from posttrain_arena.sandbox.docker import DockerBackend
from posttrain_arena.sandbox.owner import pid_namespace
from posttrain_arena.sandbox.reaper import reap_docker

from .conftest import BASE, write_context

pytestmark = pytest.mark.docker


@pytest.fixture
def docker_backend(_cache_dir: Path) -> Iterator[DockerBackend]:
    be = get_backend("docker")
    assert isinstance(be, DockerBackend)
    yield be


@pytest.fixture
def fresh_context(tmp_path: Path, docker_backend: DockerBackend) -> Iterator[Path]:
    """A context no one has built before; its image is removed afterwards."""
    ctx = write_context(
        tmp_path / "ctx", f"FROM {BASE}\nCOPY nonce /nonce\n", {"nonce": uuid.uuid4().hex}
    )
    yield ctx
    ref = docker_backend.build(ctx, timeout=120)
    docker_backend.client.images.remove(ref.tag, force=True)


def test_concurrent_builds_of_one_context_make_one_image(
    docker_backend: DockerBackend, fresh_context: Path
) -> None:
    refs = []
    threads = [
        threading.Thread(
            target=lambda: refs.append(docker_backend.build(fresh_context, timeout=120))
        )
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(refs) == 3 and len({r.image_id for r in refs}) == 1
    assert refs[0].tag.startswith("arena-env:")
    # a second backend (as in another process) reuses the tag instead of building
    again = DockerBackend().build(fresh_context, timeout=120)
    assert again.image_id == refs[0].image_id
    image = docker_backend.client.images.get(refs[0].tag)
    assert image.labels.get("posttrain-arena") == "1"


def test_changed_context_gets_a_new_tag(docker_backend: DockerBackend, fresh_context: Path) -> None:
    first = docker_backend.build(fresh_context, timeout=120)
    (fresh_context / "extra").write_text("changed")
    second = docker_backend.build(fresh_context, timeout=120)
    assert first.tag != second.tag
    docker_backend.client.images.remove(second.tag, force=True)
    (fresh_context / "extra").unlink()


def test_failed_build_is_a_build_error(docker_backend: DockerBackend, tmp_path: Path) -> None:
    ctx = write_context(tmp_path / "bad", f"FROM {BASE}\nRUN exit 7\n")
    with pytest.raises(BuildError, match="Dockerfile"):
        docker_backend.build(ctx, timeout=120)


def test_container_is_labelled_limited_and_removed(
    docker_backend: DockerBackend, context_dir: Path
) -> None:
    ref = docker_backend.build(context_dir, timeout=300)
    s = docker_backend.start(
        ref, limits=Limits(cpus=0.5, memory_mb=300, pids_limit=77), labels={"trial": "t-1"}
    )
    api = docker_backend.client.api
    attrs = api.inspect_container(s.container)  # type: ignore[attr-defined]
    assert attrs["Config"]["Labels"]["posttrain-arena"] == "1"
    assert attrs["Config"]["Labels"]["trial"] == "t-1"
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["NanoCpus"] == 500_000_000
    assert host["Memory"] == 300 << 20
    assert host["PidsLimit"] == 77
    s.stop()
    assert not api.containers(all=True, filters={"id": s.container})  # type: ignore[attr-defined]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_reaper_removes_orphans_of_dead_owners(
    docker_backend: DockerBackend, context_dir: Path
) -> None:
    ref = docker_backend.build(context_dir, timeout=300)
    api = docker_backend.client.api
    host = f"{socket.gethostname()}:{pid_namespace()}"
    nonce = {"posttrain-arena.test-reaper": uuid.uuid4().hex}
    made = {}
    for who, owner in (("dead", f"{host}:{_dead_pid()}"), ("alive", f"{host}:{_live_pid()}")):
        made[who] = api.create_container(
            ref.tag,
            command=["sleep", "600"],
            labels={"posttrain-arena": "1", "posttrain-arena.owner": owner, **nonce},
            host_config=api.create_host_config(network_mode="none"),
        )["Id"]
        api.start(made[who])
    try:
        reap_docker(max_age_sec=3600, client=docker_backend.client, match=nonce)
        remaining = {c["Id"] for c in api.containers(all=True)}
        assert made["dead"] not in remaining
        assert made["alive"] in remaining
        # older than the limit: removed whoever owns it (only ours are matched here)
        reap_docker(max_age_sec=-1, client=docker_backend.client, match=nonce)
        remaining = {c["Id"] for c in api.containers(all=True)}
        assert made["alive"] not in remaining
    finally:
        for cid in made.values():
            with contextlib.suppress(Exception):
                api.remove_container(cid, force=True)


def _live_pid() -> int:
    import os

    return os.getpid()
