"""Fresh verification (`trial/fresh.py`), one path on both backends: the one exec keeps
outputs like any verification (only top-level regular files, nothing parsed from
stdout), is up while the agent works, gives way to copies where the image cannot take
it; and the verifier sees the same bytes of one awkward state on both backends, by each
way the path takes."""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial import fresh, verification
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner
from posttrain_arena.trial.state import SavedState

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


# -- one path, the same bytes on every backend -------------------------------------------

BOX = "/root/box"
"""Where the awkward state lives (inside the workdir, a state root); the rest of the
workdir holds the image's own dotfiles, which are no part of this comparison."""

BINARY = bytes(range(256)) * 64 + b"\x00\xff" * 1000
ODD_NAME = b"odd\xff\x01 name\n\xc0.bin"  # not UTF-8, a control byte, a space, a newline
DEEP = b"/".join([b"n"] * 40)

STATE: list[tuple[bytes, str, bytes, int]] = [
    # (path under BOX, kind, content or link target, mode)
    (b"nested", "d", b"", 0o755),
    (b"nested/emptydir", "d", b"", 0o700),
    *[(b"nested/" + DEEP[:end], "d", b"", 0o755) for end in range(1, len(DEEP) + 1, 2)],
    (b"nested/" + DEEP + b"/deep.txt", "f", b"at the bottom\n", 0o644),
    (b"empty", "f", b"", 0o600),
    (b"binary.dat", "f", BINARY, 0o644),
    (ODD_NAME, "f", b"odd name's content\r\n\x00", 0o644),
    (b"run.sh", "f", b"#!/bin/sh\necho hi\n", 0o755),
    (b"rel-link", "l", b"nested/" + DEEP + b"/deep.txt", 0),
    (b"abs-link", "l", b"/root/box/empty", 0),
    (b"dangling", "l", b"no-such-file", 0),
    (b"escape", "l", b"/etc/passwd", 0),  # leaves the state roots: dropped on the way
]

MAKE_STATE = '''\
import os
box = b"/root/box"
os.makedirs(box)
for path, kind, data, mode in SPEC:
    path, data = os.path.join(box, bytes.fromhex(path)), bytes.fromhex(data)
    if kind == "d":
        os.makedirs(path, exist_ok=True)
    elif kind == "f":
        with open(path, "wb") as fh:
            fh.write(data)
    else:
        os.symlink(data, path)
for path, kind, data, mode in reversed(SPEC):  # modes last: parents stay writable
    if kind != "l":
        os.chmod(os.path.join(box, bytes.fromhex(path)), mode)
'''

VERIFIER_MANIFEST = '''\
import hashlib, json, os, pathlib, stat
box = b"/root/box"
seen = []
for top, dirs, files in os.walk(box):
    for name in dirs + files:
        path = os.path.join(top, name)
        info = os.lstat(path)
        rel = os.path.relpath(path, box).hex()
        if stat.S_ISLNK(info.st_mode):
            seen.append([rel, "l", os.readlink(path).hex(), 0])
        elif stat.S_ISDIR(info.st_mode):
            seen.append([rel, "d", "", stat.S_IMODE(info.st_mode)])
        else:
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            seen.append([rel, "f", digest, stat.S_IMODE(info.st_mode)])
seen.sort()
logs = pathlib.Path(os.environ["ARENA_LOGS_DIR"])
(logs / "manifest.json").write_text(json.dumps(seen))
(logs / "reward.txt").write_text("1.0")
'''


def _expected_manifest() -> list[list[object]]:
    """What the verifier must see: STATE less the link that leaves the state roots."""
    rows: list[list[object]] = []
    for path, kind, data, mode in STATE:
        if path == b"escape":
            continue
        shown = hashlib.sha256(data).hexdigest() if kind == "f" else data.hex()
        rows.append([path.hex(), kind, "" if kind == "d" else shown, mode])
    return sorted(rows)


class LeavesAwkwardState:
    """An agent that leaves STATE under BOX, made in its session by the image's python3."""

    name = "awkward-state"

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        spec = [(p.hex(), k, d.hex(), m) for p, k, d, m in STATE]
        script = f"SPEC = {spec!r}\n" + MAKE_STATE
        result = shell.exec(f"python3 -c {shlex.quote(script)}", timeout=60)
        assert result.exit_code == 0, result.stderr
        return AgentRun(transcript=Transcript(messages=[Message(role="user",
                                                                 content=ctx.prompt)]))


WAYS = ("one exec, armed while the agent works", "one exec, armed for a kept state",
        "copies, the state past the one exec's bound")


@pytest.mark.docker
@pytest.mark.bwrap
def test_fresh_verification_shows_the_verifier_the_same_bytes_on_every_backend(
    runner_factory: Factory, tmp_path: Path, trial_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One function verifies fresh on both backends: the same awkward state (nested and
    deep directories, an empty file and directory, binary content, a name that is not
    UTF-8 with a control byte and a newline, links inside the roots, a dangling one and
    one that leaves them) reaches the verifier as the same bytes, on each backend, by
    each way the path takes; and those bytes are the state the agent left, less the
    link that leaves the roots."""
    _require_image(BASE)
    task = make_task(tmp_path / "task", verifier_py=VERIFIER_MANIFEST)
    emptied: list[str] = []  # sessions whose roots were emptied apart from the one exec
    real_empty_roots = verification.empty_roots

    def counting_empty_roots(session: Any, command: Any, roots: list[str]) -> None:
        emptied.append(session.id)
        real_empty_roots(session, command, roots)

    monkeypatch.setattr(verification, "empty_roots", counting_empty_roots)
    seen: dict[tuple[str, str], list[list[object]]] = {}
    for backend in ("local", "docker"):
        runner = runner_factory(backend)
        kept = tmp_path / f"kept-{backend}"
        for way in WAYS:
            emptied.clear()
            if way == WAYS[1]:
                saved = SavedState.load(kept)
                assert saved is not None, "the first trial kept no state"
                result = runner.verify_state(task, saved, name="kept-state")
            else:
                with monkeypatch.context() as patch:
                    if way == WAYS[2]:
                        patch.setattr(fresh, "MAX_STATE_BYTES", 0)
                    result = runner.run(task, LeavesAwkwardState(), seed=WAYS.index(way),
                                        keep_state=kept if way == WAYS[0] else None)
            assert (result.outcome, result.reward) == (Outcome.SCORED, 1.0), \
                (backend, way, result.reason)
            # the way taken: copies empty the roots apart; the one exec does it itself
            assert bool(emptied) == (way == WAYS[2]), (backend, way, emptied)
            record = Path(result.record_dir or "")
            seen[backend, way] = json.loads((record / "verifier" / "manifest.json").read_text())
            if way != WAYS[1]:
                assert "/root/box/escape -> /etc/passwd" in (
                    record / "verifier" / "dropped_links.txt").read_text()
    expected = _expected_manifest()
    for (backend, way), manifest in seen.items():
        assert manifest == expected, (backend, way)
    assert len({json.dumps(m) for m in seen.values()}) == 1
