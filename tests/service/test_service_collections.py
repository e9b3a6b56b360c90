"""Registering collections: archives (good and hostile) and server paths; git sources are
in test_service_sources.py."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.service.conftest import Arena


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _post(arena: Arena, data: bytes, filename: str = "c.tar.gz"):  # type: ignore[no-untyped-def]
    return arena.call(
        "POST", "/api/collections/upload", "author", content=data, params={"filename": filename}
    )


def test_upload_registers_checks_and_pins(
    arena: Arena, tmp_path: Path, new_collection: Any
) -> None:
    resp = arena.upload(new_collection(n_tasks=3))
    assert resp.status_code == 201, resp.text
    col = resp.json()
    assert col["task_count"] == 3 and col["eligible_count"] == 3
    assert col["error_count"] == 0 and col["content_hash"].startswith("sha256:")
    assert sum(col["domain_counts"].values()) == 3
    assert col["owner_id"] == arena.ids["author"]
    stored = Path(arena.settings.collections_dir / str(col["id"]))
    assert (stored / "submission.yaml").is_file()
    listed = arena.call("GET", "/api/collections?owner=me", "author").json()
    assert [c["id"] for c in listed] == [col["id"]]


def test_upload_as_multipart_form(arena: Arena, tmp_path: Path, new_collection: Any) -> None:
    from posttrain_arena.service.client import pack_dir

    data = pack_dir(new_collection())
    resp = arena.call(
        "POST",
        "/api/collections/upload",
        "author",
        files={"file": ("form.tar.gz", data, "application/gzip")},
        data={"name": "From a form"},
    )
    assert resp.status_code == 201, resp.text
    assert resp.json()["name"] == "From a form"


def test_zip_upload_and_findings_for_a_broken_task(
    arena: Arena, tmp_path: Path, new_collection: Any
) -> None:
    root = new_collection(n_tasks=2)
    (root / "envs" / "task-team-1" / "task.md").write_text("no frontmatter\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(root).as_posix())
    resp = _post(arena, buf.getvalue(), "c.zip")
    assert resp.status_code == 201, resp.text
    col = resp.json()
    assert col["task_count"] == 2 and col["eligible_count"] == 1 and col["error_count"] >= 1
    assert any("task-team-1/task.md" in f["path"] for f in col["findings"])


@pytest.mark.parametrize("name", ["../evil.txt", "/etc/evil.txt", "a/../../evil.txt"])
def test_path_traversal_is_refused(arena: Arena, name: str) -> None:
    resp = _post(arena, _tar([(tarfile.TarInfo(name), b"x")]))
    assert resp.status_code == 400
    assert "outside" in resp.json()["detail"] or "absolute" in resp.json()["detail"]
    assert not (arena.settings.data_dir.parent / "evil.txt").exists()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_links_in_archives_are_refused(arena: Arena, kind: bytes) -> None:
    link = tarfile.TarInfo("col/envs/secret")
    link.type = kind
    link.linkname = "/etc/passwd"
    resp = _post(arena, _tar([(tarfile.TarInfo("col/submission.yaml"), b"a: 1\n"), (link, None)]))
    assert resp.status_code == 400
    assert "link" in resp.json()["detail"]


def test_symlink_in_zip_is_refused(arena: Arena) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo("envs/link")
        info.external_attr = 0o120777 << 16
        zf.writestr(info, "/etc/passwd")
    resp = _post(arena, buf.getvalue(), "c.zip")
    assert resp.status_code == 400 and "link" in resp.json()["detail"]


def test_oversized_upload_and_unpacked_bomb(arena: Arena) -> None:
    big = bytes(arena.settings.upload_max_bytes + 1)
    resp = _post(arena, big)
    assert resp.status_code == 413
    # Small compressed, large unpacked: counted while reading, refused.
    bomb = _tar([(tarfile.TarInfo("col/big.bin"), bytes(arena.settings.unpacked_max_bytes + 10))])
    assert len(bomb) < arena.settings.upload_max_bytes
    resp = _post(arena, bomb)
    assert resp.status_code == 413 and "bytes" in resp.json()["detail"]


def _dir(name: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info, None


def test_folders_count_against_the_file_limit(arena: Arena) -> None:
    """Empty folders cost inodes too: listed ones, and those a member's path implies."""
    n = arena.settings.max_files + 5
    listed = _tar([_dir(f"col/d{i}") for i in range(n)])
    resp = _post(arena, listed)
    assert resp.status_code == 413 and "files and folders" in resp.json()["detail"]
    deep = "/".join(f"d{i}" for i in range(n))
    implied = _tar([(tarfile.TarInfo(f"col/{deep}/x"), b"x")])
    resp = _post(arena, implied)
    assert resp.status_code == 413 and "files and folders" in resp.json()["detail"]
    assert not any(arena.settings.collections_dir.glob(".staging-*"))  # nothing left behind


@pytest.mark.parametrize(
    "data", [b"not an archive at all", b"PK\x03\x04broken zip", b"\x1f\x8b\x08\x00garbage", b""]
)
def test_malformed_archives_are_400(arena: Arena, data: bytes) -> None:
    resp = _post(arena, data)
    assert resp.status_code == 400, resp.text
    assert resp.json()["detail"]
    leftovers = [p for p in arena.settings.collections_dir.iterdir()]
    assert leftovers == []


def test_server_path_needs_an_editor_or_an_allowed_root(
    arena: Arena, tmp_path: Path, new_collection: Any
) -> None:
    root = new_collection()
    body = {"path": str(root)}
    assert arena.call("POST", "/api/collections/path", "author", json=body).status_code == 403
    resp = arena.call("POST", "/api/collections/path", "editor", json=body)
    assert resp.status_code == 201, resp.text
    assert resp.json()["source_kind"] == "path" and resp.json()["eligible_count"] == 2
    missing = arena.call(
        "POST", "/api/collections/path", "editor", json={"path": str(tmp_path / "nope")}
    )
    assert missing.status_code == 400
