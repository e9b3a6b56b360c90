"""Content-addressed, resumable stages.

Each stage works in `stages/<name>.partial/` and, when it finishes, writes `done.json`
(its input hash, summary and output hash) there and renames the folder to
`stages/<name>/` in one atomic step. A rerun skips a stage whose folder holds a
done-marker with the same input hash; a stage whose inputs changed is redone, and every
stage after it too, because a stage's input hash includes the output hashes of the
stages it reads. A crash leaves `<name>.partial/` behind: long stages keep checkpoints
there, so the rerun continues where the crash left them.

A stage with `depends_on` is keyed on that digest of its upstream (say, the base model's
and the suite's content hashes) instead of their whole outputs, and runs that share a
folder (`StageRunner(shared=...)`) share its result: the first run to finish it publishes
a copy there under its input hash, and a later run with the same input hash takes that
copy, after checking that its files still hash to the recorded output hash, instead of
computing it again. The runs of one challenge share their baseline evaluation this way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

DONE = "done.json"


class StageEvent(BaseModel):
    """One progress report: a stage started, skipped, finished, failed, or a step inside."""

    stage: str = Field(description="Stage name")
    status: str = Field(description="start, skip, step, checkpoint, done or failed")
    message: str = Field(default="", description="Human-readable detail")
    done: int | None = Field(default=None, description="Units finished so far (for 'step')")
    total: int | None = Field(default=None, description="Units in all (for 'step')")


Progress = Callable[[StageEvent], None]


def no_progress(event: StageEvent) -> None:
    """The default progress sink: ignore."""


class StageRecord(BaseModel):
    """The done-marker of a finished stage."""

    name: str
    input_hash: str
    output_hash: str
    summary: dict[str, Any] = Field(default_factory=dict)
    started_at: float
    finished_at: float

    @property
    def seconds(self) -> float:
        return self.finished_at - self.started_at


@dataclass
class StageContext:
    """What a stage's body gets: its work folder, finished upstream stages, progress."""

    name: str
    work_dir: Path
    upstream: dict[str, StageRecord]
    stages_dir: Path
    progress: Progress
    resumed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def output_of(self, stage: str) -> Path:
        """Folder of a finished upstream stage."""
        return self.stages_dir / stage

    def step(self, done: int, total: int, message: str = "") -> None:
        self.progress(StageEvent(stage=self.name, status="step", done=done, total=total,
                                 message=message))

    def checkpoint(self, message: str) -> None:
        """Report a durable checkpoint (a resume point inside the stage)."""
        self.progress(StageEvent(stage=self.name, status="checkpoint", message=message))


StageBody = Callable[[StageContext], dict[str, Any]]


@dataclass(frozen=True)
class Stage:
    """A named unit of work: `config_hash` covers the recipe sections it reads."""

    name: str
    body: StageBody
    config_hash: str
    reads: tuple[str, ...] = ()  # upstream stage names whose outputs this stage reads
    version: str = "1"  # bump when the stage's code changes what it produces
    depends_on: Callable[[dict[str, StageRecord]], Any] | None = None
    """What of the upstream records the output depends on (JSON-able); when set, the input
    hash covers this instead of the upstream output hashes, and the result is shareable."""


def hash_json(data: Any) -> str:
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def dir_hash(root: Path, *, skip: tuple[str, ...] = (DONE, "checkpoints")) -> str:
    """Content hash of a stage's output folder (checkpoints and the marker excluded)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(d for d in dirnames if not (rel_dir == Path(".") and d in skip))
        for name in sorted(filenames):
            if rel_dir == Path(".") and name in skip:
                continue
            rel = (rel_dir / name).as_posix()
            h.update(rel.encode() + b"\0")
            with (Path(dirpath) / name).open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            h.update(b"\0")
    return "sha256:" + h.hexdigest()


def read_record(stage_dir: Path) -> StageRecord | None:
    marker = stage_dir / DONE
    if not marker.is_file():
        return None
    try:
        return StageRecord.model_validate_json(marker.read_text())
    except ValueError:
        return None


class StageRunner:
    """Runs stages in order under `run_dir/stages`, skipping those already done."""

    def __init__(self, run_dir: Path, *, progress: Progress = no_progress, resume: bool = True,
                 shared: Path | None = None):
        """`shared`: a folder where results of stages with `depends_on` are published and
        looked up by input hash (None: nothing is shared)."""
        self.run_dir = run_dir
        self.stages_dir = run_dir / "stages"
        self.progress = progress
        self.resume = resume
        self.shared = shared
        self.records: dict[str, StageRecord] = {}
        self.computed: list[str] = []  # stages run (not skipped) in this invocation

    def input_hash(self, stage: Stage) -> str:
        records = {name: self.records[name] for name in stage.reads}
        upstream = (stage.depends_on(records) if stage.depends_on is not None
                    else {name: rec.output_hash for name, rec in records.items()})
        key = {"stage": stage.name, "version": stage.version, "config": stage.config_hash,
               "upstream": upstream}
        if stage.depends_on is not None:  # never equal to a hash of upstream outputs
            key["keyed"] = "depends_on"
        return hash_json(key)

    def _shared_copy(self, stage: Stage, want: str) -> Path | None:
        if self.shared is None or stage.depends_on is None:
            return None
        return self.shared / stage.name / want.removeprefix("sha256:")

    def _take_shared(self, stage: Stage, want: str, final: Path) -> StageRecord | None:
        """The shared result for this input hash, copied into the run; None when there is
        none, or when its files no longer hash to what it recorded (then it is ignored)."""
        source = self._shared_copy(stage, want)
        record = read_record(source) if source is not None else None
        if source is None or record is None or record.input_hash != want:
            return None
        if hash_json({"files": dir_hash(source), "summary": record.summary}) != (
                record.output_hash):
            return None
        taking = final.with_name(f"{stage.name}.shared-{os.getpid()}")
        shutil.rmtree(taking, ignore_errors=True)
        shutil.copytree(source, taking)
        if final.exists():
            shutil.rmtree(final)
        taking.replace(final)
        return record

    def _publish(self, stage: Stage, want: str, final: Path) -> None:
        """Copy a finished shareable stage to the shared folder (first finisher wins)."""
        target = self._shared_copy(stage, want)
        if target is None or target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(final, staging)
        try:
            staging.rename(target)  # atomic; fails when another run published first
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)

    def run(self, stage: Stage) -> StageRecord:
        """Run one stage (or reuse its finished output); returns its record."""
        missing = [name for name in stage.reads if name not in self.records]
        if missing:
            raise RuntimeError(f"stage {stage.name} reads {missing}, which have not run yet")
        self.stages_dir.mkdir(parents=True, exist_ok=True)
        final = self.stages_dir / stage.name
        partial = self.stages_dir / f"{stage.name}.partial"
        want = self.input_hash(stage)
        record = read_record(final) if self.resume else None
        if record is not None and record.input_hash == want:
            self.records[stage.name] = record
            self.progress(StageEvent(stage=stage.name, status="skip",
                                     message="already done with the same inputs"))
            return record
        shared = self._take_shared(stage, want, final)
        if shared is not None:
            shutil.rmtree(partial, ignore_errors=True)  # an interrupted attempt of its own
            self.records[stage.name] = shared
            self.progress(StageEvent(stage=stage.name, status="skip",
                                     message="the same inputs were measured by another run "
                                     f"({self._shared_copy(stage, want)})"))
            return shared
        if final.exists():  # stale output (inputs changed, or no resume): redo it
            shutil.rmtree(final)
        resumed = False
        if partial.exists():
            marker = partial / ".input_hash"
            same = marker.is_file() and marker.read_text() == want
            if self.resume and same:
                resumed = True
            else:
                shutil.rmtree(partial)
        partial.mkdir(parents=True, exist_ok=True)
        (partial / ".input_hash").write_text(want)
        started = time.time()
        self.progress(StageEvent(stage=stage.name, status="start",
                                 message="resuming from a partial run" if resumed else ""))
        ctx = StageContext(name=stage.name, work_dir=partial,
                           upstream={n: self.records[n] for n in stage.reads},
                           stages_dir=self.stages_dir, progress=self.progress, resumed=resumed)
        try:
            summary = stage.body(ctx)
        except BaseException as exc:
            self.progress(StageEvent(stage=stage.name, status="failed",
                                     message=f"{type(exc).__name__}: {exc}"))
            raise
        (partial / ".input_hash").unlink(missing_ok=True)
        output_hash = hash_json({"files": dir_hash(partial), "summary": summary})
        record = StageRecord(name=stage.name, input_hash=want, output_hash=output_hash,
                             summary=summary, started_at=started, finished_at=time.time())
        tmp = partial / (DONE + ".tmp")
        tmp.write_text(record.model_dump_json(indent=2))
        tmp.replace(partial / DONE)
        partial.replace(final)
        self.records[stage.name] = record
        self.computed.append(stage.name)
        self._publish(stage, want, final)
        self.progress(StageEvent(stage=stage.name, status="done",
                                 message=f"{record.seconds:.1f}s"))
        return record
