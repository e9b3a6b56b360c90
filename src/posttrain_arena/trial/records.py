"""Trial identity and the per-trial record directory.

A record is a directory named by the trial id under a records root:

    <root>/<trial_id>/config.json      what was run (task, agent, backend, limits, seed)
    <root>/<trial_id>/result.json      the TrialResult (timings, reward, outcome, reason)
    <root>/<trial_id>/transcript.json  the agent's transcript
    <root>/<trial_id>/verifier/        the verifier's stdout, stderr, reward files, ctrf.json

No sandbox ever has a record directory mounted: the verifier's output is copied in
(regular files only) after its session has been halted, and every write here goes
through `hostfiles.write_file`, which never follows a link.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.trial.hostfiles import write_file
from posttrain_arena.trial.result import TrialResult


def trial_id(task_checksum: str, agent_name: str, seed: int) -> str:
    """The identity of a trial: the same task content, agent and seed give the same id."""
    digest = hashlib.sha256(f"{task_checksum}\0{agent_name}\0{seed}".encode()).hexdigest()
    return digest[:24]


class TrialConfig(BaseModel):
    """What a trial was asked to do (config.json)."""

    trial_id: str = Field(description="task checksum + agent + seed, hashed")
    task_name: str = Field(description="the task's directory name")
    task_root: str = Field(description="where the task package was read from")
    task_checksum: str = Field(description="content hash of the task package")
    agent: str = Field(description="agent name, e.g. 'oracle', 'empty', 'script:probe.sh'")
    seed: int = Field(description="seed handed to the agent")
    backend: str = Field(description="sandbox backend: docker or local")
    isolation: str = Field(description="verification mode: fresh or shared")
    agent_timeout_sec: float = Field(description="deadline of the agent phase, seconds")
    verifier_timeout_sec: float = Field(description="limit of the verifier, seconds")
    limits: dict[str, Any] = Field(
        description="cpus, memory, storage, pids, network; disk: how storage is bounded")
    workdir: str = Field(description="the agent's workspace inside the session")


class TrialRecord:
    """Writes one trial's directory. With no root, files go to a scratch directory
    that is removed at `close()` (the result then names no record_dir)."""

    def __init__(self, root: Path | None, tid: str, scratch: Path) -> None:
        self.keep = root is not None
        self.dir = (root / tid) if root is not None else scratch / "record"
        if self.dir.exists():
            shutil.rmtree(self.dir)  # a re-run replaces the previous attempt's files
        self.verifier_dir.mkdir(parents=True)

    @property
    def verifier_dir(self) -> Path:
        return self.dir / "verifier"

    def write_config(self, config: TrialConfig) -> None:
        _write_atomic(self.dir / "config.json", config.model_dump_json(indent=2))

    def write_transcript(self, transcript: Transcript) -> None:
        _write_atomic(self.dir / "transcript.json", transcript.model_dump_json(indent=1))

    def write_result(self, result: TrialResult) -> None:
        _write_atomic(self.dir / "result.json", result.model_dump_json(indent=2))

    def write_text(self, name: str, text: str) -> None:
        _write_atomic(self.verifier_dir / name, text)


def read_result(record_dir: Path) -> TrialResult:
    """Load result.json from a record directory."""
    return TrialResult.model_validate(json.loads((record_dir / "result.json").read_text()))


def _write_atomic(path: Path, text: str) -> None:
    write_file(path, text)
