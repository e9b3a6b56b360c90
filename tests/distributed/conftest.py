"""Ray fixtures: a one-machine cluster and a head with two worker nodes.

Ray is memory-hungry and the test machine is shared, so every node gets a small object
store, no dashboard, and every cluster is shut down (its processes gone) when the test
that asked for it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import ray  # the `cluster` extra, which `all` (what CI installs) includes

from posttrain_arena.distributed.ray_executor import SLOT_RESOURCE

STORE = 100 * 1024 * 1024
T = TypeVar("T")
STARTS = 3  # Ray gives a node 30 s (not configurable) to register; a loaded CI box may not


def _started(start: Callable[[], T], stop: Callable[[], None]) -> T:
    """`start()`, again after `stop()` when Ray's fixed node start-up wait ran out."""
    for attempt in range(STARTS):
        try:
            return start()
        except Exception as exc:
            stop()
            if "timed out during startup" not in str(exc) or attempt == STARTS - 1:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def local_ray(arena_cache_dir: Path) -> Iterator[None]:
    """A one-node Ray with two sandbox slots, for executor tests."""
    _started(lambda: ray.init(address="local", resources={SLOT_RESOURCE: 2}, num_cpus=2,
                              object_store_memory=STORE, include_dashboard=False,
                              log_to_driver=False), ray.shutdown)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def three_nodes(arena_cache_dir: Path) -> Iterator[tuple[object, list[object]]]:
    """`ray.cluster_utils.Cluster`: a head with no sandbox slot and two worker nodes
    with two slots each; yields (cluster, [worker node, worker node])."""
    from ray.cluster_utils import Cluster

    made: list[Cluster] = []

    def start() -> tuple[Cluster, list[object]]:
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False})
        made.append(cluster)
        workers = [cluster.add_node(num_cpus=2, object_store_memory=STORE,
                                    resources={SLOT_RESOURCE: 2}) for _ in range(2)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        return cluster, workers

    def stop() -> None:
        ray.shutdown()
        while made:
            made.pop().shutdown()

    try:
        yield _started(start, stop)
    finally:
        stop()
