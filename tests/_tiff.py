"""Hand-built TIFF files, for the tests of the image loaders."""

from __future__ import annotations

import struct
from pathlib import Path


def one_segment_tiff(path: Path, side: int, payload: bytes, compression: int, *, bits: int = 16,
                     samples: int = 1, tile: int | None = None,
                     extra: tuple[tuple[int, int, int, int], ...] = ()) -> None:
    """A ``side`` x ``side`` TIFF of ``samples`` bands of ``bits`` bits (RGB when 3, else grey) in one strip
    (or one ``tile`` x ``tile`` tile) holding ``payload`` as stored, compressed with TIFF ``compression``
    (tag 259); ``extra`` tags (code, type, count, value) of one value each."""
    tags = [(256, 4, 1, side), (257, 4, 1, side), (258, 3, 1, bits), (259, 3, 1, compression),
            (262, 3, 1, 2 if samples == 3 else 1), (277, 3, 1, samples), (284, 3, 1, 1), *extra]
    if tile:
        tags += [(322, 4, 1, tile), (323, 4, 1, tile), (324, 4, 1, 0), (325, 4, 1, len(payload))]
    else:
        tags += [(273, 4, 1, 0), (278, 4, 1, side), (279, 4, 1, len(payload))]
    data_at = 8 + 2 + len(tags) * 12 + 4
    tags = [(c, t, n, data_at if c in (273, 324) else v) for c, t, n, v in sorted(tags)]
    ifd = struct.pack("<H", len(tags)) + b"".join(struct.pack("<HHII", *t) for t in tags) + struct.pack("<I", 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"II*\0" + struct.pack("<I", 8) + ifd + payload)

