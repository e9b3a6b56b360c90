"""Who caused a failure, path by path: a real trial (local sandbox) against a loopback
chat server that fails in one way at one turn, then what evaluation, the gates and GRPO
make of the trial. What the model did is the agent's 0; only what the provider or the
harness did leaves the trial out."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agents.tasks import write_task
from posttrain_arena.agents.model import ModelAgent
from posttrain_arena.evaluate.attribution import Cause, counts, failure_cause, training_reward
from posttrain_arena.evaluate.report import build_report
from posttrain_arena.gates.policy import INFRA_OUTCOMES
from posttrain_arena.models.openai import OpenAIChatModel
from posttrain_arena.task_format.package import load_task
from posttrain_arena.train.episodes import trial_episodes
from posttrain_arena.trial.executor import ThreadExecutor, TrialJob
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner


class Server:
    """Chat completions: turn 0 writes the wrong word, turn 1 submits, unless `fail`
    says to answer a turn with (status, message) instead. /models lists the model
    with `max_model_len`."""

    def __init__(self) -> None:
        self.fail: dict[int, tuple[int, str]] = {}
        self.max_model_len = 4096
        self.posts = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [
                    {"id": "m", "object": "model", "max_model_len": server.max_model_len}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.posts += 1
                turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
                if turn in server.fail:
                    status, message = server.fail[turn]
                    return self._send(status, {"error": {"message": message}})
                call = ({"name": "bash", "arguments": json.dumps({"command": "echo no > out.txt"})}
                        if turn == 0 else {"name": "submit", "arguments": "{}"})
                self._send(200, {"choices": [{"index": 0, "finish_reason": "tool_calls",
                                              "message": {"role": "assistant", "content": "",
                                                          "tool_calls": [{
                                                              "id": f"c{turn}",
                                                              "type": "function",
                                                              "function": call}]}}],
                                 "usage": {"prompt_tokens": 20, "completion_tokens": 5}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.httpd.shutdown()


OVERFLOW = ("This model's maximum context length is 4096 tokens. However, you requested "
            "4400 tokens (3888 in the messages, 512 in the completion).")

# path -> (failures by turn, outcome, cause, counted in rates, GRPO reward)
PATHS: dict[str, tuple[dict[int, tuple[int, str]], Outcome, Cause | None, bool, float | None]] = {
    "no failure": ({}, Outcome.SCORED, None, True, 0.0),
    "context overflow (the server's 400)": ({1: (400, OVERFLOW)}, Outcome.SCORED, None, True,
                                            0.0),
    "a request the model's output made invalid": (
        {1: (400, "tool call arguments are not valid JSON")}, Outcome.SCORED, None, True, 0.0),
    "refused before the model wrote anything": (
        {0: (400, "unknown field tool_choice")}, Outcome.INFRA_ERROR, Cause.HARNESS, False, None),
    "5xx that persists": ({1: (503, "overloaded")}, Outcome.INFRA_ERROR, Cause.PROVIDER, False,
                          None),
    "the server's timeout": ({1: (504, "upstream timed out")}, Outcome.INFRA_ERROR,
                             Cause.PROVIDER, False, None),
}


@pytest.mark.bwrap
@pytest.mark.parametrize("path", list(PATHS))
def test_each_error_path_is_attributed_the_same_everywhere(server: Server, tmp_path: Path,
                                                           path: str) -> None:
    fail, outcome, cause, counted, reward = PATHS[path]
    server.fail = fail
    task = load_task(write_task(tmp_path, "t", word="yes"))
    model = OpenAIChatModel("m", base_url=server.url, api_key="", max_retries=1,
                            sleep=lambda _: None)
    out = ThreadExecutor(TrialRunner("local"), slots=1).run(
        TrialJob(task, ModelAgent(model), 0, capture=True))
    result = out.result
    assert result.outcome is outcome, result.reason
    assert failure_cause(result.outcome, result.reason) is cause
    # Evaluation: counted trials are in the denominator (a 0 when it failed).
    report = build_report([(task.name, task.checksum, task.domain.value)], [result], model="m",
                          agent="a", suite="s", suite_hash="h", k=1, backend="local",
                          wall_sec=0)
    assert report.tasks[0].n == int(counted)
    assert report.overall.pass_rate == (0.0 if counted else None)
    # Gates: the same trials are left out.
    assert (result.outcome.value in INFRA_OUTCOMES) is (not counted)
    # GRPO: the agent's failures are 0, the rest masked.
    episode = trial_episodes(lambda job: out)(task, ModelAgent(model), 0)
    assert episode.reward == reward


@pytest.mark.bwrap
def test_the_context_limit_is_the_servers_and_is_enforced_before_sending(
        server: Server, tmp_path: Path) -> None:
    """vLLM lists max_model_len; once a request would not fit, the agent does not send
    it: the episode ends as the agent's (scored on its state), not as a provider error."""
    server.max_model_len = 25  # turn 0 holds 20 + 5 tokens: nothing more fits
    task = load_task(write_task(tmp_path, "t", word="no"))
    model = OpenAIChatModel("m", base_url=server.url, api_key="", sleep=lambda _: None)
    assert model.context_limit == 25
    out = ThreadExecutor(TrialRunner("local"), slots=1).run(
        TrialJob(task, ModelAgent(model), 0, capture=True))
    assert out.run is not None and out.run.info["exit"] == "max_context"
    assert out.run.info["context_limit"] == 25
    assert server.posts == 1  # the second request was never sent
    assert out.result.outcome is Outcome.SCORED and out.result.reward == 1.0  # "no" was right


@pytest.mark.parametrize(("outcome", "reason", "cause"), [
    (Outcome.SCORED, None, None),
    (Outcome.AGENT_TIMEOUT, "deadline", Cause.AGENT),
    (Outcome.VERIFIER_ERROR, "no reward file", Cause.AGENT),
    (Outcome.BUILD_FAILED, "docker build failed", Cause.TASK),
    (Outcome.INFRA_ERROR, "sandbox did not start", Cause.HARNESS),
    (Outcome.INFRA_ERROR, "agent failure: the model provider failed (m, turn 2): 503",
     Cause.PROVIDER),
])
def test_the_classification_table(outcome: Outcome, reason: str | None,
                                  cause: Cause | None) -> None:
    """A verifier error the agent's state caused is a 0 for training too, not masked."""
    assert failure_cause(outcome, reason) is cause
    assert failure_cause(outcome.value, reason) is cause  # a report's summary says it so
    assert counts(outcome, reason) is (cause in (None, Cause.AGENT))
    expected = (0.5 if outcome is Outcome.SCORED else 0.0) if counts(outcome, reason) else None
    assert training_reward(outcome, 0.5 if outcome is Outcome.SCORED else None,
                           reason) == expected
