"""The verifier runtime: how each entry point runs, and how its reward is read.

Entry points (spec.VerifierKind):

* `verifier.py`: `python3 -I VDIR/verifier.py`; it writes reward.txt or reward.json.
* `test.sh` (the existing format): `bash --noprofile --norc VDIR/test.sh` with the
  BENCHFLOW_* variables set and BENCHFLOW_SKIP_VERIFIER_DEPS=1, so it uses the harness's
  pytest (BENCHFLOW_PYTEST_BIN, with `--ctrf`) instead of downloading one.
* `test_outputs.py` alone: the harness's pytest runs it; exit 0 is reward 1.0, exit 1
  (tests failed) is 0.0, anything else a verifier error.

Commands are argv lists started through `env -i`, never `bash -lc`, so nothing in the
agent's workspace (.profile, .bashrc, BASH_ENV) takes part. The reward is read on the
host from the output directory after the verifier ended: reward.json `{"reward": x}`
first, else reward.txt; a value outside [0, 1], a missing or unparsable reward is a
verifier error with the reason. CTRF JSON, when written, becomes per-test details.
"""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from posttrain_arena.spec.package import VerifierKind
from posttrain_arena.trial.result import TestDetail

LOGS_DIR = "/logs/verifier"
"""Where the verifier writes its reward inside its session."""

PINNED_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_PYTEST_EXIT = {
    2: "pytest was interrupted",
    3: "pytest hit an internal error",
    4: "pytest was given a bad command line",
    5: "pytest collected no tests",
}


@dataclass(frozen=True)
class VerifierCommand:
    """One verifier invocation: argv (run with `env -i`), its environment, its cwd."""

    argv: list[str]
    env: dict[str, str]
    workdir: str
    pytest_only: bool = False


def build_command(
    kind: VerifierKind,
    *,
    verifier_dir: str,
    harness_dir: str,
    workdir: str,
    base_env: Mapping[str, str] | None = None,
    isolate_site: bool = False,
    logs_dir: str = LOGS_DIR,
    pycache_prefix: str | None = None,
) -> VerifierCommand:
    """The command that runs a verifier entry point.

    `base_env` is the image's environment (fresh mode: a pristine image's, trusted);
    shared mode passes none, so PATH is pinned. `isolate_site` runs Python with `-S`
    and adds site-packages without executing .pth files or sitecustomize;
    `pycache_prefix` makes Python read bytecode only from that (fresh) directory.
    """
    pyflags = ["python3", "-I", "-B", *(["-S"] if isolate_site else []),
               *(["-X", f"pycache_prefix={pycache_prefix}"] if pycache_prefix else [])]
    env = {k: v for k, v in (base_env or {}).items() if not k.startswith(("PYTHON", "BASH"))}
    env.setdefault("PATH", PINNED_PATH)
    if base_env is None:
        env["PATH"] = PINNED_PATH
    env.setdefault("HOME", "/root")
    env.setdefault("LANG", "C.UTF-8")
    ctrf = f"{logs_dir}/ctrf.json"
    pytest_bin = f"{harness_dir}/pytest"
    env.update(
        {
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "ARENA_VERIFIER_DIR": verifier_dir,
            "ARENA_PYFLAGS": " ".join(pyflags[3:]),
            "BENCHFLOW_SKIP_VERIFIER_DEPS": "1",
            "BENCHFLOW_VERIFIER_DIR": verifier_dir,
            "BENCHFLOW_WORKSPACE": workdir,
            "BENCHFLOW_REWARD_TEXT": f"{logs_dir}/reward.txt",
            "BENCHFLOW_REWARD_JSON": f"{logs_dir}/reward.json",
            "ARENA_LOGS_DIR": logs_dir,
            "BENCHFLOW_CTRF_JSON": ctrf,
            "BENCHFLOW_REWARD_DETAILS_JSON": ctrf,
            "BENCHFLOW_PYTEST_BIN": pytest_bin,
        }
    )
    py = pyflags
    if kind is VerifierKind.VERIFIER_PY:
        script = f"{verifier_dir}/verifier.py"
        argv = [*py, f"{harness_dir}/run_python.py", script] if isolate_site else [*py, script]
        return VerifierCommand(argv, env, workdir)
    if kind is VerifierKind.TEST_SH:
        return VerifierCommand(["bash", "--noprofile", "--norc", f"{verifier_dir}/test.sh"],
                               env, workdir)
    argv = ["sh", pytest_bin, "--ctrf", ctrf, f"{verifier_dir}/test_outputs.py", "-rA", "-v"]
    return VerifierCommand(argv, env, workdir, pytest_only=True)


def env_argv(command: VerifierCommand) -> list[str]:
    """argv that starts the command with exactly its environment (`env -i K=V ... argv`)."""
    pairs = [f"{k}={v}" for k, v in sorted(command.env.items())]
    return ["/usr/bin/env", "-i", *pairs, *command.argv]


@dataclass
class VerifierReading:
    """What the verifier's output says: a reward, or why there is none."""

    reward: float | None
    reason: str | None = None
    details: list[TestDetail] = field(default_factory=list)


def read_outcome(
    logs: Path, *, exit_code: int, timed_out: bool, timeout: float, pytest_only: bool,
    stderr_tail: str = "",
) -> VerifierReading:
    """Interpret a finished verifier: its exit, then its reward files, then CTRF."""
    details = read_ctrf(logs / "ctrf.json")
    if timed_out:
        return VerifierReading(None, f"the verifier ran past its {timeout:g} s limit", details)
    if pytest_only:
        if exit_code in (0, 1):
            reward = 1.0 if exit_code == 0 else 0.0
            (logs / "reward.txt").write_text(f"{reward}\n")
            return VerifierReading(reward, None, details)
        why = _PYTEST_EXIT.get(exit_code, f"pytest exited with status {exit_code}")
        return VerifierReading(None, f"{why}{_tail(stderr_tail)}", details)
    if exit_code != 0:
        return VerifierReading(
            None, f"the verifier exited with status {exit_code}{_tail(stderr_tail)}", details
        )
    value, reason = read_reward(logs)
    return VerifierReading(value, reason, details)


def read_reward(logs: Path) -> tuple[float | None, str | None]:
    """(reward, None) from reward.json or reward.txt, else (None, why)."""
    for name in ("reward.json", "reward.txt"):
        path = logs / name
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode):
            return None, f"{LOGS_DIR}/{name} is not a regular file"
        if info.st_size > 65_536:
            return None, f"{LOGS_DIR}/{name} is too large ({info.st_size} bytes)"
        text = path.read_text(encoding="utf-8", errors="replace").strip()
        try:
            if name == "reward.json":
                data = json.loads(text)
                value = data.get("reward") if isinstance(data, dict) else None
                if isinstance(value, bool) or not isinstance(value, int | float):
                    why = f'has no numeric "reward" (got {text[:80]!r})'
                    return None, f"{LOGS_DIR}/reward.json {why}"
                reward = float(value)
            else:
                reward = float(text)
        except ValueError:
            return None, f"{LOGS_DIR}/{name} is not a number (got {text[:80]!r})"
        if math.isnan(reward) or not 0.0 <= reward <= 1.0:
            return None, f"{LOGS_DIR}/{name} holds {reward}, outside [0, 1]"
        return reward, None
    return None, f"the verifier wrote no reward ({LOGS_DIR}/reward.txt or reward.json)"


def read_ctrf(path: Path) -> list[TestDetail]:
    """Per-test details from a CTRF JSON report; [] when absent or malformed."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > 16 << 20:
            return []
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        tests = data["results"]["tests"]
    except (ValueError, KeyError, TypeError, OSError):
        return []
    out: list[TestDetail] = []
    for test in tests if isinstance(tests, list) else []:
        if not isinstance(test, dict) or "name" not in test:
            continue
        status = str(test.get("status", "other"))
        message = test.get("message") or test.get("trace")
        out.append(TestDetail(name=str(test["name"]), status=status,
                              message=str(message)[:4000] if message else None))
    return out


def _tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return f": {text[-limit:]}" if text else ""
