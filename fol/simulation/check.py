"""``fol simulate --check``: everything about a scenario that can be validated
without training, in seconds, so that a run never fails after half an hour.

:func:`check_scenario` runs first in every ``fol simulate`` / ``fol demo`` (and
:func:`fol.simulation.run_simulation`). On top of the field checks done while
parsing, it

- reads the files the scenario names (TLE, OMM, OEM, waypoint CSV, ``[time] iers_finals``; the Sun's ephemeris of
  a satellite scenario with ``[energy]``) and derives the learning nodes and their architectures (``models.nodes`` must name real nodes);
- instantiates every selected method with its ``[methods.<name>]`` options,
  asks each whether it can run on the scenario's image size (a DENSE or
  Co-Boosting synthesis, or FOL's synthesized distillation inputs, too large
  for memory is refused here, not after pretraining), and refuses methods that
  average parameters (``fedavg``, ``hermes``, ``dm-pfl``, ``mtfl``, ...) or
  train one model on every node's data (``pooled``, ``pooled-ft``) on a
  swarm of mixed architectures;
- checks the dataset name, its options and, for real datasets, that its folder
  holds files (an image folder at least two class sub-folders); that a synthetic pool of ``data.size`` images can give every node ``data.per_node`` (dirichlet partition) or ``data.min_samples`` (orbit, region);
- refuses a Ray address with another executor than ``ray`` (it would be
  ignored); with the ``ray`` executor and a ``host:port`` address, checks
  that something accepts a connection there;
- with the orbit partition, that the satellites' ground tracks over
  ``data.acquisition_s`` fit the contact side's trajectory budget, and, for an
  OEM's satellites, that the period lies inside the file (:func:`check_acquisition_span`; the ground
  tracks take ITRF states as they are, so ``[time] iers_finals`` need not cover it);
- checks the output folder: a folder (not a file), writable, and empty unless
  resuming; a resumed folder must hold a run's record, and the scenario must
  equal that run's in everything that changes results, the contents of the
  files its contact side and its image folder hold included (:func:`input_digests`); the folders of its
  saved work must be folders, the method results it saved must read back (:func:`check_saved_results`), and
  its pretrained models must be model files of this format, whole, each of the node and seed whose place it
  has (:func:`check_saved_models`; the resumed run then loads each against the data pool, before it writes
  anything).

Errors are :class:`~fol.errors.ConfigError` / :class:`~fol.errors.DataError`
(or the contact side's own), one line; one about the scenario or a file it names gives the
scenario file first, then the field (:func:`~fol.simulation.scenario.errors_name_the_file`),
as ``fol contacts`` words them, one about the output folder names the folder.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from contact_sim.scenario import (build_constellation, check_contact_scenario, check_energy_inputs, input_files,
                                  round_boundaries)
from contact_sim.trajectory import MAX_TRAJECTORY_BYTES, STATION_ROTATION_BYTES_PER_TIME, grid_samples
from fol.checkpoint import ModelCard, read_card
from fol.data.registry import SYNTHETIC_DEFAULT_SIZE, check_dataset
from fol.errors import CheckpointError, ConfigError, DataError
from fol.executors import check_ray_address, cluster_address
from fol.fileio import check_input_dir, check_output_dir, file_sha256
from swarmbase.cli import parallelism_problem
from swarmbase.fileio import dead_link, dead_link_text
from fol.methods import NodeResult, get_method
from fol.stages import check_finetune_freeze
from orbits import Constellation, Ephemeris, OrbitError
from orbits.groundtrack import turns_earth_fixed
from swarmbase.safejson import loads as bounded_loads
from fol.simulation.partition import (GROUND_SPEED_KM_S, GROUND_TRACK_BYTES_PER_SAMPLE, GROUND_TRACK_BYTES_PER_TIME,
                                     ITRF_GROUND_TRACK_BYTES_PER_SAMPLE, coverage_step_s)
from fol.simulation.scenario import DataConfig, SwarmScenario, errors_name_the_file, json_default, result_settings
from swarmbase.tomlcheck import brief, read_text_file, shown

__all__ = ["CheckReport", "check_scenario", "check_run_folder", "check_resumable", "read_run_record", "node_architectures",
           "input_digests", "INPUTS_FILE", "STATE_DIR", "seed_dir", "results_path", "saved_results", "check_saved_results",
           "real_number", "read_run_json", "check_acquisition_span", "node_file_stem", "pretrained_path",
           "check_pretrained_card", "check_saved_models", "refused_pretrained"]

#: In a run folder: the folder of its saved work (:data:`INPUTS_FILE`, the wall time, and per seed
#: :func:`seed_dir`).
STATE_DIR = "state"
#: In a run folder: the sha256 of each file the scenario's contact side read and of its image folder's
#: files (:func:`input_digests`).
INPUTS_FILE = f"{STATE_DIR}/inputs.json"
#: In :func:`seed_dir`: the folders of the seed's pretrained models and of its methods' saved results.
SEED_FOLDERS = ("pretrained", "results")


def seed_dir(out: Path, seed: int) -> Path:
    """Where a run keeps seed ``seed``'s pretrained models (``pretrained/``) and method results (``results/``)."""
    return Path(out) / STATE_DIR / f"seed-{seed}"
#: In :data:`INPUTS_FILE`: the images of an ``imagefolder`` dataset, ``{relative path: {"bytes", "sha256"}}``.
IMAGES_KEY = "data.path"
#: The entries of :data:`INPUTS_FILE` recorded since a later version (the dataset's files, ``[time] iers_finals``):
#: the record of a run made before lacks them, and they are not compared then.
LATER_KEYS = (IMAGES_KEY, "data.coords", "time.iers_finals")
#: How a run names its Ray address: the scenario's field or the flag that overrides it, as for the executor.
RAY_ADDRESS_FIELD = "run.ray_address (or --ray-address)"


@dataclass
class CheckReport:
    """What the check established about a scenario."""

    nodes: list[str]
    archs: list[str]
    methods: list[str]

    def summary(self, scn: SwarmScenario) -> str:
        """One line: what was checked and how much will run (seeds x nodes x methods, one result
        each); the seeds are listed shortened (a scenario may give up to ``MAX_SEEDS``)."""
        kinds = sorted(set(self.archs))
        n_seeds, n_nodes, n_methods = len(scn.seeds), len(self.nodes), len(self.methods)
        return (f"{brief(scn.source)}: OK — {n_nodes} learning nodes ({scn.contact.kind}), architectures "
                f"{', '.join(kinds)}, dataset {scn.data.dataset} ({scn.data.partition} partition), "
                f"methods {', '.join(self.methods)}, seeds {shown(scn.seeds)}; will run {n_seeds:,} seed(s) x "
                f"{n_nodes:,} nodes x {n_methods} method(s) = {n_seeds * n_nodes * n_methods:,} node results")


def node_architectures(scn: SwarmScenario, names: list[str], planes: list[int] | None) -> list[str]:
    """The architecture of each learning node: explicit override, else the rule."""
    archs = scn.models.archs
    out = []
    for k, name in enumerate(names):
        if name in scn.models.nodes:
            out.append(scn.models.nodes[name])
        elif scn.models.rule == "plane" and planes is not None and planes[k] >= 0:
            out.append(archs[planes[k] % len(archs)])
        else:
            out.append(archs[k % len(archs)])
    unknown = sorted(set(scn.models.nodes) - set(names))
    if unknown:
        raise ConfigError(f"models.nodes: no learning node is named {shown(unknown[0])}")
    return out


def check_run_folder(out: Path, resume: bool = False) -> None:
    """``out`` can hold a run: a writable folder or a name that can be created,
    empty unless ``resume`` (which needs the folder, named ``--resume``). Nothing is created."""
    out = Path(out)
    if resume:
        check_input_dir(out, ConfigError, "--resume")
    check_output_dir(out, ConfigError, what="--resume" if resume else "output folder")
    if not resume and out.is_dir() and any(out.iterdir()):
        if (out / "scenario.resolved.json").is_file():  # a run's folder: it can be continued
            raise ConfigError(f"output folder {brief(out)} is not empty; continue it with fol simulate --resume "
                              f"{brief(out)}, or give another --out")
        raise ConfigError(f"output folder {brief(out)} is not empty and holds no run to continue; give another --out")


#: How deep a run folder's JSON files may nest (the scenario record and the results with their
#: ``extra`` need a handful of levels); deeper is a damaged file, refused before anything walks it.
RUN_JSON_DEPTH = 32


#: The largest JSON file of a run folder read back (bytes), checked before it is read: far above what a
#: run writes (a method's saved results take about 1 kB per node and round, the record of an image
#: folder's files about 120 bytes per image), so that a damaged one (a link to ``/dev/zero``, a FIFO, a
#: sparse file of gigabytes) is refused unread, not read whole into memory or waited on for ever.
MAX_RUN_JSON_BYTES = 2**30


def read_run_json(path: Path) -> Any:
    """A JSON file of a run folder (its record, a saved result, the wall time), as
    ``--resume`` reads it: a regular file of at most :data:`MAX_RUN_JSON_BYTES`, UTF-8
    (:func:`swarmbase.tomlcheck.read_text_file`), ``NaN`` taken (results hold it), nesting
    bounded (:func:`swarmbase.safejson.loads`), so a damaged or missing file is a
    :class:`ValueError` whose message does not repeat the path, never a ``RecursionError``
    later; one that does not parse says "not valid JSON (<the parser's reason>)". The count
    of values is bounded by the file's size alone."""
    return _run_json(_run_json_text(path))


def _run_json_text(path: Path) -> str:
    """The text of :func:`read_run_json`'s file; :class:`ValueError` without the path."""
    try:
        return read_text_file(path, ValueError, "JSON file of a run", MAX_RUN_JSON_BYTES)
    except ValueError as exc:  # the callers name the file
        raise ValueError(str(exc).removeprefix(f"{brief(Path(path))}: ")) from None


def _run_json(text: str) -> Any:
    """:func:`read_run_json`'s parse of the text of its file; :class:`ValueError` "not valid JSON
    (<the parser's reason, cut>)", the one wording of every caller."""
    try:
        return bounded_loads(text, max_depth=RUN_JSON_DEPTH, max_items=len(text) + 1, allow_nan=True)
    except ValueError as exc:
        raise ValueError(f"not valid JSON ({brief(str(exc), 300)})") from None


def read_run_record(out: Path) -> dict[str, Any]:
    """The ``scenario.resolved.json`` a run wrote in ``out``, for ``--resume``:
    a JSON object whose ``source`` and ``base_dir`` are text (or absent). One that
    cannot be read is one :class:`ConfigError` line saying why: missing (not a run's
    folder), a link to nothing, not a regular file, too large, not UTF-8, not JSON."""
    path = Path(out) / "scenario.resolved.json"
    try:
        text = _run_json_text(path)
    except (OSError, ValueError) as exc:
        if not os.path.lexists(path):
            raise ConfigError(f"--resume {brief(out)}: no readable {path.name} there (it is missing: not a simulation "
                              f"output folder)") from None
        dead = dead_link(path)
        why = f"it is {dead_link_text(path, dead)}" if dead is not None else brief(str(exc), 300)
        raise ConfigError(f"--resume {brief(out)}: no readable {path.name} there ({why}); restore the run's record or "
                          f"use a new output folder") from None
    try:
        record = _run_json(text)
    except ValueError as exc:  # "not valid JSON (<the parser's reason>)"
        raise ConfigError(f"--resume {brief(out)}: no readable {path.name} there ({exc}); "
                          f"restore the run's record or use a new output folder") from None
    if not isinstance(record, dict) or any(not isinstance(record.get(k), (str, type(None)))
                                           for k in ("source", "base_dir")):
        raise ConfigError(f"--resume {brief(out)}: {path.name} is not a run record (expected a JSON object with text "
                          "'source' and 'base_dir'); use a new output folder")
    return record


def check_local_parallelism(executor: str, ray_address: str | None, workers: int | None, threads: int | None) -> None:
    """Refuse more processes or threads than this machine can use: beyond
    :data:`swarmbase.cli.MAX_PER_CORE` per core they only slow a CPU-bound run, and a typo
    (``workers = 100000``) would start one process per node, each loading torch.
    A Ray cluster (``ray_address``) counts its own CPUs and is not checked here; a new Ray instance on this
    machine (``"local"``) is, as no address is."""
    if executor == "ray" and cluster_address(ray_address):
        return
    for key, value in (("run.workers (or --workers)", workers), ("run.threads", threads)):
        if value is not None and (problem := parallelism_problem(value)):  # fol contacts --workers' rule and line
            raise ConfigError(f"{key}: {problem}")


def _check_ground_tracks(acquisition_s: float, swath_km: float, n_sats: int, turned: bool) -> None:
    """Refuse an orbit partition whose peak memory would exceed the contact side's trajectory budget:
    the ground tracks (every satellite over the acquisition period, one sample per coverage step) are
    computed as one table, at a measured peak resident set of
    :data:`~fol.simulation.partition.GROUND_TRACK_BYTES_PER_SAMPLE` per satellite and sample and
    :data:`~fol.simulation.partition.GROUND_TRACK_BYTES_PER_TIME` per time sample, and, when ``turned`` (:func:`orbits.groundtrack.turns_earth_fixed`: element
    sets, an OEM with states in another frame than ITRF), turned Earth-fixed at every time at once
    (Skyfield's rotation, :data:`STATION_ROTATION_BYTES_PER_TIME` per time sample whatever the number of
    satellites). An OEM's ITRF states are Earth-fixed as read: no rotation and no Earth-fixed copy are
    built for them (:data:`~fol.simulation.partition.ITRF_GROUND_TRACK_BYTES_PER_SAMPLE` per satellite
    and sample)."""
    step_s = coverage_step_s(swath_km)
    samples = grid_samples(acquisition_s, step_s)
    per_sample = GROUND_TRACK_BYTES_PER_SAMPLE if turned else ITRF_GROUND_TRACK_BYTES_PER_SAMPLE
    per_time = GROUND_TRACK_BYTES_PER_TIME + (STATION_ROTATION_BYTES_PER_TIME if turned else 0)
    need = float(samples) * (max(n_sats, 1) * per_sample + per_time)
    if need > MAX_TRAJECTORY_BYTES:
        raise ConfigError(f"data.acquisition_s: {acquisition_s:g} s of ground tracks every {step_s:g} s "
                          f"(data.swath_km / {2 * GROUND_SPEED_KM_S:g} km/s) x {n_sats:,} satellite(s) would need "
                          f"{need / 2**30:,.1f} GiB (limit {MAX_TRAJECTORY_BYTES / 2**30:.0f} GiB); shorten "
                          "data.acquisition_s (default: time.duration_s) or widen data.swath_km")


def check_acquisition_span(scn: SwarmScenario, constellation: Constellation | Ephemeris | None = None) -> None:
    """With the orbit partition and an OEM's satellites, the swaths sweep from ``time.start`` for
    ``data.acquisition_s`` (default ``time.duration_s``): that period must lie inside every object's
    useable span, refused in one :class:`~fol.errors.DataError` line naming the field, the object and
    the first instant not covered. ``[time] iers_finals`` need not cover it: the ground tracks take ITRF states
    Earth-fixed as they are (:func:`orbits.ground_track`) and turn no position with the file. A period no longer
    than the horizon is inside the file, which :func:`~contact_sim.scenario.build_constellation` checked; a longer
    one is checked against ``constellation``, the satellites the caller built (:func:`check_scenario` those of
    :func:`~contact_sim.scenario.check_contact_scenario`, the run its own), else against the files read here.
    Used by :func:`check_scenario` (``--check``) and by the run before it partitions the data."""
    d, c = scn.data, scn.contact
    if d.partition != "orbit" or c.constellation is None or c.constellation.kind != "oem":
        return
    acquisition_s = d.acquisition_s or c.time.duration_s
    if acquisition_s <= c.time.duration_s:
        return
    eph = constellation if constellation is not None else build_constellation(c)  # kind = "oem": an Ephemeris
    try:
        eph.check_covers(c.time.start, acquisition_s, "data.acquisition_s")
    except OrbitError as exc:
        raise DataError(f"{brief(scn.source)}: {exc}") from None


def _dataset_field(d: DataConfig) -> str:
    """The ``[data]`` field that gives what :func:`check_dataset` found missing: a real
    dataset's folder (``data.root``, else ``data.dataset`` under the default root), an
    image folder (``data.path``) or, in a folder that is there, its ``coords.csv``
    (``data.coords``) or, that file there too, a file not a TIFF where ``data.bands`` is given."""
    if d.dataset != "imagefolder":
        return "data.root" if d.root is not None else "data.dataset"
    folder = Path(d.path or "")
    if not (folder.is_dir() and any(folder.iterdir())):
        return "data.path"
    if d.coords == "csv" and not (folder / "coords.csv").is_file():
        return "data.coords"
    return "data.bands" if d.bands is not None else "data.path"


def _known_node_count(scn: SwarmScenario) -> int | None:
    """The number of learning nodes when the file alone gives it (a Walker shell's
    ``total``, random-waypoint drones' ``count``), else ``None`` (files to read)."""
    c = scn.contact
    if c.constellation is not None and c.constellation.kind.startswith("walker"):
        return c.constellation.total
    return c.drones.count if c.drones is not None else None


def _check_synthetic_pool(scn: SwarmScenario, n_nodes: int) -> None:
    """A synthetic pool of ``data.size`` images can give each of ``n_nodes`` nodes
    ``data.per_node`` (dirichlet partition) or ``data.min_samples`` (orbit, region)."""
    d = scn.data
    if not d.dataset.startswith("synthetic-"):  # a real dataset's size is known once it is read
        return
    pool = d.size or SYNTHETIC_DEFAULT_SIZE
    field, each = (("data.per_node", d.per_node) if d.partition == "dirichlet" and d.per_node is not None
                   else ("data.min_samples", d.min_samples))
    if pool < n_nodes * each:
        size = "data.size" if d.size is not None else f"data.size (default {SYNTHETIC_DEFAULT_SIZE})"
        raise DataError(f"{brief(scn.source)}: {size}: {pool} images cannot give {n_nodes} nodes {field} = {shown(each)} "
                        f"each ({d.partition} partition); raise data.size, lower {field} or use fewer nodes")


def check_scenario(scn: SwarmScenario, out: Path | None = None, *, resume: bool = False,
                   check_data: bool = True) -> CheckReport:
    """Validate ``scn`` (and the output folder ``out`` if given) without training;
    see the module docstring. ``check_data=False`` skips the dataset's presence."""
    known = _known_node_count(scn)
    if known is not None:  # before a shell of up to 339,999 satellites is built only to be refused
        _check_synthetic_pool(scn, known)
    with errors_name_the_file(scn.source):
        names, planes, constellation = check_contact_scenario(scn.contact, derive_planes=scn.models.rule == "plane")
        check_energy_inputs(scn.contact)
        archs = node_architectures(scn, names, planes)
        if len(names) < 2:
            raise ConfigError(f"{len(names)} learning node(s); a swarm needs at least 2")
        check_finetune_freeze(scn.fol.finetune_freeze, archs, scn.data.side_px)  # each neighbour may be any of them

        plan_rounds = len(round_boundaries(scn.contact)) - 1
        shape = (3, scn.data.side_px, scn.data.side_px)
        for name in scn.methods:
            method = get_method(name, **scn.method_options.get(name, {}))
            rounds = getattr(method, "rounds", None)
            if type(method).multi_round and rounds is not None and rounds > plan_rounds:
                # rounds past the plan's have no participant: each would only re-evaluate every node
                raise ConfigError(f"methods.{name}.rounds: {rounds} server rounds but the contact plan has "
                                  f"{plan_rounds} [rounds]")
            method.check_inputs(shape, scn.fol)
            if type(method).one_architecture and len(set(archs)) > 1:
                raise ConfigError(
                    f"methods.run: {name!r} {type(method).one_architecture_reason} and needs one architecture for "
                    "every node, but "
                    f"models gives {', '.join(sorted(set(archs)))}; drop {name!r} or use one architecture")

        # it would be ignored: the run would not use Ray (an empty address too: it is not taken as absent)
        if scn.run.ray_address is not None and scn.run.executor != "ray":
            raise ConfigError(f"{RAY_ADDRESS_FIELD} {shown(scn.run.ray_address)} only applies to the "
                              f"ray executor, but run.executor (or --executor) is {shown(scn.run.executor)}; "
                              "use executor 'ray' or drop the address")
        check_local_parallelism(scn.run.executor, scn.run.ray_address, scn.run.workers, scn.run.threads)
        if scn.run.executor == "ray":
            check_ray_address(scn.run.ray_address, field=RAY_ADDRESS_FIELD)

        d = scn.data
        if d.partition == "orbit":
            _check_ground_tracks(d.acquisition_s or scn.contact.time.duration_s, d.swath_km, len(names),
                                 constellation is None or turns_earth_fixed(constellation))
            check_acquisition_span(scn, constellation)  # the satellites just built: the OEM file read once
        if d.size is not None and not d.dataset.startswith("synthetic-"):
            raise ConfigError(f"data.size: only applies to synthetic datasets, not {d.dataset!r}")
    if check_data:
        try:
            check_dataset(d.dataset, d.root, **d.loader_options(0))
        except DataError as exc:  # as every other error of the check: the scenario file and the field first
            raise DataError(f"{brief(scn.source)}: {_dataset_field(d)}: {exc}") from None
        if d.dataset == "imagefolder":  # its classes are the sub-folders (hidden ones aside), as the loader reads them
            from fol.data.loaders import image_folder_classes, refuse_one_class

            folder = Path(d.path or "")
            classes = image_folder_classes(folder, d.splits)
            try:
                refuse_one_class(folder, classes)
            except DataError as exc:  # the one wording of fol pretrain --data too, after the file and field
                raise DataError(f"{brief(scn.source)}: data.path: {exc}") from None
    _check_synthetic_pool(scn, len(names))

    if out is not None:
        try:
            check_run_folder(out, resume)
        except ConfigError as exc:  # as every other error of the check: the scenario file and the field first
            if resume:  # the folder --resume names, said so
                raise
            raise ConfigError(f"{brief(scn.source)}: output.dir (or --out): {exc}") from None
        if resume:
            check_resumable(scn, out)
            check_saved_results(scn, out, names)
            check_saved_models(scn, out, names)
    return CheckReport(names, archs, list(scn.methods))


def _input_files(scn: SwarmScenario) -> dict[str, Path]:
    """The files the scenario's contact side reads, by field (``constellation.tle_file``, ``time.iers_finals``,
    ``drones.missions[1]``, ...: :func:`contact_sim.scenario.input_files`), and an image folder's
    ``coords.csv`` (``data.coords``)."""
    files = input_files(scn.contact)
    if scn.data.dataset == "imagefolder" and scn.data.coords == "csv":
        files["data.coords"] = Path(scn.data.path or "") / "coords.csv"
    return files


def _image_digests(scn: SwarmScenario) -> dict[str, dict[str, int | str | None]]:
    """Every image file an ``imagefolder`` scenario reads, by its path relative to ``data.path``:
    its size and sha256 (both null for one that cannot be read: the loader says so, or skips it)."""
    from fol.data.loaders import image_folder_files

    folder = Path(scn.data.path or "")
    try:
        files, _, _ = image_folder_files(folder, splits=scn.data.splits)
    except DataError as exc:
        raise DataError(f"{brief(scn.source)}: data.path: {exc}") from None
    out: dict[str, dict[str, int | str | None]] = {}
    for path in files:
        try:
            out[path.relative_to(folder).as_posix()] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
        except OSError:
            out[path.relative_to(folder).as_posix()] = {"bytes": None, "sha256": None}
    return out


def input_digests(scn: SwarmScenario) -> dict[str, Any]:
    """The sha256 of each file the scenario's contact side reads, by field, and, for an
    ``imagefolder`` dataset, of its ``coords.csv`` and of every image (:data:`IMAGES_KEY`):
    the run's record only names them, and an edited waypoint or TLE file changes every
    contact, an edited or relabelled image the data. A synthetic pool is drawn from the seed."""
    out: dict[str, Any] = {}
    for key, path in _input_files(scn).items():
        try:
            out[key] = file_sha256(path)
        except OSError as exc:
            raise ConfigError(f"{brief(scn.source)}: {key}: {brief(path)} cannot be read ({exc.strerror or exc})") from None
    if scn.data.dataset == "imagefolder":
        out[IMAGES_KEY] = _image_digests(scn)
    return out


def _check_inputs_record(recorded: Any) -> None:
    """ValueError unless ``recorded`` is what :func:`input_digests` writes: field -> sha256, and
    :data:`IMAGES_KEY` -> an object of relative path -> object."""
    if not isinstance(recorded, dict):
        raise ValueError("expected a JSON object of field -> sha256")
    for key, value in recorded.items():
        if key == IMAGES_KEY:
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise ValueError(f"{key}: expected a JSON object of image path -> {{bytes, sha256}}")
        elif not isinstance(value, str):
            raise ValueError(f"{key}: expected a sha256, got {shown(value)}")


def _first_changed_image(before: dict[str, Any], now: dict[str, Any]) -> str:
    """The first image (by relative path) that differs between two :data:`IMAGES_KEY` entries, and how."""
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    first = changed[0]
    how = "added" if first not in before else "removed" if first not in now else "edited"
    more = f"; {len(changed) - 1} more image(s) differ" if len(changed) > 1 else ""
    return f"{first} was {how}{more}"


def real_number(value: Any) -> bool:
    """A JSON number a float holds: not a bool, not a whole number beyond any float (NaN and infinities are floats)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


#: The numbers of a saved result's ``extra`` that the report reads: in the object ``accuracy``
#: (FOL's pipeline), and in each object of the lists ``curve`` (multi-round methods) and ``exchanges``.
_EXTRA_NUMBERS = {"accuracy": ("local", "student", "ensemble"), "curve": ("round", "test_accuracy", "bytes"),
                  "exchanges": ("round", "test_accuracy", "bytes_up", "bytes_down")}


def _check_extra(extra: dict[str, Any]) -> None:
    """ValueError unless what the report reads of ``extra`` has the types the methods write."""
    if "transfer" in extra and extra["transfer"] is not None and not real_number(extra["transfer"]):
        raise ValueError(f"extra.transfer: expected a number or null, got {shown(extra['transfer'])}")
    for key, numbers in _EXTRA_NUMBERS.items():
        if key not in extra:
            continue
        items = [extra[key]] if key == "accuracy" else extra[key]
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise ValueError(f"extra.{key}: expected {'an object' if key == 'accuracy' else 'a list of objects'}, "
                             f"got {shown(extra[key])}")
        for item in items:
            for name in numbers:
                if not real_number(item.get(name)):
                    raise ValueError(f"extra.{key}: {name}: expected a number, got {shown(item.get(name))}")


def saved_results(path: Path, method: str, names: list[str]) -> list[NodeResult]:
    """The results an interrupted run saved for ``method`` (``--resume``), checked:
    a list of one object per node of this swarm (every node once) with the fields of
    :class:`NodeResult`.
    A bad file is an error naming it; nothing is deleted."""
    fields = {f.name: f for f in dataclasses.fields(NodeResult)}
    try:
        rows = read_run_json(path)
        if not isinstance(rows, list):
            raise ValueError(f"expected a list of per-node results, got {type(rows).__name__}")
        results = []
        for row in rows:
            if not isinstance(row, dict):
                raise ValueError(f"expected an object per node, got {type(row).__name__}")
            unknown = sorted(set(row) - set(fields))
            if unknown:
                raise ValueError(f"unknown field {unknown[0]!r}")
            missing = [k for k in ("node", "method", "test_accuracy") if k not in row]
            if missing:
                raise ValueError(f"field {missing[0]!r} is missing")
            for key, value in row.items():
                kind = fields[key].type
                if kind == "int":  # counts: bytes, FLOPs, rounds, models (64-bit, as every count a run writes)
                    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
                        big = " below 2**63" if isinstance(value, int) and value >= 2**63 else ""
                        raise ValueError(f"{key}: expected a whole number >= 0{big}, got {shown(value)}")
                    continue
                ok = (isinstance(value, str) if kind == "str" else isinstance(value, bool) if kind == "bool"
                      else isinstance(value, dict) if key == "extra" else real_number(value))
                if not ok:
                    raise ValueError(f"{key}: expected {kind}, got {type(value).__name__}"
                                     + (" beyond any float" if isinstance(value, int) and kind == "float" else ""))
                if key.endswith("_accuracy") and not (value != value or 0 <= value <= 1):  # NaN: none measured
                    raise ValueError(f"{key}: expected a share from 0 to 1 (or NaN), got {shown(value)}")
            _check_extra(row.get("extra", {}))
            result = NodeResult(**row)
            if result.method != method or result.node not in names:
                raise ValueError(f"a result of method {result.method!r} on node {result.node!r}, not of {method!r} "
                                 "on a node of this swarm")
            if any(r.node == result.node for r in results):
                raise ValueError(f"node {result.node!r} twice")
            results.append(result)
        missing = [n for n in names if n not in {r.node for r in results}]
        if missing:
            raise ValueError(f"no result for node {missing[0]!r} ({len(missing)} of the {len(names)} nodes missing)")
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"--resume: {brief(path)}: not the saved results of method {method!r} ({exc}); move the file "
                          f"away to run {method!r} again") from None
    return results


def results_path(seed_dir: Path, method: str) -> Path:
    """Method ``method``'s saved per-node results in :func:`seed_dir`."""
    return seed_dir / "results" / f"{method}.json"


def node_file_stem(name: str) -> str:
    """A node's name as a file name in the run's state folder: as it is when it holds only letters,
    digits, '.', '_', '-' and '~' (ASCII), else with the other characters percent-encoded (TLE / OMM / OEM names
    hold spaces and path separators: 'SL-16 R/B' is 'SL-16%20R%2FB'); distinct names stay distinct."""
    return quote(name, safe="")


def pretrained_path(seed_dir: Path, name: str) -> Path:
    """Node ``name``'s pretrained model in :func:`seed_dir`."""
    return seed_dir / "pretrained" / f"{node_file_stem(name)}.safetensors"


def check_pretrained_card(path: Path, card: ModelCard, name: str, seed: int) -> int:
    """The pretraining FLOPs the card of node ``name``'s checkpoint ``path`` records, once the card is that
    of node ``name`` and seed ``seed`` (what the run wrote there): else :class:`ConfigError` naming the file."""
    if card.producer != name or card.extra.get("seed") != seed:
        raise ConfigError(f"--resume: {brief(path)}: the pretrained model of node {shown(card.producer)} seed "
                          f"{shown(card.extra.get('seed'))}, not of node {name!r} seed {seed}; move the file away "
                          f"to pretrain {name!r} again")
    flops = card.extra.get("pretrain_flops", 0)
    if not isinstance(flops, int) or isinstance(flops, bool) or flops < 0:
        raise ConfigError(f"--resume: {brief(path)}: card extra 'pretrain_flops' is {shown(flops)}, expected a "
                          f"non-negative integer (the FLOPs the run recorded for pretraining {name!r}); move the "
                          f"file away to pretrain {name!r} again")
    return flops


def check_saved_models(scn: SwarmScenario, out: Path, names: list[str]) -> None:
    """``--resume``: what each pretrained model the interrupted run saved shows by itself, read as
    :func:`fol.checkpoint.read_card` reads it (a regular file within the size limit, a safetensors header
    holding this format's card of the version the run loads (not version 1), the tensors' byte ranges within the file: one cut short or garbled is
    refused; no tensor is read), and its card of the node and seed whose place it has
    (:func:`check_pretrained_card`). Checked before the data pool is read, by :func:`check_scenario`
    (``--check --resume`` too); the run then loads each in full (the digest, the values) and compares its
    spec with the one the pool's classes and image shape give the node."""
    for seed in scn.seeds:
        for name in names:
            path = pretrained_path(seed_dir(out, seed), name)
            if not path.exists():  # not pretrained yet: the run pretrains it (as it reads it)
                continue
            with refused_pretrained(path, name):  # a version-1 card too: the run's load_model refuses it
                card = read_card(path, legacy=False)
            check_pretrained_card(path, card, name, seed)


@contextmanager
def refused_pretrained(path: Path, name: str) -> Iterator[None]:
    """A :class:`~fol.errors.CheckpointError` of node ``name``'s pretrained model ``path`` as the one
    :class:`ConfigError` line of ``--resume``: the file, why, and what to do."""
    try:
        yield
    except CheckpointError as exc:
        reason = str(exc).removeprefix(f"{brief(path)}: ")  # the loader names the file through brief
        raise ConfigError(f"--resume: {brief(path)}: not a pretrained model this run saved ({reason}); move the "
                          f"file away to pretrain {name!r} again") from None


def check_saved_results(scn: SwarmScenario, out: Path, names: list[str]) -> None:
    """``--resume``: every method result the interrupted run saved, read as the run will read it,
    before anything in ``out`` is written, so that a refused resume changes nothing there
    (:class:`ConfigError` naming the first bad file). They need only the nodes' names: checked
    before the data pool is read (seconds, minutes for a large dataset), by :func:`check_scenario`
    (``--check --resume`` too: it refuses what the resume would)."""
    for seed in scn.seeds:
        for method in scn.methods:
            if results_path(seed_dir(out, seed), method).exists():
                saved_results(results_path(seed_dir(out, seed), method), method, names)


def _check_state_folders(scn: SwarmScenario, out: Path) -> None:
    """The folders a resumed run keeps its saved work in (:data:`STATE_DIR`, and for each seed
    :func:`seed_dir` and its :data:`SEED_FOLDERS`) are folders (a link to one too) where they are
    there: a file, a FIFO or a broken link in the place of one is refused now, before the run
    works for minutes and rewrites its record, only to fail when it saves there."""
    folders = [Path(out) / STATE_DIR]
    for seed in scn.seeds:
        folders += [seed_dir(out, seed), *(seed_dir(out, seed) / name for name in SEED_FOLDERS)]
    for folder in folders:
        if os.path.lexists(folder) and not folder.is_dir():
            raise ConfigError(f"--resume {brief(out)}: {brief(folder)} is not a folder (a broken link, a file, ...), where the run "
                              "keeps its saved work; move it away to resume without it, or use a new output folder")


#: How many of the fields a resumed scenario changed its refusal names (then "and <n> more").
SHOWN_CHANGES = 5
_ABSENT = object()  # a key one side lacks: unlike any value, None included


def _changed_fields(old: dict[str, Any], new: dict[str, Any], within: tuple[str, ...] = ()) -> list[str]:
    """The fields in which two :func:`~fol.simulation.scenario.result_settings` differ, named as the
    scenario file writes them: ``scenario.name``, ``link.acquisition_s`` (a contact table's field),
    ``methods.fedavg.fraction``; a table only where one side has it and the other not, or has no table
    there (a hand-edited record)."""
    changed: list[str] = []
    for key in sorted(set(old) | set(new), key=str):
        a, b = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if a == b:
            continue
        path = (*within, str(key))
        if isinstance(a, dict) and isinstance(b, dict):
            changed += _changed_fields(a, b, path)
        elif within:
            changed.append(".".join(path))
        else:  # a key of resolved(): name and seeds are [scenario]'s; the contact tables are the file's own
            changed.append(f"scenario.{key}" if key in ("name", "seeds") else str(key))
    if not within:  # the contact side's tables sit at the top of the file, not under [contact]
        changed = sorted(c.removeprefix("contact.") for c in changed)
    return changed


def check_resumable(scn: SwarmScenario, out: Path) -> None:
    """``--resume OUT``: ``OUT`` holds a run's record, and the scenario equals the
    interrupted run's in everything that changes results (:func:`result_settings`),
    and in the contents of the files its contact side and its image folder hold, when
    the run recorded them (:data:`INPUTS_FILE`; :data:`LATER_KEYS` it lacks are not compared)."""
    before = read_run_record(out)
    _check_state_folders(scn, out)
    now = json.loads(json.dumps(scn.resolved(), default=json_default))  # as the run wrote its record
    old, new = result_settings(before), result_settings(now)
    changed = _changed_fields(old, new)
    if changed:
        more = f" and {len(changed) - SHOWN_CHANGES} more" if len(changed) > SHOWN_CHANGES else ""
        raise ConfigError(f"--resume {brief(out)}: the scenario differs from the interrupted run's in "
                          f"{brief(', '.join(changed[:SHOWN_CHANGES]))}{more}; use a new output folder")
    path = Path(out) / INPUTS_FILE
    if not path.exists():  # killed before it was written, or a run made before it was kept
        return
    try:
        recorded = read_run_json(path)
        _check_inputs_record(recorded)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--resume {brief(out)}: {brief(path)}: not the record of the run's input files ({exc}); "
                          "move it away to resume without comparing them") from None
    digests, files = input_digests(scn), _input_files(scn)
    changed = sorted(k for k in set(recorded) | set(digests) if recorded.get(k) != digests.get(k)
                     and k != IMAGES_KEY and (k in recorded or k not in LATER_KEYS))
    if changed:
        shown_files = ", ".join(f"{k} ({brief(files[k])})" if k in files else k for k in changed)
        raise ConfigError(f"--resume {brief(out)}: the contents of {shown_files} differ from the interrupted run's "
                          "(the file was edited or replaced); restore it or use a new output folder")
    if IMAGES_KEY in recorded and recorded[IMAGES_KEY] != digests.get(IMAGES_KEY, {}):
        raise ConfigError(f"--resume {brief(out)}: the image folder data.path ({brief(scn.data.path)}) differs from the "
                          f"interrupted run's: {_first_changed_image(recorded[IMAGES_KEY], digests.get(IMAGES_KEY, {}))}"
                          "; restore it or use a new output folder")
