"""Default names shared by the library and the command line, in a module light
enough for ``fol --help`` (no torch import).

``DEFAULT_ARCH`` is the architecture used wherever none is named: the CLI's
``--arch``, scenario files without ``[models] archs``, the demo, the node
agent's loopback set-up and the benchmarks. It was chosen by measurement with
``benchmarks/model_zoo.py``: the cheapest architecture of the zoo (fewest
multiply-accumulates) that fits pooled data (>= 98 % training accuracy) on
both synthetic tasks and on a task whose class depends on where a pattern is
in the image, and whose FOL round on one node stays under 30 s on 2 CPU
cores (``benchmarks/fol_node_time.py``). ``cnn-small`` remains available by
name; it cannot fit the position task (its receptive field is too small for
its global average pooling to keep where things are).

``MAX_SEED`` is the largest seed a user may give (a scenario's ``seeds``,
``--data seed=``, ``--init-seed``): the data generators use a seed's low 32
bits only, and a larger one overflows torch's 64-bit generator seed once a
node index is mixed in.

``class_name`` is the one rule for comparing class names: Unicode NFC, so that
a class folder 'café' that macOS keeps decomposed (NFD) and Linux as typed (NFC)
names one class wherever models and data meet.

``MAX_ITERATIONS`` is the largest count of iterations a user may give: every
epoch, step, round, copy and patience count of ``FOLConfig``, ``TrainConfig``,
``PruneConfig`` and the baselines' options, and ``fol pretrain --epochs``. A
larger value would only make a run loop for ages (10**12 epochs), and a 20-digit
one ended in an OverflowError traceback from the progress bar or ``range``.

``MAX_ROUND`` is the largest FOL round a model card may name (the loader's
check of a card) and an agent's OFFER may name (``fol.agent.protocol``): a
round is one model exchange, and no run has more than ``MAX_ITERATIONS``
rounds; a card of round 10**4000 was written whole into ``fol personalize``'s
"is the model of round N" refusal.

``IMAGE_FOLDER_COORDS`` are the places an image folder's coordinates can come
from (``load_image_folder``'s ``coords``, a scenario's ``data.coords``,
``fol data info --coords``). ``check_bands`` and ``check_scale`` check the
options that read a multispectral TIFF's bands (``load_image_folder``'s
``bands`` and ``scale``, ``--data ...,bands=4+3+2``, a scenario's ``data.bands``);
``check_band_options`` is the one rule of which of them go together, with the
dataset and ``coords``, that all four of those front ends apply.

``SYNTHETIC_DATASETS`` are the datasets generated from no file
(:mod:`fol.data.registry`); ``check_data_root`` is the one rule refusing a data
root given with one (``--data-root``, a node agent's ``node.data_root``), which
:func:`fol.nodedata.parse_node_data` and ``fol data info`` apply before any data
is read.

>>> DEFAULT_ARCH
'cnn-medium'
"""

import unicodedata

from fol.errors import ConfigError
from swarmbase.tomlcheck import shown

DEFAULT_ARCH = "cnn-medium"

MAX_SEED = 2**32 - 1

MAX_ITERATIONS = 100_000

MAX_ROUND = 1_000_000

#: The largest ensemble size K (``fol.top_k``, ``fol personalize --top-k``): an ensemble holds and runs K
#: models, and ``fol personalize`` lists each member it writes in a manifest of at most 256 KiB
#: (:data:`fol.personalize_cli.MAX_MEMBERS`).
MAX_TOP_K = 1024

#: The largest Q (``fol.max_neighbours``), the neighbour models a node takes per round, each loaded into
#: memory and aligned (fine-tuned, pruned, scored) for the Top-K: the node agent's round, which waits for
#: min(peers, Q) models unless ``[trigger] models`` says otherwise, waits for at most as many as that
#: field may ask (:data:`fol.agent.config.TRIGGER_MAXIMA`, this bound), and the ensemble holds at most
#: :data:`MAX_TOP_K` (the same number) of them. A larger Q takes no more models (a node has only so many
#: senders) and is a typo.
MAX_NEIGHBOURS = 1024

#: Largest model file (bytes) accepted by default (:data:`fol.checkpoint.DEFAULT_MAX_BYTES`, the node agent's
#: ``[limits] max_payload_bytes``): 200 MB. ResNet-18 in float32 is about 45 MB, the other architectures of the
#: zoo are far smaller. Here, without torch: the commands' help and the agent's config reader name it.
DEFAULT_MAX_BYTES = 200 * 1000 * 1000

#: The largest model file a command may be told to accept (``fol personalize --max-bytes``, ``fol model info
#: --max-bytes``), as the node agent's ``[limits] max_payload_bytes`` (the same meaning: a model is read whole
#: into memory to be checked): 4 GB, 20 times the default (:data:`fol.checkpoint.DEFAULT_MAX_BYTES`).
MAX_MODEL_BYTES = 4 * 1000 * 1000 * 1000
#: The help of those commands' ``--max-bytes``.
MAX_BYTES_HELP = (f"largest model file accepted (bytes; default {DEFAULT_MAX_BYTES:,}, at most {MAX_MODEL_BYTES:,} "
                  "as the node agent's [limits] max_payload_bytes)")


def model_bytes_problem(value: int) -> str | None:
    """Why ``value`` cannot be the largest model file accepted (``--max-bytes``), or None.

    >>> model_bytes_problem(200_000_000) is None, model_bytes_problem(0)
    (True, 'expected a number of bytes in 1..4,000,000,000 (4 GB), got 0')
    """
    if 1 <= value <= MAX_MODEL_BYTES:
        return None
    return f"expected a number of bytes in 1..{MAX_MODEL_BYTES:,} (4 GB), got {shown(value)}"


def too_many(name: str, value: object) -> str:
    """The message refusing ``value`` of the count ``name`` above :data:`MAX_ITERATIONS`.

    >>> too_many("distill_epochs", 10**19)
    'distill_epochs must be at most 100,000, got 10000000000000000000'
    """
    return f"{name} must be at most {MAX_ITERATIONS:,}, got {shown(value)}"


def is_seed(value: object) -> bool:
    """Whether ``value`` is a seed a user may give: an integer (not a bool) in 0..``MAX_SEED``.

    >>> is_seed(0), is_seed(-1), is_seed(2**32), is_seed(True)
    (True, False, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED

def class_name(name: str) -> str:
    """A class name as the toolkit keeps it: in Unicode normal form NFC (ASCII names are
    unchanged). Applied where class names come in (image-folder names, a
    ``GeoDataset``'s ``class_names``, a model card's ``class_names``), so that every
    comparison of class lists is one of NFC names.

    >>> class_name("cafe\u0301") == "caf\u00e9", class_name("no_fire")
    (True, 'no_fire')
    """
    return unicodedata.normalize("NFC", name)


#: ``"none"`` (NaN), ``"filename"`` (``<lon>,<lat>.<ext>``), ``"csv"`` (``<folder>/coords.csv``),
#: ``"exif"`` (each image's EXIF GPS tags) or ``"geotiff"`` (a GeoTIFF's centre).
IMAGE_FOLDER_COORDS = ("none", "filename", "csv", "exif", "geotiff")

#: Most bands (samples per pixel) a TIFF read with ``bands`` may have: Sentinel-2 has 13,
#: Landsat 8/9 11; a file declaring more is refused from its header, before it is decoded.
MAX_TIFF_BANDS = 64


def check_bands(bands: object, where: str = "bands") -> tuple[int, int, int]:
    """``bands`` as three 1-based band numbers (the model's red, green and blue input
    channels), each in 1..:data:`MAX_TIFF_BANDS`; a :class:`~fol.errors.ConfigError`
    naming ``where`` otherwise.

    >>> check_bands([12, 11, 9])
    (12, 11, 9)
    """
    ok = (isinstance(bands, (list, tuple)) and len(bands) == 3
          and all(isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= MAX_TIFF_BANDS
                  for b in bands))
    if not ok:
        raise ConfigError(f"{where}: expected three band numbers in 1..{MAX_TIFF_BANDS} (1-based, for the model's "
                          f"3 input channels, e.g. 4, 3, 2), got {shown(bands)}")
    return tuple(int(b) for b in bands)  # type: ignore[return-value]


def check_scale(scale: object, where: str = "scale") -> float:
    """``scale`` as a finite number > 0 (what a band's values are divided by); a
    :class:`~fol.errors.ConfigError` naming ``where`` otherwise."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < float("inf"):
        raise ConfigError(f"{where}: expected a finite number > 0 (a band's values are divided by it and clipped "
                          f"to [0, 1], e.g. 10000 for Sentinel-2 reflectances), got {shown(scale)}")
    return float(scale)


def bands_from_text(text: str, sep: str, where: str) -> tuple[int, int, int]:
    """:func:`check_bands` of ``text``, band numbers separated by ``sep`` (``4+3+2`` in a
    ``--data`` spec, whose pairs ``,`` separates; ``4,3,2`` after ``fol data info --bands``).

    >>> bands_from_text("12+11+9", "+", "--data")
    (12, 11, 9)
    """
    try:
        numbers: object = [int(p) for p in text.split(sep)]
    except ValueError:
        numbers = None
    try:
        return check_bands(numbers, where)
    except ConfigError:
        return check_bands(text, where)  # refused, naming the text as given


def check_band_options(dataset: str, bands: object, scale: object, coords: str | None = None, *,
                       names: dict[str, str], where: str = "", sep: str | None = None
                       ) -> tuple[tuple[int, int, int] | None, float | None]:
    """The one rule for the options that read a multispectral TIFF's bands, whichever front
    end gives them (the loader's keywords, a ``--data`` spec, ``fol data info``, a scenario's
    ``[data]``): ``(bands, scale)`` checked (each None when not given), or a
    :class:`~fol.errors.ConfigError` of one line. In this order: ``bands`` and ``scale`` only
    with dataset ``imagefolder``; ``scale`` only with ``bands``; ``coords = 'exif'`` not with
    ``bands`` (EXIF tags are read as Pillow opens an image); ``bands`` by :func:`check_bands`
    (text, as typed, split at ``sep`` when ``sep`` is given); ``scale`` by :func:`check_scale`.

    ``names`` says how the front end names ``"bands"``, ``"scale"`` and ``"coords"`` (its
    fields: ``data.bands``, ``--bands``, ``bands=`` of a spec) and ``"dataset"`` (how it names
    the ``imagefolder`` dataset: ``dataset=imagefolder``, ``imagefolder:PATH``); ``where``, when
    given, comes first (a spec: ``--data``). A field named ``key=`` is a spec's pair: the line
    names it as ``key=`` (its value too where the value is refused), not ``key=:``.

    >>> names = {"dataset": "dataset=imagefolder", "bands": "bands=", "scale": "scale=", "coords": "coords="}
    >>> check_band_options("imagefolder", "4+3+2", 10000.0, names=names, where="--data", sep="+")
    ((4, 3, 2), 10000.0)
    >>> check_band_options("cifar10", None, 10000.0, names=names, where="--data")
    Traceback (most recent call last):
    ...
    fol.errors.ConfigError: --data: scale= only applies to dataset=imagefolder (a folder of multispectral TIFFs), not 'cifar10'
    """
    def field(key: str, value: str | None = None) -> str:  # the line's start naming one field
        name = names[key]
        if name.endswith("="):
            name += value if value is not None else ""
        head = f"{where}: {name}" if where else name
        return head if name.endswith("=") or value is not None else f"{head}:"

    if (bands is not None or scale is not None) and dataset != "imagefolder":
        raise ConfigError(f"{field('bands' if bands is not None else 'scale')} only applies to {names['dataset']} "
                          f"(a folder of multispectral TIFFs), not {shown(dataset)}")
    if bands is None:
        if scale is not None:
            raise ConfigError(f"{field('scale')} only applies with {names['bands']} (the bands of TIFFs read "
                              f"with tifffile)")
        return None, None
    if coords == "exif":
        raise ConfigError(f"{field('coords')} 'exif' is read as Pillow opens an image, not with {names['bands']} "
                          f"(TIFFs read with tifffile); give the places of a folder read with {names['bands']} by "
                          f"'geotiff', 'csv' or 'filename'")
    if isinstance(bands, str) and sep is not None:
        checked = bands_from_text(bands, sep, field("bands", bands.strip()))
    else:
        checked = check_bands(bands, field("bands", shown(bands)))
    if scale is None:
        return checked, None
    return checked, check_scale(scale, field("scale", f"{scale:g}" if isinstance(scale, float) else shown(scale)))


#: The datasets generated from no file (:mod:`fol.data.registry`'s ``synthetic-*`` names), known without torch.
SYNTHETIC_DATASETS = ("synthetic-wildfire", "synthetic-hurricane", "synthetic-wildfire-types",
                      "synthetic-hurricane-types")


def check_data_root(name: str, root: object, where: str = "--data-root") -> None:
    """A data root given on the command line (``--data-root``) or in a node agent's config (``where``:
    ``<file>: node.data_root``) with dataset ``name`` that reads no file
    (:data:`SYNTHETIC_DATASETS`, generated): refused in one line, as ``--coords``, ``--splits`` and ``--bands`` are
    where they do not apply (a file, ``/dev/null`` or a FIFO was taken and ignored). The one check of every
    front end, before any data is read: :func:`fol.nodedata.parse_node_data` (``fol pretrain``, ``fol
    personalize``, the node agent) and ``fol data info``. ``FOL_DATA_ROOT``, a default of every run, is not
    checked; a scenario's ``data.root`` has its own rule (:mod:`fol.simulation.scenario`).

    >>> check_data_root("wildfire", "/data"), check_data_root("synthetic-wildfire", None)
    (None, None)
    >>> check_data_root("synthetic-wildfire", "/data")
    Traceback (most recent call last):
    ...
    fol.errors.ConfigError: --data-root: only applies to datasets read from files (a real dataset's <root>/<name>/, an imagefolder path relative to it), not 'synthetic-wildfire', which is generated from no folder
    """
    if root is not None and name in SYNTHETIC_DATASETS:
        raise ConfigError(f"{where}: only applies to datasets read from files (a real dataset's <root>/<name>/, an "
                          f"imagefolder path relative to it), not {shown(name)}, which is generated from no folder")


__all__ = ["DEFAULT_ARCH", "DEFAULT_MAX_BYTES", "MAX_SEED", "is_seed", "MAX_ITERATIONS", "MAX_ROUND", "MAX_TOP_K", "MAX_NEIGHBOURS", "MAX_MODEL_BYTES", "MAX_BYTES_HELP", "model_bytes_problem", "too_many", "class_name", "IMAGE_FOLDER_COORDS",
           "MAX_TIFF_BANDS", "check_bands", "check_scale", "bands_from_text",
           "check_band_options", "SYNTHETIC_DATASETS", "check_data_root"]
