"""The gate run: every package of a collection through the gates, into evidence records.

Per package, on one TrialRunner (images built once, trials recorded):

1. build: the image builds within task.md's build_timeout_sec;
2. oracle rerun 0 (keeping its final state on the host) and the empty trial, side by
   side;
3. when rerun 0 reached a verdict: reruns 1..R-1 (the flake rate); when it scored 1.0,
   also the probes: its kept state perturbed on the host and verified, one
   verification each, no agent phase (see probes.py), and for shared isolation or a
   multi-step task (judged by its last step's verifier) the kept state verified
   unperturbed (the replay must score as the oracle did). An oracle that hangs is not
   rerun R times: its first timeout is its verdict;
4. for every package whose build and oracle gates pass: the base model's k samples,
   through `evaluate` (one batch for the whole collection).

A fault in one package (a build that fails, an oracle that hangs, a verifier that
crashes, even an unexpected exception in the harness) becomes that package's evidence,
and the run goes on. At most `jobs` trials and verifications run at once. Packages
whose record is on file for the same content hash, harness version and set-up are not
measured again; records with an `error` gate (infrastructure) are always measured again.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain_arena.agents.base import Agent
from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.model import AgentSettings
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.evaluate.report import TrialSummary, summarise
from posttrain_arena.evaluate.runner import evaluate, model_agents
from posttrain_arena.evaluate.suite import suite_from_tasks
from posttrain_arena.gates.cheats import CHEATS, make_cheat
from posttrain_arena.gates.evidence import (
    BaseModelEvidence,
    BuildEvidence,
    EvidenceStore,
    GateName,
    GateStatus,
    ProbeEvidence,
    TaskEvidence,
    Verdict,
    evidence_key,
    harness_version,
)
from posttrain_arena.gates.policy import DEFAULT_POLICY, INFRA_OUTCOMES, GatePolicy
from posttrain_arena.gates.probes import PROBES, make_probe
from posttrain_arena.models.base import ChatModel
from posttrain_arena.sandbox.base import BuildError
from posttrain_arena.task_format.findings import SpecError
from posttrain_arena.task_format.hashing import tree_hash
from posttrain_arena.task_format.package import TaskPackage, load_task
from posttrain_arena.trial.replay import task_dirs
from posttrain_arena.trial.result import TrialResult
from posttrain_arena.trial.runner import TrialRunner
from posttrain_arena.trial.state import SavedState

OnDone = Callable[[TaskEvidence, bool], None]
"""Called once per package with its evidence and whether it was reused."""


class GateReport(BaseModel):
    """What one gate run found, package by package."""

    path: str = Field(description="The collection folder")
    backend: str = Field(description="Sandbox backend")
    harness_version: str = Field(description="posttrain-arena version + content hash of "
                                 "its source code")
    model: str = Field(description="Base model spec")
    k: int = Field(description="Base model samples per task")
    reruns: int = Field(description="Oracle reruns per task")
    evidence: list[TaskEvidence] = Field(default_factory=list, description="By task name")
    reused: list[str] = Field(default_factory=list,
                              description="Tasks whose record on file was reused")
    trials_run: int = Field(default=0, description="Trials this run started (an agent "
                                                   "phase and a verification each)")
    verifications_run: int = Field(
        default=0, description="Kept states this run verified with no agent phase (probes, "
                               "replays): one verification each")
    wall_sec: float = Field(default=0.0, description="Wall-clock of the whole run")

    @property
    def eligible(self) -> list[str]:
        return [e.task for e in self.evidence if e.eligible]

    @property
    def ok(self) -> bool:
        return bool(self.evidence) and all(e.eligible for e in self.evidence)


class _Package:
    """One package's measurements while the run is under way."""

    def __init__(self, ev: TaskEvidence, task: TaskPackage | None) -> None:
        self.ev = ev
        self.task = task


def gate_collection(root: Path, runner: TrialRunner, model: ChatModel, *, model_spec: str,
                    k: int, records_root: Path, **options: Any) -> GateReport:
    """Gate every package under `root` (a collection's envs/, or a folder of packages);
    `options` as for `gate_packages`."""
    return gate_packages(task_dirs(Path(root)), runner, model, model_spec=model_spec, k=k,
                         records_root=records_root, source=str(root), **options)


def gate_packages(
    dirs: list[Path], runner: TrialRunner, model: ChatModel, *, model_spec: str, k: int,
    reruns: int = 3, jobs: int = 1, records_root: Path, policy: GatePolicy = DEFAULT_POLICY,
    settings: AgentSettings | None = None, harness: str | None = None,
    on_done: OnDone | None = None, source: str = "<packages>",
) -> GateReport:
    """Gate the packages in `dirs`: measure each (or reuse its record), assess it under
    `policy`, store its record under `records_root`/evidence. `harness` overrides the
    harness version the records are keyed by (default: `harness_version()`, which holds
    the code's content hash)."""
    if k < 1 or reruns < 1 or jobs < 1:
        raise ValueError(f"k, reruns and jobs must be at least 1 (got k={k}, "
                         f"reruns={reruns}, jobs={jobs})")
    if GateName.LEARNABLE in policy.gates and k < 2:
        raise ValueError("the learnable gate needs k of at least 2: with one sample a task "
                         "is always either never or always solved")
    start = time.monotonic()
    harness = harness or harness_version()
    agent = "sha256:" + hashlib.sha256(
        (settings or AgentSettings()).model_dump_json().encode()).hexdigest()
    store = EvidenceStore(records_root)
    report = GateReport(path=source, backend=runner.backend_name, harness_version=harness,
                        model=model_spec, k=k, reruns=reruns)
    counter = _Counter()
    todo: list[_Package] = []
    for directory in dirs:
        pkg = _open(directory, harness, runner.backend_name, model_spec, agent, k, reruns)
        if pkg.task is None:
            _finish(pkg, policy, store, report, on_done)
            continue
        kept = store.get(pkg.ev.key)
        if kept is not None and not _has_error(kept):
            kept = kept.model_copy(update={"verdict": policy.assess(kept)})
            report.evidence.append(kept)
            report.reused.append(kept.task)
            if on_done is not None:
                on_done(kept, True)
            continue
        todo.append(pkg)
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="gate-trial") as trials, \
            ThreadPoolExecutor(max_workers=max(1, min(len(todo), jobs + 1)),
                               thread_name_prefix="gate-pkg") as packages:
        # One package more in flight than trial slots: while one waits for its oracle's
        # verdict before its probes, another's trials keep the slots busy.
        slots = _Slots(runner, trials, counter)
        for fut in [packages.submit(_measure, pkg, runner, slots, reruns) for pkg in todo]:
            fut.result()
    _sample_base(todo, runner, model, model_spec, k, jobs, policy, settings, counter)
    for pkg in todo:
        _finish(pkg, policy, store, report, on_done)
    report.evidence.sort(key=lambda e: e.task)
    report.trials_run = counter.n
    report.verifications_run = counter.verifications
    report.wall_sec = round(time.monotonic() - start, 3)
    return report


class _Counter:
    def __init__(self) -> None:
        self.n = 0
        self.verifications = 0
        self._lock = threading.Lock()

    def add(self, n: int = 1) -> None:
        with self._lock:
            self.n += n

    def add_verification(self) -> None:
        with self._lock:
            self.verifications += 1


class _Slots:
    """The run's trial slots: trials and verifications of kept states, `jobs` at once."""

    def __init__(self, runner: TrialRunner, pool: ThreadPoolExecutor,
                 counter: _Counter) -> None:
        self.runner, self.pool, self.counter = runner, pool, counter
        self._lock = threading.Lock()
        self._started: dict[str, list[Future[TrialResult]]] = {}

    def trial(self, task: TaskPackage, agent: Agent, seed: int, *,
              keep_state: Path | None = None) -> Future[TrialResult]:
        def run() -> TrialResult:
            self.counter.add()
            return self.runner.run(task, agent, seed=seed, keep_state=keep_state)
        return self._submit(task, run)

    def verify(self, task: TaskPackage, state: SavedState, name: str) -> Future[TrialResult]:
        def run() -> TrialResult:
            self.counter.add_verification()
            return self.runner.verify_state(task, state, name=name)
        return self._submit(task, run)

    def wait_for(self, task: TaskPackage) -> None:
        """Until every trial and verification started for `task` has ended."""
        with self._lock:
            futures = self._started.pop(task.checksum, [])
        wait(futures)

    def _submit(self, task: TaskPackage, run: Callable[[], TrialResult]
                ) -> Future[TrialResult]:
        fut = self.pool.submit(run)
        with self._lock:
            self._started.setdefault(task.checksum, []).append(fut)
        return fut


def _open(directory: Path, harness: str, backend: str, model: str, agent: str, k: int,
          reruns: int) -> _Package:
    """Load a package and find its key; a package that does not load is evidence too."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    blank = Verdict(eligible=False)
    common = dict(harness_version=harness, backend=backend, model=model, k=k, reruns=reruns,
                  created_at=now, verdict=blank)
    try:
        task = load_task(directory)
    except (SpecError, OSError) as exc:
        try:
            checksum = tree_hash(directory)
        except OSError:
            checksum = "unreadable"
        ev = TaskEvidence(key=evidence_key(checksum, harness=harness, backend=backend,
                                           model=model, agent=agent, k=k, reruns=reruns),
                          task=directory.name, task_checksum=checksum,
                          load_error=str(exc), **common)  # type: ignore[arg-type]
        return _Package(ev, None)
    key = evidence_key(task.checksum, harness=harness, backend=backend, model=model,
                       agent=agent, k=k, reruns=reruns)
    ev = TaskEvidence(key=key, task=task.name, task_checksum=task.checksum,
                      domain=task.domain.value, **common)  # type: ignore[arg-type]
    return _Package(ev, task)


def _measure(pkg: _Package, runner: TrialRunner, slots: _Slots, reruns: int) -> None:
    """Build, oracle reruns, empty trial and probes of one package (never raises)."""
    task, ev = pkg.task, pkg.ev
    assert task is not None
    kept = Path(tempfile.mkdtemp(prefix="arena-gate-"))
    try:
        t0 = time.monotonic()
        try:
            runner.image_for(task)
            ev.build = BuildEvidence(ok=True, seconds=round(time.monotonic() - t0, 3))
        except BuildError as exc:
            ev.build = BuildEvidence(ok=False, seconds=round(time.monotonic() - t0, 3),
                                     error=f"the environment did not build: {exc}")
            return
        ev.timings[GateName.BUILD.value] = ev.build.seconds
        oracle = OracleAgent()
        first = slots.trial(task, oracle, 0, keep_state=kept / "oracle")
        empty = slots.trial(task, EmptyAgent(), 0, keep_state=kept / "empty")
        results = [first.result()]
        more: list[Future[TrialResult]] = []
        probes: list[tuple[int, Future[TrialResult]]] = []
        replay: Future[TrialResult] | None = None
        head = results[0]
        if head.outcome.value in (*INFRA_OUTCOMES, "agent_timeout"):
            if reruns > 1:
                ev.oracle_note = (f"not rerun: the first oracle trial ended in "
                                  f"{head.outcome.value}")
        else:
            more = [slots.trial(task, oracle, seed) for seed in range(1, reruns)]
            if head.passed:
                probes, replay = _start_probes(task, ev, slots, kept)
        ev.empty = summarise(empty.result())
        if head.passed:  # the cheats plant where the oracle's outputs go
            probes += _start_cheats(task, ev, slots, kept)
        results += [f.result() for f in more]
        ev.oracle = [summarise(r) for r in results]
        counted = [r for r in results if r.outcome.value not in INFRA_OUTCOMES]
        if counted:
            ev.flake_rate = round(sum(not r.passed for r in counted) / len(counted), 4)
        for i, fut in probes:
            ev.probes[i].trial = summarise(fut.result())
        if replay is not None:
            ev.replay = summarise(replay.result())
        ev.timings[GateName.ORACLE.value] = _seconds(ev.oracle)
        ev.timings[GateName.EMPTY.value] = _seconds([ev.empty])
        if ev.probes:
            ev.timings[GateName.PROBES.value] = _seconds(
                [p.trial for p in ev.probes if p.trial is not None]
                + ([ev.replay] if ev.replay is not None else []))
    except Exception as exc:  # a harness bug in one package must not stop the run
        ev.oracle_note = f"the gate run failed on this package: {type(exc).__name__}: {exc}"
    finally:
        slots.wait_for(task)  # nothing may still read the kept states
        shutil.rmtree(kept, ignore_errors=True)


def _start_probes(task: TaskPackage, ev: TaskEvidence, slots: _Slots, kept: Path
                  ) -> tuple[list[tuple[int, Future[TrialResult]]],
                             Future[TrialResult] | None]:
    """Build each probe from the oracle's kept state (on the host) and start its
    verification; for shared isolation, also the unperturbed replay, and for a multi-step
    task too (its probes are judged by the last step's verifier alone, which must accept
    the oracle's final state for a rejection to mean anything)."""
    saved = SavedState.load(kept / "oracle")
    if saved is None:
        why = ("the oracle's final state was not kept (a state too large to fetch, or a "
               "trial taken from the journal), so no probe ran")
        ev.probes = [ProbeEvidence(kind=k.name, description=k.description, applicable=True,
                                   note=why) for k in PROBES]
        return [], None
    limit = task.frontmatter.environment.storage_mb << 20
    started: list[tuple[int, Future[TrialResult]]] = []
    for kind in PROBES:
        probe = make_probe(saved, kind, kept / kind.name, limit=limit)
        ev.probes.append(ProbeEvidence(kind=kind.name, description=kind.description,
                                       applicable=bool(probe.perturbed),
                                       perturbed=probe.perturbed))
        if probe.perturbed:
            started.append((len(ev.probes) - 1,
                            slots.verify(task, probe.state, f"probe:{kind.name}")))
    replay = None
    if started and (task.steps or task.frontmatter.verifier.isolation.value == "shared"):
        replay = slots.verify(task, saved, "probe:replay")
    return started, replay


def _start_cheats(task: TaskPackage, ev: TaskEvidence, slots: _Slots, kept: Path
                  ) -> list[tuple[int, Future[TrialResult]]]:
    """Build each cheating probe from the empty trial's kept state and the oracle's
    outputs (cheats.py) and start its verification."""
    empty, oracle = SavedState.load(kept / "empty"), SavedState.load(kept / "oracle")
    if empty is None or oracle is None:
        why = "the empty trial's final state was not kept, so no cheating probe ran"
        ev.probes += [ProbeEvidence(kind=k.name, description=k.description, start="empty",
                                    applicable=True, note=why) for k in CHEATS]
        return []
    started: list[tuple[int, Future[TrialResult]]] = []
    for kind in CHEATS:
        probe = make_cheat(empty, oracle, kind, kept / f"cheat-{kind.name}")
        ev.probes.append(ProbeEvidence(kind=kind.name, description=kind.description,
                                       start="empty", applicable=bool(probe.perturbed),
                                       perturbed=probe.perturbed))
        if probe.perturbed:
            started.append((len(ev.probes) - 1,
                            slots.verify(task, probe.state, f"probe:{kind.name}")))
    return started


def _sample_base(todo: list[_Package], runner: TrialRunner, model: ChatModel,
                 model_spec: str, k: int, jobs: int, policy: GatePolicy,
                 settings: AgentSettings | None, counter: _Counter) -> None:
    """k samples of the base model on every package whose build and oracle pass."""
    ready = []
    for pkg in todo:
        gates = {c.gate: c.status for c in policy.assess(pkg.ev).gates}
        if pkg.task is not None and gates[GateName.ORACLE] is GateStatus.PASS:
            ready.append(pkg)
    if not ready:
        return
    suite = suite_from_tasks([p.task for p in ready if p.task is not None], source="gate")
    agents = model_agents(model, settings, name=f"model:{model_spec}")
    eval_report = evaluate(suite, agents, k=k, jobs=jobs, runner=runner, model=model_spec)
    counter.add(len(eval_report.trials))
    by_task: dict[str, list[TrialSummary]] = {}
    for t in eval_report.trials:
        by_task.setdefault(t.task_name, []).append(t)
    for pkg in ready:
        samples = sorted(by_task.get(pkg.ev.task, []), key=lambda t: t.seed)
        counted = [t for t in samples if t.outcome not in INFRA_OUTCOMES]
        solved = sum(t.passed for t in counted)
        pkg.ev.base = BaseModelEvidence(
            model=model_spec, k=k, n=len(counted), solved=solved,
            pass_rate=round(solved / len(counted), 4) if counted else None,
            pass_at_k=(1.0 if solved else 0.0) if counted else None, trials=samples)
        pkg.ev.timings[GateName.LEARNABLE.value] = _seconds(samples)


def _finish(pkg: _Package, policy: GatePolicy, store: EvidenceStore, report: GateReport,
            on_done: OnDone | None) -> None:
    ev = pkg.ev
    ev.verdict = policy.assess(ev)
    if pkg.task is not None:
        store.put(ev)
    report.evidence.append(ev)
    if on_done is not None:
        on_done(ev, False)


def _has_error(ev: TaskEvidence) -> bool:
    """Whether a record holds a gate that could not be measured (then measure again)."""
    return any(c.status is GateStatus.ERROR for c in ev.verdict.gates)


def _seconds(trials: list[TrialSummary]) -> float:
    return round(sum(t.seconds for t in trials), 3)
