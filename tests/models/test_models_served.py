"""A policy server is used only when it serves the weights a stage evaluates: checked by
name and a fingerprint of the weights (the pipeline went on from SFT to an evaluation
while the server still served the base model, and every request there failed)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.models.base import ModelError
from posttrain_arena.models.vllm_server import check_served, fingerprint, served_name


def _weights(folder: Path, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "qwen2"}')
    (folder / "model.safetensors").write_bytes(data)
    (folder / "tokenizer.json").write_text("{}")
    return folder


@pytest.fixture
def listing() -> Iterator[tuple[str, list[str]]]:
    names: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            data = json.dumps({"object": "list", "data": [
                {"id": n, "object": "model", "max_model_len": 2048} for n in names]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", names
    httpd.shutdown()


def test_the_fingerprint_follows_the_weights_not_the_folder(tmp_path: Path) -> None:
    base = _weights(tmp_path / "base", b"\x00" * 64)
    same = _weights(tmp_path / "copy" / "base", b"\x00" * 64)
    trained = _weights(tmp_path / "sft" / "base", b"\x01" + b"\x00" * 63)
    assert fingerprint(base) == fingerprint(same) != fingerprint(trained)
    (same / "tokenizer.json").write_text('{"other": 1}')  # not weights
    assert fingerprint(same) == fingerprint(base)
    assert served_name(base).startswith("base@sha256:")
    with pytest.raises(ModelError, match="not a local model folder"):
        fingerprint(tmp_path / "hub-id")


def test_a_server_of_other_weights_is_refused(tmp_path: Path,
                                              listing: tuple[str, list[str]]) -> None:
    url, names = listing
    base = _weights(tmp_path / "base" / "policy", b"base")
    sft = _weights(tmp_path / "sft" / "policy", b"sft")
    names.append(served_name(base))  # the server still holds the previous stage's model
    with pytest.raises(ModelError, match="not the weights this stage evaluates") as err:
        check_served(url, sft)
    assert f"--served-model-name {served_name(sft)}" in str(err.value)
    names.append(served_name(sft))
    assert check_served(url, sft) == served_name(sft)
    with pytest.raises(ModelError, match="does not answer"):
        check_served("http://127.0.0.1:9/v1", sft, timeout_sec=2)
