"""The verifier runtime: how each entry point runs, and how its reward is read.

Entry points (spec.VerifierKind):

* `verifier.py`: `python3 -I VDIR/verifier.py`; it writes reward.txt or reward.json.
* `test.sh` (the existing format): `bash --noprofile --norc VDIR/test.sh` (`sh VDIR/test.sh`
  when its first line asks for sh) with the BENCHFLOW_* variables set and
  BENCHFLOW_SKIP_VERIFIER_DEPS=1, so it uses the harness's pytest (BENCHFLOW_PYTEST_BIN,
  with `--ctrf`) instead of downloading one.
* `test_outputs.py` alone: the harness's pytest runs it with its CTRF report. The verdict
  needs the report and the exit status to agree (see `read_pytest`): 1.0 only when at
  least one test passed and none failed; skipped tests never pass.

Every command runs under the harness's own static supervisor (`supervise.c`, see
`supervised_argv`) with exactly the environment built here: no shell, `env` or
interpreter of the task's image starts it, and nothing in the agent's state is read
on the way. Python runs with PYTHONSAFEPATH=1 (no script directory or current
directory on sys.path, whatever directory the verifier `cd`s into; PYTHONPATH is the
read-only verifier directory, so its scripts still import their siblings), HOME is a
new empty directory (no start-up or config file of the agent's, whose state is often
/root), and BASH_ENV, ENV and PYTHON* variables of the image are dropped. The reward is read on
the host from a copy of the output directory taken after the verifier's session was
halted. It has one source: reward.txt, reward.json `{"reward": x}`, or both holding the
same value; two files that disagree, a value outside [0, 1], a missing or unparsable
reward are a verifier error with the reason. CTRF JSON, when written, becomes per-test
details.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from posttrain_arena.task_format.package import VerifierKind
from posttrain_arena.task_format.trust import DEFAULT_PATH
from posttrain_arena.trial.harness import SUPERVISOR
from posttrain_arena.trial.hostfiles import NotRegular, read_regular, write_file
from posttrain_arena.trial.result import TestDetail

LOGS_DIR = "/logs/verifier"
"""Where the verifier writes its reward inside its session."""


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
    harness_dir: str
    logs_dir: str
    pytest_only: bool = False

    @property
    def home_dir(self) -> str:
        """The verifier's HOME: made new and empty by the supervisor, beside its output."""
        return f"{self.logs_dir.rstrip('/')}.home"


SH_SHEBANGS = ("#!/bin/sh", "#!/usr/bin/sh", "#!/usr/bin/env sh", "#!/bin/dash")


def script_shell(script: Path) -> list[str]:
    """How test.sh runs: `sh` when its first line asks for it (an image with no bash
    verifies too), else `bash --noprofile --norc` (the existing format's default)."""
    try:
        first = read_regular(script, limit=1 << 20).split(b"\n", 1)[0].decode(errors="replace")
    except OSError:
        first = ""
    words = first.split()
    if words and " ".join(words[:2] if words[0].endswith("env") else words[:1]) in SH_SHEBANGS:
        return ["sh"]
    return ["bash", "--noprofile", "--norc"]


def build_command(
    kind: VerifierKind,
    *,
    verifier_dir: str,
    harness_dir: str,
    workdir: str,
    base_env: Mapping[str, str] | None = None,
    task_env: Mapping[str, str] | None = None,
    isolate_site: bool = False,
    logs_dir: str = LOGS_DIR,
    pycache_prefix: str | None = None,
    shell: list[str] | None = None,
) -> VerifierCommand:
    """The command that runs a verifier entry point.

    `base_env` is the image's environment (fresh mode: a pristine image's, trusted);
    shared mode passes none, so PATH is pinned. `task_env`: the task's own constants
    (`verifier.env`, whose model refuses names that steer lookup or that the harness
    sets); they come after the image's and before the harness's. `isolate_site` runs
    Python with `-S` and adds site-packages without executing .pth files or sitecustomize;
    `pycache_prefix` makes Python read bytecode only from that (fresh) directory;
    `shell`: how test.sh runs (see script_shell; bash by default).
    """
    pyflags = ["python3", "-I", "-B", *(["-S"] if isolate_site else []),
               *(["-X", f"pycache_prefix={pycache_prefix}"] if pycache_prefix else [])]
    env = {k: v for k, v in (base_env or {}).items()
           if not k.startswith(("PYTHON", "BASH")) and k != "ENV"}
    env.update(task_env or {})
    env.setdefault("PATH", DEFAULT_PATH)
    if base_env is None:
        env["PATH"] = DEFAULT_PATH
    # last: the image's own programs win; the harness's uvx/uv serve what verifiers fetch
    env["PATH"] += f":{harness_dir}/bin"
    env.setdefault("HOME", "/root")
    env.setdefault("LANG", "C.UTF-8")
    ctrf = f"{logs_dir}/ctrf.json"
    pytest_bin = f"{harness_dir}/pytest"
    env.update(
        {
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONSAFEPATH": "1",
            # what PYTHONSAFEPATH takes from a verifier's own scripts (their directory on
            # sys.path, for their sibling modules), from the read-only verifier/ only
            "PYTHONPATH": verifier_dir,
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
        return VerifierCommand(argv, env, workdir, harness_dir, logs_dir)
    if kind is VerifierKind.TEST_SH:
        return VerifierCommand([*(shell or ["bash", "--noprofile", "--norc"]),
                                f"{verifier_dir}/test.sh"], env, workdir, harness_dir, logs_dir)
    argv = [*py, f"{harness_dir}/run_pytest.py", "--ctrf", ctrf,
            f"{verifier_dir}/test_outputs.py", "-rA", "-v"]
    return VerifierCommand(argv, env, workdir, harness_dir, logs_dir, pytest_only=True)


def supervised_argv(command: VerifierCommand, *, empty: list[str] | None = None,
                    untar: str | None = None, run: bool = True) -> list[str]:
    """argv that runs the command under the harness's static supervisor (supervise.c)
    with exactly the command's environment: every process the verifier starts ends
    before the supervisor exits, and one that outlives its parent is recorded in its
    status file. `empty`: paths it first empties (then it makes the output directory
    anew); `untar`: it then restores a tar from its stdin under that directory.
    `run=False`: only those steps, the command is not run (exit 0, no status)."""
    argv = [f"{command.harness_dir}/{SUPERVISOR}", command.logs_dir]
    if empty is not None:
        for path in [*empty, command.logs_dir]:
            argv += ["--empty", path]
        argv += ["--mkdir", command.logs_dir]
    if untar is not None:
        argv += ["--untar", untar]
    argv += ["--home", command.home_dir, "--cwd", command.workdir]
    for key, value in sorted(command.env.items()):
        argv += ["--env", f"{key}={value}"]
    return [*argv, "--", *(command.argv if run else [])]


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
    """Interpret a finished verifier: its exit, then its reward files, then CTRF.
    `logs` is the host copy of its output directory (in the trial's record)."""
    details = read_ctrf(logs / "ctrf.json")
    if timed_out:
        return VerifierReading(None, f"the verifier ran past its {timeout:g} s limit", details)
    if pytest_only:
        if exit_code in (0, 1):
            reading = read_pytest(details, exit_code=exit_code,
                                  report_written=(logs / "ctrf.json").exists())
            if reading.reward is not None:
                write_file(logs / "reward.txt", f"{reading.reward}\n")
            return reading
        why = _PYTEST_EXIT.get(exit_code, f"pytest exited with status {exit_code}")
        return VerifierReading(None, f"{why}{_tail(stderr_tail)}", details)
    if exit_code != 0:
        return VerifierReading(
            None, f"the verifier exited with status {exit_code}{_tail(stderr_tail)}", details
        )
    value, reason = read_reward(logs)
    return VerifierReading(value, reason, details)


def read_pytest(details: list[TestDetail], *, exit_code: int,
                report_written: bool) -> VerifierReading:
    """The verdict of a pytest-only verifier that exited 0 or 1, from its per-test report.

    An exit status alone is never a verdict: a module of the agent's that calls
    `os._exit(0)` when imported ends pytest with 0 before anything is reported. So:
    1.0 when the report shows at least one test passed and none failed (and pytest
    exited 0); 0.0 when it shows a failure (and pytest exited 1), or when no test passed
    and none failed (all skipped: a skip never passes); a verifier error when there is
    no report or it disagrees with the exit status.

    What the report can be trusted with: it is written by the harness's plugin inside
    the pytest process, after the last test; code that process imported (a test module
    importing the agent's code) could rewrite it, as it could do anything the tests do.
    Agreement with the exit status catches a process cut short; a verifier that imports
    the agent's code into its own process is what the gate's probes catch (gates/probes).
    """
    if not report_written:
        return VerifierReading(None, (
            f"pytest exited with status {exit_code} but wrote no per-test report "
            f"({LOGS_DIR}/ctrf.json): something ended it before its tests were reported "
            "(an exit status alone is never a verdict)"), details)
    counts = {s: sum(d.status == s for d in details) for s in ("passed", "failed", "skipped")}
    other = len(details) - sum(counts.values())
    failed = counts["failed"] + other
    shown = ", ".join(f"{n} {s}" for s, n in {**counts, "other": other}.items() if n)
    if exit_code == 0 and failed:
        return VerifierReading(None, (
            f"pytest exited 0 but its report shows {shown}: they disagree, so neither "
            "is taken"), details)
    if exit_code == 1 and not failed:
        return VerifierReading(None, (
            f"pytest exited 1 (tests failed) but its report shows {shown or 'no test'}: "
            "they disagree, so neither is taken"), details)
    if failed:
        return VerifierReading(0.0, None, details)
    if counts["passed"] == 0:
        return VerifierReading(0.0, f"no test passed ({shown or 'none ran'}); a skipped "
                                    "test never counts as passing", details)
    return VerifierReading(1.0, None, details)


def read_reward(logs: Path) -> tuple[float | None, str | None]:
    """(reward, None) from reward.txt and/or reward.json, else (None, why). When both
    exist they must hold the same value: the reward has one source."""
    found: dict[str, float] = {}
    for name in ("reward.txt", "reward.json"):
        value, reason = read_reward_file(logs / name)
        if reason is not None:
            return None, reason
        if value is not None:
            found[name] = value
    if not found:
        return None, f"the verifier wrote no reward ({LOGS_DIR}/reward.txt or reward.json)"
    if len(set(found.values())) > 1:
        return None, (f"{LOGS_DIR}/reward.txt holds {found['reward.txt']:g} but reward.json "
                      f"holds {found['reward.json']:g}; the reward must have one source, so "
                      "neither is taken")
    return next(iter(found.values())), None


def read_reward_file(path: Path) -> tuple[float | None, str | None]:
    """One reward file: (value, None), (None, None) when absent, or (None, why)."""
    name = path.name
    try:
        text = read_regular(path, limit=65_536).decode("utf-8", errors="replace").strip()
    except FileNotFoundError:
        return None, None
    except NotRegular as exc:
        return None, f"{LOGS_DIR}/{name}: {exc}"
    try:
        if name == "reward.json":
            data = json.loads(text)
            value = data.get("reward") if isinstance(data, dict) else None
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None, f'{LOGS_DIR}/reward.json has no numeric "reward" (got {text[:80]!r})'
            reward = float(value)
        else:
            reward = float(text)
    except ValueError:
        return None, f"{LOGS_DIR}/{name} is not a number (got {text[:80]!r})"
    if math.isnan(reward) or not 0.0 <= reward <= 1.0:
        return None, f"{LOGS_DIR}/{name} holds {reward}, outside [0, 1]"
    return reward, None


def read_ctrf(path: Path) -> list[TestDetail]:
    """Per-test details from a CTRF JSON report; [] when absent or malformed."""
    try:
        data = json.loads(read_regular(path, limit=16 << 20).decode("utf-8", errors="replace"))
        tests = data["results"]["tests"]
    except (ValueError, KeyError, TypeError, OSError):
        return []
    out: list[TestDetail] = []
    for test in tests if isinstance(tests, list) else []:
        if not isinstance(test, dict) or "name" not in test:
            continue
        status = _text(test.get("status", "other"))
        message = test.get("message") or test.get("trace")
        out.append(TestDetail(name=_text(test["name"]), status=status,
                              message=_text(message)[:4000] if message else None))
    return out


def _text(value: object) -> str:
    """A report's string as text that encodes (a lone surrogate from a non-UTF-8 test
    name becomes its escape, never an error where the record is written)."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return f": {text[-limit:]}" if text else ""
