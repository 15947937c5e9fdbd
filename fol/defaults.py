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

``IMAGE_FOLDER_COORDS`` are the places an image folder's coordinates can come
from (``load_image_folder``'s ``coords``, a scenario's ``data.coords``,
``fol data info --coords``). ``check_bands`` and ``check_scale`` check the
options that read a multispectral TIFF's bands (``load_image_folder``'s
``bands`` and ``scale``, ``--data ...,bands=4+3+2``, a scenario's ``data.bands``).

>>> DEFAULT_ARCH
'cnn-medium'
"""

import unicodedata

from fol.errors import ConfigError
from swarmbase.tomlcheck import shown

DEFAULT_ARCH = "cnn-medium"

MAX_SEED = 2**32 - 1

MAX_ITERATIONS = 100_000


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


__all__ = ["DEFAULT_ARCH", "MAX_SEED", "is_seed", "MAX_ITERATIONS", "too_many", "class_name", "IMAGE_FOLDER_COORDS",
           "MAX_TIFF_BANDS", "check_bands", "check_scale", "bands_from_text"]
