"""Collect (coverage), review (append-only), leaderboard ranking and intervals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from posttrain_arena.service.stage_plan import FunctionStage, RunContext, snapshot
from posttrain_arena.service.worker import Worker

if TYPE_CHECKING:
    from tests.service.conftest import Arena


def _score_stage(change: float, n_tasks: int | None = None) -> FunctionStage:
    def stage(ctx: RunContext) -> dict[str, Any]:
        n = ctx.challenge["suite_size"] if n_tasks is None else n_tasks
        return {
            "score": {
                "base_pass_rate": 0.5,
                "final_pass_rate": 0.5 + change / 100,
                "change_pp": change,
                "ci_low": change - 4,
                "ci_high": change + 4,
                "n_tasks": n,
                "per_domain": {},
            }
        }

    return FunctionStage("pipeline", stage)


def scored_run(
    arena: Arena, col_id: int, change: float, who: str = "author", n_tasks: int | None = None
) -> int:
    resp = arena.call(
        "POST", "/api/runs", who, json={"challenge": "micro", "collection_id": col_id}
    )
    assert resp.status_code == 201, resp.text
    stages = [FunctionStage("snapshot", snapshot), _score_stage(change, n_tasks)]
    Worker(arena.db, arena.settings, stages).poll_once()
    assert arena.call("GET", f"/api/runs/{resp.json()['id']}").json()["state"] == "scored"
    return int(resp.json()["id"])


def test_collect_review_and_rank(
    arena: Arena, challenge: dict[str, Any], new_collection: Any
) -> None:
    a = arena.upload(new_collection(team="alpha")).json()["id"]
    b = arena.upload(new_collection(team="beta")).json()["id"]
    c = arena.upload(new_collection(team="gamma")).json()["id"]
    runs = {
        "a1": scored_run(arena, a, 10.0),
        "a2": scored_run(arena, a, 20.0),
        "b1": scored_run(arena, b, 25.0),
        "c1": scored_run(arena, c, 40.0),
    }
    for key, run_id in runs.items():  # stored as the run was scored: nothing to choose
        resp = arena.call("GET", f"/api/runs/{run_id}/result")
        assert resp.status_code == 200, (key, resp.text)
        assert resp.json()["status"] == "pending"
    # Collecting returns the stored result (append-only, idempotent).
    again = arena.call("POST", f"/api/runs/{runs['a1']}/collect", "author")
    assert again.status_code == 200 and again.json()["run_id"] == runs["a1"]
    assert arena.call("GET", "/api/challenges/micro/leaderboard").json()["pending"] == 4
    assert (
        arena.call(
            "POST", f"/api/runs/{runs['a1']}/review", "author", json={"decision": "accept"}
        ).status_code
        == 403
    )
    for key in ("a1", "a2", "b1"):
        resp = arena.call(
            "POST",
            f"/api/runs/{runs[key]}/review",
            "editor",
            json={"decision": "accept", "note": "looks right"},
        )
        assert resp.status_code == 200 and resp.json()["status"] == "accepted"
    no_note = arena.call(
        "POST", f"/api/runs/{runs['c1']}/review", "editor", json={"decision": "reject"}
    )
    assert no_note.status_code == 400
    rej = arena.call(
        "POST",
        f"/api/runs/{runs['c1']}/review",
        "editor",
        json={"decision": "reject", "note": "suite leak"},
    )
    assert rej.json()["status"] == "rejected"
    twice = arena.call(
        "POST",
        f"/api/runs/{runs['c1']}/review",
        "editor",
        json={"decision": "accept", "note": "changed my mind"},
    )
    assert twice.status_code == 409
    board = arena.call("GET", "/api/challenges/micro/leaderboard").json()
    ranked = [(e["rank"], e["collection_id"], e["n"], e["mean_change_pp"]) for e in board["ranked"]]
    assert ranked == [(1, b, 1, 25.0), (2, a, 2, 15.0)]
    beta, alpha = board["ranked"]
    assert (beta["ci_low"], beta["ci_high"]) == (21.0, 29.0)  # one run: its own interval
    assert alpha["ci_low"] < 15.0 < alpha["ci_high"]  # two runs: t-interval of the mean
    assert [r["collection_id"] for r in board["rejected"]] == [c]
    assert board["rejected"][0]["note"] == "suite leak" and board["pending"] == 0
    listed = arena.call("GET", "/api/challenges/micro/results").json()
    assert {r["status"] for r in listed} == {"accepted", "rejected"}
    assert board["ranked_total"] == 2
    pages = [arena.call("GET", "/api/challenges/micro/leaderboard",
                        params={"limit": 1, "offset": i}).json() for i in (0, 1, 2)]
    assert [[(e["rank"], e["collection_id"]) for e in p["ranked"]] for p in pages] == [
        [(1, b)], [(2, a)], []]
    assert {p["ranked_total"] for p in pages} == {2}
    assert arena.call("GET", "/api/challenges/micro/leaderboard",
                      params={"limit": 0}).status_code == 422


def test_a_score_short_of_the_suite_fails_the_run(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    resp = arena.call("POST", "/api/runs", "author",
                      json={"challenge": "micro", "collection_id": collection["id"]})
    stages = [FunctionStage("snapshot", snapshot),
              _score_stage(5.0, n_tasks=challenge["suite_size"] - 1)]
    Worker(arena.db, arena.settings, stages).poll_once()
    run = arena.call("GET", f"/api/runs/{resp.json()['id']}").json()
    assert run["state"] == "failed" and "cover the whole held-out suite" in run["reason"]
    assert arena.call("GET", f"/api/runs/{run['id']}/result").status_code == 404
    refused = arena.call("POST", f"/api/runs/{run['id']}/collect", "author")
    assert refused.status_code == 409 and "failed" in refused.json()["detail"]
    queued = arena.call(
        "POST",
        "/api/runs",
        "author",
        json={"challenge": "micro", "collection_id": collection["id"]},
    ).json()
    resp = arena.call("POST", f"/api/runs/{queued['id']}/collect", "author")
    assert resp.status_code == 409 and "queued" in resp.json()["detail"]
    assert arena.call("POST", f"/api/runs/{queued['id']}/collect", "other").status_code == 403


def test_every_scored_run_counts_and_a_tree_is_one_entry(
    arena: Arena, challenge: dict[str, Any], new_collection: Any
) -> None:
    """The red-team case: rerun, keep the best. Re-registering the same tree to dodge
    the record gives the same entry, and every accepted run of it is in its mean."""
    tree = new_collection(team="same")
    first = arena.upload(tree).json()
    again = arena.upload(tree, who="other").json()  # the same files, a new id and owner
    assert again["id"] != first["id"] and again["content_hash"] == first["content_hash"]
    # another account's copy launches once an editor clears it (families.py)
    arena.call("POST", f"/api/collections/{again['id']}/clear-duplicate", "editor")
    bad = scored_run(arena, first["id"], -20.0)
    good = scored_run(arena, again["id"], 30.0, who="other")
    for run_id in (bad, good):
        arena.call("POST", f"/api/runs/{run_id}/review", "editor",
                   json={"decision": "accept", "note": "ok"})
    board = arena.call("GET", "/api/challenges/micro/leaderboard").json()
    assert [(e["collection_id"], e["n"], e["mean_change_pp"]) for e in board["ranked"]] == [
        (first["id"], 2, 5.0)]


def test_launch_checks_key_on_the_challenge_and_the_tree(
    arena: Arena, challenge: dict[str, Any], challenge_body: dict[str, Any],
    new_collection: Any,
) -> None:
    body = {**challenge_body, "slug": "cool", "cooldown_sec": 3600}
    assert arena.call("POST", "/api/challenges", "admin", json=body).status_code == 201
    tree = new_collection(team="tree")
    first = arena.upload(tree).json()["id"]
    again = arena.upload(tree).json()["id"]
    other = arena.upload(new_collection(team="different")).json()["id"]

    def checks(challenge_slug: str, col: int) -> dict[str, str]:
        pre = arena.call("POST", "/api/runs/preflight", "author",
                         json={"challenge": challenge_slug, "collection_id": col}).json()
        return {c["name"]: c["status"] for c in pre["checks"]}

    queued = arena.call("POST", "/api/runs", "author",
                        json={"challenge": "micro", "collection_id": first})
    assert queued.status_code == 201
    assert checks("micro", again)["no_active_run"] == "FAIL"  # the same tree, re-registered
    assert checks("micro", other)["no_active_run"] == "ok"
    assert checks("cool", again)["no_active_run"] == "ok"  # another challenge
    arena.call("POST", f"/api/runs/{queued.json()['id']}/cancel", "author")
    resp = arena.call("POST", "/api/runs", "author",
                      json={"challenge": "cool", "collection_id": first})
    Worker(arena.db, arena.settings, [_score_stage(1.0)]).poll_once()
    assert arena.call("GET", f"/api/runs/{resp.json()['id']}").json()["state"] == "scored"
    assert checks("cool", again)["cooldown"] == "FAIL"
    assert checks("cool", other)["cooldown"] == "skip"
    assert checks("micro", again)["cooldown"] == "skip"


def test_cooldown_after_a_counted_run(
    arena: Arena, collection: dict[str, Any], challenge_body: dict[str, Any]
) -> None:
    body = {**challenge_body, "cooldown_sec": 3600}
    assert arena.call("POST", "/api/challenges", "admin", json=body).status_code == 201
    scored_run(arena, collection["id"], 1.0)
    pre = arena.call(
        "POST",
        "/api/runs/preflight",
        "author",
        json={"challenge": "micro", "collection_id": collection["id"]},
    ).json()
    checks = {c["name"]: c for c in pre["checks"]}
    assert pre["ok"] is False and checks["cooldown"]["status"] == "FAIL"
    assert "wait" in checks["cooldown"]["reason"]


def test_a_score_is_not_seen_or_dodged_before_it_counts(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    """Between the stage that scores a run and the step that ends it (or while a run
    whose worker died after scoring waits to resume), the author can neither read the
    score nor cancel the run to keep it off the board."""
    resp = arena.call("POST", "/api/runs", "author",
                      json={"challenge": "micro", "collection_id": collection["id"]})
    run_id = resp.json()["id"]
    worker = Worker(arena.db, arena.settings, [_score_stage(-30.0)])
    assert worker.claim() == run_id
    worker.run_stage(run_id)  # the score is stored; the run is still running
    shown = arena.call("GET", f"/api/runs/{run_id}").json()
    assert shown["state"] == "running" and shown["score"] is None
    listed = arena.call("GET", "/api/runs").json()["items"][0]
    assert listed["id"] == run_id and listed["score"] is None
    refused = arena.call("POST", f"/api/runs/{run_id}/cancel", "author")
    assert refused.status_code == 409 and "counts" in refused.json()["detail"]
    worker.run_stage(run_id)  # finish
    done = arena.call("GET", f"/api/runs/{run_id}").json()
    assert done["state"] == "scored" and done["score"]["change_pp"] == -30.0
    assert arena.call("GET", f"/api/runs/{run_id}/result").json()["change_pp"] == -30.0
