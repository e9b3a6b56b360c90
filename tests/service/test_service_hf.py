"""Hugging Face dataset sources against a loopback stand-in for the hub (gitserver.py:
the revision API route plus git http-backend serving the dataset repositories), never
the real hub."""

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
def hub(tmp_path: Path, arena: Arena) -> Iterator[GitHttpServer]:
    """The stand-in hub, configured as the service's endpoint (not an allowed git host:
    the endpoint setting alone lets the service fetch from it)."""
    root = tmp_path / "hub"
    root.mkdir()
    srv = GitHttpServer(root)
    arena.settings.hf_endpoint = srv.url
    yield srv
    srv.close()


def _register(arena: Arena, url: str, who: str = "author") -> Any:
    return arena.call("POST", "/api/collections/hf", who, json={"url": url})


def test_a_dataset_revision_is_resolved_fetched_and_pinned(
    arena: Arena, hub: GitHttpServer, new_collection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_the_servers_own_token")  # must never be sent
    work = new_collection(n_tasks=2)
    first = commit_all(work, "one")
    (work / "envs" / "task-team-1" / "note.txt").write_text("later\n")
    second = commit_all(work, "two")
    hub.publish(work, "datasets/org/tasks")
    resp = _register(arena, "hf://datasets/org/tasks@main")
    assert resp.status_code == 201, resp.text
    col = resp.json()
    assert col["source_kind"] == "hf" and col["commit"] == second
    assert col["source_ref"] == "main" and col["eligible_count"] == 2
    assert col["name"] == "tasks"
    pinned = _register(arena, f"hf://datasets/org/tasks@{first}")
    assert pinned.status_code == 201, pinned.text
    assert pinned.json()["commit"] == first
    assert hub.api_calls[0] == "/api/datasets/org/tasks/revision/main"
    assert set(hub.api_auth) == {None}, "the server's token went to the hub"
    page = arena.client.get(f"/arena/collections/{col['id']}").text
    assert f"{hub.url}/datasets/org/tasks/tree/{second}" in page
    assert "Hugging Face dataset org/tasks at main" in page


def test_a_folder_of_a_dataset(arena: Arena, hub: GitHttpServer, new_collection: Any,
                               tmp_path: Path) -> None:
    work = tmp_path / "mixed"
    work.mkdir()
    (work / "README.md").write_text("a dataset with a collection in a folder\n")
    new_collection(n_tasks=3).rename(work / "collection")
    commit_all(work)
    hub.publish(work, "datasets/org/mixed")
    resp = _register(arena, "hf://datasets/org/mixed@main/collection")
    assert resp.status_code == 201, resp.text
    assert resp.json()["eligible_count"] == 3 and resp.json()["name"] == "collection"
    page = arena.client.get(f"/arena/collections/{resp.json()['id']}").text
    assert "folder collection" in page and "/tree/" in page
    missing = _register(arena, "hf://datasets/org/mixed@main/nope")
    assert missing.status_code == 400


@pytest.mark.parametrize("url, says", [
    ("hf://models/org/model@main", "not an hf:// dataset"),
    ("hf://datasets/org/tasks", "not an hf:// dataset"),
    ("hf://datasets/org/tasks@main/../../etc", "not a folder"),
    ("hf://datasets/../x@main", "not an hf:// dataset"),
    ("hf://datasets/org/tasks@-x", "not an hf:// dataset"),
])
def test_malformed_hf_urls(arena: Arena, hub: GitHttpServer, url: str, says: str) -> None:
    resp = _register(arena, url)
    assert resp.status_code == 400 and says in resp.json()["detail"]
    assert hub.api_calls == []


def test_unknown_gated_and_oversized_datasets(
    arena: Arena, hub: GitHttpServer, new_collection: Any
) -> None:
    unknown = _register(arena, "hf://datasets/org/none@main")
    assert unknown.status_code == 400 and "no public dataset" in unknown.json()["detail"]
    work = new_collection(n_tasks=1)
    commit_all(work)
    hub.publish(work, "datasets/org/gated")
    (hub.root / "datasets" / "org" / "gated" / "GATED").write_text("")
    resp = _register(arena, "hf://datasets/org/gated@main")
    assert resp.status_code == 403 and "gated" in resp.json()["detail"]
    branch = _register(arena, "hf://datasets/org/gated@no-such-branch")
    assert branch.status_code == 400 and "has no revision" in branch.json()["detail"]
    big = new_collection(n_tasks=1)
    size = 10 * arena.settings.unpacked_max_bytes
    (big / "blob.bin").write_bytes(os.urandom(size))
    commit_all(big)
    hub.publish(big, "datasets/org/big")
    resp = _register(arena, "hf://datasets/org/big@main")
    assert resp.status_code == 413 and "stopped" in resp.json()["detail"]
    assert hub.sent < size / 2


def test_the_web_form_registers_a_dataset(
    arena: Arena, hub: GitHttpServer, new_collection: Any
) -> None:
    work = new_collection(n_tasks=2)
    commit = commit_all(work)
    hub.publish(work, "datasets/org/web")
    browser = arena.client
    browser.get("/signin")
    csrf = browser.cookies["arena_csrf"]
    browser.post(f"/signin?csrf={csrf}", data={"token": arena.tokens["author"]})
    page = browser.post(f"/arena/collections/hf?csrf={csrf}",
                        data={"url": "hf://datasets/org/web@main"},
                        headers={"accept": "text/html"})
    assert "registered: 2 eligible task(s)" in page.text, page.text[-1500:]
    assert f"{hub.url}/datasets/org/web/tree/{commit}" in page.text
    bad = browser.post(f"/arena/collections/hf?csrf={csrf}",
                       data={"url": "hf://datasets/org/web"}, headers={"accept": "text/html"})
    assert "The dataset was not registered" in bad.text
