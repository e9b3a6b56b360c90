"""Fresh verification in one exec (docker): same results as the plain copies, and the
plain copies when the image cannot take that path. The output is read from the halted
session, so only top-level regular files are kept and nothing is parsed from stdout."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
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


@pytest.mark.docker
def test_one_exec_verification_keeps_outputs_like_the_plain_path(
    runner_factory: Factory, tmp_path: Path, trial_cache: Path
) -> None:
    _require_image(BASE)
    task = make_task(tmp_path / "task", verifier_py=VERIFIER_WITH_OUTPUT)
    runner = runner_factory("docker")
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
