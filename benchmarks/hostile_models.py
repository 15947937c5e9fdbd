"""Cost of rejecting hostile model files: tiny, correctly signed files whose
card asks for a huge network.

For each case the file is built (an attacker can compute the digest), then
:func:`fol.checkpoint.load_model_bytes` is timed once, and run a second time
under :mod:`tracemalloc` for the peak of traced Python allocations; the growth
of the process's maximum RSS over the first run is printed too. Cases:

* ``resnet-small`` with ``blocks = 10000`` and ``cnn`` with one 50,000-channel
  layer: over :data:`fol.checkpoint.SPEC_LIMITS`, refused before any module is
  built;
* ``resnet-small`` with 16 stages of 16 blocks (inside the bounds) and one
  tensor in the file: stopped by the build budget after a few layers.

Run from the repository root::

    python benchmarks/hostile_models.py
"""

from __future__ import annotations

import json
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from safetensors.torch import save  # noqa: E402

from fol.checkpoint import ModelCard, load_model_bytes, model_digest  # noqa: E402
from fol.errors import CheckpointError  # noqa: E402
from fol.models import ModelSpec  # noqa: E402

CASES = {
    "resnet-small, blocks = 10000": ModelSpec("resnet-small", 2, options={"blocks": 10_000}),
    "cnn, widths = [50000]": ModelSpec("cnn", 2, options={"widths": [50_000]}),
    "resnet-small, 16 stages x 16 blocks (within bounds)": ModelSpec(
        "resnet-small", 2, options={"blocks": 16, "widths": [16] * 16}),
}


def hostile_file(spec: ModelSpec) -> bytes:
    """A one-tensor model file whose signed card asks for ``spec``."""
    tensors = {"w": torch.zeros(1)}
    card = ModelCard(spec, ["a", "b"])
    return save(tensors, metadata={"fol": json.dumps({**card.to_dict(), "sha256": model_digest(card, tensors)})})


def reject(data: bytes) -> str:
    try:
        load_model_bytes(data, source="peer")
    except CheckpointError as exc:
        return str(exc)
    raise AssertionError("a hostile file was accepted")


def main() -> None:
    torch.set_num_threads(1)
    for name, spec in CASES.items():
        data = hostile_file(spec)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        message = reject(data)
        seconds = time.perf_counter() - t0
        rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        tracemalloc.start()
        reject(data)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{name}: {len(data)} bytes, rejected in {1000 * seconds:.1f} ms, traced peak "
              f"{peak / 1e6:.2f} MB, max RSS growth {rss_kb / 1e3:.1f} MB\n    {message[:120]}")


if __name__ == "__main__":
    main()
