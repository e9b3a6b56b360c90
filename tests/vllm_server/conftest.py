"""The vLLM server tests' shared fixtures: one server per module on that module's
`model_dir` (a fixture each module defines: a blank tiny model, a fine-tuned one), the
same weights in process, and a client of the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from posttrain_arena.models.openai import OpenAIChatModel
from posttrain_arena.models.transformers_local import TransformersChatModel
from posttrain_arena.models.vllm_server import VllmServer, vllm_python


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[VllmServer]:
    with VllmServer(model_dir, python=vllm_python(), kv_cache_gb=1) as srv:
        yield srv


@pytest.fixture(scope="module")
def local(model_dir: Path) -> TransformersChatModel:
    return TransformersChatModel.from_pretrained(model_dir, device="cpu")


@pytest.fixture
def remote(server: VllmServer) -> Iterator[OpenAIChatModel]:
    client = OpenAIChatModel(server.model_name, base_url=server.base_url, api_key="none")
    yield client
    client.close()
