"""The verifier's runtime extras, provided without network: `pytest --ctrf FILE`.

`verifier_runtime()` gives a read-only mount holding the CTRF plugin and the environment
that makes pytest load it (PYTEST_PLUGINS), so PostTrain-style `test.sh` verifiers that run
`pytest --ctrf ...` work offline on any backend and any image with python3 + pytest. In
`posttrain-arena/python:bookworm` the plugin is also installed; loading it twice is
harmless (the second copy notices the option exists and stays quiet).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from posttrain_arena.paths import cache_home
from posttrain_arena.sandbox.base import Mount

RUNTIME_TARGET = "/opt/arena-runtime"
PLUGIN_MODULE = "ctrf_plugin"


def _runtime_dir() -> Path:
    return cache_home() / "verifier-runtime"


def verifier_runtime(target: str = RUNTIME_TARGET) -> tuple[Mount, dict[str, str]]:
    """(mount, env) that give a session `pytest --ctrf FILE`; add both to the verifier's
    session and exec. The host directory holds only the plugin module."""
    directory = _runtime_dir()
    directory.mkdir(parents=True, exist_ok=True)
    source = Path(__file__).with_name("ctrf_plugin.py")
    dest = directory / f"{PLUGIN_MODULE}.py"
    if not dest.is_file() or dest.read_bytes() != source.read_bytes():
        tmp = directory / f".{PLUGIN_MODULE}.{os.getpid()}.tmp"
        shutil.copyfile(source, tmp)
        tmp.replace(dest)
    env = {"PYTHONPATH": target, "PYTEST_PLUGINS": PLUGIN_MODULE}
    return Mount(source=directory, target=target, read_only=True), env
