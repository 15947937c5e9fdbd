"""Shared fixtures of the test suite (the torch thread set-up is in the root ``conftest.py``)."""

from __future__ import annotations

import pytest


def _tiny_swarm(task: str, seed: int, archs=("cnn-small",), psi: float = 0.5, epochs: int = 1, n_nodes: int = 3):
    from fol.data import dirichlet_partition, make_synthetic
    from fol.nodes import build_nodes
    from fol.train import TrainConfig

    pool = make_synthetic(task, 400 if n_nodes <= 3 else 150 * n_nodes, seed=seed, image_size=16)
    shards = dirichlet_partition(pool.labels.numpy(), n_nodes, psi, seed=seed, samples_per_node=100)
    return build_nodes(pool, shards, list(archs), TrainConfig(epochs=epochs), seed=seed)


@pytest.fixture(scope="session")
def tiny_swarm():
    """Factory: ``tiny_swarm(task, seed, archs=..., psi=..., epochs=...)`` gives a few
    pretrained nodes of 100 synthetic 16x16 images each (for method tests)."""
    return _tiny_swarm
