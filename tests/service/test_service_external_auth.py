"""The external token checker (a Hugging Face style whoami), against a loopback server."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from posttrain_arena.service.app import create_app
from posttrain_arena.service.auth import create_user
from posttrain_arena.service.config import Settings
from posttrain_arena.service.errors import BadRequest
from posttrain_arena.service.models import User

from .conftest import CHALLENGE


class _Whoami(BaseHTTPRequestHandler):
    calls = 0

    def do_GET(self) -> None:
        type(self).calls += 1
        ok = self.headers.get("Authorization") == "Bearer hf_good"
        body = json.dumps({"name": "alice"} if ok else {"error": "bad"}).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def whoami() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Whoami)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/whoami-v2"
    server.shutdown()


def test_external_tokens_off_by_default(settings: Settings) -> None:
    app = create_app(settings)
    with TestClient(app) as c:
        assert c.get("/api/me", headers={"Authorization": "Bearer hf_good"}).status_code == 401
    app.state.db.dispose()


def test_external_whoami_signs_in_a_participant(settings: Settings, whoami: str) -> None:
    on = settings.model_copy(update={"external_auth": "huggingface", "external_auth_url": whoami})
    app = create_app(on)
    with TestClient(app) as c:
        me = c.get("/api/me", headers={"Authorization": "Bearer hf_good"})
        assert me.status_code == 200, me.text
        assert me.json() == {"id": me.json()["id"], "name": "hf:alice", "role": "participant",
                             "approved": False, "team": None}
        again = c.get("/api/me", headers={"Authorization": "Bearer hf_good"}).json()
        assert again["id"] == me.json()["id"]  # the same user, not a new one each time
        assert c.get("/api/me", headers={"Authorization": "Bearer hf_bad"}).status_code == 401
    app.state.db.dispose()


def test_whoami_answers_are_reused_for_a_while(settings: Settings, whoami: str) -> None:
    on = settings.model_copy(update={"external_auth": "huggingface", "external_auth_url": whoami})
    app = create_app(on)
    before = _Whoami.calls
    with TestClient(app) as c:
        for _ in range(5):
            assert c.get("/api/me", headers={"Authorization": "Bearer hf_good"}).status_code == 200
            assert c.get("/api/me", headers={"Authorization": "Bearer hf_bad"}).status_code == 401
    assert _Whoami.calls - before == 2  # one call per token, not one per request
    app.state.db.dispose()
    off = settings.model_copy(update={"external_auth": "huggingface", "external_auth_url": whoami,
                                      "external_auth_cache_sec": 0})
    app = create_app(off)
    before = _Whoami.calls
    with TestClient(app) as c:
        for _ in range(3):
            c.get("/api/me", headers={"Authorization": "Bearer hf_good"})
    assert _Whoami.calls - before == 3
    app.state.db.dispose()


def test_a_token_check_opens_no_write_transaction(settings: Settings, whoami: str) -> None:
    """With another writer holding SQLite's write lock, signed-in reads still answer
    (a token check that took the lock would wait for it, then fail)."""
    if settings.database_url is not None:
        pytest.skip("SQLite's single write lock is what makes a write visible here")
    on = settings.model_copy(update={"external_auth": "huggingface", "external_auth_url": whoami,
                                     "external_auth_cache_sec": 0})
    app = create_app(on)
    with TestClient(app) as c:
        hf = {"Authorization": "Bearer hf_good"}
        assert c.get("/api/me", headers=hf).status_code == 200  # first visit: a write
        with app.state.db.write() as s:
            _user, token = create_user(s, "local", "participant")
        raw = sqlite3.connect(str(on.data_dir / "arena.db"), timeout=0.1)
        raw.execute("PRAGMA busy_timeout=100")
        raw.execute("BEGIN IMMEDIATE")  # another writer, mid-transaction
        try:
            app.state.db.engine.dispose()  # fresh connections must not wait long either
            for headers in (hf, {"Authorization": f"Bearer {token}"}):
                resp = c.get("/api/me", headers=headers)
                assert resp.status_code == 200, resp.text
        finally:
            raw.rollback()
            raw.close()
    app.state.db.dispose()


def test_no_local_user_can_take_an_external_name(settings: Settings, whoami: str) -> None:
    """Names with ':' are kept for external accounts; a local one made before that rule
    gets the external user a clear 409 on sign-in, not a server error, and no access."""
    app = create_app(settings)
    with app.state.db.write() as s, pytest.raises(BadRequest, match="external provider"):
        create_user(s, "hf:alice", "admin")
    with app.state.db.write() as s:  # as an older database may hold it
        s.add(User(name="hf:alice", role="admin"))
    app.state.db.dispose()
    on = settings.model_copy(update={"external_auth": "huggingface", "external_auth_url": whoami})
    app = create_app(on)
    with TestClient(app, raise_server_exceptions=False) as c:
        me = c.get("/api/me", headers={"Authorization": "Bearer hf_good"})
        assert me.status_code == 409, me.text
        assert "local account" in me.text
    app.state.db.dispose()


class _NotJson(_Whoami):
    answer = b"<html>maintenance</html>"

    def do_GET(self) -> None:
        body = self.answer
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _TooLong(_NotJson):
    answer = json.dumps({"name": "a" * 120}).encode()


@pytest.mark.parametrize("handler", [_NotJson, _TooLong], ids=["not-json", "name-too-long"])
def test_a_whoami_answer_that_is_not_json_signs_no_one_in(
        settings: Settings, handler: type[_Whoami]) -> None:
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api/whoami-v2"
    on = settings.model_copy(update={"external_auth": "huggingface", "external_auth_url": url})
    app = create_app(on)
    try:
        with TestClient(app, raise_server_exceptions=False) as c:
            me = c.get("/api/me", headers={"Authorization": "Bearer hf_good"})
            assert me.status_code == 401, me.text
    finally:
        app.state.db.dispose()
        server.shutdown()


def _launch_as_alice(c: TestClient, collection: Path) -> tuple[dict[str, str], int]:
    from posttrain_arena.service.client import pack_dir

    hf = {"Authorization": "Bearer hf_good"}
    col = c.post("/api/collections/upload", headers=hf, content=pack_dir(collection))
    assert col.status_code == 201, col.text  # registering is allowed at once
    body = {"challenge": "micro", "collection_id": col.json()["id"]}
    pre = c.post("/api/runs/preflight", headers=hf, json=body).json()
    allowed = next(ch for ch in pre["checks"] if ch["name"] == "caller_allowed")
    return allowed, c.post("/api/runs", headers=hf, json=body).status_code


def test_an_external_account_launches_only_once_approved(
        settings: Settings, whoami: str, new_collection: Any) -> None:
    on = settings.model_copy(update={"external_auth": "huggingface", "external_auth_url": whoami})
    app = create_app(on)
    with TestClient(app) as c:
        with app.state.db.write() as s:
            _admin, admin = create_user(s, "root", "admin")
        root = {"Authorization": f"Bearer {admin}"}
        assert c.post("/api/challenges", headers=root, json=CHALLENGE).status_code == 201
        allowed, status = _launch_as_alice(c, new_collection(team="a"))
        assert status == 409 and allowed["status"] == "FAIL"
        assert "approval" in allowed["reason"] and "--approve" in allowed["reason"]
        assert c.patch("/api/users/hf:alice", headers={"Authorization": "Bearer hf_good"},
                       json={"approved": True}).status_code == 403  # not by herself
        ok = c.patch("/api/users/hf:alice", headers=root, json={"approved": True})
        assert ok.status_code == 200 and ok.json()["approved"] is True
        allowed, status = _launch_as_alice(c, new_collection(team="b"))
        assert status == 201 and allowed["status"] == "ok"
    app.state.db.dispose()


def test_an_allowlisted_external_account_launches_at_once(
        settings: Settings, whoami: str, new_collection: Any) -> None:
    on = settings.model_copy(update={"external_auth": "huggingface", "external_auth_url": whoami,
                                     "external_allowlist": ["hf:bob", "hf:ali*"]})
    app = create_app(on)
    with TestClient(app) as c:
        with app.state.db.write() as s:
            _admin, admin = create_user(s, "root", "admin")
        c.post("/api/challenges", headers={"Authorization": f"Bearer {admin}"}, json=CHALLENGE)
        allowed, status = _launch_as_alice(c, new_collection(team="a"))
        assert status == 201 and allowed["status"] == "ok"
    app.state.db.dispose()


def test_a_flood_of_unseen_tokens_costs_a_bounded_number_of_checks(
        settings: Settings, whoami: str) -> None:
    on = settings.model_copy(update={"external_auth": "huggingface", "external_auth_url": whoami,
                                     "external_auth_rate": 1.0})
    app = create_app(on)
    before = _Whoami.calls
    with TestClient(app) as c:
        statuses = [c.get("/api/me", headers={"Authorization": f"Bearer hf_random{i}"}
                          ).status_code for i in range(40)]
        shapeless = [c.get("/api/me", headers={"Authorization": f"Bearer junk{i}"}
                           ).status_code for i in range(40)]
    calls = _Whoami.calls - before
    assert calls <= 6  # the burst (4 x the rate) and what the rate refilled meanwhile
    assert statuses.count(401) == calls and statuses.count(429) == 40 - calls
    assert set(shapeless) == {401}  # not the provider's shape: refused without a call
    app.state.db.dispose()
