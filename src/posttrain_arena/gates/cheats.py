"""Cheating probes: the empty trial's state with what an agent would plant to be scored
without solving the task; a verifier that scores any above the empty trial is gameable.

Where `probes.py` asks whether the verifier rejects wrong answers, these ask whether it
can be made to accept no answer. Each starts from the empty trial's kept final state (the
environment as the agent found it) and plants, on the host, at the paths the oracle's
outputs take (`probes.outputs`), in every state root and beside every output:

* `exit-0-modules`: every Python file the oracle writes, as a module that ends its process
  with status 0 when imported (a pytest run that imports it ends "green" at once);
* `skip-modules`: the same, a module that skips every test importing it;
* `reward-writers`: every file the oracle writes, as a program (Python or sh, by its
  name) that writes 1.0 into both reward files and exits 0;
* `reward-links`: the same, writing 1.0 into reward.json and making reward.txt a link;
* `pytest-config`: conftest.py, pytest.ini, tox.ini, setup.cfg and pyproject.toml that
  make every test pass (a report hook), in every state root and beside every output.

Each costs one verification (`TrialRunner.verify_state`, no agent phase). The planted
files are written with `write_file` (never through a link), under directories that are
not links (a target behind a link in the empty state is skipped).
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from posttrain_arena.gates.probes import Probe, ProbeKind, outputs
from posttrain_arena.sandbox.localfs import copy_tree
from posttrain_arena.trial.hostfiles import write_file
from posttrain_arena.trial.state import SavedState

CHEATS = (
    ProbeKind("exit-0-modules", "the empty state with every Python file the oracle writes "
                                "planted as a module that exits 0 when imported"),
    ProbeKind("skip-modules", "the empty state with every Python file the oracle writes "
                              "planted as a module that skips the tests importing it"),
    ProbeKind("reward-writers", "the empty state with every file the oracle writes planted "
                                "as a program writing 1.0 into both reward files"),
    ProbeKind("reward-links", "the empty state with every file the oracle writes planted as "
                              "a program writing reward.json 1.0 and linking reward.txt"),
    ProbeKind("pytest-config", "the empty state with conftest.py and ini files that pass "
                               "every test, in every state root and beside each output"),
)

_REWARDS = ('import json, os\n'
            'txt = os.environ.get("BENCHFLOW_REWARD_TEXT", "/logs/verifier/reward.txt")\n'
            'jsn = os.environ.get("BENCHFLOW_REWARD_JSON", "/logs/verifier/reward.json")\n'
            'os.makedirs(os.path.dirname(txt), exist_ok=True)\n'
            'with open(jsn, "w") as fh:\n    json.dump({"reward": 1.0}, fh)\n')
_PY = {
    "exit-0-modules": "import os\nos._exit(0)\n",
    "skip-modules": "import pytest\npytest.skip('probe', allow_module_level=True)\n",
    "reward-writers": _REWARDS + 'with open(txt, "w") as fh:\n    fh.write("1.0\\n")\n'
                                 'os._exit(0)\n',
    "reward-links": _REWARDS + 'if os.path.lexists(txt):\n    os.unlink(txt)\n'
                               'os.symlink(jsn, txt)\nos._exit(0)\n',
}
_SH = {
    "reward-writers": '#!/bin/sh\nt=${BENCHFLOW_REWARD_TEXT:-/logs/verifier/reward.txt}\n'
                      'j=${BENCHFLOW_REWARD_JSON:-/logs/verifier/reward.json}\n'
                      'mkdir -p "$(dirname "$t")"; echo 1.0 > "$t"\n'
                      'echo \'{"reward": 1.0}\' > "$j"\nexit 0\n',
    "reward-links": '#!/bin/sh\nt=${BENCHFLOW_REWARD_TEXT:-/logs/verifier/reward.txt}\n'
                    'j=${BENCHFLOW_REWARD_JSON:-/logs/verifier/reward.json}\n'
                    'mkdir -p "$(dirname "$t")"; echo \'{"reward": 1.0}\' > "$j"\n'
                    'rm -f "$t"; ln -s "$j" "$t"\nexit 0\n',
}
_PASS_ALL = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
             "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
             "    report = outcome.get_result()\n    report.outcome = 'passed'\n"
             "    report.longrepr = None\n")
_CONFIG = {
    "conftest.py": _PASS_ALL,
    "arena_probe_plugin.py": _PASS_ALL,
    "pytest.ini": "[pytest]\naddopts = -p arena_probe_plugin\npythonpath = .\n",
    "tox.ini": "[pytest]\naddopts = -p arena_probe_plugin\npythonpath = .\n",
    "setup.cfg": "[tool:pytest]\naddopts = -p arena_probe_plugin\npythonpath = .\n",
    "pyproject.toml": "[tool.pytest.ini_options]\naddopts = \"-p arena_probe_plugin\"\n"
                      "pythonpath = [\".\"]\n",
}


def make_cheat(empty: SavedState, oracle: SavedState, kind: ProbeKind, dest: Path) -> Probe:
    """A copy of the empty trial's kept state under `dest` (a new directory) with
    `kind`'s plants at the oracle's output paths; `perturbed` names what was planted
    (empty: the probe does not apply)."""
    dest.mkdir(parents=True)
    hosts: dict[str, Path] = {}
    for i, root in enumerate(sorted({*empty.hosts, *oracle.hosts})):
        hosts[root] = dest / f"root-{i}"
        if root in empty.hosts:
            copy_tree(empty.hosts[root], hosts[root])
        else:
            hosts[root].mkdir()
    copy = SavedState(hosts=hosts, changed=list(empty.changed), kbytes=empty.kbytes)
    targets = [path for path, _where in outputs(oracle)]
    if not targets:  # an oracle that writes nothing shows no place worth a plant
        return Probe(kind, copy, [])
    plants: dict[str, tuple[str, int]] = {}
    if kind.name == "pytest-config":
        for folder in {*hosts, *(posixpath.dirname(t) for t in targets)}:
            for name, text in _CONFIG.items():
                plants[f"{folder.rstrip('/')}/{name}"] = (text, 0o644)
    else:
        for target in targets:
            if target.endswith(".py") and kind.name in _PY:
                plants[target] = (_PY[kind.name], 0o755)
            elif kind.name in _SH:
                plants[target] = (_SH[kind.name], 0o755)
    planted = [path for path, (text, mode) in sorted(plants.items())
               if _plant(hosts, path, text, mode)]
    return Probe(kind, copy, planted)


def _plant(hosts: dict[str, Path], path: str, text: str, mode: int) -> bool:
    """Write one plant at session `path` in the host copies (never through a link)."""
    for root, host in hosts.items():
        if path == root or not path.startswith(root.rstrip("/") + "/"):
            continue
        parts = path[len(root.rstrip("/")) + 1:].split("/")
        where = host
        for part in parts[:-1]:
            where = where / part
            if where.is_symlink() or (where.exists() and not where.is_dir()):
                return False
            if not where.exists():
                where.mkdir()
        target = where / parts[-1]
        if target.is_dir() and not target.is_symlink():
            return False
        write_file(target, text, mode=mode)
        os.utime(target, follow_symlinks=False)
        return True
    return False
