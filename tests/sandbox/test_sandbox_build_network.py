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


DOCKER_DEFAULT_CAPS = 0x00000000A80425FB
"""The engine's default set (CHOWN, DAC_OVERRIDE, FSETID, FOWNER, MKNOD, NET_RAW, SETGID,
SETUID, SETFCAP, SETPCAP, NET_BIND_SERVICE, SYS_CHROOT, KILL, AUDIT_WRITE): a classic
build's RUN step gets these and nothing more (no SYS_ADMIN, NET_ADMIN, ...)."""


def _caps(text: str) -> int:
    return int(text.split()[-1], 16)


@pytest.mark.docker
def test_a_docker_build_step_gets_no_added_capability(tmp_path: Path) -> None:
    from posttrain_arena.sandbox.docker import DockerBackend

    ctx = write_context(tmp_path / "ctx", f"FROM {BASE}\nRUN echo {uuid.uuid4().hex} > /id && "
                        "grep CapEff /proc/self/status > /caps\n")
    backend = DockerBackend()
    session = backend.start(backend.build(ctx, timeout=300), limits=Limits())
    try:
        caps = _caps(session.exec(["cat", "/caps"]).stdout)
    finally:
        session.stop()
    assert caps & ~DOCKER_DEFAULT_CAPS == 0, hex(caps)


@pytest.mark.bwrap
def test_a_local_build_step_has_only_the_session_capabilities(tmp_path: Path) -> None:
    from posttrain_arena.sandbox.base import SESSION_CAPABILITIES
    from posttrain_arena.sandbox.local_backend import LocalBackend

    numbers = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5,
               "SETGID": 6, "SETUID": 7, "NET_BIND_SERVICE": 10}
    allowed = sum(1 << numbers[c] for c in SESSION_CAPABILITIES)
    ctx = write_context(tmp_path / "ctx", f"FROM {BASE}\nRUN echo {uuid.uuid4().hex} > /root/id"
                        " && grep CapEff /proc/self/status > /root/caps\n")
    backend = LocalBackend()
    session = backend.start(backend.build(ctx, timeout=300), limits=Limits())
    try:
        caps = _caps(session.exec(["cat", "/root/caps"]).stdout)
    finally:
        session.stop()
    assert caps & ~allowed == 0, hex(caps)
