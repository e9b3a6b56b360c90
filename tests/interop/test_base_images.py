"""Base images that cannot be pulled (issue 25, item 5), and what `arena task run` prints
when a phase fails (item 7)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from posttrain_arena.cli.main import app
from posttrain_arena.sandbox.base import BuildError
from posttrain_arena.sandbox.imagemap import (
    IMAGE_MAP_ENV,
    MissingBaseImage,
    apply_image_map,
    ensure_base_images,
    load_image_map,
)
from posttrain_arena.task_format.checks import check_task

from .real_shapes import write_tb2_task

# An image name no registry serves, as a task's own prebuilt image is for an offline host.
NEVER_PULLED = "arena-tests/never-published:20251031"


def test_check_warns_on_every_base_image_it_cannot_build(tmp_path: Path) -> None:
    root = write_tb2_task(tmp_path / "t", files={
        "environment/Dockerfile": "FROM ubuntu:24.04 AS build\nRUN true\n"
                                  "FROM build\nFROM posttrain-arena/python:bookworm\n"})
    report = check_task(root)
    assert report.ok
    [warn] = [f for f in report.warnings if f.code == "base-image"]
    # only the registry image: not the stage named `build`, not the one bootstrap builds
    assert "ubuntu:24.04" in warn.message and warn.line == 1
    assert "docker load" in warn.message and "image map" in warn.message


def test_image_map_renames_from_lines_only(tmp_path: Path) -> None:
    text = "# FROM ubuntu:24.04 in a comment\nFROM --platform=linux/amd64 ubuntu:24.04 AS b\n" \
           "RUN echo ubuntu:24.04\nfrom python:3.13-slim\n"
    mapped = apply_image_map(text, {"ubuntu:24.04": "local/u:1", "python:3.13-slim": "p:2"})
    assert mapped == ("# FROM ubuntu:24.04 in a comment\nFROM --platform=linux/amd64 "
                      "local/u:1 AS b\nRUN echo ubuntu:24.04\nfrom p:2\n")
    path = tmp_path / "map.toml"
    path.write_text('"ubuntu:24.04" = "local/u:1"\n')
    assert load_image_map(path) == {"ubuntu:24.04": "local/u:1"}
    path.write_text('"ubuntu:24.04" = 3\n')
    with pytest.raises(BuildError, match="must map a name to a name"):
        load_image_map(path)


def test_missing_image_names_every_way_forward(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setenv(IMAGE_MAP_ENV, str(tmp_path / "map.toml"))
    with pytest.raises(MissingBaseImage) as info:
        ensure_base_images(f"FROM {NEVER_PULLED}\n", "env/Dockerfile", lambda _: False,
                           lambda _: "dial tcp: lookup registry-1.docker.io: no such host")
    text = str(info.value)
    assert text.startswith(f"env/Dockerfile:1: FROM {NEVER_PULLED}")
    for way in ("no such host", f"docker pull {NEVER_PULLED}", "docker load",
                "registry-mirrors", str(tmp_path / "map.toml"), "--image-map",
                "arena images bootstrap"):
        assert way in text, way
    pulled: list[str] = []
    ensure_base_images(f"FROM {NEVER_PULLED}\n", "x", lambda _: False,
                       lambda name: pulled.append(name))  # type: ignore[func-returns-value]
    assert pulled == [NEVER_PULLED]  # an engine that can pull it is asked to


@pytest.mark.docker
def test_docker_build_without_the_image_fails_fast_then_the_map_builds_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from posttrain_arena.sandbox.docker import DockerBackend

    context = tmp_path / "env"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {NEVER_PULLED}\nWORKDIR /app\n")
    monkeypatch.setenv(IMAGE_MAP_ENV, str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    backend = DockerBackend()
    t0 = time.monotonic()
    with pytest.raises(MissingBaseImage, match=NEVER_PULLED):
        backend.build(context, timeout=120)
    elapsed = time.monotonic() - t0
    print(f"missing base image reported in {elapsed:.2f} s")  # figure, not an assert
    (tmp_path / "map.toml").write_text(f'"{NEVER_PULLED}" = "debian:bookworm-slim"\n')
    monkeypatch.setenv(IMAGE_MAP_ENV, str(tmp_path / "map.toml"))
    image = backend.build(context, timeout=300)
    assert image.workdir == "/app"
    assert (context / "Dockerfile").read_text().startswith(f"FROM {NEVER_PULLED}")


@pytest.mark.docker
def test_a_prebuilt_image_alone_is_used_or_named_with_the_fix(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from posttrain_arena.sandbox.docker import DockerBackend
    from posttrain_arena.sandbox.imagemap import build_context
    from posttrain_arena.task_format.package import load_task

    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "cache"))
    task = load_task(write_tb2_task(tmp_path / "t", dockerfile=False))
    context = build_context(task.environment_dir, task.prebuilt_image)
    assert (context / "Dockerfile").read_text() == "FROM alexgshaw/t:20251031\n"
    monkeypatch.setenv(IMAGE_MAP_ENV, str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    with pytest.raises(MissingBaseImage, match="alexgshaw/t:20251031"):
        DockerBackend().build(context, timeout=60)
    (tmp_path / "map.toml").write_text('"alexgshaw/t:20251031" = "debian:bookworm-slim"\n')
    monkeypatch.setenv(IMAGE_MAP_ENV, str(tmp_path / "map.toml"))
    assert DockerBackend().build(context, timeout=300).tag.startswith("arena-env:")


_FAILING_TEST_SH = """\
#!/bin/bash
echo checking the sum
python3 -c "import numpy_that_is_not_here"
if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


@pytest.mark.bwrap
def test_run_prints_the_failing_phase_and_keeps_records_per_backend(tmp_path: Path) -> None:
    root = write_tb2_task(tmp_path / "add", files={"tests/test.sh": _FAILING_TEST_SH})
    records = tmp_path / "records"
    result = CliRunner().invoke(app, ["task", "run", str(root), "--backend", "local",
                                      "--records", str(records)])
    assert result.exit_code == 1, result.output
    assert "ModuleNotFoundError: No module named 'numpy_that_is_not_here'" in result.output
    assert "verifier stderr" in result.output
    [record] = list((records / "local").iterdir())
    assert f"transcript: {record / 'transcript.json'}" in result.output


@pytest.mark.docker
def test_images_map_shows_each_entry_and_whether_the_engine_has_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "map.toml"
    path.write_text(f'"ubuntu:24.04" = "debian:bookworm-slim"\n"{NEVER_PULLED}" = "no/such:1"\n')
    monkeypatch.setenv(IMAGE_MAP_ENV, str(path))
    result = CliRunner().invoke(app, ["images", "map"])
    assert result.exit_code == 1, result.output  # one target is missing
    assert f"image map: {path}" in result.output
    assert "ubuntu:24.04 -> debian:bookworm-slim: present" in result.output
    assert f"{NEVER_PULLED} -> no/such:1: MISSING" in result.output
