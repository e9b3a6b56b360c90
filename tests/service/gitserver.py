"""A real git server on loopback for the source tests: `git http-backend` (git's own
smart-HTTP server, run as CGI) behind a small threaded HTTP server, plus the one route
of the Hugging Face hub API that the hf:// source calls (a dataset revision's commit),
so that hf:// sources are tested against a stand-in, never the real hub.

A bare repository holding a file `PRIVATE` answers 401, as a private one does.
Repositories live under `root` as bare repositories: `root/NAME.git` for git URLs,
`root/datasets/ORG/NAME` for hub datasets (as the hub serves them over git). The server
counts the bytes of every response it sent, so tests can prove a fetch was cut off.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit


def git(cwd: Path, *args: str) -> str:
    """Run git as a test author would (fixed identity, no user config)."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e.org", "-c", "init.defaultBranch=main",
         *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit_all(repo: Path, message: str = "commit") -> str:
    """git init (once), add everything and commit; the new commit."""
    if not (repo / ".git").exists():
        git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


class GitHttpServer:
    """Serves bare repositories under `root` over smart HTTP on 127.0.0.1."""

    def __init__(self, root: Path):
        self.root = root
        self.sent = 0  # response body bytes written to clients
        self.api_calls: list[str] = []
        self.api_auth: list[str | None] = []  # the Authorization header of each API call
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def host(self) -> str:
        """HOST:PORT of the server."""
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def publish(self, work: Path, name: str) -> str:
        """Push `work` (a repository) as a bare repository `name` under the root; the URL."""
        bare = self.root / name
        if bare.exists():
            shutil.rmtree(bare)
        bare.parent.mkdir(parents=True, exist_ok=True)
        git(self.root, "clone", "-q", "--bare", str(work), str(bare))
        git(bare, "config", "uploadpack.allowReachableSHA1InWant", "true")
        return f"{self.url}/{name}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _count(self, n: int) -> None:
        with self._lock:
            self.sent += n

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/api/datasets/"):
                    self._hub_api()
                else:
                    self._cgi()

            def do_POST(self) -> None:
                self._cgi()

            def _hub_api(self) -> None:
                # /api/datasets/ORG/NAME/revision/REV  (huggingface_hub's dataset_info)
                path = unquote(urlsplit(self.path).path)
                server.api_calls.append(path)
                server.api_auth.append(self.headers.get("Authorization"))
                head, _, revision = path.removeprefix("/api/datasets/").partition("/revision/")
                bare = server.root / "datasets" / head
                if not (bare / "HEAD").is_file():  # the hub's answers carry an error code
                    self._json(404, {"error": "Repository not found"}, "RepoNotFound")
                    return
                try:
                    sha = git(bare, "rev-parse", "--verify", "-q", f"{revision}^{{commit}}")
                except subprocess.CalledProcessError:
                    self._json(404, {"error": f"Invalid rev id: {revision}"}, "RevisionNotFound")
                    return
                gated = (bare / "GATED").exists()
                self._json(200, {"_id": head, "id": head, "sha": sha, "private": False,
                                 "gated": "auto" if gated else False, "disabled": False,
                                 "siblings": [], "tags": [], "downloads": 0, "likes": 0})

            def _json(self, status: int, body: dict[str, Any], code: str = "") -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                if code:
                    self.send_header("X-Error-Code", code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _cgi(self) -> None:
                parts = urlsplit(self.path)
                repo = unquote(parts.path).split("/info/refs")[0].split("/git-upload")[0]
                if (server.root / repo.lstrip("/") / "PRIVATE").exists():
                    self.send_response(401)  # what a private repository answers
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = {
                    "PATH": "/usr/bin:/bin", "GIT_PROJECT_ROOT": str(server.root),
                    "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": unquote(parts.path),
                    "QUERY_STRING": parts.query, "REQUEST_METHOD": self.command,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
                    "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                    "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                }
                proc = subprocess.Popen(["git", "http-backend"], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(body)
                proc.stdin.close()
                status, headers = "200 OK", []
                while (line := proc.stdout.readline().rstrip(b"\r\n")):
                    key, _, value = line.decode().partition(":")
                    if key.lower() == "status":
                        status = value.strip()
                    else:
                        headers.append((key, value.strip()))
                code, _, reason = status.partition(" ")
                self.send_response(int(code), reason)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    while chunk := proc.stdout.read(65536):
                        self.wfile.write(chunk)
                        server._count(len(chunk))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading: what a cut-off fetch looks like
                finally:
                    proc.kill()
                    proc.wait()
                    proc.stdout.close()
                self.close_connection = True

        return Handler
