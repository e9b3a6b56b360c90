"""The external token checker (a Hugging Face style whoami), against a loopback server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from fastapi.testclient import TestClient

from posttrain_arena.service.app import create_app
from posttrain_arena.service.config import Settings


class _Whoami(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
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
        assert me.json() == {"id": me.json()["id"], "name": "hf:alice", "role": "participant"}
        again = c.get("/api/me", headers={"Authorization": "Bearer hf_good"}).json()
        assert again["id"] == me.json()["id"]  # the same user, not a new one each time
        assert c.get("/api/me", headers={"Authorization": "Bearer hf_bad"}).status_code == 401
    app.state.db.dispose()
