"""`arena task serve`: a package as an OpenEnv environment, driven by openenv-core's own
client over loopback (WebSocket sessions) and by plain HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from tests.interop.harbor_kit import write_harbor_task

from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.runner import TrialRunner

pytestmark = pytest.mark.bwrap


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import uvicorn

    from posttrain_arena.serve_env.app import task_app

    root = tmp_path_factory.mktemp("serve")
    task = load_task(write_harbor_task(root / "count-words"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with TrialRunner("local", warm_pool=False) as runner:
        config = uvicorn.Config(task_app(task, runner, max_sessions=2), host="127.0.0.1",
                                port=port, log_level="warning")
        srv = uvicorn.Server(config)
        thread = threading.Thread(target=srv.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not srv.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.started
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            srv.should_exit = True
            thread.join(timeout=60)


def _client(url: str):  # type: ignore[no-untyped-def]
    from openenv.core.generic_client import GenericEnvClient

    return GenericEnvClient(base_url=url, message_timeout_s=300).sync()


def test_solving_over_a_websocket_session_scores_one(server: str) -> None:
    with _client(server) as env:
        first = env.reset()
        assert "Count the words" in first.observation["prompt"] and not first.done
        ran = env.step({"command": "wc -w < /app/words.txt > /app/count.txt; cat count.txt"})
        assert ran.observation["stdout"].strip() == "5" and ran.observation["exit_code"] == 0
        assert not ran.done and ran.reward is None
        done = env.step({"submit": True})
        assert done.done and done.reward == 1.0 and done.observation["outcome"] == "scored"
        state = env.state()
        assert state["outcome"] == "scored" and state["reward"] == 1.0
        assert state["step_count"] == 2
        after = env.step({"command": "true"})
        assert after.done and "reset first" in after.observation["reason"]


def test_doing_nothing_scores_below_one_and_reset_starts_over(server: str) -> None:
    with _client(server) as env:
        env.reset()
        env.step({"command": "echo 4 > /app/count.txt"})
        env.reset()  # abandons that trial: a fresh sandbox, the wrong answer is gone
        probe = env.step({"command": "cat /app/count.txt"})
        assert probe.observation["exit_code"] != 0
        done = env.step({"submit": True})
        assert done.done and done.reward == 0.0


def test_sessions_have_their_own_sandbox(server: str) -> None:
    # two sessions open at once, their steps interleaved: each sees only its own files
    with _client(server) as a, _client(server) as b:
        a.reset()
        b.reset()
        a.step({"command": "echo 5 > /app/count.txt"})
        b.step({"command": "echo 6 > /app/count.txt"})
        assert a.step({"command": "cat /app/count.txt"}).observation["stdout"].strip() == "5"
        assert a.step({"submit": True}).reward == 1.0
        assert b.step({"submit": True}).reward == 0.0


def test_http_endpoints(server: str) -> None:
    reset = httpx.post(f"{server}/reset", json={}, timeout=300)
    assert reset.status_code == 200 and "Count the words" in reset.json()["observation"]["prompt"]
    step = httpx.post(f"{server}/step", json={"action": {"command": "ls"}}, timeout=60)
    assert step.status_code == 200 and step.json()["done"] is True  # stateless over HTTP
    bad = httpx.post(f"{server}/step", json={"action": {"command": 3, "x": 1}}, timeout=60)
    assert bad.status_code == 422
    schema = httpx.get(f"{server}/schema", timeout=60).json()
    assert "command" in schema["action"]["properties"]
