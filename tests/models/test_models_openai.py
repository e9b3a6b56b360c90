"""The OpenAI-compatible client against a loopback server speaking the real wire format."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from posttrain_arena.agents.model import TOOLS
from posttrain_arena.models import ModelError, ProviderError, SamplingParams, load_model
from posttrain_arena.models.openai import OpenAIChatModel


class FakeServer:
    """A chat-completions endpoint: fails `fail_first` times with `fail_status`, then
    answers with a bash tool call, vLLM-style token ids and logprobs."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.fail_first = 0
        self.fail_status = 503
        self.vllm = True
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "not found"}})
                if len(server.requests) <= server.fail_first:
                    return self._send(server.fail_status, {"error": {"message": "overloaded"}})
                if not server.vllm and "return_token_ids" in body:
                    return self._send(400, {"error": {
                        "message": "Unrecognized request argument supplied: return_token_ids"}})
                self._send(200, server.reply(body))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        ids = [101, 102, 103]
        vllm = "return_tokens_as_token_ids" in body
        tokens = [f"token_id:{i}" if vllm else f"t{i}" for i in ids]
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": None, "tool_calls": [{
                "id": "chatcmpl-tool-abc", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": "ls -la"})}}]},
            "logprobs": {"content": [{"token": t, "logprob": -0.5 * (n + 1), "bytes": [],
                                      "top_logprobs": []} for n, t in enumerate(tokens)]},
            "finish_reason": "tool_calls",
        }
        out: dict[str, Any] = {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0,
            "model": body["model"], "choices": [choice],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        }
        if body.get("return_token_ids"):
            out["prompt_token_ids"] = [1, 2, 3, 4, 5, 6, 7]
            choice["token_ids"] = ids
        return out


@pytest.fixture
def server() -> Iterator[FakeServer]:
    srv = FakeServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def _client(server: FakeServer, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel("tiny-model", base_url=server.url, api_key="sk-test",
                           sleep=lambda _: None, **kw)


MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "list files"}]


def test_tool_calls_token_ids_and_logprobs(server: FakeServer) -> None:
    resp = _client(server).chat(MESSAGES, tools=TOOLS,
                                sampling=SamplingParams(temperature=0.5, seed=4))
    assert [(c.name, c.arguments) for c in resp.tool_calls] == [("bash", {"command": "ls -la"})]
    assert resp.tool_calls[0].id == "chatcmpl-tool-abc"
    assert resp.completion_token_ids == [101, 102, 103]
    assert resp.prompt_token_ids == [1, 2, 3, 4, 5, 6, 7]
    assert resp.completion_logprobs == [-0.5, -1.0, -1.5]
    assert resp.has_tokens and resp.finish_reason == "tool_calls"
    assert resp.usage.prompt_tokens == 7
    sent = server.requests[0]
    assert sent["logprobs"] is True and sent["return_tokens_as_token_ids"] is True
    assert sent["tools"] == TOOLS and sent["seed"] == 4 and sent["temperature"] == 0.5
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    assert resp.message()["tool_calls"][0]["function"]["name"] == "bash"


def test_tool_choice_is_sent_in_its_wire_form(server: FakeServer) -> None:
    """A tool's name forces that tool (the named form); a mode is sent as is; a request
    without tools carries no tool_choice (servers reject one without tools)."""
    _client(server, tool_choice="bash").chat(MESSAGES, tools=TOOLS)
    sent = server.requests[-1]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "bash"}}
    # The forced tool's arguments are pinned to its schema; the other tools are as given.
    assert [t["function"].get("strict") for t in sent["tools"]] == [True, None]
    assert [{**t, "function": {k: v for k, v in t["function"].items() if k != "strict"}}
            for t in sent["tools"]] == TOOLS
    assert "strict" not in TOOLS[0]["function"]  # the caller's tools are not changed
    _client(server, tool_choice="required").chat(MESSAGES, tools=TOOLS)
    assert server.requests[-1]["tool_choice"] == "required"
    assert server.requests[-1]["tools"] == TOOLS
    _client(server, tool_choice="bash").chat(MESSAGES)
    assert "tool_choice" not in server.requests[-1]
    _client(server).chat(MESSAGES, tools=TOOLS)
    assert "tool_choice" not in server.requests[-1]


def test_tool_choice_naming_no_tool_is_refused(server: FakeServer) -> None:
    with pytest.raises(ModelError, match=r"'python' names no tool.*bash, submit"):
        _client(server, tool_choice="python").chat(MESSAGES, tools=TOOLS)
    assert server.requests == []  # refused before anything was sent
    with pytest.raises(ModelError, match="empty"):
        _client(server, tool_choice=" ")


def test_transient_errors_are_retried(server: FakeServer) -> None:
    server.fail_first = 3
    resp = _client(server).chat(MESSAGES, tools=TOOLS)
    assert resp.tool_calls and len(server.requests) == 4


def test_persistent_errors_raise_provider_error(server: FakeServer) -> None:
    server.fail_first = 100
    with pytest.raises(ProviderError, match="503"):
        _client(server, max_retries=2).chat(MESSAGES)
    assert len(server.requests) == 3


def test_client_errors_are_not_retried(server: FakeServer) -> None:
    server.fail_first, server.fail_status = 100, 401
    with pytest.raises(ProviderError, match="401"):
        _client(server).chat(MESSAGES)
    assert len(server.requests) == 1


def test_unreachable_server_is_a_provider_error() -> None:
    client = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="",
                             max_retries=1, sleep=lambda _: None)
    with pytest.raises(ProviderError, match="still failing"):
        client.chat(MESSAGES)


def test_server_without_token_id_options(server: FakeServer) -> None:
    """A provider that rejects vLLM's options is asked again without them, and the
    completion still carries logprobs (but no exact ids)."""
    server.vllm = False
    client = _client(server)
    resp = client.chat(MESSAGES)
    assert resp.completion_logprobs == [-0.5, -1.0, -1.5]
    assert resp.completion_token_ids is None and not resp.has_tokens
    client.chat(MESSAGES)
    assert "return_token_ids" not in server.requests[-1]
    assert len(server.requests) == 3


def test_spec_reads_environment(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    model = load_model("openai:served")
    assert model.name == "openai:served"
    model.chat(MESSAGES)
    assert server.requests[0]["model"] == "served"
    assert server.headers[0]["Authorization"] == "Bearer sk-env"
