"""Fresh verification in one exec (both backends): same results as the plain copies, and the
plain copies when the image cannot take that path. The output is read from the halted
session, so only top-level regular files are kept and nothing is parsed from stdout."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner

from .conftest import _require_image
from .taskkit import BASE, make_task

Factory = Callable[..., TrialRunner]

VERIFIER_WITH_OUTPUT = '''\
import os, pathlib, sys
expected = (pathlib.Path(__file__).parent / "expected.txt").read_text().strip()
answer = pathlib.Path("/root/answer.txt")
ok = answer.exists() and answer.read_text().strip() == expected
print("verifier says", ok, end="")  # no final newline
print("to stderr", file=sys.stderr)
logs = pathlib.Path(os.environ["ARENA_LOGS_DIR"])
(logs / "notes.txt").write_text("kept\\n")
(logs / "sub").mkdir()
(logs / "sub" / "deep.txt").write_text("not kept\\n")
(logs / "link").symlink_to("/etc/passwd")
(logs / "reward.json").write_text('{"reward": %s}' % (1.0 if ok else 0.25))
'''


def test_one_exec_verification_keeps_outputs_like_the_plain_path(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    # both backends take the one exec (the verifier's sandbox and supervisor started
    # while the agent works); docker reads its output from a host-kept directory
    task = make_task(tmp_path / "task", verifier_py=VERIFIER_WITH_OUTPUT)
    runner = runner_factory(backend_name)
    good = runner.run(task, OracleAgent())
    assert (good.outcome, good.reward) == (Outcome.SCORED, 1.0), good.reason
    empty = runner.run(task, EmptyAgent(), seed=1)
    assert (empty.outcome, empty.reward) == (Outcome.SCORED, 0.25), empty.reason
    vdir = Path(good.record_dir or "") / "verifier"
    assert (vdir / "stdout.txt").read_text() == "verifier says True"
    assert "to stderr" in (vdir / "stderr.txt").read_text()
    assert (vdir / "notes.txt").read_text() == "kept\n"
    assert json.loads((vdir / "reward.json").read_text()) == {"reward": 1.0}
    assert not (vdir / "sub").exists() and not (vdir / "link").exists()


@pytest.mark.docker
def test_an_image_without_tar_verifies_through_plain_copies(
    runner_factory: Factory, tmp_path: Path, trial_cache: Path
) -> None:
    _require_image(BASE)
    dockerfile = (f"FROM {BASE}\nWORKDIR /root\nCOPY input.txt /root/input.txt\n"
                  "RUN rm -f /bin/tar /usr/bin/tar\n")
    task = make_task(tmp_path / "task", dockerfile=dockerfile, verifier="pytest")
    runner = runner_factory("docker")
    good = runner.run(task, OracleAgent())
    assert (good.outcome, good.reward) == (Outcome.SCORED, 1.0), good.reason
    assert {d.name.split("::")[-1] for d in good.details} >= {"test_answer_matches"}
    empty = runner.run(task, EmptyAgent(), seed=1)
    assert (empty.outcome, empty.reward) == (Outcome.SCORED, 0.0), empty.reason


VERIFIER_WHEN_STARTED = '''\
import os, pathlib
# reward 1.0 when the supervisor (this process's parent) started at least 1 s before
# the agent wrote its answer: its exec was up, waiting for the state, while the agent
# worked; 0.0 when it started only after the agent phase
btime = next(int(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime"))
fields = open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()
started = btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
written = pathlib.Path("/root/answer.txt").stat().st_mtime
logs = pathlib.Path(os.environ["ARENA_LOGS_DIR"])
(logs / "reward.txt").write_text("1.0" if started < written - 1.0 else "0.0")
'''


def test_the_verifiers_exec_is_up_while_the_agent_works(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    """Both backends start the verifier's one exec (sandbox, shell, supervisor) before
    the agent phase ends, so none of that start-up is on the trial's path after it."""
    make_task(tmp_path / "task", verifier_py=VERIFIER_WHEN_STARTED)
    solve = tmp_path / "task" / "oracle" / "solve.sh"
    solve.write_text(solve.read_text().replace("set -e\n", "set -e\nsleep 3\n", 1))
    result = runner_factory(backend_name).run(load_task(tmp_path / "task"), OracleAgent())
    assert (result.outcome, result.reward) == (Outcome.SCORED, 1.0), result.reason
