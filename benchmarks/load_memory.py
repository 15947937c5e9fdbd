"""Peak memory of loading one model file, as a multiple of the file's size.

For each ``--mb`` size a ``cnn`` model file of about that many MB (widths
64/256/w/w, hidden 512, float32, in the safe format; ``w`` is the smallest
multiple of 8 that reaches the size) is written to a temporary folder. Then a
fresh Python process imports torch and :mod:`fol.checkpoint`, notes the
kernel's record of its peak resident size (``VmHWM``), loads the file and
reports how far that record rose: the true peak of the load (tracemalloc does
not see torch's storage), weights included. Two ways are measured, each in its
own process:

* ``load_model``: :func:`fol.checkpoint.load_model` on the path (``fol
  personalize --neighbors``, the agent's inbox, the simulation);
* ``load_model_bytes``: the file read into ``bytes`` first (a payload held in
  memory), then :func:`fol.checkpoint.load_model_bytes`; the bytes count too.

MB = 10^6 bytes. Run from the repository root::

    python benchmarks/load_memory.py
    python benchmarks/load_memory.py --mb 20 100
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import fail, int_in  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: Run in a fresh process: prints the rise of VmHWM (kB) over loading argv[2] by argv[1].
_PROBE = """
import sys
sys.path.insert(0, sys.argv[3])
import torch
from benchmarks._common import own_peak_kb as hwm_kb
from fol.checkpoint import load_model, load_model_bytes

torch.set_num_threads(1)
before = hwm_kb()
if sys.argv[1] == "load_model":
    loaded = load_model(sys.argv[2])
else:
    with open(sys.argv[2], "rb") as fh:
        data = fh.read()
    loaded = load_model_bytes(data)
print(hwm_kb() - before)
"""


def _spec(width: int):
    from fol.models import ModelSpec

    return ModelSpec("cnn", num_classes=2, options={"widths": [64, 256, width, width], "hidden": 512})


def _file_bytes(width: int) -> int:
    """About the size of the file of ``_spec(width)``: its float32 weights (built on the meta device)."""
    import torch

    from fol.models import build_model

    with torch.device("meta"):
        model = build_model(_spec(width))
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def write_model(path: Path, mb: int) -> int:
    """Write a model file of about ``mb`` MB to ``path``; return its size in bytes."""
    from fol.checkpoint import save_model
    from fol.models import build_model

    width = 8
    while _file_bytes(width) < mb * 1e6:
        width += 8
    spec = _spec(width)
    save_model(path, build_model(spec, seed=0), spec=spec, class_names=["a", "b"])
    return path.stat().st_size


def peak_kb(how: str, path: Path) -> int:
    out = subprocess.run([sys.executable, "-c", _PROBE, how, str(path), str(ROOT)], capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    if out.returncode != 0:
        raise SystemExit(fail(f"the {how} probe failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}"))
    return int(out.stdout.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int_in(1, 190, "MB; the loader's default limit is 200 MB"), nargs="+",
                    default=[50], help="model file sizes to measure, in MB (default: 50)")
    args = ap.parse_args()
    if not Path("/proc/self/status").exists():
        return fail("needs Linux's /proc/self/status (VmHWM) for the peak")
    with tempfile.TemporaryDirectory() as tmp:
        for mb in args.mb:
            path = Path(tmp) / f"model-{mb}mb.safetensors"
            size = write_model(path, mb)
            for how in ("load_model", "load_model_bytes"):
                kb = peak_kb(how, path)
                print(f"{how}: file {size / 1e6:.1f} MB, peak rise {kb * 1024 / 1e6:.1f} MB "
                      f"= {kb * 1024 / size:.2f}x the file")
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
