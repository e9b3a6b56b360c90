"""TrialRunner: runs trials on one sandbox backend, building each image once.

    runner = TrialRunner("auto", records_root=Path("records"), journal=Journal("j.jsonl"))
    result = runner.run(load_task("envs/foo"), OracleAgent())

`run` is thread-safe: evaluation calls it from a thread pool. Images are cached by the
content hash of the environment's build context, built once under a per-context lock
and reused across trials. With a journal, a trial whose identity (task checksum +
agent + seed) already has a final result is not run again; infrastructure failures are.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from posttrain_arena.agents.base import Agent
from posttrain_arena.sandbox.base import Backend, BuildError, ImageRef, SandboxError
from posttrain_arena.sandbox.imagemap import build_context
from posttrain_arena.task_format.hashing import tree_hash
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.trial import lifecycle, multistep
from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.pool import SessionPool
from posttrain_arena.trial.pristine import TrustCache
from posttrain_arena.trial.records import TrialConfig, TrialRecord, trial_id
from posttrain_arena.trial.result import Outcome, TrialResult
from posttrain_arena.trial.state import SavedState

__all__ = ["TrialRunner", "trial_id"]


class _BuildFailed(BuildError):
    """A cached build failure: every trial of that context reports it without rebuilding
    (a BuildError, so callers of `image_for` see one kind of failure either way)."""


class _NetworkRefused(Exception):
    """The task needs network and the operator did not allow it."""


class TrialRunner:
    """Runs trials of task packages with agents on one sandbox backend."""

    def __init__(
        self,
        backend: str | Backend = "auto",
        *,
        records_root: Path | None = None,
        journal: Journal | None = None,
        allow_network: bool = False,
        warm_pool: bool = True,
    ) -> None:
        """`backend`: "auto", "docker", "local" or a Backend object. `records_root`: keep
        a record directory per trial there (else none is kept). `allow_network`: the
        operator's permission for network: a task with `environment.allow_internet:
        true` gets network in its agent phase only when it is True, and is refused
        (build_failed, with the reason) otherwise; other tasks never get network, nor
        does any verifier. `warm_pool`: keep one
        pre-started pristine agent session per environment ready for the next trial."""
        if isinstance(backend, str):
            from posttrain_arena.sandbox import get_backend

            backend = get_backend(backend)
        self.backend: Backend = backend
        self.records_root = Path(records_root) if records_root is not None else None
        self.journal = journal
        self.allow_network = allow_network
        self.pool = SessionPool(backend) if warm_pool else None
        self.trust = TrustCache()
        self._lock = threading.Lock()
        self._context_of: dict[str, str] = {}
        self._images: dict[str, ImageRef] = {}
        self._failed_builds: dict[str, str] = {}
        self._build_locks: dict[str, threading.Lock] = {}

    def close(self) -> None:
        """Stop the warm pool's idle sessions (also done at interpreter exit)."""
        if self.pool is not None:
            self.pool.close()

    def __enter__(self) -> TrialRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def backend_name(self) -> str:
        return self.backend.name

    def image_for(self, task: TaskPackage) -> ImageRef:
        """The task's image, built on first use (BuildError when it cannot be built)."""
        with self._lock:
            key = self._context_of.get(task.checksum)
        if key is None:
            key = tree_hash(build_context(task.environment_dir, task.prebuilt_image))
            with self._lock:
                self._context_of[task.checksum] = key
        with self._lock:
            lock = self._build_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._images:
                return self._images[key]
            if key in self._failed_builds:
                raise _BuildFailed(self._failed_builds[key])
            env = task.frontmatter.environment
            try:
                context = build_context(task.environment_dir, task.prebuilt_image)
                image = self.backend.build(context, timeout=env.build_timeout_sec,
                                           task_name=task.name)
            except BuildError as exc:
                self._failed_builds[key] = str(exc)
                raise
            self._images[key] = image
            return image

    def run(self, task: TaskPackage, agent: Agent, *, seed: int = 0,
            agent_timeout: float | None = None, keep_state: Path | None = None
            ) -> TrialResult:
        """Run one trial (or return the journal's final result for its identity).
        `keep_state`: a host directory where the agent's final state is kept
        (`SavedState.load` reads it) when its phase ended well and the state was
        fetched (a multi-step task's: after its last step); a trial from the journal keeps
        nothing."""
        return self._journaled(task, agent.name, seed, lambda tid: self._run(
            task, agent.name, tid, seed, agent_timeout, agent=agent, keep_state=keep_state))

    def verify_state(self, task: TaskPackage, saved: SavedState, *, name: str,
                     seed: int = 0) -> TrialResult:
        """A trial without an agent phase: `saved` (a kept final state, perhaps changed
        on the host since) restored into a session from the pristine image and verified
        as any trial's state would be; recorded and journaled under `name`."""
        return self._journaled(task, name, seed, lambda tid: self._run(
            task, name, tid, seed, None, saved=saved))

    def _journaled(self, task: TaskPackage, name: str, seed: int,
                   run: Callable[[str], TrialResult]) -> TrialResult:
        tid = trial_id(task.checksum, name, seed)
        if self.journal is not None:
            done = self.journal.done(tid)
            if done is not None:
                return done
        result = run(tid)
        if self.journal is not None:
            self.journal.append(result)
        return result

    def _run(self, task: TaskPackage, name: str, tid: str, seed: int,
             agent_timeout: float | None, *, agent: Agent | None = None,
             keep_state: Path | None = None, saved: SavedState | None = None
             ) -> TrialResult:
        fm = task.frontmatter
        network = fm.environment.allow_internet and self.allow_network
        refused = fm.environment.allow_internet and not self.allow_network
        timeout = agent_timeout if agent_timeout is not None else fm.agent.timeout_sec
        started = datetime.now(UTC).isoformat(timespec="seconds")
        t_start = time.monotonic()
        timings: dict[str, float] = {}
        scratch = Path(tempfile.mkdtemp(prefix=f"arena-trial-{tid[:8]}-"))
        record = TrialRecord(self.records_root, tid, scratch)
        record.write_config(TrialConfig(
            trial_id=tid, task_name=task.name, task_root=str(task.root),
            task_checksum=task.checksum, agent=name, seed=seed,
            backend=self.backend_name, isolation=fm.verifier.isolation.value,
            agent_timeout_sec=timeout, verifier_timeout_sec=fm.verifier.timeout_sec,
            limits={"cpus": fm.environment.cpus, "memory_mb": fm.environment.memory_mb,
                    "storage_mb": fm.environment.storage_mb,
                    "pids_limit": fm.environment.pids_limit, "network": network,
                    "disk": self.backend.disk_bound(fm.environment.storage_mb)},
            workdir=fm.environment.workdir,
        ))
        image: ImageRef | None = None
        try:
            if refused:
                raise _NetworkRefused(
                    "refused: the task asks for the internet (environment.allow_internet: "
                    "true) and the operator did not allow it; pass --allow-internet (or "
                    "runtime.allow_internet = true in the recipe) to run it with network")
            t0 = time.monotonic()
            try:
                image = self.image_for(task)
            finally:
                timings["build"] = time.monotonic() - t0
            plan = lifecycle.TrialPlan(
                task=task, agent=agent, backend=self.backend, image=image, trial_id=tid,
                seed=seed, agent_timeout=timeout, network=network, record=record,
                scratch=scratch, timings=timings, pool=self.pool, trust=self.trust,
                keep_state=keep_state,
            )
            if saved is not None:
                phase = (multistep.verify_saved if task.steps else lifecycle.verify_saved)(
                    plan, saved)
            else:  # issue 14: multi-step tasks run step by step on the same machinery
                phase = (multistep.execute if task.steps else lifecycle.execute)(plan)
        except _NetworkRefused as exc:
            phase = lifecycle.PhaseOutcome(Outcome.BUILD_FAILED, reason=str(exc))
        except (BuildError, _BuildFailed) as exc:
            phase = lifecycle.PhaseOutcome(Outcome.BUILD_FAILED,
                                           reason=f"the environment did not build: {exc}")
        except SandboxError as exc:
            phase = lifecycle.PhaseOutcome(Outcome.INFRA_ERROR,
                                           reason=f"sandbox failure: {exc}")
        except Exception as exc:  # anything unexpected is ours, never the agent's reward
            phase = lifecycle.PhaseOutcome(Outcome.INFRA_ERROR,
                                           reason=f"{type(exc).__name__}: {exc}")
        timings["total"] = time.monotonic() - t_start
        result = TrialResult(
            trial_id=tid, task_name=task.name, task_checksum=task.checksum,
            domain=task.domain.value, agent=name, seed=seed, backend=self.backend_name,
            outcome=phase.outcome,
            reward=phase.reward if phase.outcome is Outcome.SCORED else None,
            reason=phase.reason, details=phase.details,
            timings={k: round(v, 4) for k, v in timings.items() if not k.startswith("_")},
            image_id=(image.image_id or image.tag) if image is not None else None,
            agent_info=dict(phase.agent_info), isolation=fm.verifier.isolation.value,
            network=network, started_at=started, verifier_exit_code=phase.verifier_exit_code,
            record_dir=str(record.dir) if record.keep else None,
        )
        record.write_result(result)
        shutil.rmtree(scratch, ignore_errors=True)
        return result
