"""Image builds of contributed packages get no network unless the operator allows it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from posttrain_arena.sandbox import Limits
from posttrain_arena.sandbox.base import PrerequisiteError
from posttrain_arena.sandbox.docker import BUILD_NETWORK_ENV, build_network_mode

from .conftest import BASE, write_context


def test_the_build_network_is_none_unless_the_operator_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BUILD_NETWORK_ENV, raising=False)
    assert build_network_mode() == "none"
    monkeypatch.setenv(BUILD_NETWORK_ENV, "default")
    assert build_network_mode() == "default"
    monkeypatch.setenv(BUILD_NETWORK_ENV, "host")  # never the host's own network
    with pytest.raises(PrerequisiteError, match="none"):
        build_network_mode()


@pytest.mark.docker
def test_a_build_step_sees_no_network_interface_but_loopback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from posttrain_arena.sandbox.docker import DockerBackend

    monkeypatch.delenv(BUILD_NETWORK_ENV, raising=False)
    # The listing is what the RUN step saw; a unique line makes a new image every time.
    ctx = write_context(tmp_path / "ctx", f"FROM {BASE}\nRUN echo {uuid.uuid4().hex} > /id && "
                        "ls /sys/class/net > /nets && grep -c . /proc/net/route > /routes "
                        "|| true\n")
    backend = DockerBackend()
    ref = backend.build(ctx, timeout=300)
    session = backend.start(ref, limits=Limits())
    try:
        assert session.exec(["cat", "/nets"]).stdout.split() == ["lo"]
    finally:
        session.stop()
