"""``fol contacts <scenario.toml> [--out DIR]``: windows, summary, CSV and PNG;
optionally CZML (Cesium), ION / HDTN contact plans and the orbits as OMM, TLE or OEM
(OMM in JSON, CSV, NDM/XML or KVN, OEM in KVN or NDM/XML: ``--orbits-format``).

The lead wires :func:`add_contacts_parser` / :func:`run_contacts` into
``fol/cli.py``; ``python -m contact_sim.cli`` runs it standalone.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from orbits import OMM_FORMATS, OrbitError
from orbits.oem import DEFAULT_OEM_STEP_S, EXPORT_FRAMES, MAX_OEM_POINTS, MIN_OEM_STEP_S, OEM_FORMATS
from swarmbase.cli import MAX_PER_CORE, ArgumentParser, parallelism_problem, path_argument, printable, run_command
from swarmbase.fileio import check_output_dir, check_output_file, staged_outputs
from swarmbase.manifest import EarlierOutputs, OutputManifest
from swarmbase.tomlcheck import brief
from swarmbase.units import format_bytes

from .errors import ContactError

if TYPE_CHECKING:
    from .scenario import ContactScenario

log = logging.getLogger(__name__)

#: The file each ``--export-orbits`` writes, by ``--orbits-format`` (the first layout is the default): its
#: extension names the layout, which is how :func:`orbits.read_omm` and :func:`orbits.read_oem` (so a scenario's
#: ``kind = "omm"`` / ``"oem"``) tell it; a KVN OEM keeps the ``.oem`` name OEM tools give it. TLE has one layout.
ORBIT_FILES: dict[str, dict[str, str]] = {
    "omm": {fmt: f"orbits.omm.{fmt}" for fmt in OMM_FORMATS},
    "tle": {"tle": "orbits.tle"},
    "oem": {fmt: "orbits.oem" if fmt == "kvn" else f"orbits.oem.{fmt}" for fmt in OEM_FORMATS},
}
#: ``--orbits-format`` values: every layout of OMM or OEM export.
ORBIT_FORMATS = tuple(dict.fromkeys(fmt for kind in ("omm", "oem") for fmt in ORBIT_FILES[kind]))
#: Every file ``fol contacts`` writes into ``--out`` besides its manifest (:data:`MANIFEST`). A run's set
#: replaces the previous run's whole: a regular file of a name here that the run does not write (the
#: ``contacts.czml`` of an earlier ``--czml``, the ``orbits.oem`` of an earlier KVN export beside this run's
#: ``orbits.oem.xml``) is removed in the same swap (:func:`swarmbase.fileio.staged_outputs`) when the previous
#: run's manifest lists it and it is unchanged, so the folder does not hold outputs of two runs. Such a file that
#: no manifest vouches for (the user's own, an older version's output, one edited since) is kept and said so;
#: other files there, and a link or a folder of such a name (never an output: the command writes regular files),
#: are left alone.
OUTPUT_FILES = ("contacts.csv", "contacts.json", "contacts.png", "contacts.czml", "contacts.ion", "contacts.hdtn.json",
                *(name for files in ORBIT_FILES.values() for name in files.values()))
#: The record of the files a run wrote into ``--out``, each one's size and sha256 (:mod:`swarmbase.manifest`): read
#: before the window search, it decides which earlier outputs the run may remove. At most 64 KiB: one of every
#: output takes about 2 kB.
MANIFEST = OutputManifest("contacts.manifest.json", "fol contacts", OUTPUT_FILES, ContactError)


def orbits_layout(export: str, fmt: str | None) -> tuple[str, str]:
    """The layout and file name of ``--export-orbits export`` in ``--orbits-format fmt`` (``None``: the
    default, JSON for OMM and KVN for OEM); a layout the export does not write raises :class:`ContactError`.

    >>> orbits_layout("oem", "xml"), orbits_layout("oem", None), orbits_layout("omm", None)
    (('xml', 'orbits.oem.xml'), ('kvn', 'orbits.oem'), ('json', 'orbits.omm.json'))
    """
    files = ORBIT_FILES[export]
    if fmt is None:
        fmt = next(iter(files))
    elif export == "tle":
        raise ContactError("--orbits-format: only used with --export-orbits omm or oem (a TLE has one layout)")
    elif fmt not in files:
        raise ContactError(f"--orbits-format: --export-orbits {export} writes {' or '.join(files)}, got {fmt}")
    return fmt, files[fmt]


def _path(text: str) -> Path:
    return Path(path_argument(text))

def add_contacts_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``contacts`` sub-command on an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "contacts", help="compute contact windows of a scenario",
        description="Compute contact windows for a scenario TOML (or read its [contacts] plan_file); print a "
                    "summary and write contacts.csv and contacts.png (plus contacts.json, contacts.czml, "
                    "contacts.ion, contacts.hdtn.json and the orbits with the options below).")
    p.add_argument("scenario", type=_path, help="scenario TOML file")
    p.add_argument("--out", type=_path, default=None,
                   help="output folder (default: contacts/ next to the scenario); the run's files replace the "
                        "previous run's there as a set (the previous run's outputs this run does not write are "
                        f"removed, unless changed since: {MANIFEST.name} records them)")
    p.add_argument("--workers", type=int, default=1, help="processes for the window search (default 1; at most one per core is used, and more than "
                   f"{MAX_PER_CORE} per core are refused, as fol simulate refuses them)")
    p.add_argument("--json", action="store_true", help="also write contacts.json")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--czml", action="store_true", help="also write contacts.czml (open it in Cesium; Earth-fixed "
                   "positions with the polar motion and UT1 of [time] iers_finals when given)")
    p.add_argument("--ion", action="store_true",
                   help="also write contacts.ion (ION contact plan, bytes/s, node numbers in the header)")
    p.add_argument("--hdtn", action="store_true", help="also write contacts.hdtn.json (HDTN contact plan, bits/s)")
    p.add_argument("--export-orbits", choices=tuple(ORBIT_FILES), default=None,
                   help="also write the constellation as orbits.omm.json (CCSDS OMM) or orbits.tle (mean "
                        "elements), or orbits.oem (CCSDS OEM: states over the horizon, any constellation kind); "
                        "--orbits-format picks the OMM's or the OEM's layout")
    p.add_argument("--orbits-format", choices=ORBIT_FORMATS, default=None,
                   help="layout of --export-orbits omm (json, the default: orbits.omm.json; csv, xml (CCSDS NDM/XML) "
                        "or kvn: orbits.omm.csv, .xml, .kvn) or oem (kvn, the default: orbits.oem; xml (CCSDS "
                        "NDM/XML, which Orekit reads): orbits.oem.xml)")
    p.add_argument("--oem-step-s", type=float, default=None, metavar="SECONDS",
                   help=f"seconds between the states of --export-orbits oem (default {DEFAULT_OEM_STEP_S:g}; at "
                        f"least {MIN_OEM_STEP_S:g}, and at most {MAX_OEM_POINTS:,} states in all)")
    p.add_argument("--oem-frame", choices=EXPORT_FRAMES, default=None,
                   help="REF_FRAME of --export-orbits oem: TEME (default, SGP4's frame, as computed); GCRF or ICRF "
                        "(GCRS axes) or EME2000 (J2000 mean equator and equinox: GCRS turned by the 23 mas frame "
                        "bias), for tools that do not read TEME; or ITRF (Earth-fixed, Skyfield's ITRS, velocities "
                        "relative to the Earth; polar motion and UT1 from the scenario's [time] iers_finals when "
                        "given), for ground-station tools")
    p.add_argument("--check", action="store_true",
                   help="only validate the scenario and the files it names (seconds) and exit")
    p.set_defaults(func=run_contacts, prog=p.prog)
    return p


def _check_inputs_kept(out: Path, replaced: list[str], scenario_path: Path, scenario: ContactScenario) -> None:
    """Refuse a run whose outputs would replace or remove a file it reads: the scenario file or one it names
    (an ``oem_file`` that is the ``orbits.oem`` of an earlier export into ``out``, say) is one of the files
    ``replaced`` in ``out`` (itself, a link or a hard link): those the run writes, and the earlier outputs it
    removes (regular files the previous run's manifest lists)."""
    from .scenario import input_files

    inputs = {"the scenario file": scenario_path, **input_files(scenario)}
    for name in replaced:
        target = out / name
        if not target.is_file():
            continue
        for field, path in inputs.items():
            try:
                same = os.path.samefile(target, path)
            except OSError:  # a missing file or a folder of missions: not this output
                same = False
            if same:
                raise ContactError(f"{field} {brief(path)}: is {name} in --out {brief(out)}, which this run replaces or removes "
                                   "(a run's outputs replace the previous run's); copy it elsewhere or give another "
                                   "--out")


#: What ``--check`` calls a scenario kind's nodes.
_MOVERS = {"constellation": "satellite(s)", "drones": "drone(s)", "plan": "node(s) of the plan file"}


def _one_line(args: argparse.Namespace, exc: Exception) -> int:
    """Print a user error as one line naming the scenario file; exit status 2."""
    msg = str(exc)
    if str(args.scenario) not in msg and brief(args.scenario) not in msg:  # a long name is cut (brief), not written whole
        msg = f"{brief(args.scenario)}: {msg}"
    print(f"{getattr(args, 'prog', 'contacts')}: error: {printable(msg)}", file=sys.stderr)  # a file name: one line
    return 2


def _remove_made(made: list[Path]) -> None:
    """Remove the output folder (and parents) a run made, innermost first, when it writes no set there."""
    for folder in made:
        try:
            folder.rmdir()
        except OSError:  # no longer empty, or gone: left as it is, with its parents
            break


def run_contacts(args: argparse.Namespace) -> int:
    """Run the sub-command; returns the exit code (user errors: one line on stderr
    naming the command and the scenario file, exit status 2)."""
    from orbits import check_oem_export, format_tle, write_oem, write_omm, write_tle

    from .czml import write_czml
    from .dtn import write_hdtn, write_ion
    from .plotting import plot_contacts
    from .scenario import (build_trajectories, check_contact_scenario, load_contact_scenario,
                           load_plan_file, load_polar_motion, plan_from_trajectories)

    made: list[Path] = []  # the folders of --out this run makes, deepest first
    try:
        if problem := parallelism_problem(args.workers):  # fol simulate's bound of run.workers (or --workers)
            raise ContactError(f"--workers: {problem}")
        scenario = load_contact_scenario(args.scenario)
        names, _, satellites = check_contact_scenario(scenario)  # built once: read their file once
        if scenario.plan_file is not None and (args.czml or args.export_orbits):
            raise ContactError(f"{brief(args.scenario)}: --czml and --export-orbits need positions; "
                               "an imported [contacts] plan_file has none")
        if args.czml and scenario.plan_file is None and scenario.constellation is None:  # before the search
            raise ContactError(f"{brief(args.scenario)}: --czml needs a satellite scenario ([constellation]); drone "
                               "positions are in a local frame with no place on the globe")
        if args.export_orbits and scenario.constellation is None:
            raise ContactError(f"{brief(args.scenario)}: --export-orbits needs a [constellation]")
        if args.export_orbits in ("omm", "tle") and scenario.constellation.kind == "oem":
            raise ContactError(f"{brief(args.scenario)}: --export-orbits {args.export_orbits} writes mean elements (a Walker "
                               "shell's, or a TLE or OMM file's); constellation.kind = 'oem' gives states only, and "
                               "none are fitted to them (--export-orbits oem writes the states)")
        oem_step_s = DEFAULT_OEM_STEP_S if args.oem_step_s is None else args.oem_step_s
        if args.oem_step_s is not None and args.export_orbits != "oem":
            raise ContactError("--oem-step-s: only used with --export-orbits oem")
        if args.oem_frame is not None and args.export_orbits != "oem":
            raise ContactError("--oem-frame: only used with --export-orbits oem")
        if args.orbits_format is not None and args.export_orbits is None:
            raise ContactError("--orbits-format: only used with --export-orbits omm or oem")
        orbits_fmt, orbits_file = orbits_layout(args.export_orbits, args.orbits_format) if args.export_orbits \
            else (None, None)
        if args.export_orbits == "oem":  # the number of states (and bytes, by layout), from the numbers alone
            field = "--oem-step-s" if args.oem_step_s is not None else f"--oem-step-s (default {DEFAULT_OEM_STEP_S:g})"
            try:
                check_oem_export(len(names), scenario.time.duration_s, oem_step_s, field, fmt=orbits_fmt)
            except OrbitError as exc:
                raise ContactError(f"--export-orbits oem: {exc}") from None
        if args.export_orbits == "tle":  # a satellite with no TLE form: refused by --check, before the search
            try:
                format_tle(satellites)
            except OrbitError as exc:
                raise ContactError(f"--export-orbits tle: {exc}") from None
        out = args.out or (args.scenario.resolve().parent / "contacts")
        check_output_dir(out, ContactError, what="--out")
        outputs = {"contacts.csv": True, "contacts.json": args.json,
                   "contacts.png": not args.no_plot and scenario.plan_file is None, "contacts.czml": args.czml,
                   "contacts.ion": args.ion, "contacts.hdtn.json": args.hdtn}
        if orbits_file is not None:
            outputs[orbits_file] = True
        writes = [name for name, wanted in outputs.items() if wanted] + [MANIFEST.name]
        # the previous run's outputs this one does not write, by its manifest: removed in the swap when unchanged,
        # else (no manifest vouches for them) left, and said so
        earlier = EarlierOutputs(MANIFEST, None)  # (a folder not made yet holds none)
        if out.is_dir():  # the files written there: not folders, nor a file the run reads, before the window search
            for name in writes:
                check_output_file(out / name, ContactError, what="--out")
            earlier = MANIFEST.earlier_outputs(out, writes, MANIFEST.read(out))
            _check_inputs_kept(out, writes + earlier.removable, args.scenario, scenario)
        if args.check:
            stations = len(scenario.ground_stations)  # nodes of the plan too, as the run's summary counts them
            print(f"{brief(args.scenario)}: OK — {len(names)} {_MOVERS.get(scenario.kind, scenario.kind)} and {stations} "
                  f"ground station(s), "
                  f"{len(names) + stations} nodes in the contact plan")
            return 0
        # made here, with any parent that did not exist: removed again if the search is refused (still empty)
        made = [p for p in (out, *out.parents) if not p.exists()]
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ContactError(f"--out {brief(out)}: cannot be created ({exc.strerror})") from None
        t0 = time.perf_counter()
        traj = None
        if scenario.plan_file is not None:
            plan = load_plan_file(scenario)
        else:
            traj = build_trajectories(scenario, satellites)
            plan = plan_from_trajectories(traj, scenario, workers=args.workers)  # at least 1: parallelism_problem above
        elapsed = time.perf_counter() - t0
    except (ContactError, OrbitError) as exc:
        _remove_made(made)  # folders this run made for outputs it does not write (the window search's budget, say)
        return _one_line(args, exc)
    removed: list[Path] = []  # what the swap removed: the previous set's regular files this run does not write
    try:  # the whole set into a staging folder, then swapped in (the previous set's other outputs removed with it;
        # an output edited during the search is kept): Ctrl-C or an error keeps the previous set
        with staged_outputs(out, replaces=earlier.replaces, removed=removed, removable=earlier.unchanged) as stage:
            written = [plan.to_csv(stage / "contacts.csv")]
            if args.json:
                written.append(plan.to_json(stage / "contacts.json"))
            if not args.no_plot and traj is not None:
                written.append(plot_contacts(plan, traj, stage / "contacts.png"))
            if args.czml:
                written.append(write_czml(stage / "contacts.czml", plan, traj, name=args.scenario.stem,
                                          polar_motion=load_polar_motion(scenario)))
            if args.ion:
                written.append(write_ion(stage / "contacts.ion", plan))
            if args.hdtn:
                written.append(write_hdtn(stage / "contacts.hdtn.json", plan))
            if args.export_orbits == "omm":
                written.append(write_omm(stage / orbits_file, satellites, fmt=orbits_fmt))
            elif args.export_orbits == "tle":
                try:
                    written.append(write_tle(stage / orbits_file, satellites))
                except OrbitError as exc:
                    raise ContactError(f"--export-orbits tle: {exc}") from None
            elif args.export_orbits == "oem":  # an OEM source: its interpolated states, re-sampled
                written.append(write_oem(stage / orbits_file, satellites, scenario.time.start,
                                         scenario.time.duration_s, oem_step_s, frame=args.oem_frame or "TEME",
                                         fmt=orbits_fmt, polar_motion=load_polar_motion(scenario)))
            written.append(MANIFEST.write(stage / MANIFEST.name, written, shown=out / MANIFEST.name))
        written = [out / p.name for p in written]
    except OSError as exc:
        target = Path(exc.filename2 or exc.filename or out)  # os.replace names the temporary file first
        return _one_line(args, ContactError(f"--out {brief(out)}: cannot write {brief(target.name)} ({exc.strerror or exc})"))
    except (ContactError, OrbitError) as exc:  # a writer's refusal, naming its file in --out (staged_outputs)
        _remove_made(made)  # an export refused (a plan whose every window is left out): no set written
        return _one_line(args, exc)
    s = plan.summary()
    print(f"scenario   {brief(args.scenario)}  ({scenario.kind}, {s['nodes']} nodes, "
          f"{s['horizon_s']:.0f} s, {s['rounds']} round(s))")
    one_way = f", {s['one_way_windows']} one-way" if s["one_way_windows"] else ""
    print(f"windows    {s['windows']}{one_way}  ({elapsed:.1f} s to compute)")
    print(f"per node   mean {s['windows_per_node_mean']:.1f}, min {s['windows_per_node_min']}, "
          f"max {s['windows_per_node_max']}")
    print(f"duration   mean {s['mean_duration_s']:.1f} s, median {s['median_duration_s']:.1f} s")
    print(f"capacity   mean {format_bytes(s['mean_capacity_bytes'])} per window, "
          f"total {format_bytes(s['total_capacity_bytes'])}")
    for p in written:
        print(f"wrote      {brief(p)}")
    for line in earlier.lines(removed):
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command("contact_sim", lambda: _main(argv))  # Ctrl-C, a closed output pipe


def _main(argv: list[str] | None) -> int:
    parser = ArgumentParser(prog="contact_sim")
    sub = parser.add_subparsers(dest="command", required=True)
    add_contacts_parser(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
