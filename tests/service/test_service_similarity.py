"""Near-duplicate collections share launch limits (similarity.py); quotas per user and team."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from posttrain_arena.service.similarity import (
    COLLECTION_SHARE,
    PACKAGE_SIMILAR,
    shared_share,
    signature,
)

from .conftest import Arena, make_collection, write_notes

WORDS = ("verifier", "reads", "final", "state", "workspace", "writes", "reward", "between",
         "zero", "after", "every", "agent", "process", "ended", "nothing", "running", "change")


def _text(n: int, seed: int) -> bytes:
    import random

    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(n)).encode()


def _estimate(a: bytes, b: bytes) -> float:
    import numpy as np

    sa, sb = signature(a), signature(b)
    assert sa is not None and sb is not None
    return float((np.asarray(sa) == np.asarray(sb)).mean())


def test_signatures_estimate_similarity_of_the_words_not_the_bytes() -> None:
    base = _text(800, 1)
    assert _estimate(base, base) == 1.0
    # layout, case and punctuation do not count; a comment added is a small edit
    reflowed = base.upper().replace(b" ", b",\n  - ")
    assert _estimate(base, reflowed) == 1.0
    commented = base + b"\n# a comment added to dodge the tree hash\n"
    assert _estimate(base, commented) >= PACKAGE_SIMILAR
    assert _estimate(base, _text(800, 2)) < 0.2  # other text


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _checks(arena: Arena, col: int, who: str = "author") -> dict[str, dict[str, str]]:
    pre = arena.call("POST", "/api/runs/preflight", who,
                     json={"challenge": "micro", "collection_id": col}).json()
    return {c["name"]: c for c in pre["checks"]}


def test_a_lightly_edited_copy_shares_the_original_s_limits(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    original = make_collection(tmp_path / "original", n_tasks=4, team="orig")
    first = arena.upload(original).json()
    assert first["family_id"] == first["id"] and first["near_duplicate_of"] is None
    # The attacker's variant: comments added, one package renamed, a task's prompt edited.
    variant = _copy(original, tmp_path / "variant")
    for task_md in sorted(variant.glob("envs/*/task.md")):
        task_md.write_text(task_md.read_text() + "\n<!-- variant -->\n")
    (variant / "envs" / "task-orig-0").rename(variant / "envs" / "renamed-task")
    notes = variant / "envs" / "task-orig-1" / "environment" / "notes.md"
    notes.write_text(notes.read_text().replace("w1", "w2", 5))
    second = arena.upload(variant).json()
    assert second["content_hash"] != first["content_hash"]  # a new tree...
    assert second["near_duplicate_of"] == first["id"]  # ...of the same family
    assert second["family_id"] == first["id"] and second["similarity"] >= COLLECTION_SHARE
    checks = _checks(arena, second["id"])
    assert checks["near_duplicate"]["status"] == "ok"
    assert f"matches collection {first['id']}" in checks["near_duplicate"]["reason"]
    run = arena.call("POST", "/api/runs", "author",
                     json={"challenge": "micro", "collection_id": first["id"]})
    assert run.status_code == 201
    blocked = arena.call("POST", "/api/runs", "author",
                         json={"challenge": "micro", "collection_id": second["id"]})
    assert blocked.status_code == 409 and "no_active_run" in blocked.json()["detail"]
    # A copy of the copy joins the same family (the earliest), not a new one.
    third = arena.upload(_copy(variant, tmp_path / "third")).json()
    assert third["family_id"] == first["id"]


def test_a_collection_of_mostly_new_packages_is_its_own(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    original = make_collection(tmp_path / "original", n_tasks=4, team="orig")
    first = arena.upload(original).json()
    mixed = _copy(original, tmp_path / "mixed")
    for i in range(2):  # half of its packages get content of their own
        write_notes(mixed / "envs" / f"task-orig-{i}", f"fresh-{i}", words=3000)
    other = arena.upload(mixed).json()
    assert other["near_duplicate_of"] is None and other["family_id"] == other["id"]
    assert _checks(arena, other["id"])["near_duplicate"]["status"] == "skip"
    assert first["family_id"] != other["family_id"]


def test_share_counts_the_new_collection_s_packages_with_a_similar_one() -> None:
    import numpy as np

    a = np.arange(3 * 64, dtype=np.uint32).reshape(3, 64)
    b = a.copy()
    b[2] += 1000  # one of three packages differs entirely
    assert shared_share(b, a) == 2 / 3
    assert shared_share(a[:1], b) == 1.0  # a subset of C is C's
    assert shared_share(a, a[:0]) == 0.0


def test_the_run_count_limit_counts_the_family(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    arena.settings.runs_per_family = 1
    original = make_collection(tmp_path / "original", n_tasks=2, team="orig")
    first = arena.upload(original).json()
    run = arena.call("POST", "/api/runs", "author",
                     json={"challenge": "micro", "collection_id": first["id"]}).json()
    copy = arena.upload(_copy(original, tmp_path / "copy")).json()
    checks = _checks(arena, copy["id"])
    assert checks["run_count"]["status"] == "FAIL" and "1 runs" in checks["run_count"]["reason"]
    arena.call("POST", f"/api/runs/{run['id']}/cancel", "author")  # a canceled run shows
    assert _checks(arena, copy["id"])["run_count"]["status"] == "ok"  # no score: not counted


def test_quotas_per_user_and_per_team_bound_launches(
    arena: Arena, challenge: dict[str, Any], new_collection: Any
) -> None:
    allowance = challenge["allowance"]  # 10 of the global 100
    quota = arena.call("PUT", "/api/budget/quotas", "author",
                       json={"kind": "user", "name": "author", "cap": 15})
    assert quota.status_code == 403  # organizers only
    assert arena.call("PUT", "/api/budget/quotas", "admin",
                      json={"kind": "user", "name": "author", "cap": 15}).status_code == 200
    cols = [arena.upload(new_collection(team=f"t{i}")).json()["id"] for i in range(3)]
    first = arena.call("POST", "/api/runs", "author",
                       json={"challenge": "micro", "collection_id": cols[0]})
    assert first.status_code == 201
    second = arena.call("POST", "/api/runs", "author",
                        json={"challenge": "micro", "collection_id": cols[1]})
    assert second.status_code == 409 and "quota" in second.json()["detail"]
    budget = arena.call("GET", "/api/budget").json()
    assert budget["quotas"] == [{"kind": "user", "name": "author", "cap": 15.0,
                                 "used": allowance, "left": 15.0 - allowance}]
    # A team quota binds its members together: `other` joins author's team.
    arena.call("PUT", "/api/budget/quotas", "admin",
               json={"kind": "user", "name": "author", "cap": None})
    for who in ("author", "other"):
        assert arena.call("PATCH", f"/api/users/{who}", "admin",
                          json={"team": "red"}).status_code == 200
    arena.call("PUT", "/api/budget/quotas", "admin",
               json={"kind": "team", "name": "red", "cap": 2 * allowance})
    assert arena.call("POST", "/api/runs", "author",
                      json={"challenge": "micro", "collection_id": cols[1]}).status_code == 201
    theirs = arena.upload(new_collection(team="o"), who="other").json()["id"]
    third = arena.call("POST", "/api/runs", "other",
                       json={"challenge": "micro", "collection_id": theirs})
    assert third.status_code == 409 and "team quota of 'red'" in third.json()["detail"]
