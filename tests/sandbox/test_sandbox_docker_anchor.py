"""A docker session's PID 1 never starts a program by PATH lookup (issue 24, item 4): a
`sleep` planted on a PATH directory ahead of /bin is not what PID 1 restarts once
kill_all has taken its own."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from posttrain_arena.sandbox import Limits, get_backend
from posttrain_arena.sandbox.docker import DockerBackend
from posttrain_arena.sandbox.docker_session import DockerSession

pytestmark = pytest.mark.docker


@pytest.fixture
def session(_cache_dir: Path, context_dir: Path) -> Iterator[DockerSession]:
    backend = get_backend("docker")
    assert isinstance(backend, DockerBackend)
    image = backend.build(context_dir, timeout=300, task_name="anchor-tests")
    s = backend.start(image, limits=Limits(cpus=1, memory_mb=256, storage_mb=128))
    try:
        yield s
    finally:
        s.stop()


def test_pid_1_restarts_its_own_sleep_not_one_planted_on_path(session: DockerSession) -> None:
    marker = f"/tmp/planted-{secrets.token_hex(6)}"
    planted = session.exec(
        "mkdir -p /usr/local/bin && printf '#!/bin/sh\\ntouch %s\\nexec /bin/sleep \"$@\"\\n'"
        f" {marker} > /usr/local/bin/sleep && chmod 755 /usr/local/bin/sleep", timeout=30)
    assert planted.exit_code == 0, planted.stderr
    session.kill_all()  # takes PID 1's sleep too: PID 1 starts another
    time.sleep(0.5)
    seen = session.exec(f"test -e {marker} && echo planted-ran || echo clean", timeout=30)
    assert seen.stdout.strip() == "clean"
