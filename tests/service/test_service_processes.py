"""`arena serve` and `arena worker` as real processes on the same data directory."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from posttrain_arena.service.config import Settings

ARENA = [sys.executable, "-m", "posttrain_arena.cli.main"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(settings: Settings) -> dict[str, str]:
    env = {**os.environ, "ARENA_DATA_DIR": str(settings.data_dir),
           "ARENA_HEARTBEAT_INTERVAL_SEC": "0.5"}
    if settings.database_url:
        env["ARENA_DATABASE_URL"] = settings.database_url
    return env


def _admin(env: dict[str, str], *args: str) -> Any:
    out = subprocess.run([*ARENA, "admin", *args], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.mark.slow
def test_serve_and_worker_processes(settings: Settings, new_collection: Any,
                                    tmp_path: Path) -> None:
    env = _env(settings)
    token = _admin(env, "create-user", "root", "--role", "admin")["token"]
    recipe = tmp_path / "missing-recipe.toml"  # the pipeline will refuse it: a clear reason
    _admin(env, "create-challenge", "micro", "--title", "Micro", "--base-model", "tiny",
           "--revision", "r", "--recipe", str(recipe), "--recipe-hash", "sha256:0",
           "--suite-hash", "sha256:1", "--suite-size", "4", "--price-per-hour", "2")
    port = _port()
    server = subprocess.Popen([*ARENA, "serve", "--port", str(port), "--workers", "2",
                               "--no-access-log"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        hdr = {"Authorization": f"Bearer {token}"}
        from posttrain_arena.service.client import pack_dir

        col = httpx.post(f"{base}/api/collections/upload", headers=hdr,
                         content=pack_dir(new_collection()), timeout=60).json()
        run = httpx.post(f"{base}/api/runs", headers=hdr, timeout=60,
                         json={"challenge": "micro", "collection_id": col["id"]}).json()
        assert run["state"] == "queued"
        for _ in range(6):  # two server processes: each caches the list it computed
            listed = httpx.get(f"{base}/api/runs", timeout=30).json()
            assert [(r["id"], r["state"]) for r in listed["items"]] == [(run["id"], "queued")]
        subprocess.run([*ARENA, "worker", "--once"], env=env, timeout=300, check=True,
                       capture_output=True)
        for _ in range(6):  # and every process sees what the worker committed
            listed = httpx.get(f"{base}/api/runs", timeout=30).json()
            assert [(r["id"], r["state"]) for r in listed["items"]] == [(run["id"], "failed")]
        done = httpx.get(f"{base}/api/runs/{run['id']}", timeout=30).json()
        assert done["state"] == "failed", done
        assert done["stages_done"][:2] == ["snapshot", "check"]
        assert done["reason"]
        budget = httpx.get(f"{base}/api/budget", timeout=30).json()
        assert budget["reserved"] == 0
    finally:
        server.terminate()
        server.wait(timeout=30)
    log = server.stderr.read().decode() if server.stderr else ""
    assert "Application startup complete" in log  # the server's own log is kept...
    assert "GET /api/runs" not in log  # ...without a line per request
