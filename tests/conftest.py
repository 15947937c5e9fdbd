"""Shared fixtures of the test suite (the torch thread set-up is in the root ``conftest.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from _scenarios import LEO

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _benchmark_script(name: str):
    """Import ``benchmarks/<name>.py`` as a module (its ``_common`` helper found
    on a temporary ``sys.path`` entry)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


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


@pytest.fixture(scope="session")
def benchmark_script():
    """Factory: ``benchmark_script("compare_methods")`` imports that benchmark script."""
    return _benchmark_script


@pytest.fixture(scope="session")
def tiny_leo_local(tmp_path_factory):
    """The tiny LEO scenario run once with the local executor over seeds 0 and 1
    (its methods: local, fol, fol-a): the reference that the process pool, Ray
    and the two-raylet cluster must reproduce row for row (each test runs only
    its own executor). A seed's rows do not depend on the other seeds of a run
    (the per-seed derivation), so a one-seed run is compared with its seed's rows.
    Returns ``(text, doc, result)``: the scenario's text (seed 0 only), the
    run's scenario as a TOML dict (seeds 0 and 1) and the run's result."""
    import tomllib

    from fol.simulation import parse_scenario, run_simulation

    text = LEO
    doc = tomllib.loads(text)
    assert doc["scenario"]["seeds"] == [0]
    doc["scenario"]["seeds"] = [0, 1]
    folder = tmp_path_factory.mktemp("tiny-leo-local")
    result = run_simulation(parse_scenario(doc, folder, "tiny.toml"), folder / "out", progress=False)
    return text, doc, result
