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

A served model is named by its folder and a fingerprint of its weights
(`served_name`: `NAME@sha256:HEX`), and a client checks what answers before it relies on
it (`check_served`): an endpoint still serving the previous stage's weights is refused,
never evaluated as if it were the new ones.
"""

from __future__ import annotations

import hashlib
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


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
FINGERPRINT_CHARS = 16  # of the sha256: enough to tell two trainings' weights apart


def fingerprint(model_dir: Path) -> str:
    """sha256 of a model folder's config and weight files (names and bytes, sorted)."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ModelError(f"{model_dir} is not a local model folder; a served policy is "
                         "checked against the fingerprint of its weights")
    files = sorted(p for p in model_dir.iterdir() if p.is_file() and (
        p.name == "config.json" or p.suffix in WEIGHT_SUFFIXES))
    if not any(p.suffix in WEIGHT_SUFFIXES for p in files):
        raise ModelError(f"{model_dir} has no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()[:FINGERPRINT_CHARS]}"


def served_name(model_dir: Path) -> str:
    """The name a server of this folder's weights answers to: `NAME@sha256:HEX`."""
    return f"{Path(model_dir).resolve().name}@{fingerprint(model_dir)}"


def check_served(base_url: str, model_dir: Path, *, timeout_sec: float = 10.0) -> str:
    """The served name of `model_dir` when the server at `base_url` serves exactly those
    weights; ModelError, saying what it serves instead and how to serve these, when not."""
    want = served_name(model_dir)
    try:
        resp = httpx.get(f"{base_url.rstrip('/')}/models", timeout=timeout_sec)
        listing = resp.json().get("data") if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise ModelError(f"{base_url} does not answer /models ({exc}); start the policy "
                         f"server on {model_dir}") from None
    names = [str(e.get("id")) for e in listing or [] if isinstance(e, dict)]
    if want not in names:
        raise ModelError(f"{base_url} serves {', '.join(names) or 'nothing'}, not the weights "
                         f"this stage evaluates ({model_dir}); serve them under their "
                         f"fingerprinted name: --model {model_dir} --served-model-name {want}")
    return want


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
        self.model_name = served_name(self.model_dir)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = Path(tempfile.mkstemp(prefix="vllm-", suffix=".log")[1])
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gb),
               "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
        cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server",
               "--model", str(self.model_dir), "--served-model-name", self.model_name,
               "--host", "127.0.0.1", "--port", str(self.port),
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


__all__ = ["VllmServer", "check_served", "fingerprint", "served_name", "vllm_python"]
