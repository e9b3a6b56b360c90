"""Executors: where trials run. The protocol is `trial.executor.TrialExecutor`.

* `ThreadExecutor`: in this process, on one TrialRunner (today's thread pool).
* `RayExecutor`: one Ray task per trial on a cluster (`distributed.ray_executor`).

Evaluation and training accept an executor and never import Ray; `make_executor` is
what the CLI and the worker call to pick one by name.
"""

from __future__ import annotations

import os
from pathlib import Path

from posttrain_arena.trial.executor import (
    ExecutorError,
    ThreadExecutor,
    TrialExecutor,
    TrialJob,
    TrialOutput,
)
from posttrain_arena.trial.runner import TrialRunner

EXECUTORS = ("thread", "ray")

__all__ = ["EXECUTORS", "ExecutorError", "ThreadExecutor", "TrialExecutor", "TrialJob",
           "TrialOutput", "make_executor"]


def make_executor(
    kind: str,
    *,
    backend: str = "auto",
    slots: int = 1,
    records_root: Path | None = None,
    allow_network: bool = False,
    ray_address: str | None = None,
) -> TrialExecutor:
    """`thread`: `slots` trials at once in this process. `ray`: trials on the cluster at
    `ray_address` (default $RAY_ADDRESS; with neither, a one-machine cluster of `slots`
    sandbox slots), as many in flight as the cluster has slots."""
    if kind == "thread":
        if ray_address:
            raise ExecutorError("--ray-address needs --executor ray")
        runner = TrialRunner(backend, records_root=records_root, allow_network=allow_network)
        return ThreadExecutor(runner, slots=slots, own_runner=True)
    if kind == "ray":
        from posttrain_arena.distributed.ray_executor import RayExecutor

        joining = ray_address or os.environ.get("RAY_ADDRESS")
        return RayExecutor(ray_address, backend=backend, local_slots=slots,
                           records_root=str(records_root) if records_root else None,
                           allow_network=allow_network, slots=None if joining else slots)
    raise ExecutorError(f"unknown executor {kind!r}; use one of {', '.join(EXECUTORS)}")
