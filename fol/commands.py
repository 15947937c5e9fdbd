"""Sub-commands of ``fol`` that have no better home, and the list of all of them.

Each ``add_*_parser`` registers one sub-command; its handler imports what it
needs when it runs.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Callable

from fol.defaults import DEFAULT_ARCH, IMAGE_FOLDER_COORDS, MAX_SEED, check_band_options, check_data_root, is_seed
from swarmbase.cli import parallelism_problem, path_argument
from swarmbase.tomlcheck import brief, check_input_file, shown

log = logging.getLogger(__name__)


def registrars() -> list[Callable[[argparse._SubParsersAction], None]]:
    """Every sub-command's registration function, in the order ``fol --help`` lists them."""
    from contact_sim.cli import add_contacts_parser
    from fol.simulation.cli import add_demo_parser, add_simulate_parser
    from fol.agent.cli import add_agent_parser, add_keys_parser
    from fol.personalize_cli import add_personalize_parser
    from fol.model_cli import add_model_parser

    return [
        add_demo_parser, add_simulate_parser, add_contacts_parser, add_data_parser, add_pretrain_parser,
        add_personalize_parser, add_model_parser, add_agent_parser, add_keys_parser,
    ]


# --------------------------------------------------------------------- data


def add_data_parser(sub: argparse._SubParsersAction) -> None:
    from fol.nodedata import DATA_ROOT_HELP

    p = sub.add_parser("data", help="inspect datasets")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    info = dsub.add_parser("info", help="size, image shape, class balance and coordinates of a dataset")
    info.add_argument("name", help="dataset name, e.g. synthetic-hurricane, wildfire, cifar10, or imagefolder:PATH")
    info.add_argument("--data-root", type=path_argument, default=None, help=DATA_ROOT_HELP)
    info.add_argument("--coords", choices=IMAGE_FOLDER_COORDS, default=None,
                      help="imagefolder:PATH only: read each image's coordinates from its file name (<lon>,<lat>.<ext>), "
                           "from PATH/coords.csv, from its EXIF GPS tags or from its GeoTIFF georeferencing (the image's "
                           "centre), as a scenario's data.coords does")
    info.add_argument("--skip-corrupt", action="store_true",
                      help="datasets read from image files: skip unreadable images (a warning names them) instead of "
                           "stopping at the first, as a scenario's data.skip_corrupt does")
    info.add_argument("--splits", metavar="A,B,...", default=None,
                      help="datasets published in split folders (wildfire, hurricane, svhn, or imagefolder:PATH laid "
                           "out as PATH/<split>/<class>/): the split folders to pool, comma-separated, as a "
                           "scenario's data.splits does")
    info.add_argument("--bands", metavar="B1,B2,B3", default=None,
                      help="imagefolder:PATH of multispectral TIFFs only: these three 1-based bands (e.g. 4,3,2) as the "
                           "model's 3 input channels, read with tifffile, as a scenario's data.bands does")
    info.add_argument("--scale", metavar="X", type=float, default=None,
                      help="with --bands: the bands' values divided by X and clipped to [0, 1] (e.g. 10000 for "
                           "Sentinel-2 reflectances), as a scenario's data.scale does")
    info.set_defaults(func=_run_data_info)


#: How ``fol data info``'s arguments are named in a refusal of :func:`~fol.defaults.check_band_options`.
INFO_BAND_NAMES = {"dataset": "imagefolder:PATH", "bands": "--bands", "scale": "--scale", "coords": "--coords"}


def _run_data_info(args: argparse.Namespace) -> int:
    from fol.data import describe, load_dataset
    from fol.data.registry import dataset_accepts, dataset_names
    from fol.errors import ConfigError, DataError

    name, _, path = args.name.partition(":")
    check_data_root(name, args.data_root)
    # NAME:PATH of another dataset: the loader would refuse an 'option path', which nobody typed
    if path and name != "imagefolder" and name in dataset_names():
        where = "generated, from no folder" if name.startswith("synthetic-") else \
            f"read from <data root>/{name} (--data-root, or FOL_DATA_ROOT)"
        raise ConfigError(f"{brief(args.name)}: NAME:PATH only applies to imagefolder:PATH; dataset {name!r} is {where}")
    options: dict[str, object] = {"path": path} if path else {}
    # the band options first, by the one rule every front end uses (a scenario's [data], --data, the loader)
    bands, scale = check_band_options(name, args.bands, args.scale, args.coords, names=INFO_BAND_NAMES, sep=",")
    if bands is not None:
        options["bands"] = bands
    if scale is not None:
        options["scale"] = scale
    if args.coords is not None:
        if name != "imagefolder":
            raise ConfigError(f"--coords: only applies to imagefolder:PATH, not {name!r}")
        options["coords"] = args.coords
    if args.skip_corrupt:
        if name in dataset_names() and not dataset_accepts(name, "skip_corrupt"):
            raise ConfigError(f"--skip-corrupt: only applies to datasets read from image files, not {name!r}")
        options["skip_corrupt"] = True
    if args.splits is not None:
        if name in dataset_names() and not dataset_accepts(name, "splits"):
            raise ConfigError(f"--splits: only applies to datasets published in split folders, not {name!r}")
        options["splits"] = [s.strip() for s in args.splits.split(",") if s.strip()]
    try:
        ds = load_dataset(name, root=args.data_root, **options)
    except DataError as exc:  # an image folder's loader names the folder; the line names the argument too
        if name != "imagefolder":  # a dataset's own message names it and --data-root / FOL_DATA_ROOT
            raise
        # the argument cut shorter than a name alone: the loader's message names the folder again (two names of 200
        # characters made a 489-character line)
        raise DataError(f"{brief(args.name, 100, keep_end=30)}: {exc}") from None
    print(describe(ds))
    return 0


# --------------------------------------------------------------------- pretrain


def add_pretrain_parser(sub: argparse._SubParsersAction) -> None:
    from fol.nodedata import add_node_data_arguments

    p = sub.add_parser("pretrain", help="train one node's model on its local data and save it in the safe format")
    add_node_data_arguments(p)
    p.add_argument("--arch", default=DEFAULT_ARCH, help="model architecture (default: %(default)s)")
    p.add_argument("--config", type=path_argument, default=None,
                   help="TOML file with a [fol] table of hyperparameters, read as fol personalize reads it (a "
                        "scenario's [fol] table too): its pretraining fields pretrain_epochs, pretrain_lr, "
                        "batch_size, patience, momentum and weight_decay apply (without it: FOLConfig's defaults), "
                        "its other fields are checked, not used; the flags below override it")
    p.add_argument("--epochs", type=int, help="maximum epochs (default: the config's pretrain_epochs)")
    p.add_argument("--lr", type=float, help="SGD learning rate (default: the config's pretrain_lr)")
    p.add_argument("--batch-size", type=int, help="default: the config's batch_size")
    p.add_argument("--patience", type=int,
                   help="early-stopping patience on the validation split (default: the config's patience)")
    p.add_argument("--init-seed", type=int, default=None,
                   help="seed of the shared initialization, the same for every node (default: the --data spec's "
                        "seed=, as fol simulate starts every node from its run's seed)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: torch's, one per core); the thread count changes the order floats "
                        "are added in, so the simulation's pretrained model bit for bit needs its run.threads "
                        "(default 1)")
    p.add_argument("--out", type=path_argument, required=True, help="output model file (.safetensors)")
    p.set_defaults(func=_run_pretrain)


#: ``fol pretrain``'s flags and the FOLConfig field each overrides (the ``--config`` file's, else the default).
PRETRAIN_FLAGS = (("--epochs", "pretrain_epochs"), ("--lr", "pretrain_lr"), ("--batch-size", "batch_size"),
                  ("--patience", "patience"))


def _run_pretrain(args: argparse.Namespace) -> int:
    from fol.checkpoint import save_model
    from fol.config import FOLConfig
    from fol.errors import ConfigError
    from fol.threads import torch_threads
    from fol.fileio import check_output_file
    from fol.models import architectures
    from fol.nodedata import pretrain_from_spec

    # every argument and the output path before any data is loaded or trained
    if args.config:  # a file that cannot be read is said of the option, as --out's is
        check_input_file(args.config, ConfigError, "FOL config file", option="--config")
    fol_cfg = FOLConfig.from_toml(args.config) if args.config else FOLConfig()  # the swarm's settings
    for flag, field in PRETRAIN_FLAGS:  # each flag overrides its field, checked by FOLConfig's own rules
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is None:
            continue
        try:
            fol_cfg = fol_cfg.replace(**{field: value})
        except ConfigError as exc:  # FOLConfig's message names the field (fol.pretrain_lr ...): said of the flag
            raise ConfigError(f"{flag}: {str(exc).removeprefix(f'fol.{field} ')}") from None
    if fol_cfg.pretrain_epochs < 1:  # a [fol] table may hold 0; fol pretrain would write an untrained model
        where = "--epochs" if args.epochs is not None else f"{brief(args.config)}: fol.pretrain_epochs"
        raise ConfigError(f"{where}: expected >= 1 (pretraining with 0 epochs gives an untrained model), "
                          f"got {fol_cfg.pretrain_epochs}")
    if args.arch not in architectures():
        raise ConfigError(f"--arch: unknown architecture {shown(args.arch)}; expected one of {', '.join(architectures())}")
    if args.init_seed is not None and not is_seed(args.init_seed):
        raise ConfigError(f"--init-seed: expected an integer in 0..{MAX_SEED}, got {shown(args.init_seed)}")
    if args.threads is not None:  # the simulation's bound for run.threads: beyond it threads only slow a run
        if problem := parallelism_problem(args.threads):
            raise ConfigError(f"--threads: {problem}")
    check_output_file(args.out, ConfigError, "--out")
    # node K of seed S trained as fol simulate's node K, its card recording the split rule (the one way)
    with torch_threads(args.threads):
        done = pretrain_from_spec(args.data, args.arch, fol_cfg, root=args.data_root, init_seed=args.init_seed,
                                  progress=True)
    try:  # check_output_file accepted a name in folders that do not exist yet: make them
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {brief(args.out)}: its folder cannot be created ({exc.strerror})") from None
    save_model(Path(args.out), done.model, done.card)
    node, extra = done.data, done.card.extra
    print(
        f"{done.spec.node_name}: {len(node.train)} train / {len(node.val)} val / {len(node.test)} test images; "
        f"{args.arch} val acc {100 * extra['val_accuracy']:.1f} %, test acc {100 * extra['test_accuracy']:.1f} % "
        f"-> {brief(args.out)}"
    )
    return 0
