"""Known-bad probes: the oracle's final state, perturbed, which the verifier must reject.

The oracle runs once per rerun; its first rerun keeps its final state on the host (a
`SavedState`: the state roots as they were fetched for its verifier, and the paths
the backend saw it change, from outside its session). A probe is built from that copy
on the host and verified with no agent phase and no second oracle run
(`TrialRunner.verify_state`: the pristine image, the perturbed state restored, the
task's verifier), so a probe costs one verification.

The oracle's outputs are the regular files of the kept state that the backend reports
changed or added (bytecode caches aside). Every output is perturbed at once, so a
verifier that checks any one of them rejects the probe: a task is never failed because
its oracle also writes a log the verifier rightly ignores.

* `truncate`: each output cut to the first half of its bytes (a truncated answer file);
* `wrong`: each text output with every number off by one (letters shifted by one where
  there are no digits), the layout kept: the output of a wrong but plausible command;
* `remove`: each output removed (a removed file).

The kept state is the package's doing, so it is read as an attacker's: walked without
following any link, read with `read_regular` (no link, bounded), written with
`write_file` (a new file renamed over the old name, never through a link). A probe
with no output to perturb says so (`applicable` false), runs nothing and counts for
nothing.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from posttrain_arena.sandbox.localfs import copy_tree
from posttrain_arena.trial.hostfiles import NotRegular, read_regular, write_file
from posttrain_arena.trial.state import SavedState


@dataclass(frozen=True)
class ProbeKind:
    """One perturbation: its name and what it does, in words."""

    name: str
    description: str


PROBES = (
    ProbeKind("truncate", "each file the oracle wrote cut to its first half"),
    ProbeKind("wrong", "each file the oracle wrote with every number off by one "
                       "(letters shifted where there are none), layout kept"),
    ProbeKind("remove", "each file the oracle wrote removed"),
)

_NUMBER = re.compile(rb"[0-9]+")
_SHIFT = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                         b"bcdefghijklmnopqrstuvwxyzaBCDEFGHIJKLMNOPQRSTUVWXYZA")


@dataclass
class Probe:
    """A perturbed copy of the kept state, and the session paths it changed."""

    kind: ProbeKind
    state: SavedState
    perturbed: list[str]


def outputs(saved: SavedState) -> list[tuple[str, Path]]:
    """(session path, host path) of every output of the kept state: a regular file
    (found by walking the host copies, links never followed) that the backend
    reported changed or added."""
    changed = set(saved.changed)
    found: list[tuple[str, Path]] = []
    for root, host in saved.hosts.items():
        for path, where in _regular_files(host, root):
            if path in changed and "/__pycache__/" not in path and not path.endswith(".pyc"):
                found.append((path, where))
    return sorted(found)


def make_probe(saved: SavedState, kind: ProbeKind, dest: Path, *, limit: int) -> Probe:
    """A copy of `saved` under `dest` (a new directory) with every output perturbed by
    `kind`; outputs larger than `limit` bytes are left as they are."""
    dest.mkdir(parents=True)
    hosts: dict[str, Path] = {}
    for i, (root, host) in enumerate(saved.hosts.items()):
        hosts[root] = dest / f"root-{i}"
        copy_tree(host, hosts[root])
    copy = SavedState(hosts=hosts, changed=list(saved.changed), kbytes=saved.kbytes)
    perturbed = [path for path, where in outputs(copy) if _perturb(kind, where, limit)]
    return Probe(kind, copy, perturbed)


def _perturb(kind: ProbeKind, where: Path, limit: int) -> bool:
    """Perturb one host file in place (never through a link); whether it changed."""
    try:
        info = os.lstat(where)
        if kind.name == "remove":
            if not stat.S_ISREG(info.st_mode):
                return False
            os.unlink(where)  # removes the name, never what a link points at
            return True
        data = read_regular(where, limit=limit)
    except (NotRegular, OSError):
        return False
    if kind.name == "truncate":
        new = data[: len(data) // 2]
    elif kind.name == "wrong":
        if b"\0" in data:  # binary: no plausible wrong text
            return False
        new = _NUMBER.sub(lambda m: str(int(m.group()) + 1).encode(), data)
        if new == data:
            new = data.translate(_SHIFT)
    else:
        raise ValueError(f"unknown probe kind {kind.name!r}")
    if new == data:
        return False
    write_file(where, new, mode=stat.S_IMODE(info.st_mode))
    return True


def _regular_files(host_root: Path, root: str) -> list[tuple[str, Path]]:
    """(session path, host path) of the regular files under one root's host copy."""
    found: list[tuple[str, Path]] = []
    if os.path.islink(host_root):
        return found
    if os.path.isfile(host_root):
        return [(root, host_root)]
    for dirpath, _dirs, files in os.walk(host_root):  # never descends through a link
        rel = os.path.relpath(dirpath, host_root)
        base = root.rstrip("/") + ("" if rel == "." else "/" + rel)
        for name in files:
            host = Path(dirpath) / name
            if stat.S_ISREG(os.lstat(host).st_mode):
                found.append((f"{base}/{name}", host))
    return found
