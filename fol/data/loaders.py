"""Loaders for real datasets in their published folder layouts.

Every loader returns a :class:`~fol.data.geo.GeoDataset` with images resized
to ``image_size`` x ``image_size`` (bilinear, RGB, float32 in [0, 1]). A
missing dataset raises :class:`~fol.errors.DataError` saying where to put it;
an unreadable image raises one naming the file (or, with ``skip_corrupt=True``,
is skipped with a logged warning that counts and names the skipped files).

Where data lives: ``datasets/<name>/`` under the data root, which is

1. the ``root`` argument of :func:`fol.data.registry.load_dataset` (the CLI's
   ``--data-root``), else
2. the environment variable ``FOL_DATA_ROOT``, else
3. ``datasets/`` of the source checkout this package runs from (the folder
   beside ``pyproject.toml``), else ``./datasets`` of the working directory.

``datasets/README.md`` documents each dataset: source, licence, layout and how
coordinates are encoded in the file names.

Nothing here unpickles user data: JPEG / PNG go through Pillow, the bands of
multispectral TIFFs (``bands``) through tifffile, SVHN's
``.mat`` files through :func:`scipy.io.loadmat`. CIFAR's batch files are
Python pickles; they are read by torchvision only after torchvision has
checked their MD5 sums against the official archive's, so only the official
files are ever unpickled.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import importlib
import io
import logging
import math
import os
import re
import stat
import threading
import unicodedata
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import torch
from PIL import Image

from fol.data.geo import GeoDataset, check_pool_size
from fol.data.synthetic import TASK_CLASSES
from fol.defaults import IMAGE_FOLDER_COORDS, MAX_TIFF_BANDS, check_band_options, class_name
from fol.errors import DataError
from swarmbase.fileio import NOT_REGULAR, dead_link, dead_link_text, is_special_file
from swarmbase.tomlcheck import BRIEF_CHARS, brief, check_input_file, shown

__all__ = [
    "IMAGE_EXTENSIONS",
    "default_data_root",
    "dataset_dir",
    "read_image",
    "parse_lonlat",
    "load_wildfire",
    "load_hurricane",
    "load_image_folder",
    "split_first_layout",
    "image_folder_classes",
    "refuse_one_class",
    "image_folder_files",
    "check_image_folder_root",
    "load_cifar10",
    "load_cifar100",
    "load_svhn",
    "WILDFIRE_URL",
    "HURRICANE_URL",
]

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".pgm", ".bmp", ".tif", ".tiff", ".webp")
WILDFIRE_URL = "https://www.kaggle.com/datasets/abdelghaniaaba/wildfire-prediction-dataset"
HURRICANE_URL = "https://www.kaggle.com/datasets/kmader/satellite-images-of-hurricane-damage"

# "<lon><sep><lat>.<ext>" with decimal degrees, e.g. "-73.4586,45.5837.jpg".
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


# ----------------------------------------------------------------- locations


def default_data_root() -> Path:
    """The data root when none is given (see the module docstring)."""
    env = os.environ.get("FOL_DATA_ROOT")
    if env:
        return Path(env).expanduser()
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "datasets").is_dir():
        return checkout / "datasets"
    return Path.cwd() / "datasets"


def dataset_dir(name: str, root: str | Path | None = None) -> Path:
    """``<data root>/<name>``: where dataset ``name`` is expected."""
    return (Path(root).expanduser() if root is not None else default_data_root()) / name


def _missing(name: str, where: Path, layout: str, source: str) -> DataError:
    return DataError(
        f"dataset {name!r} not found: expected {layout} in {brief(where)} (get it from {source} and unpack it there, "
        f"or point --data-root / FOL_DATA_ROOT at the folder holding '{name}/'; see datasets/README.md)"
    )


def _locate(base: Path, required: Sequence[str]) -> Path | None:
    """``base`` if it holds one of ``required`` sub-folders, else the single
    sub-folder of ``base`` that does (archives often unpack with a top folder)."""
    if not base.is_dir():
        return None
    if any((base / r).is_dir() for r in required):
        return base
    subs = [d for d in sorted(base.iterdir()) if d.is_dir() and any((d / r).is_dir() for r in required)]
    if len(subs) == 1:
        log.info("using %s (found inside %s)", brief(subs[0]), brief(base))
        return subs[0]
    return None


# -------------------------------------------------------------------- images


# The image helpers that only write messages take the file as ``shown_as``: its name as brief() writes it, computed
# once where a read starts (_read_image_and_place, _read_tiff_bands). They open nothing by it.
def _single_band_to_8bit(im, shown_as: str):
    """A single-band image of more than 8 bits as an 8-bit one (Pillow mode ``L``).

    16-bit bands (``I;16*``, or ``I`` holding 0..65535) are scaled by 255 / 65535, as
    torchvision scales uint16 to [0, 1]; floating-point bands (``F``) must hold
    values in [0, 1]. Anything else has no fixed range to map: a :class:`DataError`
    naming the file, never a silent clip (Pillow's own conversion clips every
    16-bit value above 255 to white and every float image to black).
    """
    a = np.asarray(im)  # in the image's own type: no float64 copies of a large band
    what = "floating-point image (Pillow mode F)" if im.mode == "F" else f"integer image (Pillow mode {im.mode})"
    advice = "save it scaled to [0, 1] or as 8- or 16-bit" if im.mode == "F" else "save it as 8- or 16-bit"
    return Image.fromarray(_to_8bit(a, shown_as, what, advice), mode="L")


def _to_8bit(a: np.ndarray, shown_as: str, what: str, advice: str, scale: float | None = None) -> np.ndarray:
    """``a`` (integers or floats) as uint8 of the same shape, by the rule of
    :func:`_single_band_to_8bit`: integers in 0..65535 times 255 / 65535, floats in
    [0, 1] times 255, rounded; values outside are a :class:`DataError` naming the
    file (``what`` the data, ``advice`` what to do). With ``scale``, every value is
    divided by it and clipped to [0, 1] instead (a fixed range, the same for every
    image), then times 255. Converted in chunks of :data:`_CONVERT_CHUNK` values."""
    floating = a.dtype.kind == "f"
    if scale is not None and a.size and floating and not np.isfinite(a).all():
        raise DataError(f"{shown_as}: {what} with values that are not finite (NaN or infinity); {advice}")
    if scale is None and a.size:
        if floating and not (np.isfinite(a).all() and a.min() >= 0.0 and a.max() <= 1.0):
            raise DataError(f"{shown_as}: {what} with values outside [0, 1] ({a.min():g}..{a.max():g}); {advice}")
        if not floating and (a.min() < 0 or a.max() > 65535):
            raise DataError(f"{shown_as}: {what} with values outside 0..65535 ({a.min():g}..{a.max():g}); {advice}")
    flat = a.reshape(-1)
    out = np.empty(flat.shape, dtype=np.uint8)
    for i in range(0, flat.size, _CONVERT_CHUNK):  # wide temporaries of one chunk, not of the whole band
        if floating or scale is not None:
            part = flat[i:i + _CONVERT_CHUNK].astype(np.float64)
            if scale is not None:
                part /= scale
                np.clip(part, 0.0, 1.0, out=part)
            part *= 255.0
            np.round(part, out=part)
        else:  # round(v * 255 / 65535) = round(v / 257) in integers (v / 257 never ends in exactly .5)
            part = flat[i:i + _CONVERT_CHUNK].astype(np.uint32)
            part *= 510
            part += 65535
            part //= 131070
        out[i:i + _CONVERT_CHUNK] = part
    return out.reshape(a.shape)


#: Pixels :func:`_single_band_to_8bit` converts at a time (8 MiB of float64): its
#: memory beyond the band and the 8-bit result stays this small whatever the image's size.
_CONVERT_CHUNK = 1 << 20


#: Most pixels an image file may have (Pillow's decompression-bomb threshold, about 9,459 x 9,459):
#: a larger one is refused from its header, before it is decoded. Pillow itself only warns up to
#: twice this and decodes, so that a 280 kB PNG of 12,000 x 12,000 zeros took 4 GB of memory.
MAX_IMAGE_PIXELS = 89_478_485


#: Most rows an image file may have: Pillow keeps a pointer (8 bytes) for each row of every image it
#: holds, besides its pixels, so that a 69-byte PNG of 1 x 89,000,000 pixels (within the pixel limit)
#: took 3.5 GB. 1,048,576 rows are 8 MiB of them; an image this tall is at most 85 pixels wide.
MAX_IMAGE_ROWS = 1 << 20


def _check_image_size(shown_as: str, width: int, height: int) -> None:
    """A :class:`DataError` naming the file if an image of ``width`` x ``height`` pixels has more than
    :data:`MAX_IMAGE_PIXELS` pixels or :data:`MAX_IMAGE_ROWS` rows: checked from its header."""
    if width * height > MAX_IMAGE_PIXELS:
        raise _too_large(shown_as, f"{width:,} x {height:,}")
    if height > MAX_IMAGE_ROWS:
        raise DataError(f"{shown_as}: {width:,} x {height:,} pixels, more than the {MAX_IMAGE_ROWS:,} rows an image may "
                        f"have (each row of an image Pillow holds costs 8 bytes besides its pixels: a damaged "
                        f"file, or a decompression bomb)")


def _too_large(shown_as: str, size: str) -> DataError:
    return DataError(f"{shown_as}: {size} pixels, more than the {MAX_IMAGE_PIXELS:,} pixels an image may have (a "
                     f"decompression bomb, or a whole scene: cut it into tiles of the size the model sees)")


def _no_samples(shown_as: str) -> DataError:
    return DataError(f"{shown_as}: a TIFF whose SamplesPerPixel (tag 277) is 0: it has no band to read (a damaged file)")


def _tiff_bands(path: str | Path) -> tuple[int, tuple[int, ...]] | None:
    """``(bands, bits per band)`` from a TIFF's first directory, None if it is no TIFF or
    those tags cannot be read: what to say of a TIFF Pillow cannot open (a multispectral scene)."""
    from PIL import TiffImagePlugin

    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if head[:4] not in (b"II*\0", b"MM\0*"):
                return None
            ifd = TiffImagePlugin.ImageFileDirectory_v2(head)
            fh.seek(ifd.next)
            entries = int.from_bytes(fh.read(2), "little" if head[:2] == b"II" else "big")
            fh.seek(ifd.next)
            ifd.load(fh)
            if len(ifd) < entries:  # tags cut short (Pillow warns "Truncated File Read" and skips them):
                return None  # the defaults below would be made up for tags never read
            bands, bits = int(ifd.get(277, 1)), ifd.get(258, (1,))
            return bands, tuple(int(b) for b in (bits if isinstance(bits, tuple) else (bits,)))
    except Exception:  # a damaged header: the caller says 'cannot read image'
        return None


class _NoBandCountLog(logging.Filter):
    """Drops Pillow's log line of a TIFF with more bands than it decodes (it names no file):
    :func:`read_image` says so in its error, which names the file."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("More samples per pixel")


logging.getLogger("PIL.TiffImagePlugin").addFilter(_NoBandCountLog())


def read_image(path: str | Path, image_size: int) -> np.ndarray:
    """Read one image file as ``uint8 [3, S, S]`` (RGB, bilinear resize).

    An EXIF orientation (phone and camera photos) is applied, so the image
    is used as viewers show it. Grey, palette, RGBA and CMYK images are
    converted to RGB; 16-bit and
    [0, 1] floating-point single-band images are scaled to 8 bits first
    (:func:`_single_band_to_8bit`). Raises :class:`~fol.errors.DataError`
    naming the file when it is a FIFO, a device or a socket (refused
    unopened: :func:`~swarmbase.fileio.is_special_file`), cannot be decoded
    (truncated, not an image, unsupported format), has no fixed value range or has more than
    :data:`MAX_IMAGE_PIXELS` pixels (checked before it is decoded).
    """
    return _read_image_and_place(path, image_size, None)[0]


class _Unplaced(DataError):
    """A readable image without a place in the tags its ``coords`` reads: stops the load
    even with ``skip_corrupt`` (which skips unreadable files, not unplaced ones)."""


#: EXIF's GPS IFD (pointer tag 0x8825) and the entries read from it.
_GPS_IFD = 0x8825
_GPS_TAGS = {1: "GPSLatitudeRef", 2: "GPSLatitude", 3: "GPSLongitudeRef", 4: "GPSLongitude"}


def _exif_gps_angle(shown_as: str, gps: dict, tag: int, refs: str, limit: float) -> float:
    """Signed degrees from the GPS IFD's ``tag`` (degrees, minutes, seconds) and the ref
    before it (``refs``: positive, negative letter); a :class:`_Unplaced` naming the tag otherwise."""
    name, ref_name = _GPS_TAGS[tag], _GPS_TAGS[tag - 1]
    if tag not in gps:
        raise _Unplaced(f"{shown_as}: EXIF {name} is missing (the GPS IFD holds tags {shown(sorted(gps))})")
    value = gps[tag]
    dms = _floats(value)
    said = shown(dms or value)
    if len(dms) != 3 or not all(np.isfinite(dms)) or min(dms) < 0:
        raise _Unplaced(f"{shown_as}: EXIF {name} {said}: expected three finite rationals, degrees, minutes and seconds "
                        f"(not negative; a zero denominator reads as nan)")
    if dms[1] >= 60 or dms[2] >= 60:
        raise _Unplaced(f"{shown_as}: EXIF {name} {said}: minutes and seconds must be below 60")
    degrees = dms[0] + dms[1] / 60 + dms[2] / 3600
    if degrees > limit:
        raise _Unplaced(f"{shown_as}: EXIF {name} {said} is {degrees:g} degrees, more than {limit:g}")
    ref = gps.get(tag - 1)
    letter = ref.decode("latin-1") if isinstance(ref, bytes) else ref
    letter = letter.strip("\0 ").upper() if isinstance(letter, str) else None
    if letter is None or letter not in (refs[0], refs[1]):  # one letter, not an empty or longer string
        said = "is missing" if ref is None else f"is {shown(ref)}"
        raise _Unplaced(f"{shown_as}: EXIF {ref_name} {said}, expected {refs[0]!r} or {refs[1]!r}")
    return -degrees if letter == refs[1] else degrees


def _exif_lat_lon(shown_as: str, im: Image.Image, exif: Image.Exif | None) -> tuple[float, float]:
    """``(lat, lon)`` in signed degrees (south and west negative) from the image's EXIF GPS IFD."""
    try:
        gps = dict(exif.get_ifd(_GPS_IFD)) if exif is not None else None
    except Exception as exc:  # a damaged GPS IFD: Pillow's errors vary
        raise _Unplaced(f"{shown_as}: its EXIF GPS IFD cannot be read ({type(exc).__name__}: {exc})") from None
    if gps is None:
        raise _Unplaced(f"{shown_as}: its EXIF block cannot be read, so no GPS tags")
    if not gps:
        raise _Unplaced(f"{shown_as}: no EXIF GPS tags (GPSLatitude, GPSLongitude), where coords = 'exif' reads "
                        f"each image's place")
    lat = _exif_gps_angle(shown_as, gps, 2, "NS", 90.0)
    return lat, _exif_gps_angle(shown_as, gps, 4, "EW", 180.0)


def _floats(value: object) -> tuple[float, ...]:
    """A TIFF tag's numbers as floats (Pillow gives one value bare, several as a tuple); () if not numbers."""
    try:
        return tuple(float(x) for x in (value if isinstance(value, tuple) else (value,)))
    except (TypeError, ValueError):
        return ()


def _first_number(tags, code: int, default: float) -> float:
    """The first number of TIFF tag ``code`` in ``tags`` (as :func:`_floats` reads it), or ``default`` when the
    tag is absent or holds no number."""
    return next(iter(_floats(tags.get(code, default))), float(default))


def _geokeys(shown_as: str, directory: object) -> dict[int, int]:
    """The GeoKeys a GeoKeyDirectoryTag holds in itself (location 0: SHORT values, which
    the model type, raster type, CRS codes and units are); those stored in the double or
    ASCII parameter tags (citations, ellipsoid sizes) are not needed here."""
    v = directory if isinstance(directory, tuple) else (directory,)
    if not (len(v) >= 4 and all(isinstance(x, int) for x in v) and len(v) >= 4 + 4 * v[3]):
        raise _Unplaced(f"{shown_as}: GeoKeyDirectoryTag (34735) is malformed (expected a header of 4 SHORTs and 4 per "
                        f"key, got {len(v)} values)")
    entries = [v[4 + 4 * k: 8 + 4 * k] for k in range(v[3])]
    return {key: value for key, location, _, value in entries if location == 0}


#: GTModelTypeGeoKey's values.
_MODEL_TYPES = {1: "projected", 2: "geographic", 3: "geocentric"}


def _geotiff_lat_lon(shown_as: str, im: Image.Image, exif: Image.Exif | None) -> tuple[float, float]:
    """``(lat, lon)`` of a GeoTIFF's centre, in a geographic CRS (latitude and longitude in
    degrees). Georeferenced by a tie point and a pixel scale, or a transformation matrix;
    a projected CRS is refused naming its EPSG code (the toolkit carries no projection library)."""
    tags = getattr(im, "tag_v2", None)
    if im.format != "TIFF" or tags is None:
        raise _Unplaced(f"{shown_as}: a {im.format} image, not a TIFF: no GeoTIFF tags, where coords = 'geotiff' reads "
                        f"each image's place")
    # the raster's own width and height: Pillow gives a TIFF of orientation 5..8 the turned size
    return _geotiff_centre(shown_as, tags, int(tags.get(256, im.width)), int(tags.get(257, im.height)))


def _geotiff_centre(shown_as: str, tags, w: int, h: int) -> tuple[float, float]:
    """:func:`_geotiff_lat_lon` from a TIFF's tags (``{code: value}``, one value bare or
    several as a tuple, as Pillow gives them) and its width and height in pixels."""
    if 34735 not in tags:
        raise _Unplaced(f"{shown_as}: no GeoKeyDirectoryTag (34735): a TIFF without GeoTIFF tags, whose CRS is unknown")
    keys = _geokeys(shown_as, tags[34735])
    model = keys.get(1024)
    if model == 1 or (model is None and 3072 in keys):
        code = keys.get(3072)
        crs = "(user-defined)" if code in (None, 32767) else f"EPSG:{code}"
        raise _Unplaced(f"{shown_as}: GeoTIFF in projected CRS {crs} (ProjectedCSTypeGeoKey), not latitude and longitude: "
                        f"reproject it to EPSG:4326 first (e.g. gdalwarp -t_srs EPSG:4326); the toolkit does not")
    if model is None and 2048 not in keys:
        raise _Unplaced(f"{shown_as}: GeoTIFF with no GTModelTypeGeoKey or GeographicTypeGeoKey: its CRS is unknown")
    if model not in (None, 2):
        raise _Unplaced(f"{shown_as}: GeoTIFF of GTModelTypeGeoKey {model} ({_MODEL_TYPES.get(model, 'unknown')}), "
                        f"not geographic (2): latitude and longitude are needed")
    if keys.get(2054, 9102) not in (9102, 9122):  # EPSG's degree codes
        raise _Unplaced(f"{shown_as}: GeoTIFF of GeogAngularUnitsGeoKey {keys[2054]}, not degrees (9102)")
    # the image centre in raster space: pixel corners from (0, 0), or pixel centres (PixelIsPoint)
    i, j = ((w - 1) / 2, (h - 1) / 2) if keys.get(1025) == 2 else (w / 2, h / 2)
    matrix = _floats(tags.get(34264))
    tie, scale = _floats(tags.get(33922)), _floats(tags.get(33550))
    if len(matrix) == 16:
        lon = matrix[0] * i + matrix[1] * j + matrix[3]
        lat = matrix[4] * i + matrix[5] * j + matrix[7]
    elif len(tie) >= 6 and len(tie) % 6 == 0 and len(scale) >= 2:
        lon = tie[3] + (i - tie[0]) * scale[0]
        lat = tie[4] - (j - tie[1]) * scale[1]
    else:  # several tie points without a scale are ground control points: a warp, not a grid
        raise _Unplaced(f"{shown_as}: GeoTIFF with no ModelTiepointTag (33922) with ModelPixelScaleTag (33550), nor "
                        f"ModelTransformationTag (34264) of 16 numbers: not georeferenced on a grid")
    if not (np.isfinite(lat) and np.isfinite(lon)):
        raise _Unplaced(f"{shown_as}: GeoTIFF centre at latitude {lat:g}, longitude {lon:g} is not finite (a scale or "
                        f"matrix of NaN or infinity)")
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise _Unplaced(f"{shown_as}: GeoTIFF centre at latitude {lat:g}, longitude {lon:g} is out of range "
                        f"(-90..90, -180..180 degrees)")
    return float(lat), float(lon)


#: ``coords`` read from each image's own tags, as it is opened to be decoded: the place reader.
_PLACE_READERS: dict[str, Callable[..., tuple[float, float]]] = {"exif": _exif_lat_lon, "geotiff": _geotiff_lat_lon}


def _resized(im: Image.Image, image_size: int, orientation: object) -> np.ndarray:
    """An RGB image as ``uint8 [S, S, 3]``: resized (bilinear), then turned as its
    orientation tag (EXIF / TIFF tag 274) says, as PIL.ImageOps.exif_transpose does."""
    if im.size != (image_size, image_size):
        im = im.resize((image_size, image_size), Image.Resampling.BILINEAR)
    T = Image.Transpose  # the square output is turned after resizing
    turn = {2: T.FLIP_LEFT_RIGHT, 3: T.ROTATE_180, 4: T.FLIP_TOP_BOTTOM, 5: T.TRANSPOSE, 6: T.ROTATE_270,
            7: T.TRANSVERSE, 8: T.ROTATE_90}.get(orientation)  # type: ignore[call-overload]
    if turn is not None:
        im = im.transpose(turn)
    return np.asarray(im, dtype=np.uint8)


#: Most bytes the first image of a TIFF read with ``bands`` may decode to (every band of it is
#: decoded before the chosen ones are kept): 4 x :data:`MAX_IMAGE_PIXELS`, what Pillow decodes
#: for the largest RGBA image allowed (about 358 MB); e.g. 13 bands of 16 bits up to 3,700 x 3,700.
MAX_TIFF_DECODED_BYTES = 4 * MAX_IMAGE_PIXELS

#: What to say when tifffile is missing.
TIFF_INSTALL = "pip install 'fol-swarm[tiff]'"

#: How the loaders' keywords are named in a refusal of :func:`~fol.defaults.check_band_options`.
LOADER_BAND_NAMES = {"dataset": "dataset 'imagefolder'", "bands": "bands", "scale": "scale", "coords": "coords"}

#: The TIFF each thread reads with tifffile, for :class:`_NameTheTiff`.
_TIFF_READING = threading.local()


class _NameTheTiff(logging.Filter):
    """tifffile's log lines name a page (``<tifffile.TiffPage 0 @8> incorrect StripOffsets count``),
    not the file: each is prefixed with the file the logging thread reads."""

    def filter(self, record: logging.LogRecord) -> bool:
        path = getattr(_TIFF_READING, "path", None)
        if path is not None:
            record.msg, record.args = f"{path}: {record.getMessage()} (tifffile)", ()
        return True


for _name in ("tifffile", "tifffile.tifffile"):  # tifffile 2023.1 (the oldest the tiff extra takes) logs as its module
    logging.getLogger(_name).addFilter(_NameTheTiff())


def _read_tiff_bands(path: str | Path, image_size: int, bands: Sequence[int], scale: float | None,
                     place: str | None) -> tuple[np.ndarray, tuple[float, float] | None]:
    """``bands`` (1-based) of the first image of a TIFF of any band count as ``uint8 [S, S, 3]``,
    with tifffile, and its place with ``place == "geotiff"``: the size, the band count and
    the bands are checked from the header, before anything is decoded; only the three
    chosen bands are kept, in the file's sample type, and scaled to 8 bits by :func:`_to_8bit`."""
    name = brief(path)
    try:
        import tifffile
    except ImportError:
        raise DataError(f"{name}: reading the bands of a TIFF needs tifffile: {TIFF_INSTALL}") from None
    where, page, size = None, None, None
    _TIFF_READING.path = name
    try:
        with tifffile.TiffFile(path) as tif:
            page, size = tif.pages.first, tif.filehandle.size
            w, h, n = int(page.imagewidth), int(page.imagelength), int(page.samplesperpixel)
            _check_image_size(name, w, h)
            if n == 0:
                raise _no_samples(name)
            if n > MAX_TIFF_BANDS:
                raise DataError(f"{name}: a TIFF of {n:,} bands, more than the {MAX_TIFF_BANDS} one may have")
            past = [b for b in bands if b > n]
            if past:
                pages = len(tif.pages)  # a stack of one band per page (tifffile's own [bands, H, W] write)
                raise DataError(f"{name}: bands {'/'.join(map(str, bands))} name band {past[0]}, but this TIFF "
                                f"has {n} band{'s' if n != 1 else ''}" + (
                                    f" in its first image, the only one read (it holds {pages:,} images: write "
                                    f"the bands into one image, planarconfig='separate' with tifffile)"
                                    if pages > 1 else ""))
            dtype = page.dtype
            if dtype is None or dtype.kind not in "uif" or page.imagedepth != 1:
                raise DataError(f"{name}: a TIFF of samples that are not integers or floats, or of a depth "
                                f"(sample format {page.sampleformat}, {page.bitspersample} bits, depth {page.imagedepth})")
            if w * h * n * dtype.itemsize > MAX_TIFF_DECODED_BYTES:
                raise DataError(f"{name}: {w:,} x {h:,} pixels of {n} bands of {dtype} are "
                                f"{w * h * n * dtype.itemsize:,} bytes decoded, more than the "
                                f"{MAX_TIFF_DECODED_BYTES:,} allowed: cut it into tiles of the size the model sees")
            # tifffile decodes every strip or tile whole (edge tiles to the full tile): bounded by the
            # same limit, and no compressed one may decode to more than its own size
            kind = "tile" if page.is_tiled else "strip"
            segment_bytes = math.prod(page.chunks) * dtype.itemsize
            count = math.prod(page.chunked)
            if count * segment_bytes > MAX_TIFF_DECODED_BYTES:
                raise DataError(f"{name}: {count:,} {kind}{'s' if count != 1 else ''} of "
                                f"{' x '.join(f'{d:,}' for d in page.chunks)} samples of {dtype} are "
                                f"{count * segment_bytes:,} bytes decoded, more than the "
                                f"{MAX_TIFF_DECODED_BYTES:,} allowed")
            inverted = _check_bands_compression(name, tif, page, kind, segment_bytes)
            # Deflate / LZMA / PackBits (and ZSTD, where Python decodes it) chunks are decoded here, each
            # bounded by its size, and the pixels kept (None: another codec, or a layout left to tifffile)
            data = _inflate_chunks(name, tif, page, kind, segment_bytes)
            if place == "geotiff":  # from the tags tifffile parsed on opening: no pixel is decoded for it
                tags = {t.code: _tag_value(t.value) for t in page.tags.values()
                        if t.code in (33550, 33922, 34264, 34735)}
                where = _geotiff_centre(name, tags, w, h)
            orientation = _tag_value(page.tags[274].value) if 274 in page.tags else None
            separate = n > 1 and page.planarconfig == tifffile.PLANARCONFIG.SEPARATE  # tag 284
            expected = (h, w) if n == 1 else (n, h, w) if separate else (h, w, n)
            if data is None:  # another compression, or a layout or damage _inflate_chunks leaves to tifffile
                data = page.asarray()
            if data.shape != expected:
                raise DataError(f"{name}: decoded to an array of shape {data.shape}, where its tags say {expected}")
            if inverted:  # CMYK JPEG stored inverted (Adobe's APP14): turned back, as Pillow reads such a JPEG
                data = _turned_back(data, page, tif.filehandle.size)
    except DataError:
        raise
    except Exception as exc:  # a damaged or truncated file: tifffile's errors vary
        # LZW (GDAL's usual), JPEG ...; ZSTD, which tifffile decodes with Python 3.14's compression.zstd too
        codecs = "requires the 'imagecodecs' package" in str(exc) or getattr(exc, "name", None) == "compression"
        if codecs and page is not None:
            what = (f"with predictor {page.predictor.name} (tag 317)" if "<PREDICTOR." in str(exc)  # GDAL's for floats
                    else f"compressed with {page.compression.name}")
            raise DataError(f"{name}: a TIFF {what}, which tifffile decodes only "
                            f"with the imagecodecs package: pip install imagecodecs") from None
        if isinstance(exc, OSError) and (dead := dead_link(path)) is not None:  # as read_image says it
            raise DataError(f"{name}: {dead_link_text(path, dead)}") from None
        past = None if page is None else _chunk_past_end(name, size, page.dataoffsets, page.databytecounts,
                                                         "tile" if page.is_tiled else "strip", int(page.compression))
        if past is not None:  # tifffile: 'failed to read 768 bytes, got 576', 'DeflateError: ...' ...
            raise past from None
        raise DataError(f"{name}: cannot read TIFF ({_reason(exc)})") from None
    finally:
        _TIFF_READING.path = None
    index = [b - 1 for b in bands]
    chosen = data[None][[0, 0, 0]] if n == 1 else data[index] if separate else data[..., index]
    del data  # the other bands
    if chosen.dtype == np.int8 and scale is None:  # 8-bit bands are used as they are: signed ones too, from 0
        if chosen.size and chosen.min() < 0:
            raise DataError(f"{name}: TIFF of int8 bands with values below 0 ({chosen.min()}..{chosen.max()}); give "
                            f"the dataset option scale (values divided by it and clipped to [0, 1])")
        chosen = chosen.astype(np.uint8)
    if chosen.dtype != np.uint8 or scale is not None:
        advice = ("give the dataset option scale (values divided by it and clipped to [0, 1])" if scale is None
                  else "save finite values")
        chosen = _to_8bit(chosen, name, f"TIFF of {dtype} bands", advice, scale)
    if n == 1 or separate:  # bands first: as pixels of 3 samples
        chosen = chosen.transpose(1, 2, 0)
    rgb = np.ascontiguousarray(chosen)
    return _resized(Image.fromarray(rgb, mode="RGB"), image_size, orientation), where


#: TIFF compressions whose strips or tiles are JPEG streams, as tifffile decodes them (with imagecodecs): JPEG
#: (7), the old-style JPEG of 6 whose strips tifffile decodes as JPEG streams, the ALT JPEG of 33007 and DNG's
#: lossy JPEG (34892). Each chunk's frame size is read by :func:`_check_jpeg_chunks` before any is decoded.
_JPEG_COMPRESSIONS = {6: "old-style JPEG", 7: "JPEG", 33007: "ALT JPEG", 34892: "lossy JPEG"}

#: TIFF compressions read with ``bands`` (tag 259), each decoded no further than a strip or tile
#: holds: none, Deflate (8, 32946, tifffile's 50013), LZMA, PackBits and ZSTD (50000, 34926) by
#: :func:`_inflate_chunks` or by imagecodecs into a buffer of the chunk's size (as LZW, 5), and the JPEG
#: ones of :data:`_JPEG_COMPRESSIONS` once :func:`_check_jpeg_chunks` has read each chunk's frame size.
#: The image codecs tifffile
#: hands to imagecodecs without a size (WebP, PNG, JPEG 2000, JPEG XL, JPEG XR, LERC ...) decode
#: whatever size their own header says: a 156-byte WebP strip of a 16 x 16 TIFF took 1.4 GB.
BANDS_COMPRESSIONS = {1: "none", 5: "LZW", 8: "Deflate", 32946: "Deflate", 50013: "Deflate", 34925: "LZMA",
                      32773: "PackBits", 50000: "ZSTD", 34926: "ZSTD", **_JPEG_COMPRESSIONS}


def _check_bands_compression(shown_as: str, tif, page, kind: str, segment_bytes: int) -> bool:
    """A :class:`DataError` naming the file if its first image is compressed with a codec not in
    :data:`BANDS_COMPRESSIONS`, or is a JPEG one of whose chunks' frame would decode to more than
    ``segment_bytes`` (the bytes its tags say a strip or tile holds), or one of whose chunks starts outside
    the file (:func:`_check_chunks_in_file`): before any is decoded."""
    compression = int(page.compression)
    if compression not in BANDS_COMPRESSIONS:
        named = getattr(page.compression, "name", str(compression))
        read = sorted(set(BANDS_COMPRESSIONS.values()) - {"none"} - set(_JPEG_COMPRESSIONS.values()) | {"JPEG"})
        raise DataError(f"{shown_as}: a TIFF compressed with {named} (tag 259 = {compression}), which bands does not "
                        f"read: save it uncompressed or compressed with {', '.join(read[:-1])} or {read[-1]} (an "
                        f"image codec's strip or tile decodes to the size its own header says, not its tags')")
    _check_chunks_in_file(shown_as, tif.filehandle.size, page.dataoffsets, page.databytecounts, kind, compression)
    if compression in _JPEG_COMPRESSIONS:  # each strip or tile a JPEG stream, decoded to the size its frame gives
        return _check_jpeg_chunks(shown_as, tif, page, kind, segment_bytes)
    return False


def _jpeg_frame(data: bytes) -> tuple[int, int, int, int, bool] | None:
    """``(lines, samples per line, components, precision, adobe)`` of the frame header (SOF0..SOF15) of
    a JPEG stream, read by walking its markers from SOI to its first scan, as libjpeg reads its header;
    ``adobe``: an Adobe APP14 segment among them. None if there is no frame before a scan."""
    if data[:2] != b"\xff\xd8":
        return None
    i, frame, adobe = 2, None, False
    while i + 4 <= len(data):
        if data[i] != 0xFF:  # damage: what was read stands
            break
        marker = data[i + 1]
        if marker == 0xFF:  # a fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        if marker in (0xDA, 0xD9):  # a scan, or the end
            break
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC) and frame is None:  # SOFn (not DHT, JPG, DAC)
            if i + 10 > len(data):
                return None
            frame = (int.from_bytes(data[i + 5:i + 7], "big"), int.from_bytes(data[i + 7:i + 9], "big"),
                     data[i + 9], data[i + 4])
        elif marker == 0xEE and data[i + 4:i + 9] == b"Adobe":  # APP14
            adobe = True
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    return None if frame is None else (*frame, adobe)


def _check_jpeg_chunks(shown_as: str, tif, page, kind: str, segment_bytes: int) -> bool:
    """Every strip or tile of a JPEG-compressed TIFF (compression 7, 6, 33007 or 34892) read for its frame
    header: one whose lines x samples per line x components (2 bytes each past 8 bits) are more than
    ``segment_bytes``, or that has no frame, is a :class:`DataError` naming the file. libjpeg decodes
    the frame its header gives (a 1.7 MB strip of a 16 x 16 TIFF, of 12,000 x 12,000 pixels, took
    141 MB). A frame of 0 lines (their number in a DNL marker) is decoded to the strip's rows. A frame of
    fewer components than the samples a strip or tile holds (SamplesPerPixel, or 1 of bands stored apart),
    or of more but not as many values a line (DNG's lossless JPEG packs a line of 1 sample into a frame of
    2 components of half the width), is a :class:`DataError` naming both. True if its chunks are CMYK
    stored inverted (:func:`_check_jpeg_frames`)."""
    apart = int(page.samplesperpixel) > 1 and int(page.planarconfig) == 2
    return _check_jpeg_frames(shown_as, tif.filehandle, tif.filehandle.size, page.dataoffsets, page.databytecounts,
                              kind, segment_bytes, 1 if apart else int(page.samplesperpixel), apart,
                              int(page.tilewidth if page.is_tiled else page.imagewidth), int(page.compression) == 6)


def _chunk_bytes(offset: int, count: int, size: int) -> int:
    """The bytes a strip or tile of ``count`` bytes at ``offset`` holds in a file of ``size`` bytes: 0 where it is
    empty, which tifffile fills in (with 0) rather than decodes, or starts past the end (refused first, of any
    compression, by :func:`_check_chunks_in_file`)."""
    return max(0, min(int(count), size - int(offset)))


def _chunk_tags(kind: str) -> tuple[str, str]:
    """How a refusal names the tags of a TIFF's ``kind`` of chunk (``"strip"`` or ``"tile"``): its offsets' and
    its byte counts'."""
    if kind == "tile":
        return "TileOffsets, tag 324", "TileByteCounts, tag 325"
    return "StripOffsets, tag 273", "StripByteCounts, tag 279"


def _tiff_named(compression: int) -> str:
    """A TIFF as a refusal of one of its chunks calls it: ``JPEG TIFF`` of a JPEG compression, else ``TIFF``."""
    return "JPEG TIFF" if int(compression) in _JPEG_COMPRESSIONS else "TIFF"


def _check_chunks_in_file(shown_as: str, size: int, offsets: Sequence[int], counts: Sequence[int], kind: str,
                          compression: int) -> None:
    """A strip or tile at ``offsets`` of ``counts`` bytes (``kind``) that is not empty but starts at or past the end
    of the file of ``size`` bytes (a file cut short, or a damaged offset) is a :class:`DataError` naming the file,
    the strip and its offset, whatever the TIFF's ``compression`` (tag 259). Neither tifffile nor libtiff reads one:
    tifffile said 'corrupted strip cannot be reshaped from (0,) ...' (none, LZMA, PackBits, LZW), 'DeflateError:
    ... BAD_DATA' or, of JPEG, 'Jpeg8Error: Empty input file'; libtiff a line on standard error naming no file
    ('TIFFFillStrip: Read error on strip 1; got 18446744073709550616 bytes') and Pillow's 'decoder error -2'."""
    for i, (offset, count) in enumerate(zip(offsets, counts)):
        if int(count) and int(offset) >= size:
            raise DataError(f"{shown_as}: a {_tiff_named(compression)} whose {kind} {i + 1:,} of {len(counts):,} "
                            f"starts at byte {int(offset):,} ({_chunk_tags(kind)[0]}), outside the file of {size:,} "
                            "bytes (a truncated or damaged file)")


def _chunk_past_end(shown_as: str, size: int, offsets: Sequence[int], counts: Sequence[int], kind: str,
                    compression: int) -> DataError | None:
    """The :class:`DataError` naming the file, the strip or tile, its offset, its byte count and the file's ``size``
    of the first strip or tile at ``offsets`` of ``counts`` bytes (``kind``) that starts inside the file but runs
    past its end; None if none does. Raised where decoding the file then fails, in place of tifffile's or
    libtiff's own words ('failed to read 768 bytes, got 576', 'DeflateError: ...', 'corrupted strip cannot be
    reshaped from (1,) ...', 'decoder error -2'): a complete stream under an overstated byte count still reads."""
    for i, (offset, count) in enumerate(zip(offsets, counts)):
        if int(offset) < size < int(offset) + int(count):
            at, of = _chunk_tags(kind)
            return DataError(f"{shown_as}: a {_tiff_named(compression)} whose {kind} {i + 1:,} of {len(counts):,}, at byte {int(offset):,} "
                             f"({at}) and of {int(count):,} bytes ({of}), runs past the end of the file of "
                             f"{size:,} bytes: a truncated file")
    return None


def _check_pillow_chunks_in_file(shown_as: str, fh, tags) -> DataError | None:
    """:func:`_check_chunks_in_file` of a TIFF as Pillow reads it, without ``bands``: its strips or tiles as libtiff
    reads them (:func:`_pillow_chunks`), in the open file ``fh``, before libtiff decodes any. A strip or tile that
    runs past the file's end (:func:`_chunk_past_end`) is refused here too where libtiff decodes it (any
    compression but none, 1, which Pillow decodes itself, and old-style JPEG, 6, which libtiff reads its own way):
    libtiff reads no such chunk, even a complete stream under an overstated count ('TIFFFillStrip: Read error on
    strip 1; got 36 bytes, expected 72.' on standard error, naming no file, and Pillow's 'decoder error -2').
    Otherwise its :class:`DataError` is returned, for the caller to raise if decoding fails."""
    kind, _, offsets, counts = _pillow_chunks(tags)
    position = fh.tell()
    try:
        size = fh.seek(0, io.SEEK_END)
    finally:
        fh.seek(position)
    compression = int(_first_number(tags, 259, 1))
    _check_chunks_in_file(shown_as, size, offsets, counts, kind, compression)
    past = _chunk_past_end(shown_as, size, offsets, counts, kind, compression)
    if past is not None and compression not in (1, 6):
        raise past
    return past


def _turned_back(data: np.ndarray, page, size: int) -> np.ndarray:
    """The samples of a CMYK JPEG TIFF whose strips or tiles are stored inverted (:func:`_check_jpeg_frames`;
    ``data`` as tifffile decodes ``page``, of a file of ``size`` bytes, its 4 samples stored together) turned
    back, each decoded chunk's: an empty one (:func:`_chunk_bytes`), which tifffile fills with 0, is left as
    filled, as in an unmarked file (turned back, it read 255)."""
    out = np.subtract((1 << int(page.bitspersample)) - 1, data, dtype=data.dtype)
    high, wide = int(page.chunks[0]), int(page.chunks[1])
    across = -(-int(page.imagewidth) // wide)
    for i, (offset, count) in enumerate(zip(page.dataoffsets, page.databytecounts)):
        if not _chunk_bytes(offset, count, size):
            y, x = i // across * high, i % across * wide
            out[y:y + high, x:x + wide] = data[y:y + high, x:x + wide]
    return out


def _check_jpeg_frames(shown_as: str, fh, size: int, offsets: Sequence[int], counts: Sequence[int], kind: str,
                       segment_bytes: int, expected: int, apart: bool, width: int, old_style: bool = False) -> bool:
    """:func:`_check_jpeg_chunks` on the chunks at ``offsets`` of ``counts`` bytes of the open file ``fh`` of
    ``size`` bytes (with tifffile's page, or Pillow's tags), each to be a frame of ``expected`` components
    (1 where the bands are stored ``apart``) in a strip or tile ``width`` pixels wide. Of an ``old_style``
    JPEG TIFF (compression 6), a chunk that is no JPEG stream of its own (no SOI marker: its header kept
    apart, as libtiff reads it, in JPEGInterchangeFormat, tag 513, or its tables in tags 519-521) is refused
    as such: tifffile decodes only whole streams ('Not a JPEG file'). A chunk that starts outside the file is
    refused before, by :func:`_check_chunks_in_file`.

    True if every chunk is a frame of 4 components marked with an Adobe APP14 segment: CMYK stored
    inverted, as Photoshop and Pillow write it (libjpeg.txt: 'Adobe Photoshop writes inverted data in
    CMYK JPEG files'), which libjpeg decodes as stored and Pillow's own JPEG reader inverts back; libtiff
    writes no such segment, and its CMYK as is. Some chunks marked and some not is a :class:`DataError`."""
    marked, unmarked = 0, 0
    for offset, count in zip(offsets, counts):
        count = _chunk_bytes(offset, count, size)
        if not count:  # an empty chunk: tifffile fills it in
            continue
        fh.seek(int(offset))
        data = fh.read(count)
        if old_style and data[:2] != b"\xff\xd8":
            raise DataError(f"{shown_as}: an old-style JPEG TIFF (compression 6) whose {kind}s are no whole JPEG "
                            f"streams (its JPEG header kept apart, in JPEGInterchangeFormat, tag 513, or tags "
                            f"519-521), which tifffile does not decode and bands does not read: read it without "
                            f"bands (Pillow reads it as an RGB or grey image), or save it with JPEG (compression 7)")
        frame = _jpeg_frame(data)
        if frame is None:
            raise DataError(f"{shown_as}: a JPEG {kind} without a frame header (SOF marker) before its scan "
                            f"(a damaged file)")
        lines, samples, components, precision, _ = frame
        decoded = max(lines, 1) * samples * components * (2 if precision > 8 else 1)
        if lines and decoded > segment_bytes:
            raise DataError(f"{shown_as}: a JPEG {kind} of {samples:,} x {lines:,} pixels of {components} "
                            f"component{'s' if components != 1 else ''} ({decoded:,} bytes decoded), more than "
                            f"the {segment_bytes:,} bytes its tags say it holds (a decompression bomb, or a "
                            f"damaged file)")
        if components < expected or components > expected and samples * components != width * expected:
            # tifffile said 'corrupted strip cannot be reshaped', libtiff a line on stderr naming no file
            said = ("its bands stored apart, one a strip (PlanarConfiguration 2, tag 284)" if apart
                    else "SamplesPerPixel, tag 277").replace("strip", kind)
            raise DataError(f"{shown_as}: a JPEG {kind} of {components} component{'s' if components != 1 else ''}, "
                            f"where its tags say a {kind} holds {expected} ({said}): a damaged or mislabelled file")
        if components == 4 and frame[4]:
            marked += 1
        else:
            unmarked += 1
    if marked and unmarked:
        raise DataError(f"{shown_as}: a JPEG TIFF of {marked:,} CMYK {kind}{'s' if marked != 1 else ''} marked as "
                        f"stored inverted (an Adobe APP14 segment, as Photoshop writes them) and {unmarked:,} not: "
                        f"a damaged file, or one of two writers' {kind}s")
    return bool(marked)


#: TIFF compressions whose strips or tiles are decoded here, each bounded by its size, because the
#: decoder tifffile takes for them (without imagecodecs) decodes a strip or tile whole, however large
#: it comes out: zlib (Deflate, Adobe Deflate, tifffile's 50013), LZMA, PackBits (tifffile's own
#: decoder, a Python list of every decoded byte) and ZSTD (Python 3.14's compression.zstd).
_CHUNK_CODECS = {8: "zlib", 32946: "zlib", 50013: "zlib", 34925: "lzma", 32773: "packbits", 50000: "zstd",
                 34926: "zstd"}


class _DamagedChunk(Exception):
    """A PackBits or ZSTD strip or tile that does not decode: left for tifffile to report."""


def _chunk_codec(compression: int) -> str | None:
    """The codec of :data:`_CHUNK_CODECS` that decodes TIFF ``compression`` here, None where
    tifffile decodes it: ZSTD is decoded here only where Python has compression.zstd (3.14 on);
    elsewhere tifffile decodes it with imagecodecs, which writes no further than the strip's or
    tile's size, the output buffer tifffile hands it (or, without imagecodecs, refuses it)."""
    codec = _CHUNK_CODECS.get(compression)
    if codec == "zstd":
        try:
            importlib.import_module("compression.zstd")
        except ImportError:
            return None
    return codec


#: Each byte value with its 8 bits in reverse order: how a TIFF of fill order 2 stores bytes.
_BITS_REVERSED = np.array([int(f"{b:08b}"[::-1], 2) for b in range(256)], dtype=np.uint8)


def _inflated(codec: str, data: bytes, limit: int) -> bytes | np.ndarray | None:
    """``data`` (one zlib stream, LZMA streams or ZSTD frames one after another, as
    ``lzma.decompress`` and ``compression.zstd.decompress`` read them, or PackBits runs)
    decompressed, None if it decompresses to more than ``limit`` bytes: never more than
    ``limit`` + 1 bytes are made. A damaged stream raises ``zlib.error`` or ``lzma.LZMAError``,
    damaged ZSTD frames or PackBits runs (the last one cut short) :class:`_DamagedChunk`."""
    import lzma
    import zlib

    if codec == "packbits":
        from fol.data.packbits import TOO_LONG, unpack_bits

        out = np.empty(limit, np.uint8)
        written, cut = unpack_bits(np.frombuffer(data, np.uint8), out)
        if written == TOO_LONG:
            return None
        if cut:
            raise _DamagedChunk("the last PackBits run is cut short")
        return out[:written]
    if codec == "zstd":
        return _decompressed_zstd(data, limit)
    if codec == "zlib":
        inflate = zlib.decompressobj()
        out = inflate.decompress(data, limit + 1)  # (a max_length of 0 would be no bound)
        if len(out) > limit:
            return None
        if not inflate.eof:  # all of data consumed short of the stream's end
            raise zlib.error("incomplete or truncated stream")
        return out
    parts: list[bytes] = []
    total = 0
    while True:  # as lzma.decompress: streams one after another, until the data ends or is no stream
        unpack = lzma.LZMADecompressor()
        try:
            part = unpack.decompress(data, limit - total + 1)
        except lzma.LZMAError:
            if parts:  # trailing data that is no stream: ignored, as lzma.decompress ignores it
                break
            raise
        parts.append(part)
        total += len(part)
        if total > limit:
            return None
        if not unpack.eof:
            raise lzma.LZMAError("Compressed data ended before the end-of-stream marker was reached")
        data = unpack.unused_data
        if not data:
            break
    return b"".join(parts)


def _decompressed_zstd(data: bytes, limit: int) -> bytes | None:
    """:func:`_inflated` of ZSTD frames (compression.zstd, Python 3.14 on): every frame, as
    ``compression.zstd.decompress`` reads them (bytes after the last frame that are no frame
    are damage), none decompressed past ``limit`` + 1 bytes in all, whether or not its header
    declares its size (a streaming writer, libtiff's, declares none)."""
    from compression import zstd

    parts: list[bytes] = []
    total = 0
    while True:
        unpack = zstd.ZstdDecompressor()
        try:
            part = unpack.decompress(data, limit - total + 1)
        except zstd.ZstdError as exc:
            raise _DamagedChunk(str(exc)) from None
        parts.append(part)
        total += len(part)
        if total > limit:
            return None
        if not unpack.eof:
            raise _DamagedChunk("Compressed data ended before the end-of-stream marker was reached")
        data = unpack.unused_data
        if not data:
            break
    return b"".join(parts)


def _inflate_chunks(shown_as: str, tif, page, kind: str, segment_bytes: int) -> np.ndarray | None:
    """The first image of a TIFF compressed with a codec of :func:`_chunk_codec`, as
    ``page.asarray()`` gives it, from its strips or tiles decoded once each, or None where
    tifffile is to decode it (a layout this does not assemble: bits not a whole sample type, a
    predictor other than horizontal differencing of integers; or a damaged or missing chunk, for
    tifffile to report). Of fill order 2 (tag 266), the compressed bytes are read with their bits
    reversed, as tifffile (and libtiff) reads them.

    Whatever is returned, every chunk's size is checked first: one that decompresses to more than
    ``segment_bytes`` (what its tags say it holds) is refused, having been inflated only to
    ``segment_bytes`` + 1 bytes, before tifffile decompresses it without a bound (a 1 MB strip of
    zeros inflates to 1 GB, a 1 MB PackBits strip to 64 MB). Only where None is returned does
    tifffile decode the chunks again."""
    import lzma
    import zlib

    codec = _chunk_codec(int(page.compression))
    if codec is None:
        return None
    n, h, w = int(page.samplesperpixel), int(page.imagelength), int(page.imagewidth)
    dtype = page.dtype
    planes, contig = (n, 1) if n > 1 and int(page.planarconfig) == 2 else (1, n)
    tiled = bool(page.is_tiled)
    high, wide = (int(page.tilelength), int(page.tilewidth)) if tiled else (int(page.rowsperstrip), w)
    down, across = (-(-h // high), -(-w // wide)) if high > 0 and wide > 0 else (0, 0)
    formats = page.tags[339].value if 339 in page.tags else 1
    differencing = int(page.predictor) == 2
    image = None
    reversed_bits = int(page.fillorder) == 2
    if (page.bitspersample == dtype.itemsize * 8 and not page.is_subsampled
            and len(set(np.atleast_1d(formats).tolist())) == 1 and (not tiled or int(page.tiledepth) == 1)
            and (int(page.predictor) == 1 or differencing and dtype.kind in "ui")
            and h * w > 0 and len(page.dataoffsets) == planes * down * across):
        image = np.empty((planes, h, w, contig), dtype)
    stored = dtype.newbyteorder(tif.byteorder)  # the file's byte order
    fh = tif.filehandle
    for i, (offset, count) in enumerate(zip(page.dataoffsets, page.databytecounts)):
        count = max(0, min(int(count), fh.size - int(offset)))  # a count past the file's end: what is there
        if not count:  # an empty chunk: tifffile fills it in
            image = None
            continue
        fh.seek(int(offset))
        data = fh.read(count)
        if reversed_bits:  # what tifffile inflates: checking the bytes as stored would check another stream
            data = _BITS_REVERSED[np.frombuffer(data, np.uint8)].tobytes()
        try:
            raw = _inflated(codec, data, segment_bytes)
        except (zlib.error, lzma.LZMAError, _DamagedChunk):
            image = None  # left for tifffile to report; it inflates no more of it than was inflated here
            continue
        if raw is None:
            raise DataError(f"{shown_as}: a {kind} compressed with {page.compression.name} that decompresses to more than "
                            f"the {segment_bytes:,} bytes its tags say it holds (a decompression bomb, or a damaged file)")
        if image is None:
            continue
        plane, k = divmod(i, down * across)
        y, x = k // across * high, k % across * wide
        rows = high if tiled else min(high, h - y)  # the last strip holds the rows left
        if len(raw) < rows * wide * contig * dtype.itemsize:  # short: tifffile's rules for what it holds
            image = None
            continue
        chunk = np.frombuffer(raw, stored, rows * wide * contig).reshape(rows, wide, contig)[:h - y, :w - x]
        into = image[plane, y:y + chunk.shape[0], x:x + chunk.shape[1]]
        if differencing:  # each sample minus the one left of it, wrapping in the sample type: summed back
            np.cumsum(chunk, axis=1, dtype=dtype, out=into)
        else:
            into[...] = chunk
    if image is None:
        return None
    return image[0, ..., 0] if n == 1 else image[..., 0] if planes > 1 else image[0]


def _check_tile_size(shown_as: str, tags) -> None:
    """A TIFF whose tiles (TileWidth and TileLength, tags 322 and 323) are larger than
    :data:`MAX_IMAGE_PIXELS` is a :class:`DataError` naming the file, before a tile is decoded:
    Pillow's libtiff decoder makes a buffer of a whole tile, so that a 2.9 kB TIFF of 13 x 24 pixels
    whose tiles said 50,331,664 x 16 took 1.5 GB. (A strip holds no more rows than the image.)"""
    width, length = (_first_number(tags, code, 0) for code in (322, 323))
    if width * length > MAX_IMAGE_PIXELS:
        raise DataError(f"{shown_as}: TIFF tiles of {width:,.0f} x {length:,.0f} pixels, more than the "
                        f"{MAX_IMAGE_PIXELS:,} pixels an image may have (each is decoded whole: a damaged file, "
                        f"or a decompression bomb)")


def _check_pillow_jpeg_tiff(shown_as: str, fh, tags) -> bool:
    """A TIFF of compression 7 (JPEG) as Pillow reads it, without ``bands``: every strip or tile's frame read
    as :func:`_check_jpeg_chunks` reads it with ``bands``, bounded by the bytes its tags say a strip or tile
    holds, before libtiff decodes it. libtiff refused a frame larger than its strip with a line on standard
    error that names no file ('JPEGPreDecode: ... exceeds expected dimensions') and Pillow's 'decoder error -2'.
    An old-style JPEG (6), which may hold its stream elsewhere than in its strips, is checked as libtiff reads it
    (:func:`_check_pillow_ojpeg_tiff`). True if its strips or tiles are CMYK stored inverted
    (:func:`_check_jpeg_frames`), which libtiff decodes as stored. A strip or tile of compression 7 whose byte
    count is 0, which libtiff refuses ('Invalid strip byte count 0', on standard error naming no file, and Pillow's
    'decoder error -2'), is a :class:`DataError` naming the file and the strip."""
    compression = _first_number(tags, 259, 1)
    if compression == 6:
        _check_pillow_ojpeg_tiff(shown_as, fh, tags)
        return False
    if compression != 7:
        return False
    length = int(_first_number(tags, 257, 0))
    apart = tags.get(284, 1) == 2
    samples = int(_first_number(tags, 277, 1)) if not apart else 1
    depth = 2 if max(_floats(tags.get(258, 8)) or (8.0,)) > 8 else 1
    kind, wide, offsets, counts = _pillow_chunks(tags)
    high = int(_first_number(tags, 323, 0)) if kind == "tile" else int(min(_first_number(tags, 278, length), length))
    empty = next((i for i, count in enumerate(counts) if not count), None)
    if empty is not None:  # libtiff: 'TIFFFillStrip: Invalid strip byte count 0, strip 1.' on stderr, naming no file
        raise DataError(f"{shown_as}: a JPEG TIFF whose {kind} {empty + 1:,} of {len(counts):,} is empty (a byte count "
                        f"of 0, {_chunk_tags(kind)[1]}), which "
                        f"libtiff does not decode (a damaged file); with bands it reads 0 there, as tifffile fills it")
    position = fh.tell()
    try:
        size = fh.seek(0, io.SEEK_END)
        return _check_jpeg_frames(shown_as, fh, size, [int(v) for v in offsets], [int(v) for v in counts], kind,
                                  wide * high * samples * depth, samples, apart and _first_number(tags, 277, 1) > 1,
                                  wide)
    finally:
        fh.seek(position)


def _pillow_chunks(tags) -> tuple[str, int, tuple[float, ...], tuple[float, ...]]:
    """How a TIFF whose tags Pillow gives is cut, as libtiff reads it: ``(kind, width, offsets, byte counts)``
    of its tiles where TileWidth and TileLength (tags 322 and 323) are both given (the tile's width, tags 324 and
    325), else of its strips (the image's width, ImageWidth, tag 256; tags 273 and 279)."""
    if 322 in tags and 323 in tags:
        return "tile", int(_first_number(tags, 322, 0)), _floats(tags.get(324)), _floats(tags.get(325))
    return "strip", int(_first_number(tags, 256, 0)), _floats(tags.get(273)), _floats(tags.get(279))


def _check_pillow_ojpeg_tiff(shown_as: str, fh, tags) -> None:
    """An old-style JPEG TIFF (compression 6) as Pillow reads it, without ``bands``: libtiff (``tif_ojpeg.c``) reads
    the image's one frame header from the JPEG stream in JPEGInterchangeFormat (tag 513, of the length in tag 514)
    where there is one, else from the first strip or tile, and refuses a frame wider than a strip or tile
    ('JPEG compressed data image width exceeds expected image width', on standard error naming no file; Pillow's
    'decoder error -2'), or of fewer lines than the image or fewer samples a line than the image and a strip or
    tile ('... indicates unexpected height', '... width'). Such a frame is a :class:`DataError` naming the file,
    before libtiff decodes it. A header of no frame (its tables in tags 519-521) is left to libtiff."""
    width = int(_first_number(tags, 256, 0))
    kind, wide, offsets, counts = _pillow_chunks(tags)
    position = fh.tell()
    try:
        size = fh.seek(0, io.SEEK_END)
        apart = int(_first_number(tags, 513, 0))
        if 0 < apart < size:  # as libtiff: the stream's length, or the rest of the file where tag 514 gives none
            where, at, count = "in JPEGInterchangeFormat (tag 513)", apart, int(_first_number(tags, 514, 0))
        elif offsets and counts:
            where, at, count = f"in its first {kind}", int(offsets[0]), int(counts[0])
        else:
            return
        fh.seek(at)
        frame = _jpeg_frame(fh.read(max(0, min(count or size, size - at))))
    finally:
        fh.seek(position)
    if frame is None:
        return
    lines, samples = frame[:2]
    said = f"{shown_as}: an old-style JPEG TIFF (compression 6) whose JPEG frame {where} is {samples:,} x {lines:,} pixels"
    if samples > wide:
        raise DataError(f"{said}, wider than the {wide:,} pixels its tags give a {kind} "
                        f"({'TileWidth, tag 322' if kind == 'tile' else 'ImageWidth, tag 256'}), which libtiff does "
                        f"not decode (a damaged file)")
    length = int(_first_number(tags, 257, 0))
    if lines < length or samples < min(width, wide):  # libtiff: 'indicates unexpected height' ('... width')
        raise DataError(f"{said}, smaller than the {width:,} x {length:,} image its tags give (ImageWidth and "
                        f"ImageLength, tags 256 and 257), which libtiff does not decode (a damaged file)")


def _tag_value(value: object) -> object:
    """A tag's value as Pillow gives it: one number bare, several as a tuple of Python numbers."""
    if isinstance(value, (bytes, str)):
        return value
    items = np.asarray(value).reshape(-1).tolist()
    return items[0] if len(items) == 1 else tuple(items)


def _reason(exc: BaseException) -> str:
    """What a refusal says of the error that stopped a read: its type and message, the file's name
    left out of an OSError's (the line names it first), and a long message cut by ``brief``."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return f"{type(exc).__name__}: {brief(exc, 300)}"


class _ReadsWithinFile(io.BufferedReader):
    """An image file as Pillow reads it, whose ``read(n)`` asks for no more than the bytes left in
    it: Python makes the whole ``n`` bytes before it reads, and Pillow reads the rest of a PNG's
    IDAT chunk in one read of the length the chunk's header gives (up to 4 GiB), so that a 69-byte
    PNG made 4 GiB. A read gives the bytes there are either way; only the request is cut."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(io.FileIO(path, "rb"))
        st = os.fstat(self.fileno())
        self._size = st.st_size if stat.S_ISREG(st.st_mode) else None
        self._path = os.fspath(path)

    def __repr__(self) -> str:  # as Pillow names a file it opened itself ('cannot identify image file ...')
        return repr(self._path) if len(self._path) <= BRIEF_CHARS else brief(self._path)

    def read(self, size: int | None = -1, /) -> bytes:
        if size is not None and size > 0 and self._size is not None:
            size = max(min(size, self._size - self.tell()), 0)
        return super().read(size)


def _read_image_and_place(path: str | Path, image_size: int, place: str | None,
                          bands: Sequence[int] | None = None,
                          scale: float | None = None) -> tuple[np.ndarray, tuple[float, float] | None]:
    """:func:`read_image`, and with ``place`` (a key of :data:`_PLACE_READERS`) the image's
    ``(lat, lon)`` from its tags, read in the same open after the size check and before
    the pixels are decoded; None without ``place``. With ``bands``, the file is a TIFF
    read by :func:`_read_tiff_bands`."""
    from PIL import ImageChops, UnidentifiedImageError

    name = brief(path)
    if is_special_file(path):  # not opened: a FIFO waits for a writer, forever; /dev/zero reads as empty
        raise DataError(f"{name}: {NOT_REGULAR}; expected an image file")
    if bands is not None:  # it names the file as below
        arr, where = _read_tiff_bands(path, image_size, bands, scale, place)
        return arr.transpose(2, 0, 1), where
    where, past_end = None, None  # a TIFF's strip that runs past the file's end: said if decoding fails
    try:
        with _ReadsWithinFile(path) as fh, Image.open(fh) as im:
            _check_image_size(name, im.width, im.height)
            inverted = False  # a JPEG TIFF's CMYK stored inverted, which libtiff decodes as stored
            if im.format == "TIFF":  # libtiff decodes a tile at a time, into a buffer of the tile's size
                _check_tile_size(name, getattr(im, "tag_v2", {}))
                past_end = _check_pillow_chunks_in_file(name, fh, getattr(im, "tag_v2", {}))
                inverted = _check_pillow_jpeg_tiff(name, fh, getattr(im, "tag_v2", {}))
            try:  # the orientation a camera or phone records: the image is used as viewers show it
                exif = im.getexif()
                orientation = exif.get(0x0112)
            except Exception:  # an unreadable EXIF block: the image is used as stored
                exif, orientation = None, None
            if place is not None:  # from the tags Pillow parsed on opening: no pixel is decoded for it
                where = _PLACE_READERS[place](name, im, exif)
            if im.format == "JPEG":
                im.draft("RGB", (image_size, image_size))  # decode at reduced scale: much faster
            im.load()
            if inverted and len(im.getbands()) == 4:  # turned back, as Pillow's JPEG reader reads such a stream
                im = ImageChops.invert(im)
            if orientation is not None and im.getexif().get(0x0112) is None:
                orientation = None  # Pillow turned it as it decoded it (its TIFF reader does): not twice
            if im.mode in ("I", "F") or im.mode.startswith("I;16"):
                im = _single_band_to_8bit(im, name)
            if im.mode == "P" and "transparency" in im.info:  # as Pillow asks (else it warns): same colours
                im = im.convert("RGBA")
            arr = _resized(im.convert("RGB"), image_size, orientation)
    except Image.DecompressionBombError as exc:  # more than twice the limit: Pillow refuses it in open()
        found = re.search(r"\((\d+) pixels\)", str(exc))
        raise _too_large(name, f"{int(found.group(1)):,}" if found else "too many") from None
    # TypeError: a TIFF tag of another type than the one Pillow uses (StripOffsets as DOUBLE)
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError, TypeError) as exc:
        if isinstance(exc, OSError) and (dead := dead_link(path)) is not None:
            raise DataError(f"{name}: {dead_link_text(path, dead)}") from None
        if past_end is not None:  # Pillow: 'image file is truncated (0 bytes not processed)'
            raise past_end from None
        try:  # an empty file: Pillow's "cannot identify image file" says less
            empty = isinstance(exc, UnidentifiedImageError) and os.path.getsize(path) == 0
        except OSError:  # gone since: said as Pillow said it
            empty = False
        if empty:
            raise DataError(f"{name}: cannot read image (an empty file, 0 bytes)") from None
        tiff = _tiff_bands(path) if isinstance(exc, UnidentifiedImageError) else None
        if tiff is not None and tiff[0] == 0:
            raise _no_samples(name) from None
        if tiff is not None:
            counts = sorted(set(tiff[1]))  # one a band, as many as its tag holds: a damaged one, thousands
            bits = ("/".join(map(str, counts)) + " bits" if len(counts) <= 4
                    else f"{counts[0]}..{counts[-1]} bits ({len(counts)} different)")
            raise DataError(f"{name}: a TIFF of {tiff[0]} bands of {bits}, which cannot be read as an image; "
                            f"choose 3 of its bands with the dataset option bands (e.g. bands=4+3+2 in --data, "
                            f"data.bands = [4, 3, 2]), or save 1 (grey) or 3 (RGB) of them, of 8 or 16 bits") from None
        raise DataError(f"{name}: cannot read image ({_reason(exc)})") from None
    return arr.transpose(2, 0, 1), where


def _read_many(
    files: Sequence[Path], image_size: int, skip_corrupt: bool, workers: int | None, desc: str,
    place: str | None = None, bands: Sequence[int] | None = None, scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode ``files`` in a thread pool; returns ``(uint8 [n_ok, 3, S, S], ok mask, [n, 2] lat/lon)``,
    the places read from each image's tags with ``place`` (see :func:`_read_image_and_place`), else NaN;
    with ``bands`` (and ``scale``), each file is a TIFF of which those bands are read.
    ``skip_corrupt`` skips unreadable files; a readable one without a place stops the load."""
    check_pool_size(len(files), image_size, desc)
    out = np.zeros((len(files), 3, image_size, image_size), dtype=np.uint8)
    places = np.full((len(files), 2), np.nan)
    ok = np.ones(len(files), dtype=bool)
    bad: list[str] = []

    reading = threading.local()  # the file each worker decodes, for the warnings Pillow gives
    said: set[tuple[str, str]] = set()

    def pillow_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                       file: object = None, line: str | None = None) -> None:
        """A warning Pillow gives while decoding (a TIFF's tags cut short, say) as one log line
        naming the image, not Python's two lines naming Pillow's source file."""
        text = str(message).strip()
        where = getattr(reading, "path", None)
        key = (desc if where is None else brief(where), text)
        if key not in said:
            said.add(key)
            log.warning("%s: %s (Pillow, %s)", key[0], text, category.__name__)

    def one(i: int) -> None:
        reading.path = files[i]
        try:
            out[i], where = _read_image_and_place(files[i], image_size, place, bands, scale)
            if where is not None:
                places[i] = where
        except _Unplaced:
            raise
        except DataError:
            if not skip_corrupt:
                raise
            ok[i] = False
            bad.append(str(files[i]))  # named by brief where a line names it

    n_workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    from tqdm.auto import tqdm

    with tqdm(total=len(files), desc=desc, leave=False, disable=None if len(files) > 2000 else True) as bar, \
            warnings.catch_warnings():
        # Pillow warns of images over MAX_IMAGE_PIXELS as it opens them; read_image refuses each
        # with an error naming the file, which the warning, printed first, would only repeat
        warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
        warnings.showwarning = pillow_warning  # restored as the block ends
        if n_workers <= 1:
            for i in range(len(files)):
                one(i)
                bar.update()
        else:
            with ThreadPoolExecutor(n_workers) as pool:
                for _ in pool.map(one, range(len(files))):
                    bar.update()
    if bad and len(bad) == len(files):  # skipping every file would hand on an empty dataset
        raise DataError(f"{desc}: none of the {len(files)} image(s) could be read (e.g. {brief(sorted(bad)[0])}); "
                        "skip_corrupt skips some broken files, not all of them")
    if bad:
        log.warning("skipped %d unreadable image(s): %s", len(bad),
                    ", ".join(map(brief, sorted(bad)[:5])) + (" ..." if len(bad) > 5 else ""))
    return out[ok], ok, places


def _check_no_class_emptied(desc: str, classes: Sequence[str], labels: np.ndarray, ok: np.ndarray,
                            files: Sequence[Path]) -> None:
    """With ``skip_corrupt``, skipping must not leave a class without images: a class folder
    without images is an error, and so is one whose every image was unreadable."""
    for c in np.unique(labels):
        if not ok[labels == c].any():
            first = files[int(np.flatnonzero(labels == c)[0])]
            raise DataError(f"{desc}: none of the {int((labels == c).sum())} image(s) of class {classes[c]!r} could "
                            f"be read (e.g. {brief(first)}); skip_corrupt skips some broken files, not a whole class")


def _to_dataset(
    pixels: np.ndarray, labels: Sequence[int], lat: np.ndarray, lon: np.ndarray, classes: Sequence[str],
    name: str, sources: list[str] | None,
) -> GeoDataset:
    return GeoDataset(
        images=torch.from_numpy(pixels).float().div_(255.0),
        labels=torch.as_tensor(np.asarray(labels, dtype=np.int64)),
        lat=np.asarray(lat, dtype=np.float64),
        lon=np.asarray(lon, dtype=np.float64),
        class_names=list(classes),
        name=name,
        sources=sources,
    )


#: Folders that are never classes: what macOS's zip puts beside the files (hidden folders neither).
NOT_CLASSES = frozenset({"__MACOSX"})


def class_folders(root: Path) -> dict[str, Path]:
    """The class sub-folders of an image folder by class name, sorted by name: every folder
    but hidden ones and :data:`NOT_CLASSES`. A class name is its folder's name in Unicode NFC
    (:func:`fol.defaults.class_name`): macOS keeps 'café' decomposed, Linux as typed, and
    both name one class (sorted alike). Two folders of one name in both forms are an error, and
    so is a link that points nowhere (a class folder moved, a disk not mounted): that class
    would be left out without a word."""
    folder_name = brief(root)  # as every message names it: escaped, a long path cut
    found: dict[str, Path] = {}
    for d in sorted(Path(root).iterdir()):
        if not d.name.startswith(".") and (dead := dead_link(d)) is not None:
            raise DataError(f"image folder {folder_name}: {brief(d)} is {dead_link_text(d, dead)}"
                            + ("; point it at a class folder or remove it" if dead == errno.ELOOP else
                               " (a class folder moved, or a disk not mounted?); restore it or remove the link"))
        if d.is_dir() and not d.name.startswith(".") and d.name not in NOT_CLASSES:
            name = class_name(d.name)
            if name in found:
                raise DataError(f"image folder {folder_name}: folders {found[name].name!r} and {d.name!r} are the same "
                                f"class name {name!r} written in two Unicode forms; merge them into one folder")
            found[name] = d
    return dict(sorted(found.items()))


def class_folder_names(root: Path) -> list[str]:
    """The class names of an image folder's sub-folders, sorted (:func:`class_folders`)."""
    return list(class_folders(root))


def _image_files(folder: Path) -> list[Path]:
    """The image files in ``folder`` and its sub-folders (as torchvision's
    ``ImageFolder`` reads a class folder), sorted by path; hidden files and
    folders (macOS's ``._x.jpg`` metadata beside every file copied to a
    non-Mac disk) are skipped, and links to folders are not followed (no
    loops). A link that points nowhere is listed (:func:`read_image` says so),
    not left out; a folder that cannot be listed (no permission) is a
    :class:`DataError` naming it, not a folder left out."""
    def unlisted(exc: OSError) -> None:  # os.walk's default is to skip the folder without a word
        raise DataError(f"{brief(exc.filename)}: cannot list this folder ({type(exc).__name__}: {exc.strerror}); "
                        f"its images would be left out")

    found = []
    for top, dirs, names in os.walk(folder, onerror=unlisted, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for n in names:
            p = Path(top) / n
            if not n.startswith(".") and p.suffix.lower() in IMAGE_EXTENSIONS and (
                    p.is_file() or (p.is_symlink() and not p.exists())):
                found.append(p)
    return sorted(found)


def parse_lonlat(filename: str, sep: str) -> tuple[float, float]:
    """``(lat, lon)`` in degrees from a file name ``"<lon><sep><lat>.<ext>"`` (or a path
    ending in one: an error names the path given, as :func:`~swarmbase.tomlcheck.brief` writes it).

    >>> parse_lonlat("-73.4586,45.5837.jpg", ",")
    (45.5837, -73.4586)
    >>> parse_lonlat("-95.061275_29.831535.jpeg", "_")
    (29.831535, -95.061275)
    """
    stem = Path(filename).name.rsplit(".", 1)[0]
    m = re.fullmatch(rf"\s*({_NUM})\s*{re.escape(sep)}\s*({_NUM})\s*", stem)
    if not m:
        raise DataError(f"{brief(filename)}: file name is not '<longitude>{sep}<latitude>.<ext>' (decimal degrees)")
    lon, lat = float(m.group(1)), float(m.group(2))
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise DataError(f"{brief(filename)}: coordinates out of range (lon {lon}, lat {lat}; expected degrees)")
    return lat, lon


def _subsample(labels: np.ndarray, max_per_class: int | None, seed: int) -> np.ndarray:
    """Indices keeping at most ``max_per_class`` per class (seeded choice, kept in order)."""
    if max_per_class is None:
        return np.arange(len(labels))
    if max_per_class < 1:
        raise DataError(f"max_per_class must be a positive integer, got {max_per_class}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, 0xC1A5]))
    keep = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        if len(idx) > max_per_class:
            idx = np.sort(rng.choice(idx, max_per_class, replace=False))
        keep.append(idx)
    return np.sort(np.concatenate(keep)) if keep else np.arange(0)


# ------------------------------------------------------------------ splits

#: Words that mark a folder named for a published split, not a class, when the folder's name
#: begins or ends with one (:func:`split_first_layout`): ``train``, ``valid``, ``test_another``,
#: ``val2017``, ``Train``, ``train_set``, ``trainingSet``, ``seg_train``, ``seg_pred`` ...
SPLIT_WORDS = frozenset({"train", "training", "trainval", "val", "valid", "validation", "dev", "test", "testing",
                         "eval", "evaluation", "holdout", "pred", "predict", "prediction"})


def _is_split_name(name: str) -> bool:
    """Is the first or the last word of ``name`` (words: runs of letters, a capital starting
    a new one, so ``trainingSet`` is training, set) one of :data:`SPLIT_WORDS`?"""
    words = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)
    return bool(words) and (words[0].lower() in SPLIT_WORDS or words[-1].lower() in SPLIT_WORDS)


def _split_dir(folder: Path) -> Path:
    """The folder holding a split's class folders: ``folder`` itself, or the one folder inside
    it named as it (``seg_train/seg_train/<class>/``, as some archives unpack) when ``folder``
    holds nothing else (no image directly, no other folder)."""
    inner = class_folders(folder)
    if list(inner) == [class_name(folder.name)] and not _holds_images(folder, directly=True):
        return inner[class_name(folder.name)]
    return folder


def _holds_images(folder: Path, directly: bool) -> bool:
    """Does ``folder`` hold an image file (as :func:`_image_files` counts them), directly or
    anywhere below? Stops at the first one found."""
    for top, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = [] if directly else [d for d in dirs if not d.startswith(".")]
        if any(not n.startswith(".") and Path(n).suffix.lower() in IMAGE_EXTENSIONS and (Path(top) / n).is_file()
               for n in names):
            return True
    return False


def split_first_layout(root: Path) -> dict[str, list[str]] | None:
    """``{split: [class, ...]}`` when ``root`` is laid out by split first
    (``<root>/<split>/<class>/<images>``, as Kaggle sets are published), else None.

    The rule: every top-level folder (:func:`class_folders`) is named like a split
    (its first or last word is one of :data:`SPLIT_WORDS`: ``train``, ``valid``, ``test``,
    ``test_another``, ``train_set``, ``seg_train`` ...; a split folder holding only a
    folder of its own name, ``seg_train/seg_train/``, stands for that one), and at
    least one of them holds no image directly and
    sub-folders with images (the splits returned); the others hold no class
    folder with images (an unlabelled ``test/`` of bare images, as Kaggle
    competitions publish it, or an emptied split). With two splits or more
    returned, at least one sub-folder name occurs in two of them. A folder of
    classes whose images sit in sub-folders (``burnt/2020/*.png``) is not
    split-first: its class names are not split names."""
    tops = class_folders(root)
    if not tops or not all(_is_split_name(n) for n in tops):
        return None
    layout: dict[str, list[str]] = {}
    for split, top in tops.items():
        folder = _split_dir(top)
        if _holds_images(folder, directly=True):
            continue  # unlabelled, or a class named like a split (then no split below holds class folders)
        classes = [c for c, d in class_folders(folder).items() if _holds_images(d, directly=False)]
        if classes:
            layout[split] = classes
    if not layout:
        return None
    names = [c for cs in layout.values() for c in cs]
    if len(layout) > 1 and len(set(names)) == len(names):
        return None
    return layout


def _chosen_splits(desc: str, root: Path, splits: Sequence[str], available: Iterable[str]) -> list[str]:
    """``splits`` checked against the split folders ``available`` in ``root``: a non-empty
    list of distinct names of folders that exist (compared in Unicode NFC). ``desc`` names the
    folder or dataset as a message does (a path through ``brief``)."""
    if isinstance(splits, (str, bytes)):
        raise DataError(f"{desc}: splits must be a list of split folder names, e.g. ['train', 'valid'], "
                        f"got the string {splits!r}")
    chosen = [class_name(str(s)) for s in splits]
    have = list(available)
    if not chosen:
        raise DataError(f"{desc}: splits is empty; name one or more of the split folders in {brief(root)} "
                        f"({', '.join(have) or 'none found'})")
    twice = sorted({s for s in chosen if chosen.count(s) > 1})
    if twice:
        raise DataError(f"{desc}: splits names {', '.join(twice)} twice; name each split folder once")
    missing = [s for s in chosen if s not in have]
    if missing:
        raise DataError(f"{desc}: no split folder {', '.join(missing)} in {brief(root)} (found: {', '.join(have) or 'none'})")
    return chosen


def _pooled_split_files(root: Path, splits: Sequence[str], classes: Sequence[str]
                        ) -> tuple[list[Path], list[int], list[str], list[str]]:
    """The images of ``<root>/<split>/<class>/`` for every chosen split and class, pooled (the
    toolkit re-partitions and re-splits per node): ``(files, labels, missing, empty)`` where
    ``missing`` and ``empty`` list the ``split/class`` folders absent or without images."""
    files: list[Path] = []
    labels: list[int] = []
    missing: list[str] = []
    empty: list[str] = []
    for split in splits:
        present = class_folders(_split_dir(root / split))
        for ci, cls in enumerate(classes):
            folder = present.get(class_name(cls))
            if folder is None:
                missing.append(f"{split}/{cls}")
                continue
            found = _image_files(folder)
            if not found:
                empty.append(f"{split}/{cls}")
            files += found
            labels += [ci] * len(found)
    return files, labels, missing, empty


# -------------------------------------------------------- geo-tagged layouts


def _load_geo_layout(
    name: str, base: Path, splits: Sequence[str], classes: Sequence[str], sep: str, image_size: int,
    max_per_class: int | None, seed: int, skip_corrupt: bool, workers: int | None, layout: str, source: str,
) -> GeoDataset:
    if isinstance(splits, (str, bytes)):
        splits = _chosen_splits(f"dataset {name!r}", base, splits, ())  # the error: a string is no list
    root = _locate(base, list(splits))
    if root is None:
        raise _missing(name, base, layout, source)
    splits = _chosen_splits(f"dataset {name!r}", root, splits, class_folders(root))
    files, labels, missing, empty = _pooled_split_files(root, splits, classes)
    if missing:
        raise DataError(f"dataset {name!r}: folder {brief(root / missing[0])} is missing (expected layout: {layout})")
    if not files:
        raise _missing(name, base, layout, source)
    if empty:  # every published folder holds images: an empty one is an incomplete copy, not a smaller split
        raise DataError(f"dataset {name!r}: no images in {', '.join(empty)} under {brief(root)} (an incomplete copy? "
                        f"unpack the archive again, or leave that split out with splits=)")
    files, labels = _drop_copies(name, root, *_drop_links(name, root, files, labels))
    coords = np.array([parse_lonlat(str(f), sep) for f in files], dtype=np.float64).reshape(-1, 2)
    keep = _subsample(np.asarray(labels), max_per_class, seed)
    files = [files[i] for i in keep]
    pixels, ok, _ = _read_many(files, image_size, skip_corrupt, workers, desc=name)
    _check_no_class_emptied(name, classes, np.asarray(labels)[keep], ok, files)
    kept = keep[ok]
    lab = np.asarray(labels)[kept]
    log.info("loaded %s: %d images from %s (%s)", name, len(kept), brief(root), ", ".join(splits))
    return _to_dataset(pixels, lab, coords[kept, 0], coords[kept, 1], classes, name,
                       [str(f) for f, good in zip(files, ok) if good])


def _repeats(root: Path, files: list[Path], labels: list[int], groups: Iterable[Sequence[int]],
             key: Callable[[Path], object]) -> tuple[set[int], list[str], list[str]]:
    """Within each group of file indices, the files whose ``key`` an earlier file of the
    group already had: ``(indices to drop: same label, pairs with the same label, pairs
    with another label)``, pairs as ``"<file> = <first>"``. A file that cannot be read
    is left to be reported, naming it, when it is decoded."""
    drop: set[int] = set()
    same: list[str] = []
    other: list[str] = []
    for idxs in groups:
        first: dict[object, int] = {}
        for i in idxs:
            try:
                j = first.setdefault(key(files[i]), i)
            except OSError:
                continue
            if j == i:
                continue
            pair = f"{brief(files[i].relative_to(root).as_posix())} = {brief(files[j].relative_to(root).as_posix())}"
            if labels[i] == labels[j]:
                drop.add(i)
                same.append(pair)
            else:
                other.append(pair)
    return drop, same, other


def _without(files: list[Path], labels: list[int], drop: set[int]) -> tuple[list[Path], list[int]]:
    keep = [i for i in range(len(files)) if i not in drop]
    return [files[i] for i in keep], [labels[i] for i in keep]


def _drop_copies(name: str, root: Path, files: list[Path], labels: list[int]) -> tuple[list[Path], list[int]]:
    """Keep one copy of an image found in several published folders.

    The published splits are pooled and re-split per node, so a file present in
    two of them (the same ``<lon><sep><lat>`` name and the same bytes) could land
    in both a node's training and test split. Such a copy with the same label is
    dropped (the first folder read keeps it) and counted in a logged warning; one
    labelled differently is kept and warned about. Files that merely share a name
    (other bytes: another tile of that place) are all kept."""
    by_name: dict[str, list[int]] = {}
    for i, f in enumerate(files):
        by_name.setdefault(f.name.lower(), []).append(i)
    drop, copies, conflicts = _repeats(root, files, labels, (g for g in by_name.values() if len(g) > 1),
                                       lambda f: hashlib.sha256(f.read_bytes()).digest())
    if copies:
        log.warning("%s: %d image(s) are copies of one in another published folder; each is used once "
                    "(e.g. %s)", name, len(copies), copies[0])
    if conflicts:
        log.warning("%s: %d image(s) are copies of one with another label in another folder; both are kept "
                    "(e.g. %s)", name, len(conflicts), conflicts[0])
    return _without(files, labels, drop) if drop else (files, labels)


def _drop_links(name: str, root: Path, files: list[Path], labels: list[int]) -> tuple[list[Path], list[int]]:
    """Keep one path to a file that several paths reach (a link to it, or a hard link).

    Such an image would be drawn twice and, the pool being split per node, could be
    in a node's training and test splits both. A second path with the same label is
    dropped (the first in path order is kept) and counted in a logged warning; one in
    another class is kept and warned about, as :func:`_drop_copies` does for copies."""
    def inode(f: Path) -> tuple[int, int]:
        st = f.stat()
        return st.st_dev, st.st_ino

    drop, same, other = _repeats(root, files, labels, [range(len(files))], inode)
    if same:
        log.warning("%s: %d image(s) are links to a file already read; each file is used once (e.g. %s)",
                    name, len(same), same[0])
    if other:
        log.warning("%s: %d image(s) are links to a file of another class; both are kept (e.g. %s)",
                    name, len(other), other[0])
    return _without(files, labels, drop) if drop else (files, labels)


def _geo_loader(name: str, default_splits: tuple[str, ...], sep: str, layout: str, url: str, doc: str):
    """A loader for one of the published geo-tagged layouts (``load_wildfire``,
    ``load_hurricane``): the same options, the layout's own folders, file-name
    separator and source."""

    def load(
        path: str | Path | None = None,
        splits: Sequence[str] = default_splits,
        image_size: int = 32,
        max_per_class: int | None = None,
        seed: int = 0,
        skip_corrupt: bool = False,
        workers: int | None = None,
    ) -> GeoDataset:
        base = Path(path) if path is not None else dataset_dir(name)
        return _load_geo_layout(name, base, splits, TASK_CLASSES[name], sep, image_size, max_per_class, seed,
                                skip_corrupt, workers, layout, url)

    load.__name__ = load.__qualname__ = f"load_{name}"
    load.__doc__ = doc
    return load


load_wildfire = _geo_loader(
    "wildfire", ("train", "valid", "test"), ",",
    "train/, valid/, test/ each with wildfire/ and nowildfire/ holding '<lon>,<lat>.jpg'", WILDFIRE_URL,
    """The Wildfire Prediction Dataset (Kaggle ``abdelghaniaaba/wildfire-prediction-dataset``).

    Layout: ``<path>/{train,valid,test}/{wildfire,nowildfire}/<lon>,<lat>.jpg``
    (350 x 350 satellite tiles; default ``path`` is ``datasets/wildfire``).
    Classes: ``["nowildfire", "wildfire"]`` (label 1 = wildfire). ``splits``
    picks which published folders to read (they are pooled; the toolkit
    re-partitions and re-splits per node). ``max_per_class`` keeps a seeded
    random subset of each class.
    """)

load_hurricane = _geo_loader(
    "hurricane", ("train_another", "validation_another", "test", "test_another"), "_",
    "train_another/, validation_another/, test/, test_another/ each with damage/ and no_damage/ "
    "holding '<lon>_<lat>.jpeg'", HURRICANE_URL,
    """Satellite Images of Hurricane Damage (Cao & Choe 2018; Kaggle
    ``kmader/satellite-images-of-hurricane-damage``, IEEE DataPort).

    Layout: ``<path>/{train_another,validation_another,test,test_another}/
    {damage,no_damage}/<lon>_<lat>.jpeg`` (128 x 128 tiles of the Houston area
    after Hurricane Harvey, 2017; default ``path`` is ``datasets/hurricane``).
    Classes: ``["no_damage", "damage"]`` (label 1 = damage). Options as for
    :func:`load_wildfire`.
    """)


# ----------------------------------------------------------------- generic


def _read_coords_csv(csv_path: Path) -> dict[str, tuple[float, float]]:
    """``{file: (lat, lon)}`` from a CSV with a header naming a file column
    (``file``/``filename``/``path``/``image``) and ``lat``/``latitude``,
    ``lon``/``longitude`` columns. Keys are stored as given (``\\`` read as ``/``), in Unicode NFC.
    A file listed twice with different coordinates is an error naming both lines."""
    where = brief(csv_path)  # as every message names it: escaped, a long path cut
    check_input_file(csv_path, DataError, "coordinates CSV")  # not found, a folder, a FIFO: one line, unopened
    try:
        with csv_path.open(newline="", encoding="utf-8-sig") as fh:  # -sig: Excel's "CSV UTF-8" starts with a BOM
            # csv.reader, not DictReader: its line_num is the line a record ends on (a quoted field may
            # span lines), and DictReader skips blank lines unseen; each record here starts on the line
            # after the previous one (a blank line is an empty record), the line an error names
            reader = csv.reader(fh)
            starts = 1  # the physical line the next record starts on
            fieldnames = next(reader, None)
            header = {h.strip().lower(): k for k, h in enumerate(fieldnames or [])}
            pick = lambda names: next((header[n] for n in names if n in header), None)  # noqa: E731
            c_file = pick(("file", "filename", "path", "image"))
            c_lat, c_lon = pick(("lat", "latitude")), pick(("lon", "lng", "longitude"))
            if c_file is None or c_lat is None or c_lon is None:
                raise DataError(
                    f"{where}: header must name a file column (file/filename/path/image) and lat/latitude, "
                    f"lon/longitude columns; got {shown(fieldnames)}"
                )
            table: dict[str, tuple[float, float]] = {}
            first_line: dict[str, int] = {}
            starts = reader.line_num + 1
            for fields in reader:
                line, starts = starts, reader.line_num + 1  # where this record starts; the next one's
                if not fields:  # a blank line
                    continue
                row = dict(enumerate(fields))  # a short row lacks the last columns: None, as DictReader gave
                try:
                    lat, lon = float(row.get(c_lat)), float(row.get(c_lon))
                except (TypeError, ValueError):
                    raise DataError(f"{where}:{line}: lat/lon must be numbers, got {shown(row.get(c_lat))}, "
                                    f"{shown(row.get(c_lon))}") from None
                if not (-90 <= lat <= 90 and -180 <= lon <= 180):
                    raise DataError(f"{where}:{line}: coordinates out of range (lat {lat}, lon {lon}; degrees)")
                # in NFC, as the images' paths are looked up: a CSV typed on Linux or Windows names the
                # files of a folder unpacked on macOS (decomposed names) and the other way round
                key = unicodedata.normalize("NFC", str(row.get(c_file)).strip().replace("\\", "/"))
                if key in first_line and table[key] != (lat, lon):
                    raise DataError(f"{where}:{line}: {shown(key)} is listed again with other coordinates (first on "
                                    f"line {first_line[key]}); give each image one row, by its path relative to "
                                    f"the image folder (<class>/<file>) where two images share a file name")
                first_line.setdefault(key, line)
                table[key] = (lat, lon)
    except UnicodeDecodeError:
        raise DataError(f"{where}: not a UTF-8 text CSV") from None
    except csv.Error as exc:  # e.g. a stray quote whose field runs past the csv module's field limit
        raise DataError(f"{where}:{starts}: not a valid CSV record from this line on ({exc}); "
                        f"a quote left open?") from None
    return table


def _refuse_split_first(root: Path, classes: Sequence[str] | None) -> None:
    """A folder laid out by split first, read without ``splits``, is one clear error naming its
    splits and how to name them (unless its split folders are named as ``classes``)."""
    layout = split_first_layout(root)
    tops = list(class_folders(root))
    if layout is not None and (classes is None or {class_name(c) for c in classes} - set(tops)):
        split_names = ", ".join(f"{s}/" for s in layout)
        class_names = ", ".join(sorted({c for cs in layout.values() for c in cs}))
        others = [t for t in tops if t not in layout]  # e.g. a test/ of unlabelled images
        unlabelled = f"; {', '.join(f'{t}/' for t in others)} without class folders of images" if others else ""
        raise DataError(f"image folder {brief(root)} is laid out by split first ({split_names} each holding class folders "
                        f"{class_names}{unlabelled}), not <class>/<images>: name the split folders to pool, e.g. splits="
                        f"{','.join(layout)} (--splits {','.join(layout)} in fol data info, data.splits = "
                        f"{list(layout)} in a scenario, splits={'+'.join(layout)} in a --data spec, "
                        f"--splits {' '.join(layout)} in benchmarks/paper_tables.py)")


def image_folder_classes(root: Path, splits: Sequence[str] | None = None) -> list[str]:
    """The classes :func:`load_image_folder` would read from ``root`` with ``splits``, without
    decoding any image: the sorted class folder names (of the chosen split folders,
    pooled); a folder laid out by split first, without ``splits``, is refused as the loader does."""
    folders = class_folders(root)
    if splits is None:
        _refuse_split_first(root, None)
        return list(folders)
    chosen = _chosen_splits(f"image folder {brief(root)}", root, splits, folders)
    return sorted({c for split in chosen for c in class_folders(_split_dir(folders[split]))})


def refuse_one_class(root: Path, classes: Sequence[str]) -> None:
    """An image folder of fewer than two classes (``classes``, as :func:`image_folder_classes`
    gives them) is one :class:`DataError` line, the same wherever a node's data or a pool is
    refused for it (``fol pretrain --data``, ``fol simulate``'s check of ``data.path``): the
    folder, the class folder found, and that a classifier needs at least two. The caller puts
    its own context (the flag, the scenario field) in front."""
    if len(classes) >= 2:
        return
    found = f"one class folder, {shown(classes[0])}" if classes else "no class folder"
    raise DataError(f"image folder {brief(root)} has {found}; a classifier needs at least two classes "
                    f"(one sub-folder of images per class)")


def _class_folder_files(root: Path, classes: Sequence[str] | None, folders: dict[str, Path]
                        ) -> tuple[list[Path], list[int], list[str]]:
    """``(files, labels, classes)`` of ``<root>/<class>/<image>``; a folder laid out by
    split first is refused unless its split folders are named as ``classes``."""
    _refuse_split_first(root, classes)
    folder_name = brief(root)  # as every message names it: escaped, a long path cut
    where = f"image folder {folder_name}"
    classes = list(folders) if classes is None else [class_name(c) for c in classes]
    if not classes:
        raise DataError(f"{where} has no class sub-folders (expected {folder_name}/<class>/<image files>)")
    files: list[Path] = []
    labels: list[int] = []
    for ci, cls in enumerate(classes):
        folder = folders.get(cls, root / cls)
        if not folder.is_dir():
            raise DataError(f"{where}: class folder {brief(folder)} is missing")
        found = _image_files(folder)
        if not found:
            raise DataError(f"{where}: class folder {brief(folder)} has no images ({', '.join(IMAGE_EXTENSIONS)})")
        files += found
        labels += [ci] * len(found)
    return files, labels, classes


def _split_folder_files(root: Path, splits: Sequence[str], classes: Sequence[str] | None, folders: dict[str, Path]
                        ) -> tuple[list[Path], list[int], list[str]]:
    """``(files, labels, classes)`` of ``<root>/<split>/<class>/<image>`` pooled over ``splits``
    (see :func:`load_image_folder`)."""
    folder_name = brief(root)  # as every message names it: escaped, a long path cut
    where = f"image folder {folder_name}"
    chosen = _chosen_splits(where, root, splits, folders)
    dirs = [_split_dir(folders[split]) for split in chosen]  # each split's class folders' parent, resolved once
    for folder in dirs:
        if _holds_images(folder, directly=True):
            raise DataError(f"{where}: split folder {brief(folder)} holds images directly; "
                            f"with splits= each split folder holds class folders (<split>/<class>/<images>)")
    found = {c for folder in dirs for c in class_folders(folder)}
    classes = sorted(found) if classes is None else [class_name(c) for c in classes]
    if not classes:
        raise DataError(f"{where}: split folder(s) {', '.join(chosen)} hold no class sub-folders "
                        f"(expected {folder_name}/<split>/<class>/<image files>)")
    files, labels, _, _ = _pooled_split_files(root, [folders[s].name for s in chosen], classes)
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=len(classes))
    for cls, n in zip(classes, counts):
        if not n:
            state = "has no images" if cls in found else "is missing"
            raise DataError(f"{where}: class {cls!r} {state} in split(s) {', '.join(chosen)} "
                            f"({', '.join(IMAGE_EXTENSIONS)})")
    return files, labels, classes


def check_image_folder_root(root: Path) -> None:
    """An image folder's path that is there but is no folder is a :class:`DataError` saying what it
    is: a file (an archive not unpacked), or a link that points nowhere or into a loop (naming its
    target); "not found" would send the user looking for a path that is there. A path that is a
    folder, or is not there at all, passes (the caller says "not found" as it words it)."""
    folder_name = brief(root)  # as every message names it: escaped, a long path cut
    if (dead := dead_link(root)) is not None:  # not "not found": the link is there
        raise DataError(f"image folder {folder_name} is {dead_link_text(root, dead)}"
                        + ("; point it at a folder of class folders or remove it" if dead == errno.ELOOP else
                           " (a folder moved, or a disk not mounted?)"))
    if root.exists() and not root.is_dir():  # an archive not unpacked, an image, a list of files
        raise DataError(f"image folder {folder_name} is a file, not a folder of class folders: expected "
                        f"{folder_name}/<class>/<image files> (an archive: unpack it and give its folder)")


def image_folder_files(root: Path, classes: Sequence[str] | None = None, splits: Sequence[str] | None = None
                       ) -> tuple[list[Path], list[int], list[str]]:
    """``(files, labels, classes)``: the image files :func:`load_image_folder` lists in ``root``
    with ``classes`` and ``splits``, without opening any, before it keeps one path to a file
    that several reach (and, with ``splits``, one copy of an image found in two splits)."""
    folders = class_folders(root)
    if splits is not None:
        return _split_folder_files(root, splits, classes, folders)
    return _class_folder_files(root, classes, folders)


def check_tiff_names(root: Path, files: Sequence[Path]) -> None:
    """A folder read with ``bands`` holds TIFF files only (``.tif``, ``.tiff``): a
    :class:`~fol.errors.DataError` naming the first other file, from the names alone."""
    other = [f for f in files if f.suffix.lower() not in (".tif", ".tiff")]
    if other:
        raise DataError(f"{brief(other[0])}: not a TIFF, where bands reads the bands of TIFF files; {len(other)} of "
                        f"the {len(files)} images of {brief(root)} are other files (read a folder of TIFFs with bands, "
                        f"or leave bands out)")


def load_image_folder(
    path: str | Path,
    image_size: int = 32,
    classes: Sequence[str] | None = None,
    coords: str = "none",
    coords_csv: str | Path | None = None,
    name_separator: str = ",",
    max_per_class: int | None = None,
    seed: int = 0,
    skip_corrupt: bool = False,
    workers: int | None = None,
    name: str | None = None,
    splits: Sequence[str] | None = None,
    bands: Sequence[int] | None = None,
    scale: float | None = None,
) -> GeoDataset:
    """Any ``<path>/<class>/<image>`` folder (torchvision ``ImageFolder`` layout),
    or one laid out by split first, ``<path>/<split>/<class>/<image>``.

    ``classes`` fixes the class order (default: sorted sub-folder names);
    class names are compared in Unicode NFC (:func:`class_folders`).
    A folder laid out by split first (the rule: :func:`split_first_layout`;
    e.g. ``train/``, ``valid/``, ``test/`` each with the class folders) is
    refused, naming its splits, unless ``splits`` names the split folders to
    read: their images are pooled (the toolkit makes its own train / val /
    test split per node), the classes are the sorted union of the class
    folders in those splits (a class may be absent from some of them) and an
    image found in two splits (same name, same bytes) is used once, as the
    named loaders' ``splits`` do. ``splits`` reads ``<path>/<split>/<class>/``
    whatever the split folders are called. To read such a folder as classes
    named ``train``, ``test`` ... anyway, name them in ``classes``.
    ``coords`` says where coordinates come from: ``"none"`` (NaN),
    ``"filename"`` (``"<lon><name_separator><lat>.<ext>"``, as in the
    wildfire and hurricane sets) or ``"csv"`` (``coords_csv``, default
    ``<path>/coords.csv``, with columns file, lat, lon; ``file`` is the path
    relative to ``path``, a longer path ending in it, or the bare file name;
    with ``splits``, the path relative to ``path`` starts with the split
    folder: ``train/burnt/a.png``) or ``"exif"`` (each image's EXIF GPS tags,
    as drones and phones write them: GPSLatitude / GPSLongitude with their
    N/S, E/W refs, read in the same open as the pixels) or ``"geotiff"``
    (the centre of a GeoTIFF in a geographic CRS, from its tie point and
    pixel scale or its transformation matrix; a projected CRS is refused).
    An image without coordinates in the chosen source, or named by CSV rows
    with different ones, is an error naming it, also with ``skip_corrupt``
    (which skips unreadable images only).

    ``bands`` (three 1-based band numbers, e.g. ``(4, 3, 2)``) reads every
    image as a TIFF of any band count (a multispectral scene) with tifffile
    (``pip install 'fol-swarm[tiff]'``): those bands of its first image become
    the model's 3 input channels, in that order. They are scaled to 8 bits as
    16-bit single-band images are (integers in 0..65535 times 255 / 65535,
    floats in [0, 1], 8-bit ones as they are), or with ``scale`` divided by
    it and clipped to [0, 1] (``scale=10000`` for Sentinel-2 reflectances).
    """
    root = Path(path)
    folder_name = brief(root)  # as every message names it: escaped, a long path cut
    label = name or root.name or "imagefolder"
    desc = brief(label)  # the folder's name in a message or a log line, as a path is written
    bands, scale = check_band_options("imagefolder", bands, scale, coords, names=LOADER_BAND_NAMES)
    if not root.is_dir():
        check_image_folder_root(root)
        raise DataError(
            f"image folder {folder_name} not found: expected {folder_name}/<class>/<image files> "
            f"(e.g. under datasets/; see datasets/README.md)"
        )
    if coords not in IMAGE_FOLDER_COORDS:
        raise DataError(f"coords must be one of {', '.join(map(repr, IMAGE_FOLDER_COORDS))}, got {coords!r}")
    files, labels, classes = image_folder_files(root, classes, splits)
    files, labels = _drop_links(desc, root, files, labels)
    if splits is not None:
        files, labels = _drop_copies(desc, root, files, labels)
    if bands is not None:  # known from the names, before any file is read
        check_tiff_names(root, files)
    if coords == "filename":
        lat_lon = np.array([parse_lonlat(str(f), name_separator) for f in files], dtype=np.float64).reshape(-1, 2)
    elif coords == "csv":
        table = _read_coords_csv(Path(coords_csv) if coords_csv is not None else root / "coords.csv")
        by_name: dict[str, list[str]] = {}
        for key in table:
            by_name.setdefault(key.rsplit("/", 1)[-1], []).append(key)
        lat_lon = np.empty((len(files), 2))
        for i, f in enumerate(files):
            # its row by the path relative to the folder, else by its bare name or a longer path
            # ending in that one (an absolute path, say); never another folder's file of that name
            rel = unicodedata.normalize("NFC", f.relative_to(root).as_posix())  # as the CSV's keys
            base = rel.rsplit("/", 1)[-1]
            keys = [rel] if rel in table else [k for k in by_name.get(base, ()) if k == base or k.endswith("/" + rel)]
            places = {table[k] for k in keys}
            if not places:
                raise DataError(f"{brief(f)}: no coordinates for this image in the CSV (looked up {rel!r}, {base!r} "
                                f"and paths ending in '/{rel}')")
            if len(places) > 1:
                raise DataError(f"{brief(f)}: the CSV's rows {', '.join(map(repr, keys))} all name this image, with "
                                "different coordinates; keep one")
            lat_lon[i] = places.pop()
    else:  # none, or read from each image's tags as it is decoded
        lat_lon = np.full((len(files), 2), np.nan)
    keep = _subsample(np.asarray(labels), max_per_class, seed)
    files = [files[i] for i in keep]
    pixels, ok, places = _read_many(files, image_size, skip_corrupt, workers, desc=desc,
                                    place=coords if coords in _PLACE_READERS else None, bands=bands, scale=scale)
    lat_lon = places if coords in _PLACE_READERS else lat_lon[keep]
    _check_no_class_emptied(desc, classes, np.asarray(labels)[keep], ok, files)
    kept = keep[ok]
    return _to_dataset(pixels, np.asarray(labels)[kept], lat_lon[ok, 0], lat_lon[ok, 1], classes, label,
                       [str(f) for f, good in zip(files, ok) if good])


# --------------------------------------------------------- torchvision sets


def _resize_uint8(x: np.ndarray, image_size: int, where: str) -> torch.Tensor:
    """uint8 [N, 3, H, W] -> float32 [N, 3, S, S] in [0, 1]."""
    check_pool_size(x.shape[0], image_size, where)
    t = torch.from_numpy(np.ascontiguousarray(x)).float().div_(255.0)
    if t.shape[-1] != image_size or t.shape[-2] != image_size:
        t = torch.nn.functional.interpolate(t, size=(image_size, image_size), mode="bilinear",
                                            align_corners=False, antialias=True).clamp_(0, 1)
    return t


def _split_names(train: bool | None) -> list[bool]:
    return [True, False] if train is None else [bool(train)]


def _load_cifar(kind: str, path: str | Path | None, train: bool | None, download: bool, image_size: int) -> GeoDataset:
    from torchvision import datasets as tvd

    cls, folder, archive = {
        "cifar10": (tvd.CIFAR10, "cifar-10-batches-py", "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"),
        "cifar100": (tvd.CIFAR100, "cifar-100-python", "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"),
    }[kind]
    base = Path(path) if path is not None else dataset_dir(kind)
    if not download and not (base / folder).is_dir():
        raise _missing(kind, base, f"'{folder}/' (the official python-version archive, unpacked)",
                       f"{archive} (or, from Python, load it with download=True)")
    xs, ys, names = [], [], None
    for is_train in _split_names(train):
        try:
            ds = cls(str(base), train=is_train, download=download)
        except RuntimeError as exc:  # torchvision: "Dataset not found or corrupted" (MD5 mismatch)
            raise DataError(f"dataset {kind!r} in {base / folder} failed torchvision's integrity check ({exc}); "
                            f"re-download the official archive {archive}") from None
        xs.append(np.asarray(ds.data).transpose(0, 3, 1, 2))
        ys.append(np.asarray(ds.targets, dtype=np.int64))
        names = list(ds.classes)
    x = np.concatenate(xs)
    n = len(x)
    return GeoDataset(_resize_uint8(x, image_size, kind), torch.from_numpy(np.concatenate(ys)),
                      np.full(n, np.nan), np.full(n, np.nan), names or [], kind)


def load_cifar10(path: str | Path | None = None, train: bool | None = None, download: bool = False,
                 image_size: int = 32) -> GeoDataset:
    """CIFAR-10 via torchvision (no coordinates: lat/lon are NaN). ``train``:
    True (50,000 images), False (10,000) or None (both). Expects
    ``<path>/cifar-10-batches-py/`` (default ``datasets/cifar10``);
    ``download=True`` fetches it (needs internet)."""
    return _load_cifar("cifar10", path, train, download, image_size)


def load_cifar100(path: str | Path | None = None, train: bool | None = None, download: bool = False,
                  image_size: int = 32) -> GeoDataset:
    """CIFAR-100 (fine labels) via torchvision; see :func:`load_cifar10`.
    Expects ``<path>/cifar-100-python/`` (default ``datasets/cifar100``)."""
    return _load_cifar("cifar100", path, train, download, image_size)


_SVHN_FILES = {"train": "train_32x32.mat", "test": "test_32x32.mat", "extra": "extra_32x32.mat"}


def load_svhn(path: str | Path | None = None, splits: Iterable[str] = ("train", "test"), download: bool = False,
              image_size: int = 32) -> GeoDataset:
    """SVHN (cropped digits, format 2) from ``<path>/{train,test,extra}_32x32.mat``
    (default ``datasets/svhn``); ``download=True`` fetches missing files through
    torchvision (needs internet). Read with :func:`scipy.io.loadmat` exactly as
    torchvision does (``X`` is ``[32, 32, 3, N]``, label 10 means digit 0)."""
    import scipy.io

    base = Path(path) if path is not None else dataset_dir("svhn")
    splits = list(splits)
    unknown = [s for s in splits if s not in _SVHN_FILES]
    if unknown or not splits:
        raise DataError(f"SVHN splits must be a non-empty subset of {sorted(_SVHN_FILES)}, got {splits}")
    xs, ys = [], []
    for split in splits:
        f = base / _SVHN_FILES[split]
        if not f.is_file():
            if not download:
                raise _missing("svhn", base, f"'{_SVHN_FILES[split]}'", "http://ufldl.stanford.edu/housenumbers/ "
                               "(format 2; or, from Python, load it with download=True)")
            from torchvision import datasets as tvd

            try:
                tvd.SVHN(str(base), split=split, download=True)
            except (RuntimeError, OSError) as exc:
                raise DataError(f"dataset 'svhn': download of {f.name} into {brief(base)} failed ({exc})") from None
        where = brief(f)  # as every message names it: escaped, a long path cut
        try:
            mat = scipy.io.loadmat(str(f), variable_names=["X", "y"])
            x, y = np.asarray(mat["X"]), np.asarray(mat["y"]).astype(np.int64).reshape(-1)
        except (OSError, ValueError, KeyError, NotImplementedError, TypeError) as exc:
            raise DataError(f"{where}: not an SVHN .mat file with X [32, 32, 3, N] and y [N, 1] ({exc})") from None
        if x.ndim != 4 or x.shape[2] != 3 or x.shape[3] != y.size or x.dtype != np.uint8:
            raise DataError(f"{where}: X must be uint8 [H, W, 3, N] matching y [N], got X {x.shape} {x.dtype}, y {y.shape}")
        if y.size and (y.min() < 1 or y.max() > 10):
            raise DataError(f"{where}: labels must be 1..10 (10 = digit 0), got [{y.min()}, {y.max()}]")
        y[y == 10] = 0
        xs.append(x.transpose(3, 2, 0, 1))  # -> [N, 3, H, W]
        ys.append(y)
    x = np.concatenate(xs)
    n = len(x)
    return GeoDataset(_resize_uint8(x, image_size, "svhn"), torch.from_numpy(np.concatenate(ys)),
                      np.full(n, np.nan), np.full(n, np.nan), [str(d) for d in range(10)], "svhn")
