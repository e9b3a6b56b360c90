"""Host replay of a starting-kit package, without a sandbox: a quick sanity net.

`seed_workspace` copies the environment's seed files the way the package's
Dockerfile COPY lines say (only the small Dockerfile subset the examples use);
`run_oracle` runs oracle/solve.sh against that workspace; `run_verifier` runs
verifier/test_outputs.py with a plain pytest. The sandboxed replay lives with the
trial tests; this one only proves the examples are internally consistent.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import posttrain_arena.sandbox as sandbox_package

CTRF_PLUGIN = Path(sandbox_package.__file__).resolve().parent / "ctrf_plugin.py"


def system_python() -> str:
    """An interpreter with pytest: Debian's python3 (as in the image) if it has pytest."""
    candidate = "/usr/bin/python3"
    if Path(candidate).exists():
        probe = subprocess.run([candidate, "-c", "import pytest"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    return sys.executable


def seed_workspace(package: Path, workspace: Path) -> dict[str, str]:
    """Apply the Dockerfile's WORKDIR/ENV/COPY lines to `workspace` (standing for /root).

    Returns the ENV variables it sets. Anything else (RUN, ADD of URLs, destinations
    outside /root) raises ValueError: the examples are meant not to need it.
    """
    env: dict[str, str] = {}
    workdir = "/root"
    context = package / "environment"
    for raw in (context / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            continue
        if keyword == "WORKDIR":
            workdir = rest.strip()
        elif keyword == "ENV":
            name, _, value = rest.strip().partition("=")
            env[name] = value.strip('"')
        elif keyword == "COPY":
            *sources, dest = shlex.split(rest)
            target = _inside(workspace, dest if dest.startswith("/") else f"{workdir}/{dest}")
            for source in sources:
                src = context / source
                if src.is_dir():
                    shutil.copytree(src, target, dirs_exist_ok=True)
                elif dest.endswith("/"):
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, target / src.name)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, target)
        else:
            raise ValueError(f"{package.name}: Dockerfile line not replayable on the host: {line}")
    _inside(workspace, workdir).mkdir(parents=True, exist_ok=True)
    return env


def _inside(workspace: Path, image_path: str) -> Path:
    if image_path.rstrip("/") != "/root" and not image_path.startswith("/root/"):
        raise ValueError(f"destination {image_path} is outside /root")
    return workspace / image_path.removeprefix("/root").strip("/")


def trial_env(workspace: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal environment like the sandbox's: workspace, HOME, plain PATH."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workspace),
        "BENCHFLOW_WORKSPACE": str(workspace),
        "BENCHFLOW_SKIP_VERIFIER_DEPS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
    }
    env.update(extra or {})
    return env


def run_oracle(
    package: Path, workspace: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """bash oracle/solve.sh with cwd = workspace."""
    return subprocess.run(
        ["bash", str(package / "oracle" / "solve.sh")],
        cwd=workspace,
        env=trial_env(workspace, env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_verifier(package: Path, dest: Path) -> Path:
    """The verifier directory copied out of the repository, as the harness mounts it.

    Running it in place would let pytest pick up the repository's pyproject.toml and
    conftest files; the real harness mounts it alone at /verifier.
    """
    target = dest / "verifier"
    shutil.copytree(package / "verifier", target)
    return target


def run_verifier(verifier: Path, workspace: Path) -> subprocess.CompletedProcess[str]:
    """`python3 -m pytest test_outputs.py` against the workspace."""
    return subprocess.run(
        [
            system_python(),
            "-m",
            "pytest",
            str(verifier / "test_outputs.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(verifier),
        ],
        cwd=workspace.parent,
        env=trial_env(workspace),
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_test_sh(verifier: Path, workspace: Path, logs: Path) -> subprocess.CompletedProcess[str]:
    """verifier/test.sh with a pytest that accepts --ctrf, as the image provides it.

    The image gets the sandbox's CTRF plugin installed with an entry point; here the
    same file is copied next to a wrapper script and loaded with `-p`.
    """
    tools = workspace.parent / "tools"
    tools.mkdir(exist_ok=True)
    shutil.copyfile(CTRF_PLUGIN, tools / "ctrf_plugin.py")
    pytest_bin = tools / "pytest-ctrf"
    pytest_bin.write_text(
        f'#!/bin/sh\nPYTHONPATH="{tools}" exec {system_python()} -m pytest -p ctrf_plugin "$@"\n'
    )
    pytest_bin.chmod(0o755)
    env = trial_env(
        workspace,
        {
            "BENCHFLOW_VERIFIER_DIR": str(verifier),
            "BENCHFLOW_REWARD_TEXT": str(logs / "reward.txt"),
            "BENCHFLOW_REWARD_JSON": str(logs / "reward.json"),
            "BENCHFLOW_CTRF_JSON": str(logs / "ctrf.json"),
            "BENCHFLOW_PYTEST_BIN": str(pytest_bin),
        },
    )
    return subprocess.run(
        ["bash", str(verifier / "test.sh")],
        cwd=workspace.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
