"""Capability gates shared by the whole suite.

A test marked `docker`, `bwrap`, `postgres`, `browser` or `vllm` is skipped when that capability
is missing on this machine — unless ARENA_REQUIRE_ALL_BACKENDS=1 (CI sets it), where a
missing capability fails the test instead, so CI can never go green by skipping.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@functools.cache
def _docker() -> str | None:
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return None
    except Exception as exc:  # any failure means "no engine answers"
        return f"no Docker engine answers ({type(exc).__name__}); start dockerd"


@functools.cache
def _bwrap() -> str | None:
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(
        [exe, "--ro-bind", "/", "/", "--unshare-all", "--", "true"],
        capture_output=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {probe.stderr.decode()[:200]}"
    return None


@functools.cache
def _postgres() -> str | None:
    if not os.environ.get("ARENA_TEST_POSTGRES_URL"):
        return "ARENA_TEST_POSTGRES_URL is not set (scripts/services.sh starts a server)"
    return None


@functools.cache
def _browser() -> str | None:
    if not (shutil.which("chromium") or os.path.exists("/usr/bin/chromium")):
        return "Chromium is not installed (apt-get install chromium)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


@functools.cache
def _vllm() -> str | None:
    if os.environ.get("ARENA_VLLM_PYTHON"):
        return None
    script = Path(__file__).resolve().parents[1] / "scripts" / "vllm-env.sh"
    if subprocess.run(["bash", str(script), "--check"], capture_output=True).returncode:
        return "vLLM's environment is not installed (run scripts/vllm-env.sh)"
    return None


_GATES = {"docker": _docker, "bwrap": _bwrap, "postgres": _postgres, "browser": _browser,
          "vllm": _vllm}


def pytest_runtest_setup(item: pytest.Item) -> None:
    strict = os.environ.get("ARENA_REQUIRE_ALL_BACKENDS") == "1"
    for name, gate in _GATES.items():
        if item.get_closest_marker(name) is None:
            continue
        missing = gate()
        if missing is None:
            continue
        if strict:
            pytest.fail(f"ARENA_REQUIRE_ALL_BACKENDS=1 but {missing}", pytrace=False)
        pytest.skip(missing)


@pytest.fixture(scope="session")
def arena_cache_dir() -> Iterator[Path]:
    """A private ARENA_CACHE_DIR (local images, harness bundle, locks) for this session,
    so tests never touch, or depend on, the user's cache."""
    old = os.environ.get("ARENA_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="arena-tests-") as tmp:
        os.environ["ARENA_CACHE_DIR"] = tmp
        yield Path(tmp)
    if old is None:
        os.environ.pop("ARENA_CACHE_DIR", None)
    else:
        os.environ["ARENA_CACHE_DIR"] = old
