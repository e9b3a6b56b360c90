"""Git sources: what a participant may make the server fetch, and the bounds that hold
while fetching. The git server is real (git http-backend on loopback, gitserver.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from tests.service.gitserver import GitHttpServer, commit_all

if TYPE_CHECKING:
    from tests.service.conftest import Arena

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def database_url() -> None:
    """Fetching does not depend on the database: these run on SQLite only."""
    return None


@pytest.fixture
def server(tmp_path: Path, arena: Arena) -> Iterator[GitHttpServer]:
    """A loopback git server that the operator allows over plain http."""
    root = tmp_path / "served"
    root.mkdir()
    srv = GitHttpServer(root)
    arena.settings.git_http_hosts = [srv.host]
    yield srv
    srv.close()


def _register(arena: Arena, url: str, ref: str = "main", who: str = "author") -> Any:
    return arena.call("POST", "/api/collections/git", who, json={"url": url, "ref": ref})


def test_participant_registers_from_an_allowed_http_host_pinned_to_the_commit(
    arena: Arena, server: GitHttpServer, new_collection: Any
) -> None:
    work = new_collection(n_tasks=2)
    first = commit_all(work, "one")
    (work / "envs" / "task-team-0" / "extra.txt").write_text("second commit\n")
    second = commit_all(work, "two")
    url = server.publish(work, "col.git")
    resp = _register(arena, url)
    assert resp.status_code == 201, resp.text
    col = resp.json()
    assert col["commit"] == second and col["source_ref"] == "main"
    assert col["source_url"] == url and col["eligible_count"] == 2
    old = _register(arena, url, first)
    assert old.status_code == 201, old.text
    assert old.json()["commit"] == first and old.json()["content_hash"] != col["content_hash"]
    bad = _register(arena, url, "no-such-branch")
    assert bad.status_code == 400 and "git fetch failed" in bad.json()["detail"]


@pytest.mark.parametrize("url, status, says", [
    ("file:///etc", 403, "editors"),
    ("/srv/sealed-suite", 403, "editors"),
    ("ssh://git@example.org/repo.git", 400, "https"),
    ("git+ssh://example.org/repo.git", 400, "https"),
    ("git@github.com:org/repo.git", 400, "scp-style"),
    ("example.org:repo.git", 400, "scp-style"),
    ("ext::sh -c touch% /tmp/pwned", 400, "remote helper"),
    ("fd::17", 400, "remote helper"),
    ("git://example.org/repo.git", 400, "https"),
    ("--upload-pack=touch /tmp/x", 400, "not a git URL"),
    ("https://user:secret@example.org/repo.git", 400, "password"),
    ("https://127.0.0.1/repo.git", 403, "private or local"),
    ("https://localhost/repo.git", 403, "private or local"),
    ("https://169.254.169.254/latest/meta-data", 403, "private or local"),
    ("https://[::1]/repo.git", 403, "private or local"),
    ("http://example.org/repo.git", 403, "plain http"),
])
def test_participant_urls_that_would_reach_the_server_are_refused(
    arena: Arena, url: str, status: int, says: str
) -> None:
    resp = _register(arena, url)
    assert resp.status_code == status, resp.text
    assert says in resp.json()["detail"]
    assert list(arena.settings.collections_dir.iterdir()) == []


def test_an_operator_host_list_narrows_https(arena: Arena) -> None:
    arena.settings.git_https_hosts = ["git.example.org"]
    resp = _register(arena, "https://github.com/org/repo.git")
    assert resp.status_code == 403 and "git.example.org" in resp.json()["detail"]


def test_editors_may_fetch_from_the_server_disk(
    arena: Arena, tmp_path: Path, new_collection: Any
) -> None:
    work = new_collection(n_tasks=1)
    commit = commit_all(work)
    for url in (f"file://{work}", str(work)):
        assert _register(arena, url, who="author").status_code == 403
        resp = _register(arena, url, who="editor")
        assert resp.status_code == 201, resp.text
        assert resp.json()["commit"] == commit
    assert _register(arena, "relative/path", who="editor").status_code == 400


def test_git_uses_no_credentials_no_helper_and_no_prompt(
    arena: Arena, server: GitHttpServer, new_collection: Any, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A private repository answers 401: git must neither ask the server's credential
    helpers (here one that would leave a mark) nor wait for a terminal prompt."""
    marker = tmp_path / "helper-ran"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        f"[credential]\n\thelper = \"!f() {{ touch {marker}; echo username=u; "
        f"echo password=p; }}; f\"\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    work = new_collection(n_tasks=1)
    commit_all(work)
    url = server.publish(work, "private.git")
    (server.root / "private.git" / "PRIVATE").write_text("")
    resp = _register(arena, url)
    assert resp.status_code == 400, resp.text
    assert not marker.exists(), "the server's credential helper was asked"


def test_links_and_submodules_are_refused(
    arena: Arena, server: GitHttpServer, new_collection: Any
) -> None:
    work = new_collection(n_tasks=1)
    (work / "envs" / "sneaky").symlink_to("/etc")
    commit_all(work)
    resp = _register(arena, server.publish(work, "links.git"))
    assert resp.status_code == 400 and "link" in resp.json()["detail"]


def test_a_pack_over_the_byte_bound_is_cut_off_while_fetching(
    arena: Arena, server: GitHttpServer, new_collection: Any
) -> None:
    work = new_collection(n_tasks=1)
    size = 10 * arena.settings.unpacked_max_bytes  # incompressible: the pack is as large
    (work / "blob.bin").write_bytes(os.urandom(size))
    commit_all(work)
    url = server.publish(work, "big.git")
    resp = _register(arena, url)
    assert resp.status_code == 413, resp.text
    assert "stopped" in resp.json()["detail"]
    assert server.sent < size / 2, f"the server sent {server.sent} of {size} bytes"


def test_a_pack_with_too_many_objects_is_stopped_before_it_is_received(
    arena: Arena, server: GitHttpServer, new_collection: Any
) -> None:
    work = new_collection(n_tasks=1)
    many = work / "many"
    many.mkdir()
    for i in range(2 * arena.settings.max_files + 5):
        (many / f"f{i}").write_text(f"{i}\n")
    commit_all(work)
    resp = _register(arena, server.publish(work, "many.git"))
    assert resp.status_code == 413, resp.text
    assert "objects" in resp.json()["detail"] and "stopped" in resp.json()["detail"]


def test_too_many_files_for_the_tree_bound(
    arena: Arena, server: GitHttpServer, new_collection: Any
) -> None:
    work = new_collection(n_tasks=1)
    many = work / "many"
    many.mkdir()
    for i in range(arena.settings.max_files + 1):
        (many / f"f{i}").write_text(f"{i}\n")
    commit_all(work)
    resp = _register(arena, server.publish(work, "files.git"))
    assert resp.status_code == 413 and "files" in resp.json()["detail"]


def test_git_lfs_pointers_are_refused(
    arena: Arena, server: GitHttpServer, new_collection: Any
) -> None:
    work = new_collection(n_tasks=1)
    (work / "data.parquet").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:" + "a" * 64 + "\nsize 9\n")
    commit_all(work)
    resp = _register(arena, server.publish(work, "lfs.git"))
    assert resp.status_code == 400 and "LFS" in resp.json()["detail"]


def test_git_itself_refuses_other_protocols_for_an_https_source(
    tmp_path: Path, new_collection: Any
) -> None:
    """Defence in depth: were a file:// URL to get past the URL policy labelled as an
    https source, git runs with protocol.file.allow=never and refuses it."""
    from posttrain_arena.service.errors import BadRequest
    from posttrain_arena.service.gitsource import fetch_git
    from posttrain_arena.service.sourceurl import Remote

    work = new_collection(n_tasks=1)
    commit_all(work)
    for url in (f"file://{work}", str(work)):
        with pytest.raises(BadRequest, match="git fetch failed"):
            fetch_git(Remote(url=url, protocol="https"), "main", tmp_path / "out", 10**7,
                      100, 60)
    root, _ = fetch_git(Remote(url=f"file://{work}", protocol="file"), "main",
                        tmp_path / "ok", 10**7, 100, 60)
    assert (root / "submission.yaml").is_file()
