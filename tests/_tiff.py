"""Hand-built TIFF files and the JPEG streams their segments hold, for the tests of the image loaders."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Sequence

import numpy as np


def one_segment_tiff(path: Path, side: int, payload: bytes, compression: int, *, bits: int = 16,
                     samples: int = 1, tile: int | None = None, photometric: int | None = None,
                     extra: tuple[tuple[int, int, int, int], ...] = ()) -> None:
    """A ``side`` x ``side`` TIFF of ``samples`` bands of ``bits`` bits (``photometric``, tag 262: by default RGB
    when 3, else grey) in one strip (or one ``tile`` x ``tile`` tile) holding ``payload`` as stored, compressed
    with TIFF ``compression`` (tag 259); ``extra`` tags (code, type, count, value) of one value each."""
    tags = [(256, 4, 1, side), (257, 4, 1, side), (258, 3, 1, bits), (259, 3, 1, compression),
            (262, 3, 1, (2 if samples == 3 else 1) if photometric is None else photometric), (277, 3, 1, samples),
            (284, 3, 1, 1), *extra]
    if tile:
        tags += [(322, 4, 1, tile), (323, 4, 1, tile)]
    else:
        tags += [(278, 4, 1, side)]
    _write(path, tags, [payload], (324, 325) if tile else (273, 279))


def flat_jpeg(values: tuple[int, ...], side: int = 16) -> bytes:
    """A JPEG stream of ``side`` x ``side`` pixels of 1, 3 or 4 components, component i all ``values[i]`` as a
    reader sees it: of 4 (CMYK), Pillow stores ``255 - values[i]`` and an Adobe APP14 segment saying so."""
    from PIL import Image

    mode = {1: "L", 3: "RGB", 4: "CMYK"}[len(values)]
    out = io.BytesIO()
    Image.frombytes(mode, (side, side), np.full((side, side, len(values)), values, np.uint8).tobytes()).save(
        out, "JPEG", quality=95)
    return out.getvalue()


def without_adobe_segment(jpeg: bytes) -> bytes:
    """``jpeg`` without its Adobe APP14 segment (Pillow writes one in a CMYK JPEG, saying its inks are stored
    inverted): the same stream unmarked, which a reader takes as stored."""
    at = jpeg.index(b"\xff\xee")
    return jpeg[:at] + jpeg[at + 2 + int.from_bytes(jpeg[at + 2:at + 4], "big"):]


def band_strips_tiff(path: Path, side: int, payloads: Sequence[bytes], compression: int, *, bits: int = 8,
                     photometric: int = 1) -> None:
    """A ``side`` x ``side`` TIFF of one band a payload, its bands stored apart (PlanarConfiguration 2, tag
    284): a strip of the whole band each, holding its payload as stored, compressed with TIFF
    ``compression``; grey (``photometric`` 1) by default."""
    tags = [(256, 4, 1, side), (257, 4, 1, side), (258, 3, 1, bits), (259, 3, 1, compression),
            (262, 3, 1, photometric), (277, 3, 1, len(payloads)), (278, 4, 1, side), (284, 3, 1, 2)]
    _write(path, tags, payloads, (273, 279))


def row_strips_tiff(path: Path, side: int, payloads: Sequence[bytes], compression: int, *, samples: int,
                    photometric: int) -> None:
    """A ``side`` x ``side`` TIFF of ``samples`` bands of 8 bits stored together (PlanarConfiguration 1), in
    strips of ``side / len(payloads)`` rows each holding its payload as stored, compressed with ``compression``."""
    tags = [(256, 4, 1, side), (257, 4, 1, side), (258, 3, 1, 8), (259, 3, 1, compression),
            (262, 3, 1, photometric), (277, 3, 1, samples), (278, 4, 1, side // len(payloads)), (284, 3, 1, 1)]
    _write(path, tags, payloads, (273, 279))


def header_apart_ojpeg_tiff(path: Path, side: int, jpeg: bytes, samples: int = 3) -> None:
    """A ``side`` x ``side`` old-style JPEG TIFF (compression 6) of ``samples`` bands of 8 bits (RGB when 3, else
    grey) as libtiff reads one whose strip is no JPEG stream of its own: the whole ``jpeg`` stream in
    JPEGInterchangeFormat (tag 513, its length in 514), the one strip its scan data alone, after its SOS header."""
    at = 2  # past SOI: the markers up to the end of the SOS header
    while jpeg[at + 1] != 0xDA:
        at += 2 + int.from_bytes(jpeg[at + 2:at + 4], "big")
    scan = at + 2 + int.from_bytes(jpeg[at + 2:at + 4], "big")
    tags = [(256, 4, 1, side), (257, 4, 1, side), (258, 3, 1, 8), (259, 3, 1, 6), (262, 3, 1, 2 if samples == 3 else 1),
            (277, 3, 1, samples), (278, 4, 1, side), (284, 3, 1, 1)]
    stream_at = 8 + 2 + (len(tags) + 4) * 12 + 4  # where _write stores the stream, after these, 273/279 and 513/514
    _write(path, tags + [(273, 4, 1, stream_at + scan), (279, 4, 1, len(jpeg) - scan)], [jpeg], (513, 514))


def _write(path: Path, tags: list[tuple[int, int, int, int]], payloads: Sequence[bytes],
           segment_tags: tuple[int, int]) -> None:
    """A little-endian TIFF of one directory of ``tags`` (of one value each) and the ``segment_tags``
    (StripOffsets and StripByteCounts, or those of tiles) of ``payloads``, stored after it in turn."""
    offsets_tag, counts_tag = segment_tags
    n = len(payloads)
    data_at = 8 + 2 + (len(tags) + 2) * 12 + 4
    arrays = b""  # the offsets and byte counts of more than one payload, which do not fit in their entry
    if n > 1:
        arrays_at, data_at = data_at, data_at + 8 * n
    offsets, at = [], data_at
    for payload in payloads:
        offsets.append(at)
        at += len(payload)
    if n > 1:
        arrays = struct.pack(f"<{n}I", *offsets) + struct.pack(f"<{n}I", *map(len, payloads))
        tags = tags + [(offsets_tag, 4, n, arrays_at), (counts_tag, 4, n, arrays_at + 4 * n)]
    else:
        tags = tags + [(offsets_tag, 4, 1, offsets[0]), (counts_tag, 4, 1, len(payloads[0]))]
    ifd = struct.pack("<H", len(tags)) + b"".join(struct.pack("<HHII", *t) for t in sorted(tags))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"II*\0" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0) + arrays + b"".join(payloads))
