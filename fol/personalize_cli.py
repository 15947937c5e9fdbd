"""``fol personalize``: one FOL round on files.

Reads the node's model (safe format), its local data and a folder of received
neighbour models (none for ``--variant local``, which deploys the pretrained
model and reads no neighbour); writes the personalized model in the safe format,
``report.json`` (and a deployed ensemble) to ``--out`` with the manifest of those files
(:data:`MANIFEST`), and prints a summary table. The round run is
the one after the ``--model``'s (its card's ``round`` + 1), at most
``fol.rounds`` (E): a model of round E or later is refused.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any, Callable

from fol.defaults import MAX_BYTES_HELP, MAX_TOP_K
from fol.errors import ConfigError
from swarmbase.cli import path_argument, recorded_path, utf8_text
from swarmbase.manifest import OutputManifest, recorded_unchanged
from swarmbase.tomlcheck import brief, check_input_file

log = logging.getLogger(__name__)

MODEL_SUFFIX = ".safetensors"
#: Every file a run writes into ``--out`` besides its manifest: the model, the report and, for a deployed
#: ensemble (:func:`fol.personalize.save_ensemble`), ``ensemble.json`` and one ``member-<i>-<tag>.safetensors``
#: per member (a fresh ``<tag>`` each run). A run's set replaces the previous run's whole: a regular file of such
#: a name that the run does not write (the ensemble of an earlier ``fol-an`` run) is removed in the same swap
#: when the previous run's manifest lists it and it is unchanged; one no manifest vouches for (the user's own,
#: an output of a version before the manifest, one edited since) is kept and said so.
OUTPUT_FILES = ("model.safetensors", "report.json", "ensemble.json", "member-*.safetensors")
#: The most ensemble members a run writes (:data:`fol.defaults.MAX_TOP_K`, the bound of ``fol.top_k`` and
#: ``--top-k``): the next run reads its manifest, which lists each (about 140 bytes apiece), in at most 256 KiB.
MAX_MEMBERS = MAX_TOP_K
#: The record of the files a run wrote into ``--out``, each one's size and sha256 (:mod:`swarmbase.manifest`).
MANIFEST = OutputManifest("personalize.manifest.json", "fol personalize", OUTPUT_FILES, ConfigError,
                          max_bytes=256 * 1024, max_files=MAX_MEMBERS + 3)
#: Most skipped files (with their reasons) the "no usable neighbour model" error names (the warnings name each),
#: and the characters of each name (its last :data:`SHOWN_NAME_END` kept) and reason there: the line stays within
#: about SHOWN_REASONS * (SHOWN_NAME_CHARS + SHOWN_REASON_CHARS + 4) characters and the --neighbors folder.
#: The "holds no model file" error names as many entries of the folder, each name cut the same way.
SHOWN_REASONS = 5
SHOWN_NAME_CHARS = 60
SHOWN_NAME_END = 20
SHOWN_REASON_CHARS = 120


def add_personalize_parser(sub: argparse._SubParsersAction) -> None:
    from fol.nodedata import add_node_data_arguments
    from fol.variants import ALL_VARIANTS, PRESET_NAMES

    p = sub.add_parser("personalize", help="personalize a node's model with the neighbour models in a folder (one FOL round)")
    p.add_argument("--model", type=path_argument, required=True, help="the node's current model (.safetensors, safe format)")
    add_node_data_arguments(p)
    p.add_argument("--neighbors", "--neighbours", dest="neighbors", type=path_argument, default=None,
                   help="folder of received neighbour models (required, except by --variant local, which reads none)")
    p.add_argument("--out", type=path_argument, required=True,
                   help="output folder (model.safetensors, report.json; a deployed ensemble's ensemble.json and "
                        "member-*.safetensors); the previous run's outputs this run does not write are removed, "
                        f"unless changed since: {MANIFEST.name} records them")
    p.add_argument("--variant", default="fol", choices=ALL_VARIANTS, help="what to deploy (default: %(default)s)")
    p.add_argument("--top-k", type=int, default=None, help="ensemble size K (overrides the config)")
    p.add_argument("--config", type=path_argument, default=None, help="TOML file with a [fol] table of hyperparameters")
    p.add_argument("--preset", default=None, choices=PRESET_NAMES,
                   help="FOL options preset the config applies on (default: the config's 'preset' key, else 'default'; "
                        "'paper' = the paper's equations)")
    p.add_argument("--max-bytes", type=int, default=None, help=MAX_BYTES_HELP)
    p.set_defaults(func=run_personalize)


def scan_neighbours(folder: Path, max_bytes: int | None = None, usable: Callable[[Any], str | None] | None = None,
                    limit: int | None = None, own_sha256: str | None = None) -> tuple[list[Any], list[dict[str, str]]]:
    """Load every model file of ``folder`` through the safe loader.

    Returns ``(received, skipped)``: the usable models and, for every other
    file, its name and the reason it was skipped. Raises when the folder does
    not exist or holds no model file (hidden entries aside; sub-folders are not
    read). Files are read in name order; once
    ``limit`` of them pass ``usable`` (a reason, or None when the node can use
    the model), the later model files are listed as skipped without being read,
    so that a folder of many models costs no more than the round takes (Q).
    A model that ``usable`` refuses is returned for its card only: its tensors
    are moved to the ``meta`` device (no memory). Each model is used once, as
    the node agent's inbox keeps it: a file whose card ``sha256`` (over the
    card and the tensors) an earlier file had, or the node's own model
    (``own_sha256``), is skipped. A model is named by its file's name without
    the suffix, bytes that are not UTF-8 escaped (:func:`swarmbase.cli.utf8_text`);
    a file whose name is then that of a model read before it is skipped unread,
    so that each name in the round and its report is one model.
    """
    received, skipped = _scan_files(folder, max_bytes, usable, limit, own_sha256)
    return [item for item, _ in received], [item for item, _ in skipped]


def neighbour_entries(folder: Path) -> list[Path]:
    """The entries of a neighbours folder, hidden ones aside, in name order, when it holds a model file
    (``*.safetensors``): else :class:`~fol.errors.DataError`, one line saying the folder is missing, cannot
    be listed, is empty or holds no model file (naming what it holds). Only the folder is listed: checked
    by ``fol personalize`` before the node's data is read, and again by :func:`scan_neighbours`."""
    from fol.errors import DataError

    if not folder.is_dir():
        raise DataError(f"neighbours folder {brief(folder)} does not exist or is not a folder")
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        raise DataError(f"neighbours folder {brief(folder)} cannot be listed ({exc.strerror or exc})") from None
    if not entries:
        raise DataError(f"neighbours folder {brief(folder)} is empty; expected received models (*{MODEL_SUFFIX})")
    if not any(p.suffix == MODEL_SUFFIX for p in entries):  # sidecar cards, notes, sub-folders: say what is there
        # each name as the "no usable neighbour model" line names a file: escaped, cut past SHOWN_NAME_CHARS
        shown = [brief(p.name, SHOWN_NAME_CHARS, keep_end=SHOWN_NAME_END)
                 + ("/ (sub-folders are not read)" if p.is_dir() else "") for p in entries[:SHOWN_REASONS]]
        more = len(entries) - SHOWN_REASONS
        raise DataError(f"neighbours folder {brief(folder)} holds no model file (*{MODEL_SUFFIX}), only "
                        f"{', '.join(shown)}{f' and {more} more' if more > 0 else ''}; put the received models in it")
    return entries


def _scan_files(folder: Path, max_bytes: int | None, usable: Callable[[Any], str | None] | None, limit: int | None,
                own_sha256: str | None) -> tuple[list[tuple[Any, str]], list[tuple[dict[str, str], str]]]:
    """:func:`scan_neighbours`' models and skipped files, each beside its file's name in the folder, as the
    file system gives it (bytes that are not UTF-8 as lone surrogates): for messages only (:func:`brief`
    escapes each character once), never for the report, which records the escaped name."""
    from fol.checkpoint import DEFAULT_MAX_BYTES, load_model
    from fol.errors import CheckpointError
    from fol.personalize import Received

    entries = neighbour_entries(folder)
    received, skipped = [], []
    n_usable = 0
    seen: dict[str, str] = {}  # sha256 -> the file first read with it
    named: set[str] = set()  # the names of the models received: each names one model in the round and its report
    for path in entries:
        # the file's name as text: bytes that are not UTF-8 (lone surrogates in the name Python gives) escaped,
        # as the round's seeds hash the name, and the report and the ensemble write it, as UTF-8
        name = utf8_text(path.name)

        def skip(reason: str) -> None:
            skipped.append(({"file": name, "reason": reason}, path.name))

        if not path.is_file():
            if path.suffix == MODEL_SUFFIX:  # a folder, broken link or link loop named like a model: listed
                skip("not a regular file (a folder, a broken link or a link loop), expected a model file")
            continue
        if path.suffix != MODEL_SUFFIX:
            if path.suffix != ".json":  # sidecar cards are expected next to models
                skip(f"not a model file (expected *{MODEL_SUFFIX})")
            continue
        if limit is not None and n_usable >= limit:
            skip(f"not read: the per-round limit Q = {limit} was reached by files earlier in name order")
            continue
        if name.removesuffix(MODEL_SUFFIX) in named:  # b'\xff' and a name written '\udcff': one name once escaped
            skip("not read: its name, with the bytes that are not UTF-8 escaped, is that of a model read before "
                 "it; rename one of them")
            continue
        try:  # named by its name in the folder, given once: the reason is what follows
            loaded = load_model(path, max_bytes=max_bytes or DEFAULT_MAX_BYTES, source=name)
        except CheckpointError as exc:  # the loader names it through brief (escaped, cut when long)
            skip(str(exc).removeprefix(f"{brief(name)}: "))
            continue
        sha = loaded.card.sha256
        if sha == own_sha256 or sha in seen:
            skip("the node's own model (--model), not a neighbour's" if sha == own_sha256
                 else f"the same model as {seen[sha]} (equal sha256), used once")
            continue
        seen[sha] = name
        item = Received(name=name.removesuffix(MODEL_SUFFIX), model=loaded.model, card=loaded.card)
        received.append((item, path.name))
        named.add(item.name)
        if usable is None or usable(item) is None:
            n_usable += 1
        else:  # kept for its card (the report says why it is unused); its weights are let go, so that
            item.model.to("meta")  # a folder of many unusable models does not pile up in memory
    return received, skipped


def _replaced_output(out: Path, model: Path, writes: list[str], record: dict[str, Any] | None) -> str | None:
    """The name of the file of ``out`` that ``model`` is (itself, a link or a hard link)
    among those a run replaces or removes there: one it ``writes`` (``model.safetensors``),
    or an earlier output the previous run's manifest (``record``) lists unchanged (a member
    of its ensemble); else None. Only the file that is the model is compared with the record."""
    import os

    if not (out.is_dir() and model.is_file()):
        return None
    for pattern in OUTPUT_FILES:
        for path in sorted(out.glob(pattern)):
            try:
                same = path.is_file() and os.path.samefile(path, model)
            except OSError:  # vanished or unreadable: not the model
                continue
            if same and (path.name in writes or recorded_unchanged(record, path)):
                return path.name
    return None


def run_personalize(args: argparse.Namespace) -> int:
    from fol.checkpoint import DEFAULT_MAX_BYTES, ModelCard, load_model, model_to_bytes
    from fol.config import FOLConfig
    from fol.defaults import model_bytes_problem
    from fol.errors import CheckpointError, DataError
    from fol.nodedata import (SPLIT_SEED_KEY, load_node_data, parse_node_data, pretraining_spec,
                              recorded_split_rule, split_fields)
    from fol.fileio import atomic_write_bytes, check_input_dir, check_output_dir, check_output_file, staged_outputs, write_json_atomic
    from fol.personalize import NodeState, check_received, personalize, save_ensemble
    from fol.stages import finetune_freeze_problem

    if args.top_k is not None and args.top_k < 1:  # named as typed, not as the field it overrides (fol.top_k)
        raise ConfigError(f"--top-k: expected an ensemble size K >= 1, got {args.top_k}")
    if args.config:  # a file that cannot be read is said of the option, as --out's and --neighbors' are
        check_input_file(args.config, ConfigError, "FOL config file", option="--config")
    cfg = FOLConfig.from_toml(args.config, preset=args.preset) if args.config else FOLConfig.preset(args.preset or "default")
    if args.top_k is not None:
        try:
            cfg = cfg.replace(top_k=args.top_k)
        except ConfigError as exc:  # FOLConfig's message names the field: said of the flag
            raise ConfigError(f"--top-k: {str(exc).removeprefix('fol.top_k ')}") from None
    cfg.for_one_round_per_call(brief(args.config) if args.config else "fol personalize")
    if args.max_bytes is not None and (problem := model_bytes_problem(args.max_bytes)):
        raise ConfigError(f"--max-bytes: {problem}")
    ensemble_variant = args.variant in ("fol-a", "fol-an")  # at most MAX_MEMBERS members: fol.top_k's bound
    # what the new model's card records as typed (a card is UTF-8 text): --data, read back by the next round's
    # check of the shard, and --model's file name; a path of bytes that are not UTF-8 is refused before any work
    recorded_path(args.data, "--data", ConfigError, "the model card records the spec as UTF-8 text")
    recorded_path(args.model, "--model", ConfigError, "the new model's card records it as UTF-8 text "
                                                      "(personalized_from)", name_only=True)
    data_spec = parse_node_data(args.data, root=args.data_root)  # and --data-root, before the model is read
    out = check_output_dir(args.out, ConfigError, what="--out")  # before the round, not after it
    writes = ["model.safetensors", "report.json", MANIFEST.name] + (["ensemble.json"] if ensemble_variant else [])
    record = None  # the previous run's manifest: which files in --out it wrote
    if out.is_dir():  # the files the round writes there: not folders; the manifest, read as untrusted input
        for name in writes:
            check_output_file(out / name, ConfigError, "--out")
        record = MANIFEST.read(out)
    if args.neighbors is None and args.variant != "local":
        raise ConfigError(f"--neighbors: required by --variant {args.variant} (the folder of received neighbour "
                          f"models); only --variant local reads none")
    if args.variant == "local" and args.neighbors is not None:  # deploys the pretrained model: nothing collected
        log.info("--variant local reads no neighbour model; --neighbors %s is not read", brief(args.neighbors))
    neighbours = None if args.variant == "local" else Path(args.neighbors)
    if neighbours is not None:  # a mistyped folder: said before the model and the data are read
        check_input_dir(neighbours, DataError, "--neighbors")
    if neighbours is not None and out.is_dir() and out.samefile(neighbours):  # a symlink or "x/." is the same folder
        raise ConfigError(f"--out {brief(out)}: is the --neighbors folder; the round's outputs (its model, its ensemble "
                          f"members) would be read as neighbour models by the next run; give --out another folder")
    replaced = _replaced_output(out, Path(args.model), writes, record)
    if replaced is not None:  # the round's outputs would take the place of its input
        raise ConfigError(f"--model {brief(args.model)}: is {brief(replaced)} in --out {brief(out)}, which this run "
                          f"replaces or removes; copy it elsewhere or give another --out")
    check_input_file(args.model, CheckpointError, "model file", option="--model")  # said of the option, as above
    own = load_model(Path(args.model), max_bytes=args.max_bytes or DEFAULT_MAX_BYTES)
    if own.card.round >= cfg.rounds:  # E is the last round, as on the node agent: fol.rounds is not ignored here
        where = f"in {brief(args.config)}" if args.config else "the default, no --config"
        raise ConfigError(f"--model {brief(args.model)}: is the model of round {own.card.round}, and fol.rounds = {cfg.rounds} "
                          f"({where}) is the last FOL round: all {cfg.rounds} round(s) are done; set a larger rounds "
                          f"in the [fol] table of --config to run round {own.card.round + 1}")
    trained_on = own.card.extra.get("data")  # the --data of `fol pretrain`, kept by every round since
    earlier = pretraining_spec(trained_on)
    if earlier is not None and split_fields(earlier) != split_fields(data_spec):
        # both cut (brief): the card's may be any text up to the card's limit (256 KiB), a line of that size
        raise DataError(f"{brief(args.model)}: pretrained on --data {brief(trained_on)}, but --data {brief(args.data)} gives "
                        f"another shard or split, whose validation and test images may be ones the model trained on; "
                        f"give the spec it was pretrained on")
    # the split the model was trained on: the rule its card records (none: S + K, a model made before)
    rule = recorded_split_rule(own.card.extra, brief(args.model))
    if neighbours is not None:  # a folder without a model file: said before the node's data is read
        neighbour_entries(neighbours)
    node = load_node_data(data_spec, rule=rule)
    shape = list(node.train.images.shape[1:])
    if list(own.card.class_names) != list(node.train.class_names):
        raise DataError(f"{brief(args.model)}: model classes {own.card.class_names} differ from the data's {node.train.class_names}")
    if list(own.card.input_shape) != shape:
        raise DataError(f"{brief(args.model)}: model input shape {own.card.input_shape} differs from the data's {shape}")

    name = own.card.producer or data_spec.node_name
    state = NodeState.from_pretrained(name, own.model, own.card.spec, own.card.class_names, node)
    # each beside its file's name as the folder gives it, which the messages escape once (brief)
    received_files, skipped_files = ([], []) if neighbours is None else _scan_files(
        neighbours, args.max_bytes, lambda r: check_received(state, r), cfg.max_neighbours, own.card.sha256)
    received, skipped = [r for r, _ in received_files], [s for s, _ in skipped_files]
    for item, file in skipped_files:  # the name as every message shows it (brief), the report's is escaped text
        log.warning("skipping %s: %s", brief(file), item["reason"])
    usable_files = [(r, file) for r, file in received_files if check_received(state, r) is None]
    usable = [r for r, _ in usable_files]
    if args.variant != "local" and not usable:
        every = ([(file, s["reason"]) for s, file in skipped_files]  # and the models this node cannot use
                 + [(file, check_received(state, r)) for r, file in received_files])
        more = len(every) - SHOWN_REASONS  # a folder of many bad files, long names or reasons: the line stays readable
        reasons = "; ".join(f"{brief(file, SHOWN_NAME_CHARS, keep_end=SHOWN_NAME_END)}: "
                            f"{brief(reason, SHOWN_REASON_CHARS)}" for file, reason in every[:SHOWN_REASONS])
        reasons = reasons + (f"; and {more} more file(s)" if more > 0 else "") or "none"
        raise DataError(f"no usable neighbour model in {brief(args.neighbors)} (skipped: {reasons})")
    if args.variant != "local" and (problem := finetune_freeze_problem(
            cfg.finetune_freeze, {brief(file, SHOWN_NAME_CHARS, keep_end=SHOWN_NAME_END): r.model
                                  for r, file in usable_files},
            "the usable neighbour model")):
        raise ConfigError(f"{brief(args.config)}: {problem}" if args.config else problem)  # before any training
    round_ = own.card.round + 1
    report = personalize(state, received, round_, cfg, args.variant, progress=True)

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {brief(out)}: cannot be created ({exc.strerror})") from None
    card = ModelCard(
        spec=own.card.spec, class_names=list(state.class_names), input_shape=shape, producer=name, round=round_,
        extra={"variant": args.variant, "personalized_from": Path(args.model).name,
               "data": trained_on if earlier is not None else args.data, SPLIT_SEED_KEY: rule},
    )
    files = {"model": "model.safetensors"}
    with_ensemble = ensemble_variant and not report.kept_local
    if with_ensemble:
        files["ensemble"] = "ensemble.json"
    full = {
        "node": name, "variant": args.variant, "round": round_, "config": cfg.to_dict(),
        "skipped_files": skipped, "outputs": files, **report.to_dict(),
    }
    data = model_to_bytes(state.current_model, card, source=str(out / files["model"]))  # checked as loaded
    # The whole set goes to a staging folder inside --out and is swapped in together, taking with it
    # the previous run's outputs this run does not write (an ensemble) that its manifest lists unchanged,
    # asked again at the swap: an error or Ctrl-C while writing leaves --out with its previous outputs.
    earlier = MANIFEST.earlier_outputs(out, [*files.values(), "report.json", MANIFEST.name], record)
    removed: list[Path] = []  # what the swap removed
    writing: str | None = files["model"]  # the output being written, for the error
    try:
        with staged_outputs(out, replaces=earlier.replaces, removed=removed, removable=earlier.unchanged) as stage:
            atomic_write_bytes(stage / files["model"], data)
            writing = "report.json"
            write_json_atomic(stage / "report.json", full)
            if with_ensemble:
                writing = "ensemble.json"
                save_ensemble(stage, state, report, received)
            writing = MANIFEST.name
            MANIFEST.write(stage / MANIFEST.name, sorted(stage.iterdir()),  # the set: nothing else is staged
                           shown=out / MANIFEST.name)
            writing = None
    except OSError as exc:
        if writing is None:  # the swap: os.replace names the staged file, then its target
            writing = Path(exc.filename2 or exc.filename or out).name
        raise ConfigError(f"--out {brief(out)}: cannot write {brief(writing)} ({exc.strerror or exc})") from None
    print(format_summary(full))
    print(f"\nwrote {brief(out / files['model'])}" + (f" and {brief(out / 'ensemble.json')}" if "ensemble" in files
                                                      else "") + f"; report: {brief(out / 'report.json')}")
    for line in earlier.lines(removed):
        print(line)
    return 0


def format_summary(report: dict[str, Any]) -> str:
    """Human-readable table of a personalization report. Names come from files and peers'
    cards (a neighbour's file name, its producer, a skip reason quoting its card): every line
    is shown through :func:`swarmbase.cli.printable`, so none can split a row or reach the
    terminal as an escape."""
    from swarmbase.cli import printable

    lines = [f"FOL round {report['round']} on {report['node']} (variant {report['variant']})", ""]
    header = f"{'candidate':<28} {'arch':<20} {'val before':>10} {'val after':>9} {'params':>19} {'MACs':>21} {'weight':>7}"
    lines += [header, "-" * len(header)]
    weights = dict(zip(report.get("selected", []), report.get("weights", [])))
    for c in report.get("candidates", []):
        w = weights.get(c["name"])
        before = "-" if c["score_before"] is None else f"{100 * c['score_before']:.1f}"
        lines.append(
            f"{c['name'][:28]:<28} {c['arch'] or 'own':<20} {before:>10} {100 * c['score_after']:>9.1f} "
            f"{c['params_before']:>9,}->{c['params_after']:<9,} {c['macs_before']:>10,}->{c['macs_after']:<10,} "
            f"{'' if w is None else f'{w:.3f}':>7}"
        )
    for s in report.get("received", []):
        if not s["used"]:
            lines.append(f"  skipped {s['name']}: {s['reason']}")
    for s in report.get("skipped_files", []):
        lines.append(f"  skipped file {s['file']}: {s['reason']}")
    acc = report.get("accuracy", {})
    lines.append("")
    for key in ("local", "student", "ensemble", "deployed"):
        if key in acc:
            lines.append(f"{key:<10} val {100 * acc[key]['val']:5.1f} %   test {100 * acc[key]['test']:5.1f} %")
    transfer = report.get("transfer") or {}
    if transfer:
        share = {k: "undefined (ensemble gain ~0)" if v is None else f"{100 * v:.0f} %" for k, v in transfer.items()}
        lines.append(f"transfer (student's share of the ensemble's gain over local): val {share.get('val')}, "
                     f"test {share.get('test')}")
    secs = report.get("seconds", {})
    if secs:
        lines.append("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in secs.items()))
    return "\n".join(printable(line) for line in lines)
