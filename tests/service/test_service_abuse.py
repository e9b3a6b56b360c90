"""A scripted attacker against a real `arena serve` on loopback, on PostgreSQL.

Each step is something issue #27 measured working against a running server: it must
fail now. The server is the product's own (`arena serve`, two processes), its database
a PostgreSQL schema of its own, its identity provider a loopback stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from posttrain_arena.service.client import pack_dir

from .conftest import make_collection, postgres_schema_url

pytestmark = pytest.mark.postgres

ARENA = [sys.executable, "-m", "posttrain_arena.cli.main"]


class _Whoami(BaseHTTPRequestHandler):
    calls = 0

    def do_GET(self) -> None:
        type(self).calls += 1
        ok = self.headers.get("Authorization") == "Bearer hf_mallory"
        body = json.dumps({"name": "mallory"} if ok else {"error": "bad"}).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from postgres_schema_url()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`arena serve` on loopback, and `arena admin` on its database."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.base = f"http://127.0.0.1:{_port()}"
        self.proc: subprocess.Popen[bytes] | None = None

    def admin(self, *args: str) -> Any:
        out = subprocess.run([*ARENA, "admin", *args], env=self.env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def start(self) -> None:
        port = self.base.rsplit(":", 1)[1]
        self.proc = subprocess.Popen([*ARENA, "serve", "--port", port, "--workers", "2",
                                      "--no-access-log"], env=self.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                if httpx.get(f"{self.base}/api/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("the server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture
def server(pg_url: str, tmp_path: Path) -> Iterator[Server]:
    whoami = HTTPServer(("127.0.0.1", 0), _Whoami)
    threading.Thread(target=whoami.serve_forever, daemon=True).start()
    env = {**os.environ, "ARENA_DATA_DIR": str(tmp_path / "data"),
           "ARENA_DATABASE_URL": pg_url, "ARENA_BUDGET_CAP": "100",
           "ARENA_EXTERNAL_AUTH": "huggingface",
           "ARENA_EXTERNAL_AUTH_URL":
               f"http://127.0.0.1:{whoami.server_address[1]}/api/whoami-v2",
           "ARENA_EXTERNAL_AUTH_RATE": "1", "ARENA_RUNS_PER_FAMILY": "2"}
    srv = Server(env)
    try:
        yield srv
    finally:
        srv.stop()
        whoami.shutdown()


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_attacker_fails_at_every_step(server: Server, tmp_path: Path) -> None:
    root = server.admin("create-user", "root", "--role", "admin")["token"]
    mallory = server.admin("create-user", "mallory")["token"]
    # The sealed suite's folder on the server: its name must never reach a participant.
    # The challenge's recipe (public, by design) points at it; the suite is not there, so
    # a run fails on the organizers' side, with that path in its message.
    sealed = tmp_path / "server-only" / "sealed-heldout-ledger-7f3a"
    recipe = tmp_path / "recipes" / "micro.toml"
    recipe.parent.mkdir()
    recipe.write_text(f'name = "micro"\n[model]\nid = "tiny"\nrevision = "{"a" * 40}"\n'
                      f'[train]\ncollection = "."\n[eval]\nsuite = "{sealed}"\n')
    server.admin("create-challenge", "micro", "--title", "Micro", "--base-model", "tiny",
                 "--revision", "r", "--recipe", str(recipe),
                 "--recipe-hash", "sha256:0", "--suite-hash", "sha256:1", "--suite-size",
                 "4", "--price-per-hour", "10", "--timeout", "3600")  # allowance 10
    server.start()
    base, m = server.base, _auth(mallory)
    c = httpx.Client(base_url=base, timeout=60)

    # 1. Near-duplicates share limits: a copy with one comment added is the same family...
    original = make_collection(tmp_path / "original", n_tasks=3, team="mal")
    first = c.post("/api/collections/upload", headers=m, content=pack_dir(original)).json()
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    task_md = next(copy.glob("envs/*/task.md"))
    task_md.write_text(task_md.read_text() + "\n<!-- one comment -->\n")
    second = c.post("/api/collections/upload", headers=m, content=pack_dir(copy)).json()
    assert second["content_hash"] != first["content_hash"]
    assert second["near_duplicate_of"] == first["id"]
    run = c.post("/api/runs", headers=m, json={"challenge": "micro",
                                               "collection_id": first["id"]})
    assert run.status_code == 201, run.text
    pre = c.post("/api/runs/preflight", headers=m,
                 json={"challenge": "micro", "collection_id": second["id"]}).json()
    checks = {ch["name"]: ch for ch in pre["checks"]}
    assert checks["no_active_run"]["status"] == "FAIL"
    assert f"matches collection {first['id']}" in checks["near_duplicate"]["reason"]
    assert c.post("/api/runs", headers=m, json={"challenge": "micro",
                                                "collection_id": second["id"]}
                  ).status_code == 409

    # 1b. ...but another account's copy takes nothing from its original: mallory copies a
    # victim's collection and launches first; the copy may register, not launch, and the
    # victim launches after. An editor may clear the copy to run with limits of its own.
    victim = _auth(server.admin("create-user", "victim")["token"])
    theirs = make_collection(tmp_path / "theirs", n_tasks=3, team="vic")
    target = c.post("/api/collections/upload", headers=victim,
                    content=pack_dir(theirs)).json()
    stolen_dir = tmp_path / "stolen"
    shutil.copytree(theirs, stolen_dir)
    for md in stolen_dir.glob("envs/*/task.md"):
        md.write_text(md.read_text() + "\n<!-- mine now -->\n")
    stolen = c.post("/api/collections/upload", headers=m, content=pack_dir(stolen_dir))
    assert stolen.status_code == 201 and stolen.json()["near_duplicate_of"] == target["id"]
    sid = stolen.json()["id"]
    eat = c.post("/api/runs", headers=m, json={"challenge": "micro", "collection_id": sid})
    assert eat.status_code == 409 and "near_duplicate" in eat.json()["detail"]
    assert f"matches collection {target['id']}" in eat.json()["detail"]
    assert "victim" not in eat.json()["detail"]
    mine = c.post("/api/runs", headers=victim, json={"challenge": "micro",
                                                     "collection_id": target["id"]})
    assert mine.status_code == 201, mine.text
    c.post(f"/api/runs/{mine.json()['id']}/cancel", headers=victim)
    # Only the copy's owner and editors are told it is held; the organizer lists it with
    # the command that releases it.
    assert c.get(f"/api/collections/{sid}", headers=m).json()["duplicate"]["state"] == "held"
    for who in ({}, victim):
        seen = c.get(f"/api/collections/{sid}", headers=who).json()
        assert seen["duplicate"] is None and seen["near_duplicate_of"] is None
    held = server.admin("held-duplicates")
    assert [(h["id"], h["near_duplicate_of"], h["owner"]) for h in held] == [
        (sid, target["id"], "mallory")]
    assert held[0]["clear_command"] == f"arena admin clear-duplicate {sid}"
    assert server.admin("clear-duplicate", str(sid))["duplicate_cleared_at"]
    assert server.admin("held-duplicates") == []
    pre = c.post("/api/runs/preflight", headers=m,
                 json={"challenge": "micro", "collection_id": sid}).json()
    assert {ch["name"]: ch["status"] for ch in pre["checks"]}["near_duplicate"] == "ok"

    # 2. Nobody's share is unbounded: a quota stops a second, distinct collection.
    server.admin("set-quota", "15", "--user", "mallory")
    distinct = make_collection(tmp_path / "distinct", n_tasks=2, team="other")
    third = c.post("/api/collections/upload", headers=m, content=pack_dir(distinct)).json()
    assert third["near_duplicate_of"] is None
    over = c.post("/api/runs", headers=m, json={"challenge": "micro",
                                                "collection_id": third["id"]})
    assert over.status_code == 409 and "quota" in over.json()["detail"]
    budget = c.get("/api/budget", headers=m).json()
    assert budget["quotas"][0]["name"] == "mallory" and budget["quotas"][0]["used"] == 10
    assert budget["you"]["used"] == 10
    anonymous = c.get("/api/budget").json()  # nobody's quota or use is public
    assert anonymous["quotas"] == [] and anonymous["you"] is None

    # 3. An external sign-in cannot spend compute until approved.
    hf = _auth("hf_mallory")
    ext = c.post("/api/collections/upload", headers=hf,
                 content=pack_dir(make_collection(tmp_path / "ext", 2, "ext"))).json()
    refused = c.post("/api/runs", headers=hf, json={"challenge": "micro",
                                                    "collection_id": ext["id"]})
    assert refused.status_code == 409 and "approval" in refused.json()["detail"]

    # 4. Nothing private in public answers: the run fails on the organizers' side (its
    # suite is missing) and every public answer, cached or not, keeps the suite's path
    # to itself.
    c.post(f"/api/runs/{run.json()['id']}/cancel", headers=m)
    c.post("/api/runs", headers=_auth(root), json={"challenge": "micro",
                                                   "collection_id": third["id"]})
    public = ["/api/runs", "/api/runs?state=failed", "/api/runs?challenge=micro"]
    for url in public:
        c.get(url)  # cached before the failure
    done = subprocess.run([*ARENA, "worker", "--once"], env=server.env, timeout=600,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    failed = c.get("/api/runs?state=failed").json()["items"]
    assert failed and failed[0]["reason_class"] == "internal"
    rid = failed[0]["id"]
    for _ in range(3):  # two server processes: cached and fresh answers alike
        for url in [*public, f"/api/runs/{rid}", f"/arena/runs/{rid}", "/arena",
                    "/arena/challenges/micro"]:
            for headers in ({}, m):
                body = c.get(url, headers=headers).text
                assert "sealed-heldout-ledger-7f3a" not in body, url
                assert "server-only" not in body, url
    full = c.get(f"/api/runs/{rid}/failure", headers=_auth(root)).json()
    assert "sealed-heldout-ledger-7f3a" in full["detail"]  # editors do see it
    assert c.get(f"/api/runs/{rid}/failure", headers=m).status_code == 403

    # 5. Tokens: a flood of random ones is refused fast and ties nothing up...
    before = _Whoami.calls
    flood = [c.get("/api/me", headers=_auth(f"hf_{uuid.uuid4().hex}")).status_code
             for _ in range(60)]
    assert set(flood) <= {401, 429} and _Whoami.calls - before <= 2 * (4 + 2)
    assert c.get("/api/health").status_code == 200
    # ...a revoked token is 401 on every route, cached reads included...
    made = c.post("/api/tokens", headers=m, json={"expires_in_days": 1}).json()
    for url in ("/api/runs", "/api/budget", "/api/challenges"):
        assert c.get(url, headers=_auth(made["token"])).status_code == 200
    c.delete(f"/api/tokens/{made['prefix']}", headers=m)
    for url in ("/api/runs", "/api/budget", "/api/challenges", "/api/me"):
        for _ in range(3):
            assert c.get(url, headers=_auth(made["token"])).status_code == 401, url
    # ...and a web session copied before sign-out does not outlive it.
    browser = httpx.Client(base_url=base, timeout=60, headers={"accept": "text/html"})
    browser.get("/signin")
    csrf = browser.cookies["arena_csrf"]
    browser.post(f"/signin?csrf={csrf}", data={"token": mallory, "next": "/arena"})
    session = browser.cookies["arena_session"]
    assert mallory not in session
    thief = httpx.Client(base_url=base, timeout=60, cookies={"arena_session": session})
    assert "mallory <span" in thief.get("/arena").text
    browser.post(f"/signout?csrf={csrf}")
    assert "mallory <span" not in thief.get("/arena").text
