"""RayExecutor: each trial is one Ray task on some node of a cluster.

* Admission: a trial mostly waits (on the model, on its sandbox), so it asks for no CPU
  but for one unit of the custom resource `arena_sandbox_slot`, which each node offers
  as many times as it can run sandboxes at once (`ray start --resources=...`).
* Agents travel as `AgentSpec`s and are built on the node; live agents are refused.
* Packages travel once: packed on the driver, put in the object store once per
  checksum, unpacked once per node and checked against the checksum there
  (`distributed.packages`). Images are built on the node by content hash, by the
  sandbox backend's own cache.
* The driver alone journals: this executor returns results and never writes a journal.
* Faults: a trial whose worker or node dies is retried by Ray on another node, at most
  `max_retries` times; after that, or on any other Ray failure, it ends as
  `infra_error` with Ray's reason, never as a reward. A trial that outlives its hard
  deadline (build + agent + verifier limits + slack) is cancelled, its worker killed,
  and every node reaps the sandboxes whose owner process is gone.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.distributed.packages import pack, unpack
from posttrain_arena.task_format.package import TaskPackage
from posttrain_arena.trial.executor import (
    ExecutorError,
    TrialJob,
    TrialOutput,
    infra_result,
    run_job,
)
from posttrain_arena.trial.runner import TrialRunner

SLOT_RESOURCE = "arena_sandbox_slot"
"""The custom resource a node offers once per sandbox it can run at once."""

log = logging.getLogger(__name__)

_REAP_AGE_SEC = 10 * 365 * 86400.0  # reap by dead owner only, never by age


@dataclass(frozen=True)
class NodeConfig:
    """How each node builds its TrialRunner (one per worker process)."""

    backend: str = "auto"
    records_root: str | None = None
    allow_network: bool = False
    warm_pool: bool = True


_runners: dict[NodeConfig, TrialRunner] = {}
_runners_lock = threading.Lock()


def _node_runner(cfg: NodeConfig) -> TrialRunner:
    from pathlib import Path

    with _runners_lock:
        runner = _runners.get(cfg)
        if runner is None:
            runner = TrialRunner(cfg.backend, allow_network=cfg.allow_network,
                                 warm_pool=cfg.warm_pool,
                                 records_root=Path(cfg.records_root) if cfg.records_root
                                 else None)
            _runners[cfg] = runner
        return runner


_tasks: dict[str, TaskPackage] = {}  # checksum -> the package unpacked and checked here


def _task_here(blob: list[Any], checksum: str, name: str) -> TaskPackage:
    """The package in this worker process: fetched, unpacked and checked against its
    checksum on first use only (then kept, as the thread executor keeps its suite).
    `blob` is [ObjectRef] nested in a list, so Ray does not fetch the bytes for every
    trial, only here on a miss."""
    import ray

    with _runners_lock:
        task = _tasks.get(checksum)
    if task is None:
        task = unpack(ray.get(blob[0]), checksum=checksum, name=name)
        with _runners_lock:
            _tasks[checksum] = task
    return task


def _trial_on_node(blob: list[Any], checksum: str, name: str, agent: AgentSpec, seed: int,
                   agent_timeout: float | None, capture: bool, cfg: NodeConfig) -> TrialOutput:
    """The Ray task: unpack (once per node), build the agent, run the trial here."""
    import ray

    task = _task_here(blob, checksum, name)
    out = run_job(_node_runner(cfg), TrialJob(task, agent, seed, agent_timeout, capture))
    return TrialOutput(out.result, out.run, node=ray.get_runtime_context().get_node_id())


def _reap_here() -> dict[str, Any]:
    """Remove sandboxes on this node whose owner process died (a killed worker's)."""
    from posttrain_arena.sandbox.reaper import reap_orphans

    report = reap_orphans(_REAP_AGE_SEC)
    return {"containers": report.containers, "local_sessions": report.local_sessions}


class RayExecutor:
    """Trials as Ray tasks, admitted by sandbox slots, retried on node loss."""

    name = "ray"
    journal = None

    def __init__(
        self,
        address: str | None = None,
        *,
        backend: str = "auto",
        records_root: str | None = None,
        allow_network: bool = False,
        warm_pool: bool = False,
        max_retries: int = 2,
        slots: int | None = None,
        local_slots: int = 4,
        object_store_memory: int = 200 * 1024 * 1024,
        deadline_slack_sec: float = 300.0,
        hard_deadline_sec: float | None = None,
    ) -> None:
        """`address`: a cluster to join (default: $RAY_ADDRESS, else a one-machine
        cluster started here with `local_slots` sandbox slots and a small object
        store). `max_retries`: Ray re-runs of a trial whose worker or node died.
        `warm_pool`: pre-start the next session in each worker process; off by default,
        because every worker process keeps its own pool, and benchmarks/bench_scale.py
        measured +300 ms of Ray overhead per trial with it against +100 ms without.
        `slots`: trials kept in flight (default: the cluster's sandbox slots).
        `hard_deadline_sec`: cancel a trial after this long (default: its build, agent
        and verifier limits plus `deadline_slack_sec`)."""
        try:
            import ray
        except ImportError:
            raise ExecutorError("the Ray executor needs ray: pip install "
                                "'posttrain-arena[cluster]'") from None
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0 (got {max_retries})")
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            where = address or os.environ.get("RAY_ADDRESS")
            if where:
                ray.init(address=where, log_to_driver=False)
            else:
                # Ray keeps at most num_cpus idle workers per node and kills the rest;
                # a killed worker's successor pays a process start, an import and a
                # cold warm pool, so there must be at least as many CPUs as slots.
                ray.init(address="local", resources={SLOT_RESOURCE: local_slots},
                         num_cpus=max(local_slots, os.cpu_count() or 1),
                         include_dashboard=False,
                         object_store_memory=object_store_memory, log_to_driver=False)
            self._started = True
        offered = int(ray.cluster_resources().get(SLOT_RESOURCE, 0))
        if offered < 1:
            self.close()
            raise ExecutorError(
                f"no node of the Ray cluster offers the {SLOT_RESOURCE!r} resource, so no "
                "trial could ever be scheduled; start each worker node with "
                f"`ray start --address=HEAD:6379 --resources='{{\"{SLOT_RESOURCE}\": 8}}'` "
                "(8 = sandboxes it may run at once); see docs/cluster.md")
        self.slots = slots or offered
        self.backend_name = backend
        self.node_config = NodeConfig(backend, records_root, allow_network, warm_pool)
        self.max_retries = max_retries
        self.deadline_slack_sec = deadline_slack_sec
        self.hard_deadline_sec = hard_deadline_sec
        self._fn = ray.remote(_trial_on_node).options(
            num_cpus=0, resources={SLOT_RESOURCE: 1}, max_retries=max_retries,
            retry_exceptions=False)
        self._reap = ray.remote(_reap_here)
        self._packages: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _package(self, task: TaskPackage) -> Any:
        with self._lock:
            ref = self._packages.get(task.checksum)
            if ref is None:
                ref = self._ray.put(pack(task))
                self._packages[task.checksum] = ref
            return ref

    def deadline(self, job: TrialJob) -> float:
        """Seconds after submission at which the job is cancelled."""
        if self.hard_deadline_sec is not None:
            return self.hard_deadline_sec
        fm = job.task.frontmatter
        agent = job.agent_timeout if job.agent_timeout is not None else fm.agent.timeout_sec
        return (fm.environment.build_timeout_sec + agent + fm.verifier.timeout_sec
                + self.deadline_slack_sec)

    def run(self, job: TrialJob) -> TrialOutput:
        """Run the job as a Ray task and wait for it (or for its deadline)."""
        if not isinstance(job.agent, AgentSpec):
            raise ExecutorError(
                f"the Ray executor runs agents described by an AgentSpec, built on the "
                f"node; {job.agent_name!r} is a live agent object of this process (a "
                "model being trained?), which only the thread executor can run")
        ray = self._ray
        from ray.exceptions import GetTimeoutError, RayError

        ref = self._fn.remote([self._package(job.task)], job.task.checksum, job.task.name,
                              job.agent, job.seed, job.agent_timeout, job.capture,
                              self.node_config)
        limit = self.deadline(job)
        try:
            out: TrialOutput = ray.get(ref, timeout=limit)
            return out
        except GetTimeoutError:
            self._cancel(ref)
            return TrialOutput(infra_result(
                job, self.backend_name,
                f"cancelled: the trial outlived its deadline of {limit:.0f} s on the "
                "Ray cluster; its worker was killed and its sandboxes reaped"))
        except RayError as exc:  # worker or node lost after the retries, or Ray itself
            return TrialOutput(infra_result(job, self.backend_name,
                                            f"ray: {_reason(exc)}"))

    def _cancel(self, ref: Any) -> None:
        """Kill the task's worker, wait until it is gone, reap every node."""
        ray = self._ray
        from ray.exceptions import GetTimeoutError, RayError

        ray.cancel(ref, force=True, recursive=True)
        try:
            ray.get(ref, timeout=60)
        except GetTimeoutError:
            pass
        except RayError:
            pass  # TaskCancelledError / WorkerCrashedError: the worker is gone
        try:
            self.reap()
        except Exception as exc:  # the result stays infra_error; say why nothing was reaped
            log.warning("reaping after a cancelled trial failed: %s", exc)

    def reap(self) -> list[dict[str, Any]]:
        """Reap orphaned sandboxes on every live node; what each removed."""
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        refs = [self._reap.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
                    node["NodeID"], soft=False)).remote()
                for node in ray.nodes() if node.get("Alive")]
        reports: list[dict[str, Any]] = ray.get(refs, timeout=300)
        return reports

    def close(self) -> None:
        """Disconnect from (or stop) the Ray cluster this executor started."""
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False


def _reason(exc: BaseException) -> str:
    """Ray's exception as one line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]
