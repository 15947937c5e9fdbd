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
``fol data info --coords``).

>>> DEFAULT_ARCH
'cnn-medium'
"""

import unicodedata

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

__all__ = ["DEFAULT_ARCH", "MAX_SEED", "is_seed", "MAX_ITERATIONS", "too_many", "class_name", "IMAGE_FOLDER_COORDS"]
