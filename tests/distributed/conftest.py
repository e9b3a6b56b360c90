"""Ray fixtures: a one-machine cluster and a head with two worker nodes.

Ray is memory-hungry and the test machine is shared, so every node gets a small object
store, no dashboard, and every cluster is shut down (its processes gone) when the test
that asked for it ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import ray  # the `cluster` extra, which `all` (what CI installs) includes

from posttrain_arena.distributed.ray_executor import SLOT_RESOURCE

STORE = 100 * 1024 * 1024


@pytest.fixture
def local_ray(arena_cache_dir: Path) -> Iterator[None]:
    """A one-node Ray with two sandbox slots, for executor tests."""
    ray.init(address="local", resources={SLOT_RESOURCE: 2}, num_cpus=2, object_store_memory=STORE,
             include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def three_nodes(arena_cache_dir: Path) -> Iterator[tuple[object, list[object]]]:
    """`ray.cluster_utils.Cluster`: a head with no sandbox slot and two worker nodes
    with two slots each; yields (cluster, [worker node, worker node])."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False})
    try:
        workers = [cluster.add_node(num_cpus=2, object_store_memory=STORE,
                                    resources={SLOT_RESOURCE: 2}) for _ in range(2)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster, workers
    finally:
        ray.shutdown()
        cluster.shutdown()
