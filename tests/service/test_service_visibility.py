"""Who is told what about budgets and near-duplicates: a quota's figures go to its user
(or its team's members) and to organizers, never to anonymous readers; a collection's
near-duplicate standing goes to its owner and editors, never to anyone else."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from .conftest import Arena, make_collection


def _quota(arena: Arena, kind: str, name: str, cap: float) -> None:
    resp = arena.call("PUT", "/api/budget/quotas", "admin",
                      json={"kind": kind, "name": name, "cap": cap})
    assert resp.status_code == 200, resp.text


def test_the_budget_shows_each_caller_their_own_quota_and_use(
    arena: Arena, challenge: dict[str, Any], new_collection: Any
) -> None:
    allowance = challenge["allowance"]
    arena.add_user("mate", "participant")
    for who in ("other", "mate"):
        assert arena.call("PATCH", f"/api/users/{who}", "admin",
                          json={"team": "red"}).status_code == 200
    _quota(arena, "user", "author", 35)
    _quota(arena, "team", "red", 45)
    for who in ("author", "mate"):
        col = arena.upload(new_collection(team=who), who=who).json()["id"]
        assert arena.call("POST", "/api/runs", who,
                          json={"challenge": "micro", "collection_id": col}).status_code == 201

    def budget(who: str | None) -> dict[str, Any]:
        resp = arena.call("GET", "/api/budget", who)
        assert resp.status_code == 200
        return dict(resp.json())

    anonymous = budget(None)
    # the global figures are public; nobody's quota or use is
    assert anonymous["reserved"] == 2 * allowance and anonymous["left"] == 100 - 2 * allowance
    assert anonymous["quotas"] == [] and anonymous["you"] is None

    author = budget("author")
    assert author["cap"] == anonymous["cap"] and author["reserved"] == anonymous["reserved"]
    assert author["quotas"] == [{"kind": "user", "name": "author", "cap": 35.0,
                                 "used": allowance, "left": 35.0 - allowance}]
    assert author["you"] == {"user": "author", "used": allowance, "team": None,
                             "team_used": None}

    # a team member sees the team's quota and the team's use (the teammate's run), but no
    # other user's quota
    other = budget("other")
    assert other["quotas"] == [{"kind": "team", "name": "red", "cap": 45.0,
                                "used": allowance, "left": 45.0 - allowance}]
    assert other["you"] == {"user": "other", "used": 0.0, "team": "red",
                            "team_used": allowance}

    # organizers see every quota
    for who in ("editor", "admin"):
        seen = {(q["kind"], q["name"]): q["used"] for q in budget(who)["quotas"]}
        assert seen == {("user", "author"): allowance, ("team", "red"): allowance}


def _variant(original: Path, dest: Path) -> Path:
    shutil.copytree(original, dest)
    for task_md in sorted(dest.glob("envs/*/task.md")):
        task_md.write_text(task_md.read_text() + "\n<!-- mine now -->\n")
    return dest


def test_a_held_copy_is_told_to_its_owner_and_editors_only(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    original = make_collection(tmp_path / "original", n_tasks=3, team="victim")
    first = arena.call("POST", "/api/collections/upload", "author",
                       content=_pack(original),
                       params={"filename": "x.tar.gz", "name": "victim-private-v1"}).json()
    copy = arena.upload(_variant(original, tmp_path / "copy"), who="other").json()

    # the owner of the copy learns it is held, what it matched and how it is released
    mine = arena.call("GET", f"/api/collections/{copy['id']}", "other").json()
    dup = mine["duplicate"]
    assert dup["state"] == "held" and dup["near_duplicate_of"] == first["id"]
    assert dup["family_id"] == copy["id"] and dup["similarity"] == 1.0
    assert dup["clear_command"] == f"arena admin clear-duplicate {copy['id']}"
    assert f"matches collection {first['id']}" in dup["reason"]
    assert "victim-private-v1" not in str(mine) and "author" not in dup["reason"]
    assert copy["duplicate"] == dup  # the registration's answer says it at once
    editor = arena.call("GET", f"/api/collections/{copy['id']}", "editor").json()
    assert editor["duplicate"] == dup

    # anyone else (anonymous, and the matched collection's own author) is told nothing
    for who in (None, "author"):
        seen = arena.call("GET", f"/api/collections/{copy['id']}", who).json()
        assert seen["duplicate"] is None
        assert seen["near_duplicate_of"] is None and seen["similarity"] is None
        rows = {c["id"]: c for c in arena.call("GET", "/api/collections", who).json()}
        assert rows[copy["id"]]["near_duplicate_of"] is None
    rows = {c["id"]: c for c in arena.call("GET", "/api/collections", "other").json()}
    assert rows[copy["id"]]["near_duplicate_of"] == first["id"]
    # a preflight of someone else's collection does not say it either
    pre = arena.call("POST", "/api/runs/preflight", "author",
                     json={"challenge": "micro", "collection_id": copy["id"]}).json()
    check = {c["name"]: c for c in pre["checks"]}["near_duplicate"]
    assert check["status"] == "skip" and str(first["id"]) not in check["reason"]

    # organizers list held families with the collection each matched and the command
    assert arena.call("GET", "/api/collections/held", None).status_code == 401
    assert arena.call("GET", "/api/collections/held", "other").status_code == 403
    held = arena.call("GET", "/api/collections/held", "editor").json()
    assert [(h["id"], h["near_duplicate_of"], h["matched_name"], h["matched_owner"],
             h["owner"], h["members"]) for h in held] == [
        (copy["id"], first["id"], "victim-private-v1", "author", "other", 1)]
    assert held[0]["clear_command"] == dup["clear_command"]

    cleared = arena.call("POST", f"/api/collections/{copy['id']}/clear-duplicate", "editor")
    assert cleared.json()["duplicate"]["state"] == "cleared"
    assert cleared.json()["duplicate"]["clear_command"] is None
    assert arena.call("GET", "/api/collections/held", "editor").json() == []


def test_an_own_near_copy_says_which_family_it_shares(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    original = make_collection(tmp_path / "original", n_tasks=3, team="own")
    first = arena.upload(original).json()
    assert first["duplicate"] is None  # it copies nothing
    second = arena.upload(_variant(original, tmp_path / "v2")).json()
    dup = second["duplicate"]
    assert dup["state"] == "joined" and dup["family_id"] == first["id"]
    assert dup["clear_command"] is None and "shares the active-run slot" in dup["reason"]
    assert arena.call("GET", "/api/collections/held", "admin").json() == []


def _pack(path: Path) -> bytes:
    from posttrain_arena.service.client import pack_dir

    return pack_dir(path)
