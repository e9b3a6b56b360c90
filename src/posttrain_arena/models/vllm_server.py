"""A vLLM OpenAI-compatible server for a local model folder, as a managed process.

    with VllmServer(Path("model"), python=vllm_python()) as server:
        model = OpenAIChatModel(server.model_name, base_url=server.base_url)

The server runs in vLLM's own virtual environment (`scripts/vllm-env.sh` installs the
CPU build there once per machine), never in the project's: vLLM pins its own torch.
It is started as `python -m vllm.entrypoints.openai.api_server` (the `vllm` console
script of the CPU wheel cannot find its own distribution), with Hermes tool-call
parsing (the `<tool_call>` blocks our chat templates render), and on CPU with
`--dtype float32 --enforce-eager` and a KV cache of `kv_cache_gb` GiB
(VLLM_CPU_KVCACHE_SPACE, a whole number).
A forced call (`tool_choice` naming a tool, OpenAIChatModel's `tool_choice`) needs no
further option: with the Hermes parser vLLM 0.32 writes it in the model's own
`<tool_call>` format under a grammar (its default structured-output backend, xgrammar,
which runs on CPU), and pins the arguments to the tool's schema when the tool is marked
`strict` (`--tool-strict-level auto`, the default; the client marks the forced tool).
One server serves one model folder: to serve a stage's new weights, start another.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from posttrain_arena.models.base import ModelError


def vllm_python() -> Path:
    """The python of vLLM's environment: $ARENA_VLLM_PYTHON, else what
    scripts/vllm-env.sh would print (ModelError, with the fix, when it is missing)."""
    given = os.environ.get("ARENA_VLLM_PYTHON")
    if given:
        return Path(given)
    script = Path(__file__).resolve().parents[3] / "scripts" / "vllm-env.sh"
    if not script.is_file():
        raise ModelError("vLLM's environment is unknown: set ARENA_VLLM_PYTHON to the python "
                         "of an environment where vllm is installed")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        raise ModelError(f"scripts/vllm-env.sh failed: {done.stderr.strip()[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VllmServer:
    """Starts vLLM on a free local port; `close` (or leaving the `with`) stops it."""

    def __init__(self, model_dir: Path, *, python: Path, kv_cache_gb: int = 1,
                 max_model_len: int = 2048, start_timeout_sec: float = 600.0,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.model_dir = Path(model_dir).resolve()
        if not (self.model_dir / "config.json").is_file():
            raise ModelError(f"{self.model_dir} is not a model folder (no config.json)")
        self.port = _free_port()
        self.model_name = str(self.model_dir)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = Path(tempfile.mkstemp(prefix="vllm-", suffix=".log")[1])
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gb),
               "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
        cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server",
               "--model", self.model_name, "--host", "127.0.0.1", "--port", str(self.port),
               "--dtype", "float32", "--enforce-eager", "--max-model-len", str(max_model_len),
               "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
               "--max-logprobs", "20", "--seed", "0", *extra_args]
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        self._wait(start_timeout_sec)

    def _wait(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                self.close()
                raise ModelError(f"vLLM exited with {self.proc.returncode} while starting:\n"
                                 f"{tail}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        self.close()
        raise ModelError(f"vLLM did not answer within {timeout:.0f} s; see {self.log_path}")

    def close(self) -> None:
        """Stop the server (its whole process group) and wait for it."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=60)
        self._log.close()

    def __enter__(self) -> VllmServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["VllmServer", "vllm_python"]
