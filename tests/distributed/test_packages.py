"""Packages in transit: what a node unpacks is the package the driver hashed, or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.tasks import write_task
from posttrain_arena.distributed.packages import PackageMismatch, cache_dir, pack, unpack
from posttrain_arena.task_format.package import load_task


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own node cache (the cache is keyed by checksum only)."""
    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "node-cache"))


def test_a_package_round_trips_with_its_checksum(tmp_path: Path) -> None:
    root = write_task(tmp_path, "t", word="alpha")
    (root / "environment" / "data").mkdir()
    (root / "environment" / "data" / "x.txt").write_text("payload\n")
    (root / "environment" / "link").symlink_to("data/x.txt")
    task = load_task(root)
    got = unpack(pack(task), checksum=task.checksum, name=task.name)
    assert got.checksum == task.checksum and got.name == task.name
    assert got.root != task.root and got.root.is_relative_to(cache_dir())
    assert (got.root / "environment" / "link").is_symlink()
    # Unpacked once: a second trial finds it in place.
    assert unpack(b"not a tar at all", checksum=task.checksum, name=task.name).root == got.root


def test_a_tampered_copy_on_the_node_is_refused_then_replaced(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path, "t", word="alpha"))
    blob = pack(task)
    first = unpack(blob, checksum=task.checksum, name=task.name)
    (first.root / "oracle" / "solve.sh").write_text("#!/bin/bash\necho beta > out.txt\n")
    with pytest.raises(PackageMismatch, match="hashes to"):
        unpack(blob, checksum=task.checksum, name=task.name)
    again = unpack(blob, checksum=task.checksum, name=task.name)  # unpacked afresh
    assert again.checksum == task.checksum
    assert "alpha" in (again.root / "oracle" / "solve.sh").read_text()


def test_bytes_that_are_not_the_checksum_are_refused(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path, "t", word="alpha"))
    other = load_task(write_task(tmp_path, "u", word="beta"))
    with pytest.raises(PackageMismatch):
        unpack(pack(other), checksum=task.checksum, name=task.name)


def test_an_archive_escaping_its_folder_is_refused(tmp_path: Path) -> None:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(tarfile.TarError):
        unpack(buf.getvalue(), checksum="sha256:" + "0" * 64, name="t")
    assert not (cache_dir().parent / "escaped.txt").exists()
