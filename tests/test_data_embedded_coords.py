"""Image-folder coordinates read from the images themselves: EXIF GPS tags
(drone and phone photos), GeoTIFF georeferencing (satellite / aerial tiles)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PIL.TiffImagePlugin import IFDRational

from fol.data import loaders
from fol.data.registry import load_dataset
from fol.errors import DataError


def _dms(value: float) -> tuple[IFDRational, IFDRational, IFDRational]:
    """Non-negative degrees as EXIF's three rationals (degrees, minutes, seconds in 1/10000)."""
    d = int(value)
    m = int((value - d) * 60)
    s = round((value - d - m / 60) * 3600 * 10000)
    return IFDRational(d), IFDRational(m), IFDRational(s, 10000)


def _gps_image(path: Path, gps: dict | None, colour=(120, 60, 30), size: int = 12) -> Path:
    """An image of ``size`` px with EXIF GPS IFD ``gps`` (none when None), as Pillow writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    exif = Image.Exif()
    if gps is not None:
        exif[0x8825] = gps
    Image.new("RGB", (size, size), colour).save(path, exif=exif)
    return path


def _place(lat: float, lon: float) -> dict:
    return {1: "N" if lat >= 0 else "S", 2: _dms(abs(lat)), 3: "E" if lon >= 0 else "W", 4: _dms(abs(lon))}


PLACES = {"burnt/a.jpg": (-33.86785, -70.65421), "burnt/b.jpg": (48.85837, 2.29448),
          "intact/c.jpg": (-0.5, 179.25), "intact/d.png": (64.12, -21.94)}


def _gps_folder(root: Path) -> Path:
    for rel, (lat, lon) in PLACES.items():
        _gps_image(root / rel, _place(lat, lon), colour=(200, 40, 0) if rel.startswith("burnt") else (0, 150, 40))
    return root


def test_exif_gps_gives_each_image_its_signed_degrees(tmp_path):
    """South and west are negative; JPEG and PNG (eXIf chunk) alike; the places follow their
    images through ``max_per_class`` sampling."""
    root = _gps_folder(tmp_path / "f")
    ds = loaders.load_image_folder(root, image_size=8, coords="exif")
    assert [Path(s).relative_to(root).as_posix() for s in ds.sources] == list(PLACES)
    np.testing.assert_allclose(np.c_[ds.lat, ds.lon], np.array(list(PLACES.values())), atol=1e-6, rtol=0)
    one = loaders.load_image_folder(root, image_size=8, coords="exif", max_per_class=1, seed=3)
    for src, lat, lon in zip(one.sources, one.lat, one.lon):
        assert np.allclose((lat, lon), PLACES[Path(src).relative_to(root).as_posix()], atol=1e-6, rtol=0)


def test_exif_gps_in_a_tiff(tmp_path):
    """A TIFF keeps its GPS IFD in its own tag directory (multispectral drone cameras write such files)."""
    from PIL.TiffImagePlugin import ImageFileDirectory_v2

    info = ImageFileDirectory_v2()
    info[0x8825] = _place(-12.5, -45.25)
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        Image.new("RGB", (8, 8)).save(tmp_path / cls / "x.tif", tiffinfo=info)
    ds = loaders.load_image_folder(tmp_path, image_size=8, coords="exif")
    np.testing.assert_allclose(np.c_[ds.lat, ds.lon], [[-12.5, -45.25]] * 2, atol=1e-6, rtol=0)


@pytest.mark.parametrize("gps, needle", [
    (None, "no EXIF GPS tags (GPSLatitude, GPSLongitude)"),
    ({1: "N", 2: _dms(10.0), 3: "E"}, "EXIF GPSLongitude is missing"),
    ({1: "N", 2: (IFDRational(1, 0), IFDRational(0), IFDRational(0)), 3: "E", 4: _dms(1.0)},
     "EXIF GPSLatitude (nan, 0.0, 0.0): expected three finite rationals"),
    ({1: "N", 2: (10.0, 60.0, 0.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitude (10.0, 60.0, 0.0): minutes and seconds"),
    ({1: "N", 2: (90.0, 30.0, 0.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitude (90.0, 30.0, 0.0) is 90.5 degrees, more than 90"),
    ({1: "N", 2: _dms(1.0), 3: "E", 4: (181.0, 0.0, 0.0)}, "EXIF GPSLongitude (181.0, 0.0, 0.0) is 181 degrees, more than 180"),
    ({1: "N", 2: (1.0, 2.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitude (1.0, 2.0): expected three finite rationals"),
    ({1: "X", 2: _dms(1.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitudeRef is 'X', expected 'N' or 'S'"),
    ({2: _dms(1.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitudeRef is missing, expected 'N' or 'S'"),
    ({1: "N", 2: _dms(1.0), 3: "N", 4: _dms(1.0)}, "EXIF GPSLongitudeRef is 'N', expected 'E' or 'W'"),
])
def test_an_image_without_a_readable_gps_place_is_one_line_naming_it_and_the_tag(tmp_path, gps, needle):
    """Also with ``skip_corrupt``: the image is readable, its place is not (as a file name
    without coordinates is refused under coords = 'filename')."""
    root = _gps_folder(tmp_path / "f")
    bad = _gps_image(root / "intact" / "zz.jpg", gps)
    for skip in (False, True):
        with pytest.raises(DataError) as err:
            loaders.load_image_folder(root, image_size=8, coords="exif", skip_corrupt=skip, workers=1)
        line = str(err.value)
        assert "\n" not in line and line.startswith(f"{bad}: ") and needle in line, line


def test_exif_coords_keep_skip_corrupt_and_the_size_limit(tmp_path, monkeypatch):
    """A broken file is skipped (and named) with ``skip_corrupt``, stops the load without;
    an image over the pixel limit is refused from its header before its tags are read."""
    root = _gps_folder(tmp_path / "f")
    (root / "intact" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(DataError, match="broken.jpg: cannot read image"):
        loaders.load_image_folder(root, image_size=8, coords="exif")
    ds = loaders.load_image_folder(root, image_size=8, coords="exif", skip_corrupt=True)
    assert len(ds) == 4 and np.isfinite(ds.lat).all()
    (root / "intact" / "broken.jpg").unlink()
    _gps_image(root / "intact" / "big.jpg", None, size=40)  # no GPS either: the size is said first
    monkeypatch.setattr(loaders, "MAX_IMAGE_PIXELS", 1000)
    with pytest.raises(DataError, match=r"big.jpg: 40 x 40 pixels, more than the 1,000 pixels"):
        loaders.load_image_folder(root, image_size=8, coords="exif", skip_corrupt=False)


def test_exif_coords_through_load_dataset_and_fol_data_info(tmp_path, capsys):
    from fol.cli import main

    root = _gps_folder(tmp_path / "f")
    ds = load_dataset("imagefolder", path=root, image_size=8, coords="exif")
    assert np.isfinite(ds.lat).all() and ds.lat.min() == pytest.approx(-33.86785, abs=1e-6)
    assert main(["data", "info", f"imagefolder:{root}", "--coords", "exif"]) == 0
    out = capsys.readouterr().out
    assert "coordinates: 4/4 images; latitude -33.868 .. 64.120 deg" in out, out
    _gps_image(root / "burnt" / "nogps.jpg", None)
    assert main(["data", "info", f"imagefolder:{root}", "--coords", "exif"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{root / 'burnt' / 'nogps.jpg'}: no EXIF GPS tags" in err[0], err

