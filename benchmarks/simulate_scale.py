"""How the swarm simulation scales: nodes per minute for pretrain + FOL on the
local and process executors, and how wall time grows from 12 to 48 nodes.

Each run is a full ``run_simulation``: a Walker-delta shell of N satellites
(550 km, 53 deg, 4 planes), 24 h of contacts, synthetic hurricane imagery
partitioned by orbit (about 300 images per node), cnn-small, default FOLConfig
with Q = 3, methods local + fol (+ fol-a, which reuses fol's run).

    python benchmarks/simulate_scale.py                       # README figures
    python benchmarks/simulate_scale.py --nodes 12 --executors local
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_line  # noqa: E402

from fol.simulation import parse_scenario, run_simulation  # noqa: E402

TEMPLATE = """
[scenario]
name = "scale-{n}"
seeds = [0]
[constellation]
kind = "walker-delta"
total = {n}
planes = 4
phasing = 1
altitude_km = 550.0
inclination_deg = 53.0
epoch = "2026-06-01T00:00:00Z"
[time]
duration_s = 86400.0
step_s = 60.0
[link]
model = "constant"
rate_bps = 10e6
max_range_km = 5000.0
acquisition_s = 30.0
[rounds]
count = 1
[data]
dataset = "synthetic-hurricane"
size = {size}
partition = "orbit"
per_node = 300
[fol]
max_neighbours = 3
[methods]
run = ["local", "fol", "fol-a"]
[run]
executor = "{executor}"
threads = 1
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="+", default=[12, 24, 48])
    ap.add_argument("--executors", nargs="+", default=["local", "process"], choices=["local", "process", "ray"])
    args = ap.parse_args()
    print(machine_line())
    rows = []
    for executor in args.executors:
        for n in args.nodes:
            doc = tomllib.loads(TEMPLATE.format(n=n, size=n * 450, executor=executor))
            scn = parse_scenario(doc, Path("."), f"scale-{n}")
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                result = run_simulation(scn, Path(tmp) / "out", progress=False)
                wall = time.perf_counter() - t0
            fol = [r for r in result.results if r["method"] == "fol"]
            rows.append((executor, n, wall, 60.0 * n / wall, sum(r["received_models"] for r in fol) / n))
            print(f"{executor:>8} {n:>3} nodes: {wall:7.1f} s, {60 * n / wall:5.1f} nodes/min", flush=True)

    print("\n| executor | nodes | wall time (s) | nodes / min | models received / node | time vs. smallest |")
    print("|---|---|---|---|---|---|")
    for executor in args.executors:
        mine = [r for r in rows if r[0] == executor]
        base = mine[0][2]
        for _, n, wall, npm, recv in mine:
            print(f"| {executor} | {n} | {wall:.0f} | {npm:.1f} | {recv:.1f} | x{wall / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
