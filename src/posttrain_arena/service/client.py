"""A thin HTTP client of the Arena API, used by the `arena` client commands."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Any

import httpx


class ArenaApiError(Exception):
    """The server refused a request; carries its status, message and data."""

    def __init__(self, status: int, detail: str, data: Any = None):
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail, self.data = status, detail, data

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.detail, "status": self.status}
        if self.data is not None:
            out["data"] = self.data
        return out


class ArenaClient:
    """Calls the Arena API at `url` with an optional bearer token."""

    def __init__(self, url: str | None = None, token: str | None = None,
                 client: httpx.Client | None = None, timeout: float = 60.0):
        self.url = (url or os.environ.get("ARENA_URL") or "http://127.0.0.1:8000").rstrip("/")
        self.token = token if token is not None else os.environ.get("ARENA_TOKEN")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if client is not None:
            client.headers.update(headers)
            self.http = client
        else:
            self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            resp = self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ArenaApiError(0, f"cannot reach the Arena server at {self.url} ({exc}); "
                                "set ARENA_URL") from None
        if resp.status_code >= 400:
            try:
                body = resp.json()
            except ValueError:
                body = {"detail": resp.text}
            detail = body.get("detail", resp.text)
            raise ArenaApiError(resp.status_code, str(detail), body.get("data"))
        return resp.json() if resp.content else None

    # --- challenges, leaderboard, budget -------------------------------------------------
    def challenges(self) -> list[dict[str, Any]]:
        return self._call("GET", "/api/challenges")

    def leaderboard(self, challenge: str) -> dict[str, Any]:
        return self._call("GET", f"/api/challenges/{challenge}/leaderboard")

    def budget(self) -> dict[str, Any]:
        return self._call("GET", "/api/budget")

    def me(self) -> dict[str, Any]:
        return self._call("GET", "/api/me")

    # --- collections ---------------------------------------------------------------------
    def submit_git(self, url: str, ref: str, name: str | None = None) -> dict[str, Any]:
        return self._call("POST", "/api/collections/git",
                          json={"url": url, "ref": ref, "name": name})

    def submit_hf(self, url: str, name: str | None = None) -> dict[str, Any]:
        return self._call("POST", "/api/collections/hf", json={"url": url, "name": name})

    def submit_path(self, path: str, name: str | None = None) -> dict[str, Any]:
        return self._call("POST", "/api/collections/path",
                          json={"path": path, "name": name})

    def submit_archive(self, path: Path, name: str | None = None) -> dict[str, Any]:
        """Upload an archive file, or a directory packed on the fly as tar.gz."""
        if path.is_dir():
            data, filename = pack_dir(path), f"{path.resolve().name}.tar.gz"
        else:
            data, filename = path.read_bytes(), path.name
        params = {"filename": filename, **({"name": name} if name else {})}
        return self._call("POST", "/api/collections/upload", content=data,
                          params=params, headers={"Content-Type": "application/octet-stream"})

    def collections(self) -> list[dict[str, Any]]:
        return self._call("GET", "/api/collections")

    # --- runs and results ----------------------------------------------------------------
    def preflight(self, challenge: str, collection_id: int) -> dict[str, Any]:
        return self._call("POST", "/api/runs/preflight",
                          json={"challenge": challenge, "collection_id": collection_id})

    def launch(self, challenge: str, collection_id: int, request_id: str) -> dict[str, Any]:
        return self._call("POST", "/api/runs", json={
            "challenge": challenge, "collection_id": collection_id, "request_id": request_id})

    def runs(self, **filters: Any) -> dict[str, Any]:
        params = {k: v for k, v in filters.items() if v is not None}
        return self._call("GET", "/api/runs", params=params)

    def run(self, run_id: int) -> dict[str, Any]:
        return self._call("GET", f"/api/runs/{run_id}")

    def cancel(self, run_id: int) -> dict[str, Any]:
        return self._call("POST", f"/api/runs/{run_id}/cancel")

    def collect(self, run_id: int) -> dict[str, Any]:
        return self._call("POST", f"/api/runs/{run_id}/collect")

    def result(self, run_id: int) -> dict[str, Any]:
        return self._call("GET", f"/api/runs/{run_id}/result")

    def review(self, run_id: int, decision: str, note: str) -> dict[str, Any]:
        return self._call("POST", f"/api/runs/{run_id}/review",
                          json={"decision": decision, "note": note})

    # --- board ---------------------------------------------------------------------------
    def threads(self) -> list[dict[str, Any]]:
        return self._call("GET", "/api/board/threads")

    def thread(self, thread_id: int) -> dict[str, Any]:
        return self._call("GET", f"/api/board/threads/{thread_id}")

    def post_thread(self, title: str, body: str) -> dict[str, Any]:
        return self._call("POST", "/api/board/threads",
                          json={"title": title, "body": body})

    def post_message(self, thread_id: int, body: str) -> dict[str, Any]:
        return self._call("POST", f"/api/board/threads/{thread_id}/messages",
                          json={"body": body})


def pack_dir(root: Path) -> bytes:
    """A directory as tar.gz bytes (without .git), for uploading."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(root, arcname=root.resolve().name,
                filter=lambda ti: None if "/.git" in f"/{ti.name}" else ti)
    return buf.getvalue()
