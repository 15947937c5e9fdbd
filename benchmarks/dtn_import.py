"""Time and peak memory of reading a large ION or HDTN contact plan (``contact_sim.read_plan``).

A plan of about ``--mib`` MiB is generated in a temporary folder: ``--nodes`` nodes, every pair
in turn given a 60 s contact in both directions (so two plan lines, or two HDTN records, make
one two-way window), the next round of pairs 100 s later. ION lines read
``a contact +T0 +T1 A B 1000`` (about 35 bytes), HDTN records are compact JSON objects
(about 100 bytes). Each plan is then read by ``read_plan`` in a child process, and the child's
CPU time (user + system, with its imports; and that of ``read_plan`` alone), wall time and peak resident
set (its own ``VmHWM``) are printed with the plan's size, lines or records and windows.

Run from the repository root::

    python benchmarks/dtn_import.py --mib 60
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import int_in, machine_line  # noqa: E402

#: The child's read: it prints the windows, then its own CPU seconds, those of the read alone and its own peak
#: resident kB (``own_peak_kb``: ``VmHWM``, not ``ru_maxrss``, which keeps the parent's size at the fork).
_READ = ("import resource, sys, time; from benchmarks._common import own_peak_kb; from contact_sim.dtn import read_plan; "
         "c = time.process_time(); n = len(read_plan(sys.argv[1]).windows); c = time.process_time() - c; "
         "r = resource.getrusage(resource.RUSAGE_SELF); print(n, r.ru_utime + r.ru_stime, c, own_peak_kb())")


def write_plan(path: Path, fmt: str, target_bytes: int, nodes: int) -> int:
    """Write a generated plan of about ``target_bytes`` to ``path``; return its lines (ION) or records."""
    pairs = list(combinations(range(1, nodes + 1), 2))
    written = count = 0
    with open(path, "w", encoding="ascii") as fh:
        if fmt == "hdtn":
            fh.write('{"contacts":[')
        while written < target_bytes:  # both directions of a pair each time: a plan of two-way windows
            a, b = pairs[(count // 2) % len(pairs)]
            t0 = 100 * (count // (2 * len(pairs)))
            for src, dst in ((a, b), (b, a)):
                if fmt == "ion":
                    line = f"a contact +{t0} +{t0 + 60} {src} {dst} 1000\n"
                else:
                    line = ("," if count else "") + (
                        f'{{"contact":{count},"source":{src},"dest":{dst},"startTime":{t0},"endTime":{t0 + 60},'
                        f'"rateBitsPerSec":8000,"owlt":1}}')
                fh.write(line)
                written += len(line)
                count += 1
        if fmt == "hdtn":
            fh.write("]}\n")
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int_in(1, 63, "the import reads a plan of at most 64 MiB"), default=60,
                    help="size of each generated plan in MiB (default 60)")
    ap.add_argument("--nodes", type=int_in(2, 10_000), default=200, help="nodes of the plan (default 200)")
    ap.add_argument("--formats", choices=("ion", "hdtn", "both"), default="both")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("ion", "hdtn") if args.formats == "both" else (args.formats,):
            path = Path(tmp) / ("plan.ion" if fmt == "ion" else "plan.json")
            count = write_plan(path, fmt, args.mib * 2**20, args.nodes)
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _READ, str(path)], capture_output=True, text=True,
                                  cwd=Path(__file__).resolve().parents[1])
            wall = time.perf_counter() - t
            if done.returncode:
                print(f"{fmt}: the read failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                return 1
            windows, cpu, read_cpu, peak_kb = done.stdout.split()
            print(f"{fmt}: {path.stat().st_size / 2**20:.1f} MiB, {count:,} {'lines' if fmt == 'ion' else 'records'}, "
                  f"{args.nodes} nodes, {int(windows):,} windows: {float(cpu):.1f} s CPU "
                  f"({float(read_cpu):.2f} s of it the read), {wall:.1f} s wall, "
                  f"peak resident {int(peak_kb) / 1e6:.2f} GB (the child's VmHWM)")
    print(machine_line())  # after the reads: torch in this process would count in a child's peak
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
