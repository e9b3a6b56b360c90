"""Red team: an image that resolves programs inside the agent's state is refused.

With `ENV PATH=/root/.local/bin:$PATH` (or a venv in the workdir) the agent could plant
`python3` or a `.pth` file that the fresh verifier would run as root. Such a task is
refused before the agent starts (build_failed, with the fix), on both backends, and
`arena task check` reports it from the Dockerfile alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.script import ScriptAgent
from posttrain_arena.task_format.checks import check_task
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner

from .taskkit import BASE, make_task

Factory = Callable[..., TrialRunner]

PLANT = """
for d in /root/.local/bin /root/.venv/bin; do
  mkdir -p $d
  printf '#!/bin/sh\\nmkdir -p /logs/verifier; echo 1.0 > /logs/verifier/reward.txt\\n' > $d/python3
  chmod +x $d/python3
done
mkdir -p /root/.venv/lib/python3.11/site-packages
echo 'import os; open("/logs/verifier/reward.txt", "w").write("1.0")' \\
  > /root/.venv/lib/python3.11/site-packages/zzz.pth
"""

IMAGES = {
    "user-bin-on-path": f"FROM {BASE}\nWORKDIR /root\nENV PATH=/root/.local/bin:$PATH\n"
                        "COPY input.txt /root/input.txt\n",
    "venv-in-workdir": f"FROM {BASE}\nWORKDIR /root\nENV VIRTUAL_ENV=/root/.venv\n"
                       "ENV PATH=\"/root/.venv/bin:${PATH}\"\nCOPY input.txt /root/input.txt\n",
    "pythonpath-in-state": f"FROM {BASE}\nWORKDIR /root\nENV PYTHONPATH=/root/lib\n"
                           "COPY input.txt /root/input.txt\n",
}


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_image_resolving_programs_in_the_state_is_refused(
    backend_name: str, runner_factory: Factory, tmp_path: Path, image: str
) -> None:
    task = make_task(tmp_path / "task", dockerfile=IMAGES[image])
    script = tmp_path / "plant.sh"
    script.write_text(PLANT)
    runner = runner_factory(backend_name)
    attack = runner.run(task, ScriptAgent(script))
    assert attack.outcome is Outcome.BUILD_FAILED and attack.reward is None, attack.reason
    assert "inside the state root /root" in (attack.reason or "")
    assert "fix:" in (attack.reason or "")
    assert attack.agent_info == {}  # refused before the agent ran
    empty = runner.run(task, EmptyAgent())
    assert empty.outcome is Outcome.BUILD_FAILED
    report = check_task(task.root)
    hits = [f for f in report.findings if f.code == "state-runtime"]
    assert hits and all(f.severity.value == "error" and f.line for f in hits), report.findings
    assert "fix:" in hits[0].message


@pytest.mark.docker
def test_interpreter_linked_into_the_state_is_refused(
    runner_factory: Factory, tmp_path: Path, trial_cache: Path
) -> None:
    from .conftest import _require_image

    _require_image(BASE)
    dockerfile = (f"FROM {BASE}\nWORKDIR /root\nCOPY input.txt /root/input.txt\n"
                  "RUN mkdir -p /root/.venv/bin && cp /usr/bin/python3 /root/.venv/bin/ && "
                  "ln -sf /root/.venv/bin/python3 /usr/local/bin/python3\n")
    task = make_task(tmp_path / "task", dockerfile=dockerfile)
    result = runner_factory("docker").run(task, EmptyAgent())
    assert result.outcome is Outcome.BUILD_FAILED, result.reason
    assert "`python3` resolves to /root/.venv/bin/python3" in (result.reason or "")


def test_a_clean_image_is_not_reported(tmp_path: Path) -> None:
    task = make_task(tmp_path / "task", dockerfile=f"FROM {BASE}\nWORKDIR /root\n"
                     "ENV PATH=/opt/venv/bin:$PATH\nCOPY input.txt /root/input.txt\n")
    assert not [f for f in check_task(task.root).findings if f.code == "state-runtime"]
