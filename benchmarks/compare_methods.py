"""Paper-style comparison of FOL with every baseline on synthetic imagery, and
the multi-round picture: how many rounds (and bytes) each server-based
baseline needs to reach FOL's one exchange.

For each task (hurricane, wildfire), Dirichlet skew psi (default 0.5) and
seed: render the synthetic pool, give each node ``--per-node`` images,
pretrain every node once (``fol.nodes.build_nodes``), then run every method
on those same nodes and partitions. The server-based baselines run
``--rounds`` R rounds (default 20) and are evaluated on every node after
every round; FOL runs max(``--fol-rounds``) exchanges once, and the
rows "fol (E=2)", ... are its models after that many exchanges (what a run of
E rounds gives: a round depends only on the rounds before it). DENSE and Co-Boosting
run once per synthesis budget of ``--budget`` (rows ``dense [small]``, ...,
with a table of accuracy against generator samples).

Printed per (task, psi): the paper-style table (test accuracy, mean ± std
over seeds of the per-seed mean over nodes; the difference to local paired
by seed and node, and how many (node, seed) pairs score above / below local; bytes up /
down and training GFLOPs per node; the FOL paper's figure where it has one,
Tables 1-2), every
method's accuracy after 1, 3, 10 and R rounds with bytes per node, and the
rounds and bytes each multi-round method needs to reach FOL's and FOL-A's
accuracy ("not within R" otherwise). ``--plots DIR`` writes
``accuracy_vs_rounds-<task>-<psi>.png`` and ``accuracy_vs_bytes-<task>-<psi>.png``.

    python benchmarks/compare_methods.py                    # 2 tasks, psi 0.5, 3 seeds, 12 nodes x 300 images, R = 20
    python benchmarks/compare_methods.py --quick            # 6 nodes x 100 images (16 px), 1 seed, R = 10
    python benchmarks/compare_methods.py --tasks hurricane --psi 0.3 --seeds 1 --json out.json
    python benchmarks/compare_methods.py --seeds 1 --first-seed 2 --json seed2.json   # one seed per process
    python benchmarks/compare_methods.py --methods local fol dense co-boosting --budget tiny small   # budgets
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (fail, int_in, machine_line, mean_std, per_core, positive_float, seed_range, set_threads,  # noqa: E402
                     user_seed)

from fol.config import FOLConfig  # noqa: E402
from fol.defaults import DEFAULT_ARCH  # noqa: E402
from fol.errors import ConfigError, FOLError  # noqa: E402
from fol.fileio import atomic_write_text, check_output_dir, check_output_file  # noqa: E402
from fol.data import dirichlet_partition, load_dataset  # noqa: E402
from fol.data.geo import check_pool_size  # noqa: E402
from fol.methods import SwarmContext, get_method, method_names  # noqa: E402
from fol.methods.dense import budget_share  # noqa: E402
from fol.models import architectures  # noqa: E402
from fol.nodes import build_nodes  # noqa: E402
from fol.reproduce import paired_difference  # noqa: E402
from fol.simulation.report import (  # noqa: E402
    accuracy_at_rounds_table, plot_accuracy_vs_bytes, plot_accuracy_vs_rounds, rounds_to_match_table,
)

BASELINES = ("fedavg", "hermes", "dm-pfl", "dm-pfl+", "mtfl", "mtfl-adam", "dense", "co-boosting")
FOL_METHODS = ("local", "fol", "fol-a", "fol-n", "fol-an")

#: FOL paper (Huang & Shu, ICML 2025), Tables 1-2: test accuracy (%) per reported
#: satellite; psi = 0.7 has three satellites per task, psi = 0.3 one.
PAPER = {
    ("wildfire", 0.7): {"local": [94.23, 94.12, 90.53], "fol-a": [97.19, 97.16, 95.97], "fol": [94.94, 95.21, 91.26],
                        "fol-an": [94.38, 94.86, 91.28], "fol-n": [93.44, 94.68, 88.59],
                        "dense": [88.75, 87.41, 83.22], "co-boosting": [90.31, 89.19, 88.02],
                        "fedavg(E=1)": [73.19, 73.94, 68.18], "fedavg(E=3)": [74.61, 71.58, 68.48]},
    ("hurricane", 0.7): {"local": [86.93, 87.34, 89.82], "fol-a": [95.34, 96.18, 97.61], "fol": [90.09, 89.87, 91.62],
                         "fol-an": [88.24, 91.14, 92.81], "fol-n": [85.76, 89.22, 91.62],
                         "dense": [67.49, 69.95, 73.05], "co-boosting": [72.14, 74.45, 74.04],
                         "fedavg(E=1)": [60.21, 62.03, 66.26], "fedavg(E=3)": [63.70, 65.16, 67.82]},
    ("wildfire", 0.3): {"local": [90.37], "fol-a": [94.07], "fol": [90.68], "fol-an": [91.53], "fol-n": [88.14],
                        "dense": [78.63], "co-boosting": [85.59], "fedavg(E=1)": [63.25], "fedavg(E=3)": [66.10]},
    ("hurricane", 0.3): {"local": [57.14], "fol-a": [90.48], "fol": [84.13], "fol-an": [87.47], "fol-n": [76.19],
                         "dense": [58.73], "co-boosting": [52.38], "fedavg(E=1)": [41.27], "fedavg(E=3)": [44.44]},
}


def paper_figure(task: str, psi: float, method: str, rounds: int) -> str:
    table = PAPER.get((task, psi), {})
    method = method.split(" [")[0]  # the paper ran each data-free method at its own budget
    key = f"fedavg(E={rounds})" if method == "fedavg" else method
    vals = table.get(key)
    return f"{statistics.mean(vals):.2f}" if vals else "-"


#: One-shot data-free baselines: run once per ``--budget``.
DATA_FREE = ("dense", "co-boosting")


def _label(method: str, e: int, budget: str | None = None) -> str:
    """Row label: ``fol (E=3)``; a data-free method's budget other than the default ``tiny``
    in brackets (``dense [small]``), so runs at different budgets merge as different rows."""
    if budget not in (None, "tiny"):
        return f"{method} [{budget}]"
    return method if e == 1 else f"{method} (E={e})"


def after_exchanges(result: dict, e: int) -> dict:
    """A FOL variant's per-node result as a run of ``e`` exchanges gives it,
    from the run's per-exchange points (``extra["exchanges"]``)."""
    p = result["extra"]["exchanges"][e - 1]
    extra = {k: v for k, v in result["extra"].items() if k not in ("exchanges", "selected", "weights")}
    extra.update(selected=result["extra"]["selected"][:e], weights=result["extra"]["weights"][:e],
                 accuracy={**result["extra"]["accuracy"], "student": p["student"], "ensemble": p["ensemble"]},
                 transfer=p["transfer"])
    return {**result, "test_accuracy": p["test_accuracy"], "val_accuracy": p["val_accuracy"],
            "bytes_up": p["bytes_up"], "bytes_down": p["bytes_down"], "train_flops": result["train_flops"]
            - result["extra"]["exchanges"][-1]["train_flops"] + p["train_flops"], "rounds": e,
            "seconds": p["seconds"], "kept_local": p["kept_local"], "extra": extra}


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None


def _finite_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def merge_records(runs: list[tuple[Path, list[dict]]]) -> list[dict]:
    """The per-node records of several ``--json`` runs, in order. A (task, psi,
    seed, method, node) present in two runs is kept once if both measured the
    same test accuracy; if they differ (runs of different code or settings) the
    merge is refused, naming both files. So is a (task, psi) whose seeds and
    methods do not all hold the same number of nodes (runs with different
    ``--nodes``, or hand-edited records), naming a file of each."""
    seen: dict[tuple, tuple[Path, float]] = {}
    groups: dict[tuple, dict[tuple, tuple[Path, set]]] = {}  # (task, psi) -> (seed, method) -> (first file, nodes)
    out = []
    for path, records in runs:
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ValueError(f"{path}: expected a JSON list of per-node records (written by --json)")
        for r in records:
            try:
                key = (r["task"], r["psi"], r["seed"], r["method"], r["node"])
                acc = r["test_accuracy"]
                numbers = [r[k] for k in ("psi", "test_accuracy", "seconds", "method_seconds", "bytes_up", "bytes_down",
                                          "train_flops", "rounds")]
            except KeyError as exc:
                raise ValueError(f"{path}: a record has no {exc.args[0]!r} (not written by --json?)") from None
            if (not all(isinstance(r[k], str) for k in ("task", "method", "node")) or not isinstance(r["seed"], int)
                    or isinstance(r["seed"], bool) or not all(map(_finite_number, numbers)) or not 0 <= acc <= 1):
                raise ValueError(f"{path}: the record {'/'.join(map(str, key))} has a field of the wrong type or "
                                 "range (text task, method, node; an integer seed; finite numbers; an accuracy in "
                                 "[0, 1]): not as --json writes it")
            if key in seen:
                if seen[key][1] != acc:
                    raise ValueError(f"{path} and {seen[key][0]} disagree on {'/'.join(map(str, key))} "
                                     f"({acc} vs {seen[key][1]}): runs of different code or settings")
                continue
            seen[key] = (path, acc)
            groups.setdefault(key[:2], {}).setdefault(key[2:4], (path, set()))[1].add(key[4])
            out.append(r)
    for (task, psi), by_group in groups.items():
        (seed0, method0), (path0, nodes0) = next(iter(by_group.items()))
        for (seed, method), (path, nodes) in by_group.items():
            if len(nodes) != len(nodes0):
                raise ValueError(f"{path}: {task} psi {psi} seed {seed} {method} has {len(nodes)} node(s), but seed "
                                 f"{seed0} {method0} ({path0}) has {len(nodes0)}: every seed and method of a task "
                                 "and psi must hold the same number of nodes (runs with the same --nodes)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="+", default=["hurricane", "wildfire"],
                    choices=["hurricane", "wildfire", "hurricane-types", "wildfire-types"],
                    help="synthetic tasks; '-types' labels the same images by the event's form (4 / 5 classes)")
    ap.add_argument("--psi", nargs="+", type=positive_float("a Dirichlet concentration"), default=[0.5])
    ap.add_argument("--seeds", type=int_in(1), default=3)
    ap.add_argument("--first-seed", type=user_seed, default=0, help="run seeds first-seed .. first-seed + seeds - 1 "
                    "(to spread seeds over processes; merge their --json outputs)")
    ap.add_argument("--nodes", type=int_in(2), default=12)
    ap.add_argument("--per-node", type=int_in(1), default=300)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--arch", default=DEFAULT_ARCH, choices=architectures(), help="model of every node (default: the project "
                    "default, %(default)s)")
    ap.add_argument("--rounds", type=int_in(1), default=20, help="R: server rounds of the multi-round baselines")
    ap.add_argument("--fol-rounds", type=int_in(1), nargs="+", default=[1, 2, 3],
                    help="FOL exchanges E to run (1 is FOL itself; others are reference points)")
    ap.add_argument("--budget", nargs="+", default=["tiny"], help="synthesis budget(s) of DENSE / Co-Boosting "
                    "(tiny, small, medium, paper)")
    ap.add_argument("--methods", nargs="+", default=None, help="subset of methods (default: all available)")
    ap.add_argument("--quick", action="store_true", help="defaults of 6 nodes x 100 images of 16 px, 1 seed, R = 10, "
                    "FOL E = 1 (explicit options still win)")
    ap.add_argument("--threads", type=per_core, default=1, help="torch threads (1 is fastest for these small CNNs)")
    ap.add_argument("--json", type=Path, default=None, help="write every per-node result here")
    ap.add_argument("--plots", type=Path, default=None, help="write accuracy-vs-rounds / -bytes plots here")
    ap.add_argument("--merge", type=Path, nargs="+", default=None, metavar="JSON",
                    help="print the tables of runs saved with --json (e.g. baselines and FOL in separate "
                         "processes, one per task or seed) and exit")
    if "--quick" in sys.argv[1:]:
        ap.set_defaults(nodes=6, per_node=100, image_size=16, seeds=1, rounds=10, fol_rounds=[1])
    args = ap.parse_args()
    set_threads(args.threads)

    available = set(method_names())
    wanted = args.methods or [m for m in FOL_METHODS + BASELINES if m in available]
    missing = [m for m in wanted if m not in available]
    if missing:
        return fail(f"unknown method(s): {', '.join(missing)}")
    if args.plots:  # before the training (or the merged tables), not after
        try:
            check_output_dir(args.plots, ConfigError, what="--plots")
        except FOLError as exc:
            return fail(str(exc))
    print(machine_line())
    if args.merge:
        try:
            records = merge_records([(path, _read_json(path)) for path in args.merge])
        except (OSError, ValueError) as exc:
            return fail(f"--merge: {exc}")
        report(records, args)
        return 0
    seeds = seed_range(ap, args.first_seed, args.seeds, "--first-seed / --seeds")
    try:
        check_pool_size(args.nodes * args.per_node * 2, args.image_size, "--nodes x --per-node x 2 synthetic images")
        for m in wanted:  # the methods' options (a --budget they refuse) before the training, not after
            for b in (args.budget if m in DATA_FREE else [None]):
                get_method(m, **({"budget": b} if b else {}))
        if args.json:
            check_output_file(args.json, ConfigError, what="--json")
    except FOLError as exc:
        return fail(str(exc))
    print(f"methods: {', '.join(wanted)}; server rounds R = {args.rounds}, FOL exchanges E in {args.fol_rounds}, "
          f"data-free budget(s) {', '.join(args.budget)}; model {args.arch}")
    records: list[dict] = []
    t_start = time.perf_counter()
    for task in args.tasks:
        for psi in args.psi:
            for seed in seeds:
                pool = load_dataset(f"synthetic-{task}", n=args.nodes * args.per_node * 2, seed=seed,
                                    image_size=args.image_size)
                shards = dirichlet_partition(pool.labels.numpy(), args.nodes, psi, seed,
                                             samples_per_node=args.per_node)
                base = FOLConfig(seed=seed)
                nodes = build_nodes(pool, shards, [args.arch], base.pretrain_train(), seed)
                line = []
                # fol / fol-a run max(E) exchanges once (the point after exchange e is the E = e run);
                # the other methods do not depend on E (fol-n / fol-an run one exchange)
                ctx = SwarmContext(nodes=nodes, train=base.pretrain_train(), fol=FOLConfig(rounds=1, seed=seed),
                                   rounds=args.rounds, seed=seed)
                ctx_e = SwarmContext(nodes=nodes, train=base.pretrain_train(),
                                     fol=FOLConfig(rounds=max(args.fol_rounds), seed=seed), rounds=args.rounds, seed=seed)
                runs = [(m, {"budget": b} if m in DATA_FREE else {})
                        for m in wanted for b in (args.budget if m in DATA_FREE else [None])]
                for m, opts in runs:
                    t0 = time.perf_counter()
                    results = [r.to_dict() for r in get_method(m, **opts).run(ctx_e if m in ("fol", "fol-a") else ctx)]
                    secs = time.perf_counter() - t0
                    per_e = ({e: [after_exchanges(r, e) for r in results] for e in sorted(args.fol_rounds)}
                             if m in ("fol", "fol-a") else {1: results})
                    for e, rows in per_e.items():
                        label = _label(m, e, opts.get("budget"))
                        if m in ("fol", "fol-a"):  # the pipeline's seconds in exchanges 1..e, summed over nodes
                            secs = sum(r["seconds"] for r in rows)
                        for r in rows:
                            records.append({"task": task, "psi": psi, "seed": seed, **r, "method": label,
                                            "method_seconds": secs})
                        line.append(f"{label} {100 * statistics.mean(r['test_accuracy'] for r in rows):.1f}")
                    if args.json:  # after every method, so a run cut short keeps what it finished
                        atomic_write_text(args.json, json.dumps(records, indent=1, default=str))
                print(f"{task} psi={psi} seed {seed}: " + ", ".join(line)
                      + f"  ({time.perf_counter() - t_start:.0f} s)", flush=True)
    report(records, args)
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


def budget_table(rows: list[dict]) -> str:
    """Markdown: each data-free row's budget, generator samples, share of the
    published budget, server training GFLOPs and test accuracy (mean ± std
    over seeds of the mean over nodes)."""
    lines = ["| method | budget | generator samples | share of published | server GFLOPs | test acc. (%) |",
             "|---|---|---|---|---|---|"]
    for label in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == label]
        method, budget = label.split(" [")[0], mine[0]["extra"]["budget"]
        accs = [statistics.mean(r["test_accuracy"] for r in mine if r["seed"] == s)
                for s in sorted({r["seed"] for r in mine})]
        share = budget_share(method, budget)
        lines.append(f"| {method} | {budget} | {mine[0]['extra']['generator_samples']:,} | "
                     f"{'1' if share == 1 else f'1/{1 / share:.0f}'} | "
                     f"{statistics.mean(r['extra']['server_flops'] for r in mine) / 1e9:.0f} | {mean_std(accs)} |")
    return "\n".join(lines)


def versus_local(rows: list[dict], label: str) -> tuple[str, str]:
    """``label``'s difference to ``local``, paired by seed and node: the
    per-seed difference of the means over nodes (points, mean ± std over
    seeds), and how many (node, seed) pairs score above / below local.
    ``("-", "-")`` for local itself or when no local row shares a seed and
    node with ``label``'s rows."""
    if label == "local":
        return "-", "-"
    local = {(r["seed"], r["node"]): r["test_accuracy"] for r in rows if r["method"] == "local"}
    mine: dict[int, list[dict]] = {}
    for r in rows:
        if r["method"] == label and (r["seed"], r["node"]) in local:
            mine.setdefault(r["seed"], []).append(r)
    if not mine:
        return "-", "-"
    by_seed = sorted(mine.items())
    d = paired_difference({s: [r["test_accuracy"] for r in rs] for s, rs in by_seed},
                          {s: [local[s, r["node"]] for r in rs] for s, rs in by_seed})
    return mean_std(d.per_seed, signed=True), f"{d.above} / {d.below}"


def report(records: list[dict], args: argparse.Namespace) -> None:
    """Print the tables (and write the plots) of ``records``: per (task, psi),
    every method and seed found in them, whichever run produced them."""
    for task, psi in dict.fromkeys((r["task"], r["psi"]) for r in records):
        rows = [r for r in records if r["task"] == task and r["psi"] == psi]
        seeds = sorted({r["seed"] for r in rows})
        nodes = len({r["node"] for r in rows})
        print(f"\nsynthetic {task}, psi = {psi}: {nodes} nodes, seeds {seeds}")
        print("| method | test acc. (%) | − local (points, paired) | (node, seed) pairs above / below local | paper (%) | "
              "KB up / node | KB down / node | train GFLOPs / node | s / seed |")
        print("|---|---|---|---|---|---|---|---|---|")
        for label in dict.fromkeys(r["method"] for r in rows):
            mine = [r for r in rows if r["method"] == label]
            by_seed = sorted({r["seed"] for r in mine})
            accs = [statistics.mean(r["test_accuracy"] for r in mine if r["seed"] == s) for s in by_seed]
            secs = statistics.mean(next(r["method_seconds"] for r in mine if r["seed"] == s) for s in by_seed)
            up, down = (statistics.mean(r[k] for r in mine) / 1e3 for k in ("bytes_up", "bytes_down"))
            gf = statistics.mean(r["train_flops"] for r in mine) / 1e9
            rounds = max((r["rounds"] for r in mine), default=0)
            gain, above_below = versus_local(rows, label)
            print(f"| {label} | {mean_std(accs)} | {gain} | {above_below} | {paper_figure(task, psi, label, rounds)} | "
                  f"{up:.1f} | {down:.1f} | {gf:.2f} | {secs:.0f} |")
        budget_rows = [r for r in rows if r["method"].split(" [")[0] in DATA_FREE and "budget" in r.get("extra", {})]
        if len({(r["method"]) for r in budget_rows}) > 1:
            print(f"\nData-free baselines against their synthesis budget:\n{budget_table(budget_rows)}")
        print(f"\nAccuracy after rounds (multi-round methods evaluated after every round; mean over nodes, "
              f"then seeds):\n{accuracy_at_rounds_table(rows)}")
        print(f"\nRounds and bytes per node to reach FOL's / FOL-A's accuracy (one exchange):\n"
              f"{rounds_to_match_table(rows)}\n", flush=True)
        if args.plots:
            args.plots.mkdir(parents=True, exist_ok=True)
            plot_accuracy_vs_rounds(rows, args.plots / f"accuracy_vs_rounds-{task}-{psi}.png")
            plot_accuracy_vs_bytes(rows, args.plots / f"accuracy_vs_bytes-{task}-{psi}.png")


if __name__ == "__main__":
    sys.exit(main())
