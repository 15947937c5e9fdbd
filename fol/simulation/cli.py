"""``fol simulate`` and ``fol demo``."""

from __future__ import annotations

import argparse
import os
from importlib import resources
from pathlib import Path

__all__ = ["add_simulate_parser", "add_demo_parser", "DEMO_SCENARIO"]

#: The embedded demo scenario (a file shipped inside the package).
DEMO_SCENARIO = "demo.toml"


def add_simulate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="run a swarm scenario: contacts, data, pretraining, FOL and baselines, report")
    p.add_argument("scenario", nargs="?", help="scenario TOML file (see examples/)")
    p.add_argument("--out", default=None, help="output folder (default: the scenario's output.dir, else runs/<name>)")
    p.add_argument("--resume", metavar="OUT", default=None, help="continue an interrupted run in folder OUT")
    p.add_argument("--executor", choices=["local", "process", "ray"], default=None, help="override run.executor")
    p.add_argument("--workers", type=int, default=None, help="processes / Ray CPUs, also used for the contact search (default: all cores)")
    p.add_argument("--ray-address", default=None, help="join an existing Ray cluster ('auto' or ray://host:port)")
    p.add_argument("--list-methods", action="store_true", help="list the selectable methods and exit")
    p.set_defaults(func=run_simulate_command)


def add_demo_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the embedded demo scenario end to end (the README's main job)")
    p.add_argument("--out", default="fol-demo-out", help="output folder (default: %(default)s; replaced if it holds a finished demo)")
    p.add_argument("--executor", choices=["local", "process", "ray"], default=None,
                   help="where node work runs (default: process pool on machines with several cores)")
    p.set_defaults(func=run_demo_command)


def _apply_overrides(scn, args: argparse.Namespace) -> None:
    if getattr(args, "executor", None):
        scn.run.executor = args.executor
    if getattr(args, "workers", None):
        scn.run.workers = args.workers
    if getattr(args, "ray_address", None):
        scn.run.ray_address = args.ray_address
        if not getattr(args, "executor", None):
            scn.run.executor = "ray"


def _print_outcome(result) -> None:
    from fol.simulation.report import summary_table

    print(summary_table(result.results, result.rounds_used))
    print(f"\nreport: {result.out / 'report.md'} (plots and results.csv beside it); {result.seconds:.0f} s")


def run_simulate_command(args: argparse.Namespace) -> int:
    from fol.simulation import load_scenario, run_simulation
    from fol.errors import ConfigError

    if args.list_methods:
        from fol.methods.base import _REGISTRY, method_names

        for name in method_names():
            print(f"{name:<14} {_REGISTRY[name].description}")
        return 0
    if args.resume:
        source = Path(args.scenario) if args.scenario else Path(args.resume) / "scenario.toml"
        if not source.exists():
            raise ConfigError(f"--resume {args.resume}: no scenario.toml there; give the scenario file too")
    elif args.scenario:
        source = Path(args.scenario)
    else:
        raise ConfigError("simulate: a scenario file is required (or --list-methods)")
    scn = load_scenario(source)
    _apply_overrides(scn, args)
    out = Path(args.resume or args.out or scn.output_dir or Path("runs") / scn.name)
    result = run_simulation(scn, out, resume=bool(args.resume))
    _print_outcome(result)
    return 0


def run_demo_command(args: argparse.Namespace) -> int:
    import shutil

    from fol.simulation import parse_scenario, run_simulation
    from fol.errors import ConfigError

    text = resources.files("fol.simulation").joinpath(DEMO_SCENARIO).read_text()
    import tomllib

    scn = parse_scenario(tomllib.loads(text), Path.cwd(), "demo", text)
    scn.run.executor = args.executor or ("process" if (os.cpu_count() or 1) > 1 else "local")
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        if not (out / "report.md").exists():
            raise ConfigError(f"{out} exists and is not a finished demo output; choose another --out")
        shutil.rmtree(out)
    print(f"fol demo: {scn.name} — contacts, data, pretraining, FOL and baselines; executor {scn.run.executor}")
    result = run_simulation(scn, out)
    _print_outcome(result)
    return 0
