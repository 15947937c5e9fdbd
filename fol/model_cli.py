"""``fol model``: look into model files and bring in models trained elsewhere.

``fol model info FILE...`` loads each file with the safe loader (every check,
the digest included) and prints what its card says and what the tensors hold;
``fol model import`` turns a plain safetensors ``state_dict`` into a model file
of the safe format (:func:`fol.checkpoint.import_state_dict`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from fol.defaults import MAX_BYTES_HELP, model_bytes_problem
from swarmbase.cli import path_argument, recorded_path
from swarmbase.tomlcheck import brief, shown


def add_model_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="inspect model files, import a safetensors state dict trained elsewhere")
    msub = p.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    info = msub.add_parser("info", help="validate model files with the safe loader and summarize each")
    info.add_argument("files", type=path_argument, nargs="+", metavar="FILE", help="model files (.safetensors, safe format)")
    info.add_argument("--json", action="store_true", help="one JSON object per file and line")
    info.add_argument("--max-bytes", type=int, default=None, help=MAX_BYTES_HELP)
    info.set_defaults(func=run_model_info)
    imp = msub.add_parser(
        "import", help="turn a plain safetensors state dict trained elsewhere into a model file with a card",
        description="Turn a plain safetensors state dict (safetensors.torch.save_file(model.state_dict(), ...)) "
                    "into a model file of the safe format. Pickle checkpoints (.pt, .pth, .bin) are refused, "
                    "never unpickled. Tensor names and shapes must be exactly those of the zoo's --arch built for "
                    "--classes, --in-channels and --input-size (resnet18 and mobilenet_v3_small are torchvision's "
                    "at --input-size 96 or more; below, their stem is a 3x3 stride-1 convolution). A prefix every "
                    "name shares (DataParallel's 'module.') is removed when that makes them match, batch-norm "
                    "num_batches_tracked counters may be absent, and float64 / float16 / bfloat16 tensors are "
                    "converted to float32, each said in a note line.")
    imp.add_argument("weights", type=path_argument, metavar="WEIGHTS", help="plain safetensors file of the state dict")
    imp.add_argument("--arch", required=True, help="the zoo architecture the state dict is of (fol.models)")
    imp.add_argument("--classes", required=True, metavar="A,B,...",
                     help="class names, comma-separated, in the order of the model's outputs")
    imp.add_argument("--input-size", type=int, default=32, help="image side in pixels (default: %(default)s)")
    imp.add_argument("--in-channels", type=int, default=3, help="image channels (default: %(default)s)")
    imp.add_argument("--widths", metavar="N,N,...",
                     help="channels of each block (cnn*: conv blocks; resnet-small: stages), default the arch's")
    imp.add_argument("--hidden", metavar="N", help="cnn*: units of the hidden dense layer (0: none), default the arch's")
    imp.add_argument("--blocks", metavar="N", help="resnet-small: basic blocks per stage, default the arch's")
    imp.add_argument("--producer", default="", help="name of the node or source the card names (default: none)")
    imp.add_argument("--out", type=path_argument, required=True, help="output model file (.safetensors)")
    imp.set_defaults(func=run_model_import)


# --------------------------------------------------------------------- info


def describe_model(path: str, loaded: Any, size: int) -> dict[str, Any]:
    """What ``fol model info --json`` prints for a model file loaded by the safe loader."""
    from fol.checkpoint import FORMAT_VERSION
    from fol.models import count_parameters

    card = loaded.card
    return {
        "file": path, "valid": True, "arch": card.spec.arch, "options": card.spec.options,
        "num_classes": card.spec.num_classes, "class_names": list(card.class_names),
        "input_shape": list(card.input_shape), "producer": card.producer, "round": card.round,
        "pruned": card.pruned, "parameters": count_parameters(loaded.model), "bytes": size,
        "format_version": FORMAT_VERSION, "sha256": card.sha256, "digest_verified": True, "extra": card.extra,
    }


def format_model(d: dict[str, Any]) -> str:
    """The human summary of :func:`describe_model`; the card's text (a peer's) is shown with its unprintable
    characters escaped and the file named through :func:`~swarmbase.tomlcheck.brief` (escaped, a long path
    cut), one line each."""
    from swarmbase.cli import printable

    options = ", ".join(f"{k}={v}" for k, v in sorted(d["options"].items())) or "default options"
    c, h, w = d["input_shape"]
    return "\n".join([
        f"{brief(d['file'])}: valid, format version {d['format_version']}, digest verified (sha256 {d['sha256'][:16]}...)",
        f"  model      {d['arch']} ({options}), {'pruned' if d['pruned'] else 'dense (not pruned)'}, "
        f"{d['parameters']:,} parameters",
        f"  classes    {d['num_classes']}: {printable(', '.join(d['class_names']))}",
        f"  input      {c} x {h} x {w} (channels x height x width)",
        f"  producer   {printable(d['producer']) or '(none)'}, round {d['round']}",
        f"  file       {d['bytes']:,} bytes",
    ])


def run_model_info(args: argparse.Namespace) -> int:
    from fol.checkpoint import DEFAULT_MAX_BYTES, load_model
    from swarmbase.cli import printable
    from fol.errors import CheckpointError, ConfigError

    max_bytes = DEFAULT_MAX_BYTES if args.max_bytes is None else args.max_bytes
    if problem := model_bytes_problem(max_bytes):
        raise ConfigError(f"--max-bytes: {problem}")
    failed = 0
    for path in args.files:
        try:
            loaded = load_model(path, max_bytes)
            size = os.stat(path).st_size
        except (CheckpointError, OSError) as exc:  # OSError: the file went away after loading
            failed += 1
            why = str(exc) if isinstance(exc, CheckpointError) else f"{brief(path)}: {exc.strerror or exc}"
            if args.json:
                print(json.dumps({"file": path, "valid": False, "error": why}, ensure_ascii=False), flush=True)
            else:
                sys.stdout.flush()  # in file order on a terminal
                print(f"fol model info: error: {printable(why)}", file=sys.stderr, flush=True)
            continue
        d = describe_model(path, loaded, size)
        del loaded
        print(json.dumps(d, ensure_ascii=False) if args.json else format_model(d), flush=True)
    return 2 if failed else 0


# --------------------------------------------------------------------- import


def _arch_options(args: argparse.Namespace, limits: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """The architecture options given (``--widths``, ``--hidden``, ``--blocks``), checked against the
    loader's limits (``limits``: option -> (largest value, most entries))."""
    from fol.errors import ConfigError

    options: dict[str, Any] = {}
    for name, least, many in (("widths", 1, True), ("hidden", 0, False), ("blocks", 1, False)):
        text = getattr(args, name)
        if text is None:
            continue
        largest, entries = limits[name]
        parts = text.split(",") if many else [text]
        expected = (f"{'whole numbers separated by commas' if many else 'a whole number'} from {least} to {largest}"
                    + (f", at most {entries}" if many else ""))
        try:
            values = [int(p.strip()) for p in parts]
        except ValueError:
            raise ConfigError(f"--{name} {brief(text)}: expected {expected}") from None
        if not all(least <= v <= largest for v in values) or len(values) > entries:
            raise ConfigError(f"--{name} {brief(text)}: expected {expected}")
        options[name] = values if many else values[0]
    return options


def run_model_import(args: argparse.Namespace) -> int:
    from fol.checkpoint import SPEC_LIMITS, ModelCard, import_state_dict
    from fol.errors import ConfigError
    from fol.fileio import check_output_file
    from fol.models import ModelSpec, arch_options, architectures, count_parameters
    from fol.nodedata import SPLIT_RULE, SPLIT_SEED_KEY

    # every argument and the output path before the weights are read
    recorded_path(args.weights, "", ConfigError, "the model card records it as UTF-8 text (imported_from)",
                  name_only=True)
    if args.arch not in architectures():
        raise ConfigError(f"--arch: unknown architecture {shown(args.arch)}; expected one of {', '.join(architectures())}")
    for option, name in (("--input-size", "input_size"), ("--in-channels", "in_channels")):
        value = getattr(args, name)
        if not 1 <= value <= SPEC_LIMITS[name]:
            raise ConfigError(f"{option}: expected 1..{SPEC_LIMITS[name]} (the loader's limit), got {shown(value)}")
    classes = [c.strip() for c in args.classes.split(",")]
    if len(classes) > SPEC_LIMITS["num_classes"]:
        raise ConfigError(f"--classes: {len(classes)} names, over the loader's limit of {SPEC_LIMITS['num_classes']}")
    if "" in classes:  # '' or ' ' quoted (shown): written as it is, the value was invisible ("--classes : ...")
        typed = brief(args.classes) if args.classes.strip() else shown(args.classes)
        raise ConfigError(f"--classes {typed}: expected non-empty names separated by commas")
    options = _arch_options(args, SPEC_LIMITS["options"])
    for name in options:
        if name not in arch_options(args.arch):
            raise ConfigError(f"--{name}: not an option of --arch {args.arch}, which takes "
                              + (", ".join(f"--{o}" for o in arch_options(args.arch)) or "none"))
    try:
        spec = ModelSpec(args.arch, num_classes=len(classes), in_channels=args.in_channels,
                         input_size=args.input_size, options=options)
        card = ModelCard(spec=spec, class_names=classes, round=0,
                         extra={"imported_from": Path(args.weights).name,
                                SPLIT_SEED_KEY: SPLIT_RULE})  # a new model: its node's data splits by the current rule
    except ConfigError as exc:
        raise ConfigError(f"--classes {brief(args.classes)}: {exc}") from None
    try:  # the card's check of the producer, said of the flag that gave it
        card = dataclasses.replace(card, producer=args.producer)
    except ConfigError as exc:
        raise ConfigError(f"--producer: {exc}") from None
    out = check_output_file(args.out, ConfigError, "--out")
    weights = Path(args.weights)
    if out.exists() and weights.exists() and os.path.samefile(out, weights):
        raise ConfigError(f"--out {brief(args.out)}: is the weights file itself; expected another file name "
                          f"(the state dict would be replaced)")
    try:  # check_output_file accepted a name in folders that do not exist yet: make them
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {brief(args.out)}: its folder cannot be created ({exc.strerror})") from None
    loaded = import_state_dict(weights, out, card, note=lambda line: print(f"note: {line}", flush=True))
    arch = spec.arch + (f" ({', '.join(f'{k}={v}' for k, v in options.items())})" if options else "")
    print(f"{brief(args.weights)} -> {brief(args.out)}: {arch}, {len(classes)} classes, "
          f"{spec.in_channels} x {spec.input_size} x {spec.input_size} input, "
          f"{count_parameters(loaded.model):,} parameters; loaded back and verified")
    return 0
