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


def test_decoys_sharing_many_keys_do_not_crowd_out_the_real_match(arena: Arena) -> None:
    """More decoys than the candidates verified, each holding exact copies of a few of
    the new collection's packages (so each shares more band keys with it than the real
    original, whose packages are each only similar), never hide the original."""
    import numpy as np

    from posttrain_arena.service.models import Collection
    from posttrain_arena.service.similarity import (
        BANDS,
        CANDIDATES,
        PERMUTATIONS,
        ROWS,
        PackagePrintData,
        find_match,
        store,
    )

    rng = np.random.default_rng(5)
    n = 5
    original = rng.integers(1, 2**32, (n, PERMUTATIONS), dtype=np.uint64)
    edited = original.copy()
    changed = BANDS - 2  # one value in each of all but two bands: 2 keys in common ...
    edited[:, [b * ROWS for b in range(changed)]] = 0
    assert (PERMUTATIONS - changed) / PERMUTATIONS >= PACKAGE_SIMILAR  # ... yet similar

    def prints(rows: np.ndarray, tag: str) -> list[PackagePrintData]:
        return [PackagePrintData(f"{tag}{i}", tuple(int(v) for v in r))
                for i, r in enumerate(rows)]

    new = prints(edited, "new")
    kept = int(COLLECTION_SHARE * n) - 1  # too few of the new packages to be its copy
    with arena.db.write() as s:
        owner = arena.ids["other"]

        def add(rows: np.ndarray, name: str) -> int:
            col = Collection(name=name, owner_id=owner, source_kind="path",
                             content_hash=name, storage_path="")
            s.add(col)
            s.flush()
            col.family_id = col.id
            store(s, col.id, prints(rows, name))
            return col.id

        target = add(original, "original")
        for d in range(CANDIDATES + 1):  # exact copies of `kept` edited packages each
            add(np.vstack([edited[:kept], rng.integers(1, 2**32, (n - kept, PERMUTATIONS),
                                                       dtype=np.uint64)]), f"decoy{d}")
    with arena.db.read() as s:
        match = find_match(s, new)
    assert match is not None and match.collection_id == target and match.share == 1.0


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
    budget = arena.call("GET", "/api/budget", "author").json()
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


def _variant(original: Path, dest: Path) -> Path:
    """A light edit of `original`: a comment added to every task.md."""
    variant = _copy(original, dest)
    for task_md in sorted(variant.glob("envs/*/task.md")):
        task_md.write_text(task_md.read_text() + "\n<!-- mine now -->\n")
    return variant


def _launch(arena: Arena, col: int, who: str) -> Any:
    return arena.call("POST", "/api/runs", who, json={"challenge": "micro", "collection_id": col})


def test_another_account_s_copy_cannot_take_the_original_s_slot(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    arena.settings.runs_per_family = 1
    original = make_collection(tmp_path / "original", n_tasks=3, team="victim")
    first = arena.upload(original).json()
    # The copier registers a lightly edited copy (registering loses nothing)...
    copy = arena.upload(_variant(original, tmp_path / "copy"), who="other")
    assert copy.status_code == 201, copy.text
    theirs = copy.json()
    assert theirs["near_duplicate_of"] == first["id"]
    assert theirs["family_id"] == theirs["id"]  # a family of its own, held
    assert theirs["duplicate_cleared_at"] is None
    check = _checks(arena, theirs["id"], "other")["near_duplicate"]
    assert check["status"] == "FAIL"
    assert f"matches collection {first['id']}" in check["reason"]
    assert f"clear-duplicate {theirs['id']}" in check["reason"] and "editor" in check["reason"]
    assert "author" not in check["reason"]  # the matched collection, not its owner
    # ...but cannot launch first and eat the victim's slot, count or cooldown.
    blocked = _launch(arena, theirs["id"], "other")
    assert blocked.status_code == 409 and "near_duplicate" in blocked.json()["detail"]
    assert _launch(arena, theirs["id"], "editor").status_code == 409  # nor can an editor
    assert all(c["status"] != "FAIL" for c in _checks(arena, first["id"]).values())
    assert _launch(arena, first["id"], "author").status_code == 201


def test_a_second_account_s_copy_gains_no_launch(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    """The multi-account attack: the copy shares no slot to wait for, it has none."""
    original = make_collection(tmp_path / "original", n_tasks=3, team="mal")
    first = arena.upload(original, who="other").json()
    sock = arena.upload(_variant(original, tmp_path / "sock"), who="author").json()
    run = _launch(arena, first["id"], "other").json()
    assert _launch(arena, sock["id"], "author").status_code == 409
    arena.call("POST", f"/api/runs/{run['id']}/cancel", "other")  # the slot is free again
    again = _launch(arena, sock["id"], "author")
    assert again.status_code == 409 and "near_duplicate" in again.json()["detail"]
    # A copy of the held copy, by its owner, joins the held family: held with it.
    sock2 = arena.upload(_variant(tmp_path / "sock", tmp_path / "sock2"), who="author").json()
    assert sock2["family_id"] == sock["id"]
    check = _checks(arena, sock2["id"])["near_duplicate"]
    assert check["status"] == "FAIL" and f"clear-duplicate {sock['id']}" in check["reason"]


def test_a_family_belongs_to_its_owner_s_team(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    arena.add_user("stranger", "participant")
    for who in ("author", "other"):
        arena.call("PATCH", f"/api/users/{who}", "admin", json={"team": "red"})
    original = make_collection(tmp_path / "original", n_tasks=3, team="red")
    first = arena.upload(original).json()
    mate = arena.upload(_variant(original, tmp_path / "mate"), who="other").json()
    stranger = arena.upload(_variant(original, tmp_path / "stranger"), who="stranger").json()
    assert mate["family_id"] == first["id"]  # a teammate's copy shares the team's limits
    assert stranger["family_id"] == stranger["id"]  # a stranger's starts a held one
    assert _launch(arena, first["id"], "author").status_code == 201
    shared = _launch(arena, mate["id"], "other")
    assert shared.status_code == 409 and "no_active_run" in shared.json()["detail"]
    assert "near_duplicate" not in shared.json()["detail"]


def test_the_owner_s_own_family_wins_over_others_copies(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    """A copier registers the victim's next version first; the victim's registration of
    it still joins the victim's family (it is the victim's), not the copier's."""
    original = make_collection(tmp_path / "original", n_tasks=5, team="v")
    first = arena.upload(original).json()
    v2 = _copy(original, tmp_path / "v2")
    write_notes(v2 / "envs" / "task-v-0", "rewritten")  # 4 of 5 packages as before
    early = arena.upload(_copy(v2, tmp_path / "early"), who="other").json()
    assert early["near_duplicate_of"] == first["id"] and early["family_id"] == early["id"]
    mine = arena.upload(v2).json()  # shares 100% with the copier's, 80% with its own
    assert mine["family_id"] == first["id"] and mine["near_duplicate_of"] == first["id"]
    assert _checks(arena, mine["id"])["near_duplicate"]["status"] == "ok"


def test_an_editor_clears_a_copy_to_launch_as_a_family_of_its_own(
    arena: Arena, challenge: dict[str, Any], tmp_path: Path
) -> None:
    arena.settings.runs_per_family = 1
    original = make_collection(tmp_path / "original", n_tasks=3, team="orig")
    first = arena.upload(original).json()
    fork = arena.upload(_variant(original, tmp_path / "fork"), who="other").json()
    assert _launch(arena, first["id"], "author").status_code == 201
    url = f"/api/collections/{fork['id']}/clear-duplicate"
    assert arena.call("POST", url, "other").status_code == 403  # not its own owner's call
    assert arena.call("POST", f"/api/collections/{first['id']}/clear-duplicate",
                      "editor").status_code == 409  # nothing to clear
    cleared = arena.call("POST", url, "editor")
    assert cleared.status_code == 200 and cleared.json()["duplicate_cleared_at"]
    checks = _checks(arena, fork["id"], "other")
    assert checks["near_duplicate"]["status"] == "ok"
    assert "cleared" in checks["near_duplicate"]["reason"]
    assert checks["no_active_run"]["status"] == "ok"  # the original's run is not its own
    assert _launch(arena, fork["id"], "other").status_code == 201
    # The fork's run is not the original's: its family still counts one run.
    count = _checks(arena, first["id"])["run_count"]
    assert count["status"] == "FAIL" and "already had 1 runs" in count["reason"]


def test_migration_splits_families_another_account_joined(
    database_url: str | None, tmp_path: Path
) -> None:
    """0005 put another account's copies in the family they copied; upgrading holds
    them apart (a teammate's and the owner's own stay)."""
    from sqlalchemy import text

    from posttrain_arena.service.db import Database
    from posttrain_arena.service.migrations import upgrade

    db = Database(database_url or f"sqlite:///{tmp_path / 'm.db'}")
    upgrade(db.engine, "0005")
    users = {1: ("owner", None), 2: ("copier", None), 3: ("red1", "red"), 4: ("red2", "red")}
    # id: (owner, family, near_duplicate_of, similarity)
    cols = {1: (1, 1, None, None), 2: (2, 1, 1, 0.9), 3: (1, 1, 2, 0.95),
            4: (2, 1, None, None), 5: (3, 5, None, None), 6: (4, 5, 5, 0.85)}
    with db.engine.begin() as conn:
        for uid, (name, team) in users.items():
            conn.execute(text("INSERT INTO users (id, name, role, team, created_at) "
                              "VALUES (:i, :n, 'participant', :t, CURRENT_TIMESTAMP)"),
                         {"i": uid, "n": name, "t": team})
        for cid, (owner, fam, dup, sim) in cols.items():
            conn.execute(text(
                "INSERT INTO collections (id, name, owner_id, source_kind, content_hash, "
                "storage_path, task_count, eligible_count, domain_counts, error_count, "
                "warning_count, findings, created_at, family_id, near_duplicate_of, "
                "similarity) VALUES (:i, 'c', :o, 'path', 'h', '', 1, 1, '{}', 0, 0, '[]', "
                "CURRENT_TIMESTAMP, :f, :d, :s)"),
                {"i": cid, "o": owner, "f": fam, "d": dup, "s": sim})
    upgrade(db.engine)
    with db.engine.connect() as conn:
        rows = {r[0]: tuple(r[1:]) for r in conn.execute(text(
            "SELECT id, family_id, near_duplicate_of, similarity, duplicate_cleared_at "
            "FROM collections"))}
    db.dispose()
    assert rows == {
        1: (1, None, None, None),
        2: (2, 1, 0.9, None),  # another account's copy: a held family of its own
        3: (1, 2, 0.95, None),  # the owner's own copy stays in the owner's family
        4: (4, 1, 1.0, None),  # 0005's same-tree copy names the family it copied
        5: (5, None, None, None),
        6: (5, 5, 0.85, None),  # a teammate's copy stays
    }
