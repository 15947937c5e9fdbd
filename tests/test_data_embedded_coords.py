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
     "EXIF GPSLatitude [nan, 0.0, 0.0]: expected three finite rationals"),
    ({1: "N", 2: (10.0, 60.0, 0.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitude [10.0, 60.0, 0.0]: minutes and seconds"),
    ({1: "N", 2: (90.0, 30.0, 0.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitude [90.0, 30.0, 0.0] is 90.5 degrees, more than 90"),
    ({1: "N", 2: _dms(1.0), 3: "E", 4: (181.0, 0.0, 0.0)}, "EXIF GPSLongitude [181.0, 0.0, 0.0] is 181 degrees, more than 180"),
    ({1: "N", 2: (1.0, 2.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitude [1.0, 2.0]: expected three finite rationals"),
    ({1: "X", 2: _dms(1.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitudeRef is 'X', expected 'N' or 'S'"),
    ({2: _dms(1.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitudeRef is missing, expected 'N' or 'S'"),
    ({1: "N", 2: _dms(1.0), 3: "N", 4: _dms(1.0)}, "EXIF GPSLongitudeRef is 'N', expected 'E' or 'W'"),
    ({1: "", 2: _dms(1.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitudeRef is '', expected 'N' or 'S'"),
    ({1: "N", 2: _dms(1.0), 3: "EW", 4: _dms(1.0)}, "EXIF GPSLongitudeRef is 'EW', expected 'E' or 'W'"),
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


@pytest.mark.parametrize("gps, needle", [
    ({1: "N" * 20_000, 2: _dms(1.0), 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitudeRef is 'NNNNNNNNNN"),
    ({1: "N", 2: (1.0,) * 5_000, 3: "E", 4: _dms(1.0)}, "EXIF GPSLatitude [1.0, 1.0, 1.0"),
    ({**{k: 0 for k in range(5, 5_000)}, 1: "N", 2: _dms(1.0)}, "holds tags [1, 2, 5, 6, 7"),
])
def test_a_huge_gps_tag_is_shown_bounded(tmp_path, gps, needle):
    """A tag's value is quoted in the error as every other message quotes one, cut after some 60
    characters; the whole value was written (a line of tens of thousands of characters)."""
    bad = _gps_image(tmp_path / "a" / "big.jpg", gps)
    with pytest.raises(DataError) as err:
        loaders.load_image_folder(tmp_path, image_size=8, coords="exif", workers=1)
    line = str(err.value)
    assert line.startswith(f"{bad}: ") and needle in line and len(line) < 400, line[:400]


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



def _geotiff(path: Path, keys: tuple[int, ...], tie=None, scale=None, transform=None, size=(8, 6),
             mode: str = "RGB") -> Path:
    """A tiny TIFF with GeoTIFF tags written through Pillow's ``tiffinfo``; ``keys``: the
    GeoKeyDirectoryTag's (id, location, count, value) entries, flattened."""
    from PIL import TiffTags
    from PIL.TiffImagePlugin import ImageFileDirectory_v2

    info = ImageFileDirectory_v2()
    for tag, value in ((33922, tie), (33550, scale), (34264, transform)):
        if value is not None:
            info[tag] = tuple(float(v) for v in value)
            info.tagtype[tag] = TiffTags.DOUBLE
    info[34735] = (1, 1, 0, len(keys) // 4, *keys)
    info.tagtype[34735] = TiffTags.SHORT
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode == "I;16":  # a 16-bit single band, as satellite exports come
        image = Image.fromarray((np.arange(size[0] * size[1]).reshape(size[1], size[0]) * 900).astype(np.uint16))
    else:
        image = Image.new(mode, size, (90, 120, 60))
    image.save(path, tiffinfo=info)
    return path


WGS84 = (1024, 0, 1, 2, 1025, 0, 1, 1, 2048, 0, 1, 4326)  # geographic, pixel is area, EPSG:4326


def test_a_geotiffs_centre_is_its_place(tmp_path):
    """Tie point + pixel scale (8 x 6 px of 0.01 x 0.02 deg from (10 E, 50 N)): the centre is
    4 px east, 3 px south; the same from a transformation matrix (rotated by 90 degrees here),
    in a 16-bit single-band file, and for a raster of pixel centres (PixelIsPoint: half a pixel less)."""
    root = tmp_path / "f"
    _geotiff(root / "a" / "tie.tif", WGS84, tie=(0, 0, 0, 10.0, 50.0, 0), scale=(0.01, 0.02, 0))
    _geotiff(root / "a" / "grey16.tif", WGS84, tie=(0, 0, 0, -70.0, -33.0, 0), scale=(0.5, 0.25, 0), mode="I;16")
    # lon = 20 + 0.1 j, lat = -10 + 0.1 i: centre (i, j) = (4, 3)
    _geotiff(root / "b" / "matrix.tif", (1024, 0, 1, 2), transform=(0, 0.1, 0, 20, 0.1, 0, 0, -10, 0, 0, 0, 0, 0, 0, 0, 1))
    _geotiff(root / "b" / "point.tif", (1024, 0, 1, 2, 1025, 0, 1, 2, 2048, 0, 1, 4326),
             tie=(0, 0, 0, 10.0, 50.0, 0), scale=(0.01, 0.02, 0))
    ds = loaders.load_image_folder(root, image_size=8, coords="geotiff")
    assert [Path(s).name for s in ds.sources] == ["grey16.tif", "tie.tif", "matrix.tif", "point.tif"]
    np.testing.assert_allclose(np.c_[ds.lat, ds.lon], [[-33.75, -68.0], [49.94, 10.04], [-9.6, 20.3], [49.95, 10.035]],
                               atol=1e-9, rtol=0)


@pytest.mark.parametrize("keys, kw, needle", [
    ((1024, 0, 1, 1, 3072, 0, 1, 32633), {}, "projected CRS EPSG:32633 (ProjectedCSTypeGeoKey), not latitude and "
     "longitude: reproject it to EPSG:4326"),
    ((3072, 0, 1, 32633,), {}, "projected CRS EPSG:32633"),
    ((1024, 0, 1, 1, 3072, 0, 1, 32767), {}, "projected CRS (user-defined)"),
    ((1024, 0, 1, 3), {}, "GTModelTypeGeoKey 3 (geocentric), not geographic (2)"),
    ((1024, 0, 1, 2, 2054, 0, 1, 9101), {}, "GeogAngularUnitsGeoKey 9101, not degrees (9102)"),
    ((1025, 0, 1, 1), {}, "no GTModelTypeGeoKey or GeographicTypeGeoKey"),
    (WGS84, {"tie": None, "scale": None}, "no ModelTiepointTag (33922) with ModelPixelScaleTag (33550), "
     "nor ModelTransformationTag (34264)"),
    (WGS84, {"tie": (0, 0, 0, 10, 50, 0, 5, 5, 0, 11, 49, 0), "scale": None}, "no ModelTiepointTag (33922) with"),
    (WGS84, {"scale": (0.0, float("nan"), 0)}, "centre at latitude nan, longitude 10 is not finite"),
    (WGS84, {"tie": (0, 0, 0, 200.0, 50.0, 0)}, "centre at latitude 49.94, longitude 200.04 is out of range"),
])
def test_a_geotiff_without_a_geographic_place_is_one_line(tmp_path, keys, kw, needle):
    """Projected (UTM) tiles are refused naming their EPSG code: reprojection needs a
    projection library the toolkit does not carry."""
    root = tmp_path / "f"
    _geotiff(root / "a" / "ok.tif", WGS84, tie=(0, 0, 0, 10.0, 50.0, 0), scale=(0.01, 0.02, 0))
    args = {"tie": (0, 0, 0, 10.0, 50.0, 0), "scale": (0.01, 0.02, 0), **kw}
    bad = _geotiff(root / "b" / "bad.tif", keys, **args)
    with pytest.raises(DataError) as err:
        loaders.load_image_folder(root, image_size=8, coords="geotiff", skip_corrupt=True)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{bad}: ") and needle in line, line


def test_geotiff_coords_need_a_geotiff(tmp_path, capsys):
    """A PNG or a TIFF without GeoKeyDirectoryTag is one line; ``fol data info --coords geotiff``."""
    from fol.cli import main

    root = tmp_path / "f"
    _geotiff(root / "a" / "ok.tif", WGS84, tie=(0, 0, 0, 10.0, 50.0, 0), scale=(0.01, 0.02, 0))
    _geotiff(root / "b" / "ok.tif", WGS84, tie=(0, 0, 0, 11.0, 51.0, 0), scale=(0.01, 0.02, 0))
    assert main(["data", "info", f"imagefolder:{root}", "--coords", "geotiff"]) == 0
    assert "coordinates: 2/2 images; latitude 49.940 .. 50.940 deg" in capsys.readouterr().out
    Image.new("RGB", (4, 4)).save(root / "b" / "plain.tif")
    assert main(["data", "info", f"imagefolder:{root}", "--coords", "geotiff"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{root / 'b' / 'plain.tif'}: no GeoKeyDirectoryTag (34735)" in err[0], err
    (root / "b" / "plain.tif").unlink()
    Image.new("RGB", (4, 4)).save(root / "b" / "plain.png")
    with pytest.raises(DataError, match=r"plain.png: a PNG image, not a TIFF: no GeoTIFF tags"):
        loaders.load_image_folder(root, image_size=8, coords="geotiff")
