"""The FOL paper's protocol (Tables 1-2) as one command.

Synthetic wildfire and hurricane (or your own data), a swarm of nodes of
varying sizes, psi in {0.7, 0.5, 0.3, 0.1}; rows Local, FOL-A / FOL / FOL-AN /
FOL-N at E = 1, 2, 3, DENSE, Co-Boosting, FedAvg at E = 1, 2, 3, and two
references that are not federated, Pooled and Pooled + FT (all nodes' data in
one place; left out of ``--quick``), which measure the room a setting leaves
any personalization method, and on request (``--methods ... nbr-pooled-ft``)
Nbr-pooled + FT, each node trained on its own and its first-round senders'
data: the room one exchange can reach; columns the
nodes at the 25 / 50 / 75 % quantiles of local data size (a rule fixed before
any result) plus the mean over all nodes; mean ± std over seeds; the paper's
published cells beside ours. Writes ``tables.md``, ``tables.csv`` and
``tables.json`` to ``--out``, rewritten (crash-safe) after every finished
seed, so a long run that is stopped keeps the seeds it finished (the tables
then say they are partial); an ``--out`` that already holds such tables is
refused before any work (the run would replace them): give every run its own
folder and join them with ``--merge``. Every setting's table is followed by
each row paired with Local on the same nodes and seeds: the difference, the
(node, seed) pairs above and below, and a Wilcoxon signed-rank test over
nodes.
``--merge`` joins the tables.json of runs made in separate processes (one per
task, per seed, or per method group: ``--methods fol`` in one, ``--methods
dense fedavg`` in another) into one table without re-running anything; runs
of the same seed must agree on Local to the last node, and on any other row
both hold (a repeat, e.g. E = 1 again in a run of E = 1-3, is kept once);
a stopped run merged with a run of the seeds it missed is complete.
``--compare BASE OTHER`` sets two runs of the same swarms that differ in FOL's
(or the baselines') options side by side, e.g. ``--fol preset=paper`` against
the default: every row both hold, paired by seed and node on the seeds both
ran (Local must agree to the last node), with the same paired statistics.
``--methods local`` only pretrains and reports Local (minutes, not hours):
``--merge`` it with a saved run to check that this machine pretrains that
run's swarms to the same Local before comparing with it. ``--by-skew
TABLES_JSON ...`` splits each row's gain over Local between the nodes whose
test split is 90 % or more one class and the others (the splits rebuilt from
the run's config, no training). The protocol itself is :mod:`fol.reproduce`.

    OMP_NUM_THREADS=1 python benchmarks/paper_tables.py --quick          # psi 0.5, 4 nodes, 1 seed
    OMP_NUM_THREADS=1 python benchmarks/paper_tables.py                  # the full grid (24 nodes, 3 seeds)
    OMP_NUM_THREADS=1 python benchmarks/paper_tables.py --psi 0.5 --nodes 12
    OMP_NUM_THREADS=1 python benchmarks/paper_tables.py --quick --data imagefolder:/path/to/folder
    python benchmarks/paper_tables.py --merge wildfire/tables.json hurricane/tables.json --out both
    python benchmarks/paper_tables.py --compare default/tables.json paper/tables.json
    python benchmarks/paper_tables.py --by-skew wildfire/tables.json hurricane/tables.json
    OMP_NUM_THREADS=1 python benchmarks/paper_tables.py --data synthetic-wildfire --psi 0.7 --methods local --out check
    python benchmarks/paper_tables.py --merge saved/tables.json check/tables.json --out checked
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import ONE_CLASS_SHARE, fail, int_in, key_values, machine_line, per_core, positive_float  # noqa: E402

from fol.errors import ConfigError, FOLError  # noqa: E402
from fol.fileio import atomic_write_text, check_output_dir  # noqa: E402
from fol.executors import make_executor  # noqa: E402
from fol.reproduce import (DEFAULT_GROUPS, METHOD_GROUPS, SYNTHETIC_POOL_ALL, ProtocolConfig, ProtocolResult,  # noqa: E402
                           check_fresh_output, compare_results, mean_pm, merge_results, run_protocol)
from fol.simulation.scenario import MAX_SEEDS  # noqa: E402


def _cpu_seconds() -> float:
    """CPU time of this process and its finished child processes (user + system)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def build_config(args: argparse.Namespace) -> ProtocolConfig:
    over: dict[str, object] = {}
    if args.data:
        over["datasets"] = tuple(args.data)
    for name in ("psi", "seeds", "nodes", "pool", "image_size", "arch", "rounds", "min_samples", "data_seed",
                 "methods", "splits"):
        value = getattr(args, name)
        if value is not None:
            over[{"psi": "psis"}.get(name, name)] = tuple(value) if isinstance(value, list) else value
    if args.seeds is not None or args.first_seed is not None:  # --first-seed alone: the preset's number of seeds
        count = args.seeds if args.seeds is not None else len((ProtocolConfig.quick() if args.quick
                                                                else ProtocolConfig()).seeds)
        first = args.first_seed or 0
        over["seeds"] = tuple(range(first, first + count))
    fol = key_values(args.fol, "--fol")
    options: dict[str, dict[str, object]] = {}
    for item in args.option:
        method, dot, rest = item.partition(".")
        if not dot:
            raise SystemExit(fail(f"--option: expected METHOD.KEY=VALUE, got {item!r}"))
        options.setdefault(method, {}).update(key_values([rest], "--option"))
    if args.quick:
        quick = ProtocolConfig.quick()
        fol = {**quick.fol, **fol}
        return ProtocolConfig.quick(**over, fol=fol, method_options=options)
    return ProtocolConfig(**over, fol=fol, method_options=options)


def summary(result: ProtocolResult) -> list[str]:
    """The tables, then what the project's targets read from them: per setting
    and round, the one-model gain over Local, the ensemble's, and the share of
    it the student keeps; at psi = 0.5 (where the targets are set) FOL-A at
    E = 3 against them; the room the pooled references measure, and the room
    for one exchange (Nbr-pooled + FT) with FOL-A's share of it at E = 1."""
    cfg = result.config
    lines = [result.markdown()]  # each setting's caption says what its cells are, over its own seeds
    for (dataset, psi) in result.settings:
        rows = result.rows(dataset, psi)
        rounds = [e for e in range(1, cfg.rounds + 1) if f"FOL (E={e})" in rows and f"FOL-A (E={e})" in rows]
        for e in rounds:
            t = result.transfer(dataset, psi, rounds=e)
            counted, run = t["kept_seeds"]
            kept = ("an undefined share (the ensemble gained under half a point)" if not counted
                    else f"{mean_pm(t['kept'], counted, '.0f')} %"
                    + (f" (over the {counted} of {run} seeds where the ensemble gained half a point or more)"
                       if counted < run else ""))
            lines.append(f"{dataset} psi={psi}, E={e}: FOL - Local = {mean_pm(t['student'], run, '+.1f')}, "
                         f"FOL-A - Local = {mean_pm(t['ensemble'], run, '+.1f')} points; the student "
                         f"keeps {kept} of the ensemble's gain (of the swarm means"
                         + ("; targets +4 points and 60 %)" if e == 1 and psi == 0.5 else ")"))
        if 3 in rounds and psi == 0.5:
            gain = result.cell(dataset, psi, "FOL-A (E=3)", None)[0] - result.cell(dataset, psi, "Local", None)[0]
            judged = ", ".join(f">= +{t}: {'met' if gain >= t else 'NOT met'}" for t in (7, 8))
            lines.append(f"{dataset} psi={psi}: FOL-A (E=3) - Local = {gain:+.1f} points (mean over nodes; "
                         f"the targets: {judged})")
        local = result.cell(dataset, psi, "Local", None)[0]
        if "Nbr-pooled + FT" in rows:
            nbr = result.cell(dataset, psi, "Nbr-pooled + FT", None)[0] - local
            line = (f"{dataset} psi={psi}: the room for one exchange (not federated, each node's and its "
                    f"first-round senders' data): Nbr-pooled + FT - Local = {nbr:+.1f} points (mean over nodes)")
            if 1 in rounds and nbr > 0:
                gain = result.cell(dataset, psi, "FOL-A (E=1)", None)[0] - local
                line += f"; FOL-A (E=1) gains {100 * gain / nbr:.0f} % of it"
            lines.append(line)
        if "Pooled + FT" not in rows:
            continue
        room = {row: result.cell(dataset, psi, row, None)[0] - local for row in ("Pooled", "Pooled + FT")}
        line = (f"{dataset} psi={psi}: the room (not federated, all data in one place): Pooled - Local = "
                f"{room['Pooled']:+.1f}, Pooled + FT - Local = {room['Pooled + FT']:+.1f} points (mean over nodes)")
        if rounds and room["Pooled + FT"] > 0:
            gain = result.cell(dataset, psi, f"FOL-A (E={rounds[-1]})", None)[0] - local
            line += f"; FOL-A (E={rounds[-1]}) gains {100 * gain / room['Pooled + FT']:.0f} % of Pooled + FT's"
        lines.append(line)
    return lines


def read_runs(paths: list[Path], flag: str) -> list[tuple[str, ProtocolResult]]:
    """(path, result) of runs' tables.json files; a file listed twice, or one
    that is not such a file, is a one-line :class:`ConfigError` naming it."""
    import json

    runs, seen = [], set()
    for path in paths:
        if path.resolve() in seen:
            raise ConfigError(f"{flag} {path}: listed twice; give each run's tables.json once")
        seen.add(path.resolve())
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"{flag} {path}: cannot read it as JSON ({exc.__class__.__name__}: {exc})") from None
        runs.append((str(path), ProtocolResult.from_json(data, where=f"{flag} {path}")))
    return runs


def compare(paths: list[Path], out: Path | None) -> int:
    """``--compare BASE OTHER``: every row two runs of the same swarms hold,
    other against base, paired by seed and node (:func:`fol.reproduce.compare_results`);
    also written to ``out/compare.md`` when ``out`` is given."""
    try:
        (base_name, base), (other_name, other) = read_runs(paths, "--compare")
        rows = compare_results(base, other)
        if out is not None:
            check_output_dir(out, ConfigError, what="--out")
    except FOLError as exc:
        return fail(str(exc))
    lines = [f"other: {other_name} (fol options {other.config.fol}, baseline options {other.config.method_options})",
             f"base:  {base_name} (fol options {base.config.fol}, baseline options {base.config.method_options})",
             "cells: % mean ± std over the seeds both ran, of the mean over nodes; other - base paired by seed and "
             "node; p: Wilcoxon signed-rank over nodes (each node's difference averaged over the seeds)"]
    for key in dict.fromkeys((c.dataset, c.psi) for c in rows):
        mine = [c for c in rows if (c.dataset, c.psi) == key]
        seeds, local = mine[0].seeds, mine[0].local
        lines += ["", f"#### {key[0]}, psi = {key[1]}: {len(base.settings[key]['sizes'])} nodes, seeds "
                      f"{list(seeds)}; Local {mean_pm(local, len(seeds), '.1f')} in both",
                  "", "| row | base | other | other - base | (node, seed) pairs above / below | p |",
                  "|---|---|---|---|---|---|"]
        for c in mine:
            d = c.paired.diff
            p = "-" if c.paired.p is None else f"{c.paired.p:.2g}"
            n = len(c.seeds)
            lines.append(f"| {c.row} | {mean_pm(c.base, n, '.1f')} | {mean_pm(c.other, n, '.1f')} | "
                         f"{mean_pm(d, n, '+.1f')} | {c.paired.above} / {c.paired.below} of {c.paired.pairs} | {p} |")
    print("\n".join(lines))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "compare.md", "\n".join(lines) + "\n")
        print(f"wrote {out / 'compare.md'}")
    return 0


def by_skew(paths: list[Path]) -> int:
    """``--by-skew``: each row's gain over Local (paired by seed and node) on the nodes whose
    test split is >= 90 % one class and on the others. The splits are rebuilt from each run's
    config (pool, partition, every node's split by its training seed; no training), and a run
    whose rebuilt node sizes differ from those it recorded is refused."""
    from fol.data import split_node
    from fol.reproduce import load_pool, partition_pool
    from fol.seeds import node_seed

    try:
        runs = read_runs(paths, "--by-skew")
        lines = [f"nodes 'nearly one class': >= {100 * ONE_CLASS_SHARE:.0f} % of the node's test split is one class "
                 "(per training seed, which draws the split); cells: mean over the seeds of the mean over the "
                 "group's nodes, % points, row - Local paired by seed and node"]
        for name, result in runs:
            for (dataset, psi), setting in result.settings.items():
                pool = load_pool(dataset, result.config)
                shards = partition_pool(pool, result.config, psi)
                if [len(s) for s in shards] != list(setting["sizes"]):
                    raise ConfigError(f"--by-skew {name}: {dataset} psi={psi}: the rebuilt partition's node sizes "
                                      f"differ from those the run recorded; run it with the code that wrote it")
                groups: dict[str, dict[str, list[float]]] = {"nearly one class": {}, "others": {}}
                counts = {g: [] for g in groups}
                for seed, acc in setting["acc"].items():
                    one = []
                    for k, shard in enumerate(shards):
                        test = split_node(pool.subset(shard), seed=node_seed(int(seed), k)).test
                        one.append(float(test.class_counts().max()) / len(test) >= ONE_CLASS_SHARE)
                    local = np.asarray(acc["Local"])
                    for g, keep in (("nearly one class", True), ("others", False)):
                        m = np.asarray(one) == keep
                        counts[g].append(int(m.sum()))
                        if not m.any():
                            continue
                        for row, values in acc.items():
                            value = local[m] if row == "Local" else np.asarray(values)[m] - local[m]
                            groups[g].setdefault(row, []).append(100 * float(value.mean()))
                lines += ["", f"#### {dataset}, psi = {psi}: {len(shards)} nodes, seeds {list(setting['acc'])} ({name})",
                          "", "| row | " + " | ".join(f"{g} ({'/'.join(map(str, counts[g]))} nodes)" for g in groups)
                          + " |", "|---|" + "---|" * len(groups)]
                rows = ["Local"] + [r for r in result.rows(dataset, psi) if r != "Local"]
                for row in rows:
                    cells = [(f"{statistics.mean(groups[g][row]):.1f}" if row == "Local" else
                              f"{statistics.mean(groups[g][row]):+.1f}") if groups[g].get(row) else "-" for g in groups]
                    lines.append(f"| {row if row == 'Local' else row + ' - Local'} | " + " | ".join(cells) + " |")
    except FOLError as exc:
        return fail(str(exc))
    print("\n".join(lines))
    return 0


def merge(paths: list[Path], out: Path | None) -> int:
    """``--merge``: the tables and summary of finished (or partial) runs'
    tables.json files, joined; written to ``out`` when given."""
    try:
        result = merge_results(read_runs(paths, "--merge"))
        if out is not None:
            check_output_dir(out, ConfigError, what="--out")
    except FOLError as exc:
        return fail(str(exc))
    for line in summary(result):
        print(line)
    if out is not None:
        print(f"wrote {', '.join(map(str, result.write(out)))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="psi 0.5 only, 4 nodes from 600 images, 1 seed, Q = 3")
    ap.add_argument("--data", nargs="+", help="dataset names (default: synthetic-wildfire synthetic-hurricane) "
                    "or imagefolder:PATH")
    ap.add_argument("--splits", nargs="+", metavar="SPLIT",
                    help="for an imagefolder:PATH laid out by split first (PATH/<split>/<class>/, as Kaggle sets "
                    "are published): the split folders to pool, e.g. train valid test (the protocol partitions "
                    "the pool itself)")
    ap.add_argument("--psi", nargs="+", type=positive_float("a Dirichlet concentration psi"), help="Dirichlet concentrations (default 0.7 0.5 0.3 0.1)")
    ap.add_argument("--seeds", type=int_in(1, MAX_SEEDS, "one full run each; the cap of a scenario's seeds"),
                    help=f"number of training seeds (default 3, at most {MAX_SEEDS:,})")
    ap.add_argument("--first-seed", type=int, help="run seeds FIRST .. FIRST + seeds - 1 (default 0)")
    ap.add_argument("--nodes", type=int, help="swarm size (default 24)")
    ap.add_argument("--pool", type=int, help="images partitioned over the swarm (default 7200; 0 = all of the data, "
                                          f"{SYNTHETIC_POOL_ALL} generated for a synthetic set)")
    ap.add_argument("--image-size", type=int)
    ap.add_argument("--arch", help="model architecture (default: the zoo default)")
    ap.add_argument("--rounds", type=int, help="E, FOL and FedAvg rounds reported (default 3)")
    ap.add_argument("--min-samples", type=int)
    ap.add_argument("--data-seed", type=int, help="seed of the pool and the partition (default 0)")
    ap.add_argument("--methods", nargs="+", metavar="GROUP",
                    help=f"method groups to run besides Local, of {' '.join(METHOD_GROUPS)} (default: "
                    f"{' '.join(DEFAULT_GROUPS)}; fol = FOL-A and FOL, fol-n = FOL-AN and FOL-N)")
    ap.add_argument("--fol", nargs="*", default=[], metavar="KEY=VALUE", help="FOLConfig overrides")
    ap.add_argument("--option", nargs="*", default=[], metavar="METHOD.KEY=VALUE",
                    help="baseline options, e.g. dense.epochs=5 fedavg.local_epochs=1")
    ap.add_argument("--out", type=Path, help="output folder (default: paper_tables; with --merge / --compare: "
                                             "none, the tables are only printed)")
    ap.add_argument("--merge", type=Path, nargs="+", metavar="TABLES_JSON",
                    help="run nothing: join the tables.json of earlier runs (e.g. one process per task, per "
                         "seed or per method group), print their tables and summary, and write them to --out if given")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("BASE_JSON", "OTHER_JSON"),
                    help="run nothing: set two runs of the same swarms that differ in FOL's or the baselines' "
                         "options side by side (other - base, paired by seed and node; with --out also to OUT/compare.md) "
                         "and exit")
    ap.add_argument("--by-skew", type=Path, nargs="+", metavar="TABLES_JSON",
                    help="run nothing: each row's gain over Local on the nodes whose test split is >= 90 %% one "
                         "class and on the others (the splits rebuilt from each run's config, no training)")
    ap.add_argument("--threads", type=per_core, default=1, help="torch threads per worker (1 is fastest for small CNNs)")
    ap.add_argument("--executor", choices=["local", "process"], default="process",
                    help="where per-node work runs (default: %(default)s; results do not depend on it)")
    ap.add_argument("--workers", type=per_core, default=2, help="processes of the process executor (default: %(default)s)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)
    if args.compare:
        return compare(args.compare, args.out)
    if args.by_skew:
        return by_skew(args.by_skew)
    args.out = args.out or Path("paper_tables")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        torch.set_num_threads(args.threads)
        cfg = build_config(args)
        check_output_dir(args.out, ConfigError, what="--out")  # before hours of work, not after
        check_fresh_output(args.out)  # a run writes its tables after its first seed: never over another run's
        print(machine_line(), flush=True)
        say = (lambda m: None) if args.quiet else (lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True))
        with make_executor(args.executor, workers=args.workers, threads=args.threads) as ex:
            # the tables so far are rewritten after every finished seed: a stopped run keeps them
            result: ProtocolResult = run_protocol(cfg, progress=say, map=ex.map,
                                                  on_seed=lambda partial: partial.write(args.out))
    except FOLError as exc:
        return fail(str(exc))
    for line in summary(result):
        print(line)
    paths = result.write(args.out)
    print(f"wrote {', '.join(map(str, paths))}; total {result.seconds:.0f} s wall, "
          f"{_cpu_seconds():.0f} s CPU summed over this process and its workers ({args.executor} executor)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
