"""``fol simulate`` and ``fol demo``."""

from __future__ import annotations

import argparse
import os
from importlib import resources
from pathlib import Path

from fol.errors import ConfigError
from swarmbase.cli import parallelism_floor_problem, path_argument
from swarmbase.tomlcheck import brief

__all__ = ["add_simulate_parser", "add_demo_parser", "DEMO_SCENARIO"]

#: The embedded demo scenario (a file shipped inside the package).
DEMO_SCENARIO = "demo.toml"
#: Default output folder of ``fol demo``.
DEMO_OUT = "fol-demo-out"


def _at_least_one(text: str) -> int:
    """``--workers``: a whole number >= 1, in the words of a scenario's ``run.workers`` (argparse turns the
    error into one usage line); no upper bound here: a Ray cluster counts its own CPUs."""
    try:
        value: int | str = int(text)
    except ValueError:
        value = text
    if problem := parallelism_floor_problem(value):
        raise argparse.ArgumentTypeError(problem)
    return int(value)


def add_simulate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="run a swarm scenario: contacts, data, pretraining, FOL and baselines, report")
    p.add_argument("scenario", type=path_argument, nargs="?", help="scenario TOML file (see examples/)")
    p.add_argument("--out", type=path_argument, default=None, help="output folder (default: the scenario's output.dir, else runs/<name>)")
    p.add_argument("--resume", type=path_argument, metavar="OUT", default=None, help="continue an interrupted run in folder OUT")
    p.add_argument("--executor", choices=["local", "process", "ray"], default=None, help="override run.executor ('local' or 'process' also drops the scenario's run.ray_address)")
    p.add_argument("--workers", type=_at_least_one, default=None, help="override run.workers: processes / Ray CPUs, also used for the contact search "
                   "(default: the scenario's run.workers, else all cores)")
    p.add_argument("--ray-address", default=None, help="join an existing Ray cluster: 'auto' (on its head machine), "
                   "host:port (started with ray start) or ray://host:port (Ray Client); or 'local': a new Ray instance "
                   "on this machine, the one --executor ray starts without an address; implies --executor ray")
    p.add_argument("--list-methods", action="store_true", help="list the selectable methods and exit")
    p.add_argument("--check", action="store_true",
                   help="only validate the scenario (fields, files, methods vs architectures, dataset, output "
                        "folder) in seconds and exit; every run does this first")
    p.set_defaults(func=run_simulate_command)


def add_demo_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the embedded demo scenario end to end (the README's main job)")
    p.add_argument("--out", type=path_argument, default=None,
                   help=f"output folder, new or empty (default: {DEMO_OUT}, or {DEMO_OUT}-2, -3, ... if that "
                        "one is taken; nothing is ever deleted)")
    p.add_argument("--executor", choices=["local", "process", "ray"], default=None,
                   help="where node work runs (default: process pool on machines with several cores)")
    p.set_defaults(func=run_demo_command)


def _apply_overrides(scn, args: argparse.Namespace) -> None:
    if getattr(args, "executor", None):
        if args.executor != "ray" and getattr(args, "ray_address", None) is None:
            scn.run.ray_address = None  # the scenario's cluster address belongs to the Ray executor replaced here
        scn.run.executor = args.executor
    if getattr(args, "workers", None):
        scn.run.workers = args.workers
    if getattr(args, "ray_address", None) is not None:  # "" too: refused by the check, not taken as absent
        scn.run.ray_address = args.ray_address
        if not getattr(args, "executor", None):
            scn.run.executor = "ray"


def _print_outcome(result) -> None:
    from fol.simulation.report import summary_table

    print(summary_table(result.results, result.rounds_used))
    print(f"\nreport: {brief(result.out / 'report.md')} (plots and results.csv beside it); {result.seconds:.0f} s")


def run_simulate_command(args: argparse.Namespace) -> int:
    from contact_sim.errors import ContactError
    from fol.errors import FOLError
    from fol.simulation import load_scenario, run_simulation
    from orbits.errors import OrbitError

    if args.list_methods:
        from fol.methods.base import _REGISTRY, method_names

        for name in method_names():
            print(f"{name:<14} {_REGISTRY[name].description}")
        return 0
    base_dir = original = None
    if args.resume and args.out and Path(args.out).resolve() != Path(args.resume).resolve():
        raise ConfigError(f"--out {brief(args.out)}: a resumed run continues in its own folder --resume {brief(args.resume)}; "
                          "drop --out")
    if args.resume:
        from fol.simulation.check import check_run_folder

        check_run_folder(Path(args.resume), resume=True)  # a file or a missing folder, named as such
        source = Path(args.scenario) if args.scenario else Path(args.resume) / "scenario.toml"
        if not source.exists():
            raise ConfigError(f"--resume {brief(args.resume)}: no scenario.toml there; give the scenario file too")
        if not args.scenario:  # the copy: its relative paths belong to the original scenario's folder
            base_dir, original = _original_location(Path(args.resume))
    elif args.scenario:
        source = Path(args.scenario)
    else:
        raise ConfigError("a scenario file is required (or --list-methods, or --resume OUT)")
    try:
        scn = load_scenario(source, base_dir, original)
    except (FOLError, ContactError, OrbitError) as exc:  # a field of the copy is bad: name the copy, not the original file it came from
        # the original named as it is or as brief() writes it (every scenario message names it so)
        prefixes = () if original is None else (f"{original}: ", f"{brief(original)}: ")
        named = next((p for p in prefixes if str(exc).startswith(p)), None)
        if named is None:
            raise
        raise type(exc)(f"{brief(source)}: {str(exc)[len(named):]}") from None
    _apply_overrides(scn, args)
    out = Path(args.resume or args.out or scn.output_dir or Path("runs") / scn.name)
    if args.check:
        from fol.simulation.check import check_scenario

        print(check_scenario(scn, out, resume=bool(args.resume)).summary(scn))
        return 0
    result = run_simulation(scn, out, resume=bool(args.resume))
    _print_outcome(result)
    return 0


def _free_folder(base: Path) -> Path:
    """``base`` if it is absent or empty, else the first absent or empty ``base-2``, ``base-3``, ..."""
    for k in range(1, 10_000):
        out = base if k == 1 else base.with_name(f"{base.name}-{k}")
        if not out.exists() or (out.is_dir() and not any(out.iterdir())):
            return out
    raise ConfigError(f"{base}: no free output folder name; give --out")  # pragma: no cover


def _original_location(out: Path) -> tuple[Path | None, str | None]:
    """Folder and name of the scenario file an output folder was started from
    (recorded in its ``scenario.resolved.json``)."""
    from fol.simulation.check import read_run_record

    resolved = read_run_record(out)
    base = resolved.get("base_dir")
    return (Path(base) if base is not None else None), resolved.get("source")


def run_demo_command(args: argparse.Namespace) -> int:
    import tomllib

    from fol.simulation import parse_scenario, run_simulation
    from fol.simulation.check import check_run_folder

    text = resources.files("fol.simulation").joinpath(DEMO_SCENARIO).read_text()
    scn = parse_scenario(tomllib.loads(text), Path.cwd(), "demo", text)
    scn.run.executor = args.executor or ("process" if (os.cpu_count() or 1) > 1 else "local")
    # an existing folder is never deleted: a taken default moves on to the next free name,
    # a taken --out is refused (by the scenario check in run_simulation)
    out = Path(args.out) if args.out else _free_folder(Path(DEMO_OUT))
    check_run_folder(out)  # a bad --out is refused before the banner says the run starts
    print(f"fol demo: {scn.name} — contacts, data, pretraining, FOL and baselines; executor {scn.run.executor}")
    result = run_simulation(scn, out)
    _print_outcome(result)
    return 0
