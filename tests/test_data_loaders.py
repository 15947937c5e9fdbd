"""Real-format loaders on tiny folders written here (PIL / scipy), registry, describe."""

from __future__ import annotations

import io
import logging

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fol.data import loaders
from fol.data.registry import dataset_names, describe, load_dataset
from fol.errors import ConfigError, DataError

from _tiff import flat_jpeg, one_segment_tiff


def _write(path: Path, colour: tuple[int, int, int], size: int = 40) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (size, size), colour).save(path)


WILDFIRE_FILES = {
    ("train", "wildfire"): ["-73.4586,45.5837.jpg", "-72.1,46.25.jpg"],
    ("train", "nowildfire"): ["-71.0,47.0.jpg"],
    ("valid", "wildfire"): ["-70.5,48.5.jpg"],
    ("valid", "nowildfire"): ["-69.25,49.75.jpg"],
    ("test", "wildfire"): ["-68.0,50.0.jpg"],
    ("test", "nowildfire"): ["-67.5,51.5.jpg"],
}


def _wildfire_tree(base: Path) -> Path:
    for (split, cls), names in WILDFIRE_FILES.items():
        for name in names:
            _write(base / split / cls / name, (220, 60, 20) if cls == "wildfire" else (30, 120, 40))
    return base


def _hurricane_tree(base: Path) -> Path:
    for k, split in enumerate(("train_another", "validation_another", "test", "test_another")):
        # one place per class, a different tile of it in each split (identical copies are used once)
        _write(base / split / "damage" / "-95.061275_29.831535.jpeg", (120, 100 + 10 * k, 60))
        _write(base / split / "no_damage" / "-95.5_29.5.jpeg", (90, 90, 90 + 10 * k))
    return base


def test_wildfire_layout_coordinates_and_classes(tmp_path):
    _wildfire_tree(tmp_path / "wildfire")
    ds = load_dataset("wildfire", root=tmp_path, image_size=16)
    assert ds.class_names == ["nowildfire", "wildfire"]
    assert len(ds) == 7 and ds.images.shape == (7, 3, 16, 16)
    assert ds.images.dtype == torch.float32 and 0 <= float(ds.images.min()) and float(ds.images.max()) <= 1
    i = next(k for k, s in enumerate(ds.sources) if s.endswith("-73.4586,45.5837.jpg"))
    assert ds.lat[i] == pytest.approx(45.5837) and ds.lon[i] == pytest.approx(-73.4586)
    assert int(ds.labels[i]) == 1
    red = ds.images[:, 0].mean((1, 2)) > ds.images[:, 1].mean((1, 2))  # wildfire tiles were painted red
    assert torch.equal(red, ds.labels.bool())
    only_test = loaders.load_wildfire(tmp_path / "wildfire", splits=("test",), image_size=8)
    assert len(only_test) == 2
    capped = loaders.load_wildfire(tmp_path / "wildfire", image_size=8, max_per_class=2, seed=0)
    assert capped.class_counts().tolist() == [2, 2]


def test_wildfire_archive_with_extra_top_folder(tmp_path):
    _wildfire_tree(tmp_path / "wildfire" / "wildfire-prediction-dataset")
    assert len(load_dataset("wildfire", root=tmp_path, image_size=8)) == 7


def test_the_log_lines_of_a_found_top_folder_name_it_through_brief(tmp_path, caplog):
    """'using <folder> (found inside <base>)' and 'loaded ... from <folder>' wrote the paths as they are:
    a folder name holding a terminal escape went raw into the log, a long one whole."""
    from swarmbase.tomlcheck import brief

    base = tmp_path / ("w\x1b[2J" + "x" * 200)
    inner = _wildfire_tree(base / ("unpacked\n" + "y" * 200))
    with caplog.at_level(logging.INFO, logger="fol.data.loaders"):
        assert len(loaders.load_wildfire(base, image_size=8)) == 7
    lines = [r.getMessage() for r in caplog.records if r.name == "fol.data.loaders"]
    assert f"using {brief(inner)} (found inside {brief(base)})" in lines, lines
    assert any(line.startswith("loaded wildfire: 7 images from " + brief(inner)) for line in lines), lines
    assert not any("\x1b" in line or "\n" in line or len(line) > 600 for line in lines), lines


def test_hurricane_layout_and_env_root(tmp_path, monkeypatch):
    _hurricane_tree(tmp_path / "hurricane")
    monkeypatch.setenv("FOL_DATA_ROOT", str(tmp_path))
    ds = load_dataset("hurricane", image_size=8)
    assert ds.class_names == ["no_damage", "damage"] and len(ds) == 8
    dmg = ds.labels == 1
    assert int(dmg.sum()) == 4
    assert np.allclose(ds.lat[dmg.numpy()], 29.831535) and np.allclose(ds.lon[dmg.numpy()], -95.061275)


def test_missing_dataset_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.delenv("FOL_DATA_ROOT", raising=False)
    with pytest.raises(DataError) as err:
        load_dataset("wildfire", root=tmp_path)
    msg = str(err.value)
    assert str(tmp_path / "wildfire") in msg and "datasets/README.md" in msg and "\n" not in msg
    assert "kaggle.com" in msg
    with pytest.raises(DataError, match="hurricane"):
        load_dataset("hurricane", root=tmp_path)
    with pytest.raises(DataError, match=r"nowildfire.*missing"):
        _write(tmp_path / "w2" / "train" / "wildfire" / "-70.0,45.0.jpg", (1, 2, 3))
        loaders.load_wildfire(tmp_path / "w2", splits=("train",))


def test_corrupt_image_names_the_file(tmp_path):
    base = _wildfire_tree(tmp_path / "wildfire")
    bad = base / "valid" / "nowildfire" / "-66.0,52.0.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not really a jpeg")
    with pytest.raises(DataError) as err:
        loaders.load_wildfire(base, image_size=8)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)
    ds = loaders.load_wildfire(base, image_size=8, skip_corrupt=True)
    assert len(ds) == 7 and all(str(bad) != s for s in ds.sources)



def test_a_tiff_cut_short_is_named_as_unreadable_and_pillow_warns_in_one_log_line(tmp_path, capfd, caplog):
    """A TIFF cut off inside its tags: Pillow printed "TiffImagePlugin.py:982: UserWarning: Truncated File
    Read" with its source line, and the error called the file "a TIFF of 1 bands of 1 bits" (the tags'
    defaults, made up for tags never read)."""
    from PIL import Image

    for name in ("a/1.png", "b/2.png"):
        _write(tmp_path / name, (10, 20, 30))
    full = tmp_path / "whole.tif"
    Image.fromarray(np.full((16, 16, 3), 7, dtype=np.uint8)).save(full)
    bad = tmp_path / "a" / "cut.tif"
    bad.write_bytes(full.read_bytes()[:124])
    full.unlink()
    with caplog.at_level(logging.WARNING, logger="fol.data.loaders"), pytest.raises(DataError) as err:
        loaders.load_image_folder(tmp_path, image_size=8, workers=2)
    msg = str(err.value)
    assert msg.startswith(f"{bad}: cannot read image (UnidentifiedImageError") and "bands" not in msg, msg
    assert "UserWarning" not in capfd.readouterr().err
    assert [r.getMessage() for r in caplog.records] == [f"{bad}: Truncated File Read (Pillow, UserWarning)"]
    assert len(loaders.load_image_folder(tmp_path, image_size=8, skip_corrupt=True)) == 2

def test_skip_corrupt_refuses_a_folder_where_no_image_reads(tmp_path):
    """Skipping broken files must not turn a folder of only broken files into an
    empty dataset that fails (or, for ``fol data info``, passes) further on."""
    for name in ("a/1.png", "b/2.png"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"\x89PNG not really")
    with pytest.raises(DataError, match=r"none of the 2 image\(s\) could be read") as err:
        loaders.load_image_folder(tmp_path, image_size=8, skip_corrupt=True)
    assert "\n" not in str(err.value)
    _write(tmp_path / "a" / "3.png", (10, 20, 30))
    # class b has no image left: a class folder without images is an error, and so is this
    with pytest.raises(DataError, match=r"none of the 1 image\(s\) of class 'b' could be read \(e\.g\. .*2\.png\)"):
        loaders.load_image_folder(tmp_path, image_size=8, skip_corrupt=True)
    _write(tmp_path / "b" / "4.png", (10, 20, 30))
    assert len(loaders.load_image_folder(tmp_path, image_size=8, skip_corrupt=True)) == 2


def test_truncated_jpeg_is_reported(tmp_path):
    good = tmp_path / "x" / "a" / "1.jpg"
    _write(good, (10, 20, 30), size=64)
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="1.jpg"):
        loaders.read_image(good, 8)


def test_bad_coordinate_file_name(tmp_path):
    _write(tmp_path / "wildfire" / "train" / "wildfire" / "fire_001.jpg", (200, 0, 0))
    _write(tmp_path / "wildfire" / "train" / "nowildfire" / "-70,45.jpg", (0, 200, 0))
    with pytest.raises(DataError, match=r"fire_001.jpg.*<longitude>,<latitude>"):
        loaders.load_wildfire(tmp_path / "wildfire", splits=("train",))
    assert loaders.parse_lonlat("-95.061275_29.831535.jpeg", "_") == (29.831535, -95.061275)
    with pytest.raises(DataError, match="out of range"):
        loaders.parse_lonlat("10,95.jpg", ",")


def test_a_file_name_without_coordinates_is_named_by_its_path(tmp_path):
    """Class folders often hold files of the same name ('0001.jpg'); the error named only
    'photo.jpg', not which folder's."""
    root = tmp_path / "imgs"
    _write(root / "a" / "-70,45.png", (1, 2, 3))
    _write(root / "b" / "2020" / "photo.png", (1, 2, 3))
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=root, image_size=8, coords="filename")
    assert str(err.value).startswith(f"{root / 'b' / '2020' / 'photo.png'}: file name is not '<longitude>,<latitude>")
    bad = tmp_path / "wildfire" / "train" / "wildfire" / "fire_001.jpg"
    _write(bad, (200, 0, 0))
    _write(tmp_path / "wildfire" / "train" / "nowildfire" / "-70,45.jpg", (0, 200, 0))
    with pytest.raises(DataError) as err:
        loaders.load_wildfire(tmp_path / "wildfire", splits=("train",))
    assert str(err.value).startswith(f"{bad}: file name is not")

def test_a_palette_png_with_transparency_is_read_without_pillows_warning(tmp_path):
    """Optimised PNGs are often palette images with a transparency chunk; reading one printed
    Pillow's 'should be converted to RGBA images' warning, as if the file were wrong."""
    import warnings

    pixels = np.zeros((8, 8, 3), np.uint8)
    pixels[:, 4:] = (200, 30, 60)
    Image.fromarray(pixels).convert("P", palette=Image.Palette.ADAPTIVE, colors=2).save(
        tmp_path / "p.png", transparency=b"\x00" * 2)
    with Image.open(tmp_path / "p.png") as im:
        assert im.mode == "P" and isinstance(im.info.get("transparency"), bytes)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        arr = loaders.read_image(tmp_path / "p.png", 8)
    assert not seen, [str(w.message) for w in seen]
    assert np.array_equal(arr.transpose(1, 2, 0), pixels)  # the palette's colours, the alpha dropped

def test_high_bit_depth_single_band_images_are_scaled_not_clipped(tmp_path):
    """Pillow's own RGB conversion clips 16-bit values to white and [0, 1] floats
    to black; a mid-grey 16-bit PNG, 16-bit PGM and float TIFF load as mid-grey."""
    root = tmp_path / "imgs"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    Image.fromarray(np.full((20, 20), 32768, np.uint16)).save(root / "a" / "g16.png")
    Image.fromarray(np.full((20, 20), 32768, np.uint16)).save(root / "a" / "g16.pgm")
    Image.fromarray(np.full((20, 20), 0.25, np.float32)).save(root / "b" / "f.tif")
    Image.fromarray(np.full((20, 20), 1000, np.int32)).save(root / "b" / "i.tif")
    ds = load_dataset("imagefolder", path=root, image_size=8)
    means = {Path(s).name: round(float(im.mean()), 3) for s, im in zip(ds.sources, ds.images)}
    assert means == {"g16.png": 0.502, "g16.pgm": 0.502, "f.tif": 0.251, "i.tif": 0.016}, means
    Image.fromarray(np.full((20, 20), 70000, np.int32)).save(root / "b" / "i.tif")
    with pytest.raises(DataError, match=r"i\.tif: integer image \(Pillow mode I\) with values outside 0\.\.65535"):
        load_dataset("imagefolder", path=root, image_size=8)
    (root / "b" / "i.tif").unlink()
    Image.fromarray(np.full((20, 20), 3.0, np.float32)).save(root / "b" / "f.tif")
    with pytest.raises(DataError, match=r"f\.tif: floating-point image .* outside \[0, 1\]"):
        load_dataset("imagefolder", path=root, image_size=8)


def test_hidden_files_are_not_images(tmp_path):
    """macOS writes '._<name>' metadata beside each file copied to a non-Mac disk;
    like hidden class folders they are skipped (the load stopped at the first)."""
    root = tmp_path / "imgs"
    _write(root / "a" / "x.jpg", (1, 2, 3))
    _write(root / "b" / "y.jpg", (1, 2, 3))
    (root / "a" / "._x.jpg").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ")
    _write(root / ".cache" / "z.jpg", (1, 2, 3))
    ds = load_dataset("imagefolder", path=root, image_size=8)
    assert ds.class_names == ["a", "b"] and [Path(s).name for s in ds.sources] == ["x.jpg", "y.jpg"]


def test_a_broken_link_named_like_an_image_is_reported_not_left_out(tmp_path, caplog):
    """A class folder of links into a store, one of which points nowhere (a file moved, a disk
    not mounted): the image was silently left out. It stops the load naming the link, or with
    skip_corrupt is skipped with the warning that names skipped files."""
    root = tmp_path / "imgs"
    _write(root / "a" / "x.jpg", (1, 2, 3))
    _write(root / "b" / "y.jpg", (1, 2, 3))
    gone = root / "a" / "gone.jpg"
    gone.symlink_to(tmp_path / "store" / "gone.jpg")
    _write(tmp_path / "store" / "z.jpg", (4, 5, 6))
    (root / "a" / "z.jpg").symlink_to(tmp_path / "store" / "z.jpg")  # a link that works is an image
    (root / "b" / "sub.jpg").mkdir()  # a folder named like an image is a folder
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=root, image_size=8)
    assert str(err.value) == f"{gone}: a link to {tmp_path / 'store' / 'gone.jpg'}, which does not exist"
    with caplog.at_level("WARNING", logger="fol.data.loaders"):
        ds = load_dataset("imagefolder", path=root, image_size=8, skip_corrupt=True)
    assert [Path(s).name for s in ds.sources] == ["x.jpg", "z.jpg", "y.jpg"]
    assert f"skipped 1 unreadable image(s): {gone}" in caplog.text

def test_a_file_reached_by_several_paths_is_one_image(tmp_path, caplog):
    """A link (or hard link) to an image of the folder made it two images, which the
    per-node split could put in training and test both."""
    import os

    root = tmp_path / "imgs"
    _write(root / "a" / "x.jpg", (1, 2, 3))
    _write(root / "b" / "y.jpg", (4, 5, 6))
    (root / "a" / "sub").mkdir()
    (root / "a" / "sub" / "again.jpg").symlink_to(root / "a" / "x.jpg")
    os.link(root / "a" / "x.jpg", root / "a" / "z.jpg")
    (root / "b" / "x.jpg").symlink_to(root / "a" / "x.jpg")  # in another class: kept, with a warning
    with caplog.at_level("WARNING", logger="fol.data.loaders"):
        ds = load_dataset("imagefolder", path=root, image_size=8)
    assert [Path(s).relative_to(root).as_posix() for s in ds.sources] == ["a/sub/again.jpg", "b/x.jpg", "b/y.jpg"]
    assert "2 image(s) are links to a file already read; each file is used once (e.g. a/x.jpg = a/sub/again.jpg)" in caplog.text
    assert "1 image(s) are links to a file of another class; both are kept (e.g. b/x.jpg = a/sub/again.jpg)" in caplog.text

def test_class_folders_are_read_with_their_sub_folders_as_torchvision_does(tmp_path):
    """'burnt/2020/x.png' is a burnt image (it was silently left out); hidden sub-folders,
    a top-level __MACOSX/ from a macOS zip and a link looping back are not read."""
    import os

    root = tmp_path / "imgs"
    _write(root / "burnt" / "a.png", (200, 0, 0))
    _write(root / "burnt" / "2020" / "b.png", (200, 0, 0))
    _write(root / "burnt" / "2020" / "06" / "c.png", (200, 0, 0))
    _write(root / "burnt" / ".thumbs" / "d.png", (200, 0, 0))
    _write(root / "intact" / "e.png", (0, 200, 0))
    (root / "__MACOSX" / "burnt").mkdir(parents=True)
    (root / "__MACOSX" / "burnt" / "._a.png").write_bytes(b"\x00\x05\x16\x07")
    os.symlink(root / "burnt", root / "burnt" / "2020" / "loop")
    ds = load_dataset("imagefolder", path=root, image_size=8)
    assert ds.class_names == ["burnt", "intact"]
    rel = [Path(s).relative_to(root).as_posix() for s in ds.sources]
    assert rel == ["burnt/2020/06/c.png", "burnt/2020/b.png", "burnt/a.png", "intact/e.png"]
    assert ds.labels.tolist() == [0, 0, 0, 1]


def test_a_sub_folder_that_cannot_be_listed_stops_the_load_naming_it(tmp_path, monkeypatch):
    """A class's sub-folder that cannot be listed (no permission: copied from another user's
    disk) was skipped without a word by os.walk, and its images with it; the load now stops
    with one line naming that folder."""
    import os

    root = tmp_path / "imgs"
    _write(root / "burnt" / "a.png", (200, 0, 0))
    _write(root / "burnt" / "2020" / "b.png", (200, 0, 0))
    _write(root / "intact" / "e.png", (0, 200, 0))
    locked = root / "burnt" / "2020"
    scandir = os.scandir

    def refusing(path="."):  # as the kernel does for a folder without read permission (root is exempt)
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=root, image_size=8)
    assert str(info.value) == f"{locked}: cannot list this folder (PermissionError: Permission denied); its images " \
                              "would be left out"


def _multiband_tiff(path: Path, bands: int) -> None:
    """An 8 x 8 16-bit TIFF of ``bands`` bands, as GDAL writes a multispectral scene
    (photometric min-is-black, the bands after the first as extra samples)."""
    import struct

    data = np.zeros(8 * 8 * bands, "<u2").tobytes()
    arrays = struct.pack(f"<{bands}H", *[16] * bands) + struct.pack(f"<{bands - 1}H", *[0] * (bands - 1))
    tags = [(256, 4, 1, 8), (257, 4, 1, 8), (258, 3, bands, 8 + 2 + 11 * 12 + 4), (259, 3, 1, 1), (262, 3, 1, 1),
            (273, 4, 1, 8 + 2 + 11 * 12 + 4 + len(arrays)), (277, 3, 1, bands), (278, 4, 1, 8), (279, 4, 1, len(data)),
            (284, 3, 1, 1), (338, 3, bands - 1, 8 + 2 + 11 * 12 + 4 + 2 * bands)]
    ifd = struct.pack("<H", len(tags)) + b"".join(struct.pack("<HHII", *t) for t in tags) + struct.pack("<I", 0)
    path.write_bytes(b"II*\0" + struct.pack("<I", 8) + ifd + arrays + data)


@pytest.mark.parametrize("bands", [4, 13])
def test_a_multispectral_tiff_is_one_line_naming_its_bands(tmp_path, caplog, bands):
    """A multispectral TIFF (4-band PlanetScope, 13-band Sentinel-2 as GDAL writes them) is
    one Pillow cannot read: the error said only 'cannot identify image file' and, over 6
    bands, Pillow logged a second line naming no file. It now says how many bands the file
    has and what is read, and nothing else is logged."""
    import logging

    root = tmp_path / "imgs"
    _multiband_tiff((root / "burnt").mkdir(parents=True) or root / "burnt" / "scene.tif", bands)
    _write(root / "intact" / "e.png", (0, 200, 0))
    with caplog.at_level(logging.DEBUG), pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=root, image_size=8)
    assert str(info.value) == (f"{root / 'burnt' / 'scene.tif'}: a TIFF of {bands} bands of 16 bits, which cannot "
                               f"be read as an image; choose 3 of its bands with the dataset option bands (e.g. "
                               f"bands=4+3+2 in --data, data.bands = [4, 3, 2]), or save 1 (grey) or 3 (RGB) of "
                               f"them, of 8 or 16 bits")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def _png_declaring(path: Path, width: int, height: int, mode: str = "L") -> None:
    """A small PNG whose header declares ``width`` x ``height`` (the pixel data is an 8 x 8 image's):
    what a decompression bomb looks like until it is decoded."""
    import struct
    import zlib

    Image.new(mode, (8, 8)).save(path)
    data = bytearray(path.read_bytes())
    ihdr = 8 + 8  # signature, then the IHDR chunk's length and type
    data[ihdr:ihdr + 8] = struct.pack(">II", width, height)
    data[ihdr + 13:ihdr + 17] = struct.pack(">I", zlib.crc32(bytes(data[ihdr - 4:ihdr + 13])))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("width, height", [(10_000, 9_000), (20_000, 20_000)])
def test_images_of_too_many_pixels_are_refused_before_decoding(tmp_path, width, height):
    """A 280 kB 16-bit PNG of 12,000 x 12,000 zeros made ``fol data info`` use 4.4 GB: Pillow only
    warns between 89 and 179 million pixels and decodes. Every image over 89 million pixels is
    refused from its header, in one line naming the file, without Pillow's warning."""
    import warnings

    path = tmp_path / "big.png"
    _png_declaring(path, width, height, "I;16")
    with warnings.catch_warnings(), pytest.raises(DataError) as err:
        warnings.simplefilter("ignore")  # read_image alone: Pillow's warning, then the error
        loaders.read_image(path, 8)
    msg = str(err.value)
    size = f"{width:,} x {height:,}" if width * height < 2 * 89_478_485 else f"{width * height:,}"  # Pillow's own refusal
    assert msg.startswith(f"{path}: {size} pixels, more than the 89,478,485 pixels") and "\n" not in msg, msg
    (tmp_path / "a").mkdir()
    path.rename(tmp_path / "a" / "big.png")
    with warnings.catch_warnings(record=True) as seen, pytest.raises(DataError, match="more than the 89,478,485"):
        loaders.load_image_folder(tmp_path, image_size=8)  # the loaders' one line, without Pillow's warning first
    assert not seen, [str(w.message) for w in seen]
    _png_declaring(path, 9_459, 9_459)  # 89,472,681 pixels: under the limit, decoded (and found truncated)
    with pytest.raises(DataError, match="cannot read image"):
        loaders.read_image(path, 8)


def test_a_tiff_whose_strip_offset_is_not_an_integer_is_one_line(tmp_path):
    """A TIFF whose StripOffsets tag is of type DOUBLE: Pillow raised a TypeError ("'float' object cannot be
    interpreted as an integer") as it decoded, a traceback."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 6)).save(buf, format="TIFF")
    entry = b"\x11\x01\x04\x00\x01\x00\x00\x00"  # tag 273 (StripOffsets), LONG, one value
    assert buf.getvalue().count(entry) == 1
    path = tmp_path / "a" / "odd.tif"
    path.parent.mkdir()
    path.write_bytes(buf.getvalue().replace(entry, b"\x11\x01\x0c\x00\x01\x00\x00\x00"))  # type 12: DOUBLE
    with pytest.raises(DataError) as err:
        loaders.load_image_folder(tmp_path, image_size=8, workers=1)
    assert str(err.value).startswith(f"{path}: cannot read image (TypeError: "), err.value


def test_sixteen_bit_values_map_to_the_nearest_eight_bit_level(tmp_path):
    """Every 16-bit value v is read as round(v * 255 / 65535)."""
    values = np.arange(65536, dtype=np.uint16).reshape(256, 256)
    Image.fromarray(values).save(tmp_path / "all.png")
    with Image.open(tmp_path / "all.png") as im:
        got = np.asarray(loaders._single_band_to_8bit(im, "all.png"))
    assert np.array_equal(got, np.round(values * (255 / 65535)).astype(np.uint8))


@pytest.mark.parametrize("ext", ["jpg", "png", "tif"])
def test_exif_orientation_is_applied(tmp_path, ext):
    """A phone photo stored landscape with EXIF orientation 6 (turn 90 degrees clockwise)
    is shown upright: stored left half red / right half blue, shown top red / bottom blue.
    Pillow's TIFF reader turns a TIFF by its tag (274) itself as it decodes it: once only."""
    pixels = np.zeros((16, 32, 3), np.uint8)
    pixels[:, :16, 0] = 255
    pixels[:, 16:, 2] = 255
    im = Image.fromarray(pixels)
    exif = im.getexif()
    exif[0x0112] = 6
    im.save(tmp_path / f"p.{ext}", exif=exif, quality=95)
    arr = loaders.read_image(tmp_path / f"p.{ext}", 8)
    assert arr[:, 0, 0].argmax() == 0 and arr[:, 0, 7].argmax() == 0  # top row: red
    assert arr[:, 7, 0].argmax() == 2 and arr[:, 7, 7].argmax() == 2  # bottom row: blue


def test_oversized_pools_are_refused_before_decoding(tmp_path):
    """The pool's size is checked from the file count and image_size before any
    image is decoded or any array allocated."""
    import tracemalloc

    root = tmp_path / "imgs"
    _write(root / "a" / "x.png", (0, 255, 0))
    _write(root / "b" / "y.png", (255, 0, 0))
    for size, needle in [(4, "image_size must be an integer of 8..1024"), (5000, "8..1024"),
                         (True, "image_size must be an integer")]:
        with pytest.raises(DataError, match=needle):
            load_dataset("imagefolder", path=root, image_size=size)
    from fol.data.geo import check_pool_size
    from fol.data.synthetic import make_synthetic

    tracemalloc.start()
    try:
        with pytest.raises(DataError, match=r"synthetic wildfire: 100,000,000 images of 1024x1024 .* GiB"):
            make_synthetic("wildfire", 100_000_000, seed=0, image_size=1024)
        assert tracemalloc.get_traced_memory()[1] < 20e6
    finally:
        tracemalloc.stop()
    check_pool_size(600, 1024, "ok")  # 7.0 GiB: under the 8 GiB limit
    with pytest.raises(DataError, match=r"x: 1,000 images of 1024x1024 pixels would need 11.7 GiB"):
        check_pool_size(1_000, 1024, "x")


def test_a_pool_count_beyond_any_float_is_refused_in_one_short_line():
    """data.size = 10**400 (TOML integers have no size limit) made the size estimate an
    OverflowError traceback in `fol simulate --check`."""
    from fol.data.geo import check_pool_size

    with pytest.raises(DataError, match=r"^data\.size: 10000000000000000000\.\.\. \(401 digits\) images of 32x32 pixels "
                                        r"would need more bytes than a float can count as float32 \(limit 8 GiB\)"):
        check_pool_size(10**400, 32, "data.size")


def test_image_folder_png_csv_and_filename_coordinates(tmp_path):
    root = tmp_path / "imgs"
    _write(root / "intact" / "a.png", (0, 255, 0))
    _write(root / "intact" / "b.png", (0, 250, 0))
    _write(root / "burnt" / "c.png", (255, 0, 0))
    plain = load_dataset("imagefolder", path=root, image_size=8)
    assert plain.class_names == ["burnt", "intact"] and plain.class_counts().tolist() == [1, 2]
    assert np.isnan(plain.lat).all()
    (root / "coords.csv").write_text("file,latitude,longitude\nintact/a.png,10.5,20.5\nb.png,11,21\nburnt/c.png,-5,-6\n")
    geo = load_dataset("imagefolder", path=root, image_size=8, coords="csv")
    by_name = {Path(s).name: (la, lo) for s, la, lo in zip(geo.sources, geo.lat, geo.lon)}
    assert by_name == {"a.png": (10.5, 20.5), "b.png": (11.0, 21.0), "c.png": (-5.0, -6.0)}
    (root / "coords.csv").write_text("file,lat,lon\na.png,1,2\n")
    with pytest.raises(DataError, match=r"c.png: no coordinates"):
        load_dataset("imagefolder", path=root, coords="csv")
    named = tmp_path / "named"
    _write(named / "x" / "-120.5_38.25.png", (1, 1, 1))
    _write(named / "y" / "3_4.png", (1, 1, 1))
    ds = loaders.load_image_folder(named, coords="filename", name_separator="_", image_size=8)
    assert ds.lat.tolist() == [38.25, 4.0] and ds.lon.tolist() == [-120.5, 3.0]
    with pytest.raises(DataError, match="not found"):
        loaders.load_image_folder(tmp_path / "nope")
    with pytest.raises(ConfigError, match="path="):
        load_dataset("imagefolder")


def test_coords_csv_with_a_byte_order_mark(tmp_path):
    """Excel's "CSV UTF-8" starts the file with a BOM; the header is still read."""
    root = tmp_path / "imgs"
    _write(root / "a" / "x.png", (1, 2, 3))
    (root / "coords.csv").write_bytes("\ufefffile,lat,lon\na/x.png,10,20\n".encode("utf-8"))
    ds = load_dataset("imagefolder", path=root, image_size=8, coords="csv")
    assert ds.lat.tolist() == [10.0] and ds.lon.tolist() == [20.0]


def test_coords_csv_that_the_csv_module_refuses_is_one_line(tmp_path):
    """A stray quote opens a field that runs to the end of the file; past 131,072
    characters the csv module raises its own error, which ended in a traceback."""
    root = tmp_path / "imgs"
    _write(root / "a" / "x.png", (1, 2, 3))
    rows = "".join(f"a/{k}.png,10,20\n" for k in range(20_000))
    (root / "coords.csv").write_text('file,lat,lon\na/x.png,10,20\n"a/y.png,10,20\n' + rows)
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=root, image_size=8, coords="csv")
    msg = str(err.value)
    assert msg.startswith(f"{root / 'coords.csv'}:3: not a valid CSV") and "field larger" in msg, msg
    assert "\n" not in msg
    (root / "coords.csv").write_text('"file,lat,lon\n' + rows)  # in the header
    with pytest.raises(DataError, match=r"coords.csv:1: not a valid CSV"):
        load_dataset("imagefolder", path=root, image_size=8, coords="csv")

def test_coords_csv_row_listed_twice_with_other_coordinates(tmp_path):
    """Two images named x.png in two class folders and two bare 'x.png' rows: which
    row is which image is unknown (every x.png took the last row's place)."""
    root = tmp_path / "imgs"
    _write(root / "a" / "x.png", (1, 2, 3))
    _write(root / "b" / "x.png", (1, 2, 3))
    (root / "coords.csv").write_text("file,lat,lon\nx.png,10,20\nx.png,30,40\n")
    with pytest.raises(DataError, match=r"coords.csv:3: 'x.png' is listed again with other coordinates \(first on line 2\)"):
        load_dataset("imagefolder", path=root, image_size=8, coords="csv")
    (root / "coords.csv").write_text("file,lat,lon\nx.png,10,20\nx.png,10,20\n")  # the same row twice: harmless
    assert load_dataset("imagefolder", path=root, image_size=8, coords="csv").lat.tolist() == [10.0, 10.0]


def test_coords_csv_messages_count_blank_lines(tmp_path):
    """The csv module skips blank lines (a spreadsheet's empty rows); the messages counted records, so
    they named a line above the one at fault."""
    root = tmp_path / "imgs"
    (root / "a").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(root / "a" / "x.png")
    (root / "coords.csv").write_text("file,lat,lon\n\nx.png,10,20\n\n\nx.png,30,40\n")
    with pytest.raises(DataError, match=r"coords.csv:6: 'x.png' is listed again with other coordinates \(first on line 3\)"):
        load_dataset("imagefolder", path=root, image_size=8, coords="csv")
    (root / "coords.csv").write_text("file,lat,lon\n\n\nx.png,91,20\n")
    with pytest.raises(DataError, match=r"coords.csv:4: coordinates out of range \(lat 91.0"):
        load_dataset("imagefolder", path=root, image_size=8, coords="csv")


@pytest.mark.parametrize("text, message", [
    # a quoted file name over three lines: the record starts on line 2 and ends on line 4
    ('file,lat,lon\n"multi\nline\nx.png",95,20\n', "coords.csv:2: coordinates out of range (lat 95.0"),
    ('file,lat,lon\na/x.png,10,20\n"b\ny.png",1,2\n"c.png",x,2\n', "coords.csv:5: lat/lon must be numbers, got 'x'"),
    # a quote left open swallows the rest of the file into one field: the row starts at the quote
    ('file,lat,lon\na/x.png,10,20\n"b.png,1,2\nc.png,1,2\n', "coords.csv:3: lat/lon must be numbers, got None, None"),
    ('file,lat,lon\n"a\nb.png",10,20\n\n"a\nb.png",30,40\n',
     "coords.csv:5: 'a\\nb.png' is listed again with other coordinates (first on line 2)"),
    # csv's own error after blank lines: the line of the open quote, not the first blank line after the last row
    ('file,lat,lon\na/x.png,10,20\n\n\n"' + "y" * 200_000 + "\n", "coords.csv:5: not a valid CSV record from this line on"),
], ids=["multi-line-name", "after-a-multi-line-row", "open-quote", "twice-multi-line", "csv-error-after-blank-lines"])
def test_coords_csv_messages_name_the_line_a_row_starts_on(tmp_path, text, message):
    """csv's line_num is the line a record ends on: a row with a quoted field over several lines
    was reported at its last line, and the duplicate's "first on line" too; a csv error after
    blank lines named the first blank line."""
    root = tmp_path / "imgs"
    (root / "a").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(root / "a" / "x.png")
    (root / "coords.csv").write_text(text)
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=root, image_size=8, coords="csv")
    assert str(err.value).startswith(f"{root / 'coords.csv'}:") and message in str(err.value), str(err.value)[:300]


@pytest.mark.parametrize("text, shown", [
    ("file,lat,lon\nx.png," + "1x" * 50_000 + ",20\n", "coords.csv:2: lat/lon must be numbers, got '1x1x1x1x"),
    ("file,lat,lon\n" + "y" * 100_000 + ".png,10,20\n" + "y" * 100_000 + ".png,30,40\n",
     "coords.csv:3: 'yyyyyyyyyy"),
    ("file,lat,long" + "i" * 100_000 + "\n", "columns; got ['file', 'lat', 'longiiiii"),
])
def test_a_huge_value_in_coords_csv_is_shown_bounded(tmp_path, text, shown):
    """A CSV value is quoted in the error as every other message quotes one, cut after some 60 characters;
    the whole value was written (a line of 100,000 characters)."""
    root = tmp_path / "imgs"
    (root / "a").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(root / "a" / "x.png")
    (root / "coords.csv").write_text(text)
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=root, image_size=8, coords="csv")
    assert shown in str(err.value) and len(str(err.value)) < 400, str(err.value)[:400]


def test_coords_csv_row_of_one_folder_is_not_another_folders_file(tmp_path):
    """A row 'a/x.png' gives a/x.png its place, not b/x.png (which took it by file name)."""
    root = tmp_path / "imgs"
    _write(root / "a" / "x.png", (1, 2, 3))
    _write(root / "b" / "x.png", (1, 2, 3))
    (root / "coords.csv").write_text("file,lat,lon\na/x.png,10,20\n")
    with pytest.raises(DataError, match=r"b/x.png: no coordinates for this image in the CSV"):
        load_dataset("imagefolder", path=root, image_size=8, coords="csv")
    (root / "coords.csv").write_text(f"file,lat,lon\n{root}/a/x.png,10,20\nb/x.png,30,40\n")  # absolute paths match
    assert load_dataset("imagefolder", path=root, image_size=8, coords="csv").lat.tolist() == [10.0, 30.0]
    (root / "coords.csv").write_text("file,lat,lon\na/x.png,10,20\nb/x.png,30,40\nx.png,50,60\n")
    assert load_dataset("imagefolder", path=root, image_size=8, coords="csv").lat.tolist() == [10.0, 30.0]
    (root / "coords.csv").write_text(f"file,lat,lon\n{root}/a/x.png,10,20\nx.png,50,60\nb/x.png,30,40\n")
    with pytest.raises(DataError, match=r"a/x.png: the CSV's rows .* all name this image, with different"):
        load_dataset("imagefolder", path=root, image_size=8, coords="csv")


def test_cifar_missing_gives_clear_error(tmp_path):
    for name, folder in (("cifar10", "cifar-10-batches-py"), ("cifar100", "cifar-100-python")):
        with pytest.raises(DataError) as err:
            load_dataset(name, root=tmp_path)
        msg = str(err.value)
        assert str(tmp_path / name) in msg and folder in msg and "download=True" in msg


def test_svhn_from_tiny_mat_file(tmp_path):
    import scipy.io

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (32, 32, 3, 5), dtype=np.uint8)
    y = np.array([[10], [1], [2], [10], [9]], dtype=np.uint8)
    (tmp_path / "svhn").mkdir()
    scipy.io.savemat(tmp_path / "svhn" / "train_32x32.mat", {"X": x, "y": y})
    ds = load_dataset("svhn", root=tmp_path, splits=("train",))
    assert ds.labels.tolist() == [0, 1, 2, 0, 9]
    assert ds.images.shape == (5, 3, 32, 32)
    assert torch.allclose(ds.images[2, 1], torch.from_numpy(x[:, :, 1, 2]).float() / 255)
    assert np.isnan(ds.lat).all() and ds.class_names == [str(d) for d in range(10)]
    with pytest.raises(DataError, match=r"test_32x32.mat"):
        load_dataset("svhn", root=tmp_path, splits=("test",))
    scipy.io.savemat(tmp_path / "svhn" / "test_32x32.mat", {"X": x[:, :, 0], "y": y})
    with pytest.raises(DataError, match="test_32x32.mat"):
        load_dataset("svhn", root=tmp_path, splits=("test",))


def test_registry_names_options_and_describe(tmp_path):
    assert set(dataset_names()) >= {"synthetic-wildfire", "synthetic-hurricane", "wildfire", "hurricane",
                                    "cifar10", "cifar100", "svhn", "imagefolder"}
    with pytest.raises(ConfigError, match="unknown dataset"):
        load_dataset("mnist")
    with pytest.raises(ConfigError, match="colour"):
        load_dataset("synthetic-wildfire", n=4, colour=True)
    ds = load_dataset("synthetic-wildfire", n=40, seed=2)
    text = describe(ds)
    counts = ds.class_counts()
    assert f"{counts[0]:>8d}" in text and "nowildfire" in text and "3x32x32" in text
    assert f"{ds.lat.min():.3f}" in text and "longitude" in text
    none = describe(load_dataset("imagefolder", path=_img_folder(tmp_path), image_size=8))
    assert "coordinates: none" in none


def _img_folder(tmp_path: Path) -> Path:
    _write(tmp_path / "f" / "a" / "1.png", (5, 5, 5))
    _write(tmp_path / "f" / "b" / "2.png", (9, 9, 9))
    return tmp_path / "f"


def test_data_info_reads_an_image_folders_coordinates_and_skips_broken_files(tmp_path, capsys):
    """``fol data info imagefolder:PATH`` takes a scenario's ``coords`` and
    ``skip_corrupt`` as ``--coords`` / ``--skip-corrupt``: a user checks a folder
    before a region-partitioned run; both refuse datasets they do not apply to."""
    from fol.cli import main

    _write(tmp_path / "f" / "burnt" / "-120.5,38.25.png", (200, 50, 0))
    _write(tmp_path / "f" / "intact" / "-121.0,39.5.png", (0, 150, 0))
    (tmp_path / "f" / "intact" / "-121.5,39.0.png").write_bytes(b"\x89PNG not really")
    folder = f"imagefolder:{tmp_path / 'f'}"
    assert main(["data", "info", folder, "--coords", "filename"]) == 2  # the broken file stops it, in one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "-121.5,39.0.png: cannot read image" in err[0]
    assert main(["data", "info", folder, "--coords", "filename", "--skip-corrupt"]) == 0
    out = capsys.readouterr().out
    assert "2 images" in out and "coordinates: 2/2 images; latitude 38.250 .. 39.500 deg" in out
    assert "longitude -121.000 .. -120.500 deg" in out
    for flag, needle in ((["--coords", "csv"], "--coords: only applies to imagefolder"),
                         (["--skip-corrupt"], "--skip-corrupt: only applies to datasets read from image files")):
        assert main(["data", "info", "synthetic-wildfire", *flag]) == 2
        assert needle in capsys.readouterr().err


def test_data_info_shows_folder_names_escaped_one_line_each(tmp_path, capsys):
    """Class and dataset names are a user's folder names: a folder named with a terminal escape or
    a newline reached the terminal raw from ``fol data info`` (the escape ran, the newline split a
    class's row in two); they are now shown escaped, as ``fol model info`` shows a card's classes."""
    from fol.cli import main

    root = tmp_path / "top\x1b]0;title\x07"
    for name, colour in (("\x1b[2Jfire", (200, 50, 0)), ("no\nfire", (0, 150, 0)), ("ok\u202eerif", (9, 9, 9))):
        _write(root / name / "1.png", colour, size=8)
    assert main(["data", "info", f"imagefolder:{root}"]) == 0
    out = capsys.readouterr().out
    assert out.isascii() and not any(ch in out for ch in "\x1b\x07\u202e"), out
    lines = out.splitlines()
    assert lines[0].startswith("dataset top\\x1b]0;title\\x07: 3 images"), lines[0]
    rows = [ln.split()[0] for ln in lines[2:5]]
    assert sorted(rows) == sorted(["\\x1b[2Jfire", "no\\nfire", "ok\\u202eerif"]), lines
    assert lines[5].startswith("  coordinates:"), lines


def test_data_info_name_colon_path_is_for_image_folders_only(tmp_path, capsys):
    """``fol data info wildfire:PATH`` said the dataset 'does not take option(s) path', an
    option nobody typed; it now says ':PATH' is for imagefolder and where a named dataset is found."""
    from fol.cli import main

    assert main(["data", "info", f"wildfire:{tmp_path}"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"fol data: error: wildfire:{tmp_path}: NAME:PATH only applies to imagefolder:PATH; dataset 'wildfire' is "
        f"read from <data root>/wildfire (--data-root, or FOL_DATA_ROOT)"]
    assert main(["data", "info", f"synthetic-wildfire:{tmp_path}"]) == 2
    assert "dataset 'synthetic-wildfire' is generated, from no folder" in capsys.readouterr().err


def test_a_relative_image_folder_is_found_under_the_default_data_root(tmp_path, monkeypatch, capsys):
    """``imagefolder:NAME`` is looked up under the data root when NAME is not in
    the current folder, whether the root is given (``--data-root``) or is the
    default one (``$FOL_DATA_ROOT``, else datasets/), as ``--data-root``'s help
    says; the check a scenario runs first finds it in the same place."""
    from fol.cli import main
    from fol.data.registry import check_dataset

    root = tmp_path / "data"
    _write(root / "my_images" / "burnt" / "1.png", (200, 50, 0))
    _write(root / "my_images" / "intact" / "2.png", (0, 150, 0))
    monkeypatch.chdir(tmp_path)  # no my_images here
    monkeypatch.setenv("FOL_DATA_ROOT", str(root))
    check_dataset("imagefolder", path="my_images")
    assert len(load_dataset("imagefolder", path="my_images", image_size=8)) == 2
    assert main(["data", "info", "imagefolder:my_images"]) == 0
    assert "2 images" in capsys.readouterr().out
    assert main(["data", "info", "imagefolder:my_images", "--data-root", str(root)]) == 0
    monkeypatch.delenv("FOL_DATA_ROOT")  # the default root is the checkout's datasets/: no my_images there
    assert main(["data", "info", "imagefolder:my_images"]) == 2
    assert "image folder my_images not found" in capsys.readouterr().err


def test_an_image_folder_under_the_home_folder_may_be_written_with_a_tilde(tmp_path, monkeypatch, capsys):
    """``imagefolder:~/my_images`` (and ``path=~/...`` in a --data spec): the shell expands no ``~``
    after ``imagefolder:`` or ``path=``, so the loader does, as a scenario's data.path and
    --data-root do; the folder was looked up as a relative '~' folder and reported missing."""
    from fol.cli import main
    from fol.data.registry import check_dataset
    from fol.nodedata import load_node_data, parse_node_data

    for i in range(10):  # a node's train/val/test split needs 20 images
        _write(tmp_path / "my_images" / "burnt" / f"{i}.png", (200, 50, i), size=4)
        _write(tmp_path / "my_images" / "intact" / f"{i}.png", (0, 150, i), size=4)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path / "my_images")  # no '~' folder here
    check_dataset("imagefolder", path="~/my_images")
    assert len(load_dataset("imagefolder", path="~/my_images", image_size=8)) == 20
    assert main(["data", "info", "imagefolder:~/my_images"]) == 0
    assert "dataset my_images: 20 images" in capsys.readouterr().out
    node = load_node_data(parse_node_data("dataset=imagefolder,path=~/my_images,partition=all"))
    assert len(node.train) + len(node.val) + len(node.test) == 20


def test_an_image_in_two_published_splits_is_used_once(tmp_path, caplog):
    # pooled and re-split per node, a copy could otherwise be in a node's training and test split
    base = _wildfire_tree(tmp_path / "wildfire")
    dup = base / "train" / "wildfire" / "-73.4586,45.5837.jpg"
    (base / "test" / "wildfire" / dup.name).write_bytes(dup.read_bytes())
    _write(base / "valid" / "wildfire" / "-72.1,46.25.jpg", (10, 20, 250))  # same place, another tile: kept
    with caplog.at_level("WARNING", logger="fol.data.loaders"):
        ds = loaders.load_wildfire(base, image_size=8)
    assert len(ds) == 8
    assert sum(s.endswith("-73.4586,45.5837.jpg") for s in ds.sources) == 1
    assert sum(s.endswith("-72.1,46.25.jpg") for s in ds.sources) == 2
    assert "1 image(s) are copies" in caplog.text and "test/wildfire/-73.4586,45.5837.jpg" in caplog.text


def test_an_empty_published_folder_is_an_error_not_a_smaller_split(tmp_path):
    base = _wildfire_tree(tmp_path / "wildfire")
    for f in (base / "valid").rglob("*.jpg"):  # an archive unpacked only in part
        f.unlink()
    with pytest.raises(DataError, match=r"no images in valid/nowildfire, valid/wildfire"):
        loaders.load_wildfire(base, image_size=8)
    assert len(loaders.load_wildfire(base, splits=("train", "test"), image_size=8)) == 5


def test_class_folder_names_are_unicode_nfc_whatever_form_the_disk_keeps(tmp_path):
    """macOS (HFS+) keeps 'café' decomposed (NFD), Linux as typed (NFC): the same
    folders copied from one to the other must give the same classes, in the same
    order (sorted NFD, 'café' came before 'caff'; sorted NFC, after it)."""
    import unicodedata

    classes = {}
    for form in ("NFC", "NFD"):
        root = tmp_path / form
        for i, name in enumerate(("café", "caff", "tea")):
            _write(root / unicodedata.normalize(form, name) / "x.png", (10 * i, 2, 3))
        ds = load_dataset("imagefolder", path=root, image_size=8)
        classes[form] = ds.class_names
        assert loaders.class_folder_names(root) == ds.class_names
        # a class named in either form finds its folder
        named = load_dataset("imagefolder", path=root, image_size=8,
                             classes=[unicodedata.normalize("NFD", "café"), "tea"])
        assert named.class_names == ["café", "tea"] and len(named) == 2
    assert classes["NFC"] == classes["NFD"] == ["caff", "café", "tea"]
    assert all(unicodedata.is_normalized("NFC", n) for n in classes["NFD"])
    # ASCII names are left as they are
    assert load_dataset("imagefolder", path=tmp_path / "NFC", image_size=8, classes=["tea", "caff"]).class_names \
        == ["tea", "caff"]


def test_one_class_name_in_two_unicode_forms_is_one_clear_error(tmp_path):
    import unicodedata

    root = tmp_path / "imgs"
    for form in ("NFC", "NFD"):
        _write(root / unicodedata.normalize(form, "café") / "x.png", (1, 2, 3))
    _write(root / "tea" / "y.png", (1, 2, 3))
    with pytest.raises(DataError, match="same class name 'café'"):
        load_dataset("imagefolder", path=root, image_size=8)


def test_coords_csv_names_an_image_in_either_unicode_form(tmp_path):
    """A CSV typed on Linux or Windows (NFC) for a folder unpacked on macOS (NFD names): every
    image of folder 'café' (and file 'né.png') had 'no coordinates', the two names printing alike."""
    import unicodedata

    nfd = lambda s: unicodedata.normalize("NFD", s)  # noqa: E731
    root = tmp_path / "imgs"
    _write(root / nfd("café") / "x.png", (1, 2, 3))
    _write(root / "tea" / nfd("né.png"), (1, 2, 3))
    (root / "coords.csv").write_text("file,lat,lon\ncafé/x.png,10,20\nné.png,30,40\n", encoding="utf-8")
    ds = load_dataset("imagefolder", path=root, image_size=8, coords="csv")
    assert ds.lat.tolist() == [10.0, 30.0] and ds.lon.tolist() == [20.0, 40.0]
    # and the other way round: a CSV written with the decomposed names, folders as typed
    other = tmp_path / "other"
    _write(other / "café" / "x.png", (1, 2, 3))
    _write(other / "tea" / "y.png", (1, 2, 3))
    (other / "coords.csv").write_text(f"file,lat,lon\n{nfd('café')}/x.png,10,20\ntea/y.png,30,40\n", encoding="utf-8")
    assert load_dataset("imagefolder", path=other, image_size=8, coords="csv").lat.tolist() == [10.0, 30.0]
    # one path in two forms with other coordinates is one path listed twice
    (other / "coords.csv").write_text(f"file,lat,lon\ncafé/x.png,10,20\n{nfd('café')}/x.png,1,2\ntea/y.png,30,40\n",
                                      encoding="utf-8")
    with pytest.raises(DataError, match="listed again with other coordinates"):
        load_dataset("imagefolder", path=other, image_size=8, coords="csv")


def test_a_class_folder_link_that_points_nowhere_stops_the_load(tmp_path):
    """Class folders linked from a store, one link broken (a folder moved, a disk not mounted): that
    class was silently left out, and a model trained on one class fewer. As for a broken link to an
    image, the load stops naming it."""
    store = tmp_path / "store"
    _write(store / "a" / "x.png", (1, 2, 3))
    _write(store / "b" / "y.png", (1, 2, 3))
    root = tmp_path / "imgs"
    root.mkdir()
    for c in ("a", "b", "c"):
        (root / c).symlink_to(store / c)
    (root / ".old").symlink_to(store / "old")  # hidden: not a class, broken or not
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=root, image_size=8)
    assert str(err.value).startswith(f"image folder {root}: {root / 'c'} is a link to {store / 'c'}, which does not "
                                     f"exist"), err.value
    (root / "c").unlink()
    assert load_dataset("imagefolder", path=root, image_size=8).class_names == ["a", "b"]  # links that work


def test_an_empty_image_file_is_named_empty(tmp_path, capsys):
    """A zero-byte file named like an image (a copy cut short, a sync placeholder) stopped the load
    with 'cannot read image (UnidentifiedImageError: cannot identify image file '<the path again>')',
    which does not say that the file is empty."""
    from fol.cli import main

    root = tmp_path / "imgs"
    _write(root / "a" / "x.png", (1, 2, 3))
    _write(root / "b" / "y.png", (1, 2, 3))
    (root / "b" / "z.jpg").write_bytes(b"")
    assert main(["data", "info", f"imagefolder:{root}"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"fol data: error: imagefolder:{root}: {root / 'b' / 'z.jpg'}: cannot read image (an empty file, 0 bytes)"]
    assert len(load_dataset("imagefolder", path=root, image_size=8, skip_corrupt=True)) == 2


def test_a_loop_of_links_is_named_a_loop_not_a_link_to_nothing(tmp_path, capsys, caplog):
    """A class folder link in a loop of links (c1 -> c2 -> c1) was said to point to 'c2, which does
    not exist', where c2 is there; an image link in a loop ended in 'cannot read image (OSError:
    [Errno 40] Too many levels of symbolic links ...)'. Each is named a loop of links, in one line."""
    from fol.cli import main

    root = tmp_path / "imgs"
    _write(root / "a" / "x.png", (1, 2, 3))
    _write(root / "b" / "y.png", (1, 2, 3))
    (root / "c1").symlink_to("c2")
    (root / "c2").symlink_to("c1")
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=root, image_size=8)
    assert str(err.value) == (f"image folder {root}: {root / 'c1'} is a link to c2, which leads back to it (a loop "
                              f"of links); point it at a class folder or remove it"), err.value
    assert main(["data", "info", f"imagefolder:{root}"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"fol data: error: imagefolder:{root}: {err.value}"]
    for link in ("c1", "c2"):
        (root / link).unlink()
    (root / "a" / "x1.png").symlink_to("x2.png")
    (root / "a" / "x2.png").symlink_to("x1.png")
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=root, image_size=8)
    assert str(err.value) == f"{root / 'a' / 'x1.png'}: a link to x2.png, which leads back to it (a loop of links)"
    with caplog.at_level("WARNING", logger="fol.data.loaders"):
        ds = load_dataset("imagefolder", path=root, image_size=8, skip_corrupt=True)
    assert [Path(s).name for s in ds.sources] == ["x.png", "y.png"]
    assert f"skipped 2 unreadable image(s): {root / 'a' / 'x1.png'}" in caplog.text


def _split_first_tree(base: Path) -> Path:
    """A Kaggle-style folder: split first, then class; 'smoke' is only in train."""
    _write(base / "train" / "fire" / "-120.5,38.25.png", (220, 40, 0))
    _write(base / "train" / "fire" / "-121.0,39.0.png", (210, 50, 0))
    _write(base / "train" / "nofire" / "-119.0,37.0.png", (0, 160, 40))
    _write(base / "train" / "smoke" / "-118.0,36.0.png", (150, 150, 150))
    _write(base / "valid" / "fire" / "-122.0,40.0.png", (230, 30, 0))
    _write(base / "valid" / "nofire" / "-117.0,35.0.png", (0, 170, 30))
    _write(base / "test" / "nofire" / "-116.0,34.0.png", (0, 150, 50))
    return base


def test_a_split_first_folder_is_refused_in_one_line_not_read_as_classes_train_valid_test(tmp_path):
    """It was read as a 3-class dataset 'test', 'train', 'valid': every label wrong, no word said."""
    root = _split_first_tree(tmp_path / "kaggle")
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=root, image_size=8)
    msg = str(err.value)
    assert "\n" not in msg and str(root) in msg and "laid out by split first (test/, train/, valid/" in msg
    assert "class folders fire, nofire, smoke" in msg and "splits=test,train,valid" in msg
    assert loaders.split_first_layout(root) == {"test": ["nofire"], "train": ["fire", "nofire", "smoke"],
                                                "valid": ["fire", "nofire"]}


def test_a_split_first_folder_pools_the_splits_named(tmp_path):
    root = _split_first_tree(tmp_path / "kaggle")
    ds = load_dataset("imagefolder", path=root, image_size=8, splits=["train", "valid"])
    assert ds.class_names == ["fire", "nofire", "smoke"]  # the union over the splits read, sorted
    rel = [Path(s).relative_to(root).as_posix() for s in ds.sources]
    assert sorted(zip(rel, ds.labels.tolist())) == [
        ("train/fire/-120.5,38.25.png", 0), ("train/fire/-121.0,39.0.png", 0), ("train/nofire/-119.0,37.0.png", 1),
        ("train/smoke/-118.0,36.0.png", 2), ("valid/fire/-122.0,40.0.png", 0), ("valid/nofire/-117.0,35.0.png", 1)]
    red = ds.images[:, 0].mean((1, 2)) > ds.images[:, 1].mean((1, 2))  # fire painted red, every label right
    assert torch.equal(red, ds.labels == 0)
    only_test = loaders.load_image_folder(root, splits=("test",), image_size=8)
    assert only_test.class_names == ["nofire"] and len(only_test) == 1
    for bad, needle in ((["train", "bogus"], "no split folder bogus in .* \\(found: test, train, valid\\)"),
                        ("train", "must be a list of split folder names"), ([], "splits is empty"),
                        (["train", "train"], "names train twice")):
        with pytest.raises(DataError, match=needle):
            loaders.load_image_folder(root, splits=bad, image_size=8)
    with pytest.raises(DataError, match=r"class 'rare' is missing in split\(s\) train, valid"):
        loaders.load_image_folder(root, splits=("train", "valid"), classes=["fire", "rare"], image_size=8)


def test_a_split_first_folder_reads_coordinates_from_names_and_from_a_csv_with_the_split_folder(tmp_path):
    root = _split_first_tree(tmp_path / "kaggle")
    ds = loaders.load_image_folder(root, splits=("train", "test"), coords="filename", image_size=8)
    by_file = {Path(s).name: (la, lo) for s, la, lo in zip(ds.sources, ds.lat, ds.lon)}
    assert by_file["-120.5,38.25.png"] == (38.25, -120.5) and by_file["-116.0,34.0.png"] == (34.0, -116.0)
    # the same name in two splits, two places: the CSV's path relative to the folder starts with the split
    _write(root / "test" / "fire" / "a.png", (200, 0, 0))
    _write(root / "train" / "fire" / "a.png", (201, 0, 0))
    rows = ["file,lat,lon", "test/fire/a.png,1,2", "train/fire/a.png,3,4"]
    rows += [f'"{p.relative_to(root).as_posix()}",0,0' for p in sorted(root.rglob("*,*.png"))]
    (root / "coords.csv").write_text("\n".join(rows) + "\n")
    geo = loaders.load_image_folder(root, splits=("train", "test"), coords="csv", image_size=8)
    places = {Path(s).relative_to(root).as_posix(): (la, lo) for s, la, lo in zip(geo.sources, geo.lat, geo.lon)}
    assert places["test/fire/a.png"] == (1.0, 2.0) and places["train/fire/a.png"] == (3.0, 4.0)


def test_a_split_first_folder_with_an_unlabelled_test_split_is_refused_not_read_as_classes(tmp_path):
    """Kaggle competitions publish train/<class>/ beside a test/ of bare, unlabelled images: that
    test/ holding images directly made the folder 'not split-first', read as classes test, train."""
    root = tmp_path / "comp"
    _write(root / "train" / "fire" / "a.png", (230, 30, 0))
    _write(root / "train" / "nofire" / "b.png", (0, 170, 30))
    _write(root / "test" / "1.png", (9, 9, 9))
    (root / "valid" / "fire").mkdir(parents=True)  # an emptied split
    assert loaders.split_first_layout(root) == {"train": ["fire", "nofire"]}
    with pytest.raises(DataError, match=r"split first \(train/ each holding class folders fire, nofire; test/, "
                                        r"valid/ without class folders of images\).*splits=train \("):
        load_dataset("imagefolder", path=root, image_size=8)
    assert loaders.load_image_folder(root, splits=["train"], image_size=8).class_names == ["fire", "nofire"]
    _write(root / "valid" / "c.png", (9, 9, 9))
    named = loaders.load_image_folder(root, classes=["test", "train", "valid"], image_size=8)  # as classes, on purpose
    assert named.labels.tolist() == [0, 1, 1, 2]


def test_an_image_in_two_splits_of_a_split_first_folder_is_used_once(tmp_path, caplog):
    root = _split_first_tree(tmp_path / "kaggle")
    copy = root / "train" / "nofire" / "-119.0,37.0.png"
    (root / "valid" / "nofire" / copy.name).write_bytes(copy.read_bytes())
    with caplog.at_level("WARNING", logger="fol.data.loaders"):
        ds = loaders.load_image_folder(root, splits=("train", "valid"), image_size=8)
    assert sum(s.endswith(copy.name) for s in ds.sources) == 1 and "1 image(s) are copies" in caplog.text


def test_class_folders_with_image_sub_folders_are_still_classes_not_splits(tmp_path):
    """torchvision's layout allows 'burnt/2020/*.png': folders whose names are not split
    names, and split-named folders holding images directly, are classes as before."""
    root = tmp_path / "imgs"
    for cls in ("burnt", "intact"):
        _write(root / cls / "2020" / "a.png", (9, 9, 9))
        _write(root / cls / "2021" / "b.png", (9, 9, 9))
    ds = load_dataset("imagefolder", path=root, image_size=8)
    assert ds.class_names == ["burnt", "intact"] and ds.labels.tolist() == [0, 0, 1, 1]
    assert loaders.split_first_layout(root) is None
    flat = tmp_path / "flat"  # classes that happen to be called 'test' and 'train', images directly inside
    _write(flat / "test" / "x" / "a.png", (9, 9, 9))
    _write(flat / "test" / "b.png", (9, 9, 9))
    _write(flat / "train" / "c.png", (9, 9, 9))
    assert load_dataset("imagefolder", path=flat, image_size=8).class_names == ["test", "train"]
    # a split-first folder read as classes on purpose: the split folders named as classes
    kaggle = _split_first_tree(tmp_path / "kaggle")
    assert loaders.load_image_folder(kaggle, classes=["train", "test"], image_size=8).class_counts().tolist() == [4, 1]


def test_split_folders_named_seg_train_training_train_set_or_trainingSet_are_splits_not_classes(tmp_path):
    """Intel Image Classification unpacks as seg_train/seg_train/<class>/, seg_test/seg_test/<class>/
    and seg_pred/seg_pred/ of unlabelled images: it was read as classes seg_pred, seg_test, seg_train,
    every label wrong. Split names that end in a split word, or are written in capitals or camel case,
    and a split folder wrapping one folder of its own name, are now splits."""
    intel = tmp_path / "intel"
    for shade, split in enumerate(("seg_train", "seg_test")):
        _write(intel / split / split / "buildings" / f"{split}_a.png", (90 + shade, 90, 90))
        _write(intel / split / split / "forest" / f"{split}_b.png", (0, 160 + shade, 0))
    _write(intel / "seg_train" / "seg_train" / "forest" / "c.png", (0, 150, 0))
    _write(intel / "seg_pred" / "seg_pred" / "1.png", (9, 9, 9))
    assert loaders.split_first_layout(intel) == {"seg_test": ["buildings", "forest"],
                                                 "seg_train": ["buildings", "forest"]}
    with pytest.raises(DataError) as err:
        load_dataset("imagefolder", path=intel, image_size=8)
    msg = str(err.value)
    assert "\n" not in msg and "split first (seg_test/, seg_train/ each holding class folders buildings, forest; " \
                               "seg_pred/ without class folders of images)" in msg, msg
    ds = loaders.load_image_folder(intel, splits=["seg_train", "seg_test"], image_size=8)
    assert ds.class_names == ["buildings", "forest"] and ds.class_counts().tolist() == [2, 3]
    green = ds.images[:, 1].mean((1, 2)) > ds.images[:, 0].mean((1, 2)) + 0.2
    assert torch.equal(green, ds.labels == 1)  # every label right
    assert loaders.image_folder_classes(intel, ["seg_test"]) == ["buildings", "forest"]
    for names in (("training", "validation", "testing"), ("train_set", "test_set"), ("Train", "Test"),
                  ("trainingSet", "testSet"), ("seg_train", "seg_test")):
        root = tmp_path / "_".join(names)
        for split in names:
            _write(root / split / "cat" / "a.png", (9, 9, 9))
            _write(root / split / "dog" / "b.png", (90, 9, 9))
        assert loaders.split_first_layout(root) == {s: ["cat", "dog"] for s in sorted(names)}, names
        with pytest.raises(DataError, match="laid out by split first"):
            load_dataset("imagefolder", path=root, image_size=8)
    # a class that happens to be called 'test' (or 'seg_test'), beside classes not named like splits, stays a class
    for odd in ("test", "seg_test"):
        root = tmp_path / f"classes_{odd}"
        for cls in (odd, "control"):
            _write(root / cls / "2020" / "a.png", (9, 9, 9))
            _write(root / cls / "2021" / "b.png", (9, 9, 9))
        assert loaders.split_first_layout(root) is None
        assert load_dataset("imagefolder", path=root, image_size=8).class_names == sorted([odd, "control"])


def test_split_first_folders_are_read_through_every_way_of_naming_a_dataset(tmp_path, capsys, monkeypatch):
    """--splits of fol data info, data.splits of a scenario and splits= of a --data spec
    all reach the loader; the first two refuse datasets not read from split folders."""
    from fol.cli import main
    from fol.nodedata import load_node_data, parse_node_data
    from fol.simulation.scenario import DataConfig

    root = _split_first_tree(tmp_path / "kaggle")
    assert main(["data", "info", f"imagefolder:{root}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "laid out by split first" in err[0] and "--splits test,train,valid" in err[0]
    assert main(["data", "info", f"imagefolder:{root}", "--splits", "train,valid"]) == 0
    out = capsys.readouterr().out
    assert "6 images" in out and "classes (3):" in out and "smoke" in out
    assert main(["data", "info", "synthetic-wildfire", "--splits", "train"]) == 2
    assert "--splits: only applies to datasets published in split folders" in capsys.readouterr().err
    options = DataConfig(dataset="imagefolder", path=str(root), splits=["valid", "test"]).loader_options(0)
    assert options["splits"] == ["valid", "test"]
    assert load_dataset("imagefolder", **options).class_counts().tolist() == [1, 2]
    spec = parse_node_data(f"dataset=imagefolder,path={root},partition=all,splits=train+test")
    monkeypatch.setattr("fol.data.split_node", lambda ds, seed: ds)  # the node's whole pool, unsplit
    pool = load_node_data(spec)
    assert spec.splits == "train+test" and len(pool) == 5 and pool.class_names == ["fire", "nofire", "smoke"]


def test_a_large_sixteen_bit_or_float_band_is_converted_without_wide_copies_of_it(tmp_path):
    """The 8-bit conversion made uint32 / float64 copies of the whole band: 10 bytes of Python-side
    memory per pixel of a 16-bit image (13 of a float one), near 1 GB for an image at the pixel limit,
    in each of the reading threads. It now converts a chunk at a time: the band as Pillow hands it
    over and the 8-bit result, plus one chunk."""
    import tracemalloc

    side = 3000
    Image.fromarray(np.zeros((side, side), np.uint16)).save(tmp_path / "z16.png")
    Image.fromarray(np.zeros((side, side), np.float32)).save(tmp_path / "zf.tif")
    for name, most in (("z16.png", 6), ("zf.tif", 11)):  # bytes per pixel
        tracemalloc.start()
        try:
            assert loaders.read_image(tmp_path / name, 8).shape == (3, 8, 8)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < most * side * side, (name, peak / side / side)


@pytest.mark.parametrize("path", ["", "  "])
def test_an_empty_image_folder_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, path):
    """``imagefolder:`` with nothing after it (an unset variable in ``--data imagefolder:$DIR``) read
    the current folder, whose sub-folders became classes; it is a missing path."""
    (tmp_path / "a").mkdir()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a" / "x.png")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"imagefolder' needs path=.*empty path"):
        load_dataset("imagefolder", path=path, image_size=8)


@pytest.mark.parametrize("kind", ["file", "loop", "dangling", "missing"])
def test_an_image_folder_path_that_is_no_folder_says_what_it_is(kind, tmp_path, capsys):
    """``imagefolder:PATH`` where PATH is a file (an archive not unpacked), or a link in a loop of
    links, was said to be 'not found'; each now says what it is (a link that points nowhere names
    its target), in one line; a PATH that is not there is still not found. The scenario check of
    fol simulate (check_dataset) says the same where it said 'not found or empty'."""
    from fol.cli import main
    from fol.data.registry import check_dataset

    root = tmp_path / "imgs"
    if kind == "file":
        root.write_bytes(b"PK\x03\x04")
    elif kind == "loop":
        root.symlink_to("imgs")
    elif kind == "dangling":
        root.symlink_to(tmp_path / "moved")
    expected = {
        "file": f"image folder {root} is a file, not a folder of class folders: expected {root}/<class>/<image files> "
                f"(an archive: unpack it and give its folder)",
        "loop": f"image folder {root} is a link to imgs, which leads back to it (a loop of links); point it at a "
                f"folder of class folders or remove it",
        "dangling": f"image folder {root} is a link to {tmp_path / 'moved'}, which does not exist (a folder moved, "
                    f"or a disk not mounted?)",
        "missing": f"image folder {root} not found: expected {root}/<class>/<image files> (e.g. under datasets/; "
                   f"see datasets/README.md)",
    }[kind]
    with pytest.raises(DataError) as err:
        loaders.load_image_folder(root, image_size=8)
    assert str(err.value) == expected
    assert main(["data", "info", f"imagefolder:{root}"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"fol data: error: imagefolder:{root}: {expected}"]
    with pytest.raises(DataError) as err:
        check_dataset("imagefolder", path=str(root))
    assert str(err.value) == (expected if kind != "missing" else
                              f"image folder {root} not found or empty: expected {root}/<class>/<image files>")


@pytest.mark.parametrize("kind", ["image", "bands", "coords"])
def test_a_fifo_given_as_an_image_or_coordinates_csv_is_refused_unopened(tmp_path, kind):
    """Review: read_image opened a FIFO (named pipe) given as an image, and open() waits for a writer: the
    load blocked forever (so did the bands reader of a multispectral TIFF); a coordinates CSV that is a
    FIFO was said to be 'not found'. Each is now refused in one line, 'not a regular file', without
    opening it (swarmbase.fileio.is_special_file)."""
    import os

    from _waiting import raised_within

    fifo = tmp_path / ("coords.csv" if kind == "coords" else "scene.tif")
    os.mkfifo(fifo)
    call = {"image": lambda: loaders.read_image(fifo, 8),
            "bands": lambda: loaders._read_image_and_place(fifo, 8, None, bands=[1, 2, 3]),
            "coords": lambda: loaders._read_coords_csv(fifo)}[kind]
    exc = raised_within(call, fifo=fifo)
    expected = "a coordinates CSV" if kind == "coords" else "an image file"
    assert isinstance(exc, DataError) and str(exc) == f"{fifo}: not a regular file; expected {expected}", exc


def test_a_device_given_as_an_image_is_refused_unopened(tmp_path):
    """/dev/zero given as an image was opened and said to be 'an empty file, 0 bytes' (its size); a device is
    now refused as a FIFO is, unopened."""
    with pytest.raises(DataError, match=r"^/dev/zero: not a regular file; expected an image file$"):
        loaders.read_image("/dev/zero", 8)
    link = tmp_path / "a.png"
    link.symlink_to("/dev/null")
    with pytest.raises(DataError, match=r"a\.png: not a regular file; expected an image file$"):
        loaders.read_image(link, 8)


def test_every_message_names_the_file_through_brief(tmp_path):
    """The image readers named a file through brief() (escaped, a long path cut), the folder-level checks
    (an image folder, a class folder, a coordinates CSV, a file name without coordinates) wrote the path as
    it is: a folder whose name holds a terminal escape had it written raw into the line, and a long one
    whole. Every refusal now names the file or folder as brief() does."""
    from fol.data.registry import check_dataset
    from swarmbase.tomlcheck import brief

    root = tmp_path / ("d\x1b[2J" + "x" * 200)  # a 205-byte folder name, a path of over 250 characters
    _write(root / "a" / "-70,45.png", (1, 2, 3))
    _write(root / "b" / "photo.png", (1, 2, 3))
    csv_path = root / ("c\x1b]0;" + "y" * 200 + ".csv")
    csv_path.write_text("file,lat,lon\na/-70,45.png,north,0\n")
    empty = tmp_path / ("e\n" + "z" * 200)
    (empty / "a").mkdir(parents=True)
    _write(empty / "b" / "-70,45.png", (1, 2, 3))
    gone = tmp_path / ("g\x1b[2J" + "w" * 200)
    calls = [
        (gone, lambda: loaders.load_image_folder(gone), "not found"),
        (gone, lambda: check_dataset("imagefolder", path=str(gone)), "not found or empty"),
        (csv_path, lambda: loaders.load_image_folder(csv_path), "is a file, not a folder"),
        (empty, lambda: loaders.load_image_folder(empty), "has no images"),
        (root / "b" / "photo.png", lambda: loaders.load_image_folder(root, coords="filename"), "file name is not"),
        (csv_path, lambda: loaders.load_image_folder(root, coords="csv", coords_csv=csv_path), "lat/lon must be"),
        (root, lambda: loaders.load_image_folder(root, splits=["train"]), "no split folder train"),
    ]
    for path, call, fragment in calls:
        with pytest.raises(DataError) as err:
            call()
        msg = str(err.value)
        assert (msg.startswith(f"{brief(path)}:") or f"image folder {brief(path)}" in msg) and fragment in msg, msg
        assert "\x1b" not in msg and "\n" not in msg and len(msg) < 800, msg


@pytest.mark.parametrize("tile", [None, 16])
def test_a_jpeg_tiff_strip_larger_than_its_frame_is_refused_naming_why(tmp_path: Path, tile: int | None,
                                                                       capfd: pytest.CaptureFixture[str]) -> None:
    """A 16 x 16 JPEG-in-TIFF (compression 7) whose strip or tile holds a 64 x 64 JPEG was refused, without
    bands, as 'cannot read image (OSError: decoder error -2)', libtiff printing 'JPEGPreDecode: ... exceeds
    expected dimensions' on standard error without the file's name. Its frame is now read before libtiff
    decodes it, as with bands: one line naming the file, the frame's size and the size its tags give."""
    good, big = tmp_path / "good.tif", tmp_path / "big.tif"
    one_segment_tiff(good, 16, flat_jpeg((90,), 16), 7, bits=8, tile=tile)
    one_segment_tiff(big, 16, flat_jpeg((90,), 64), 7, bits=8, tile=tile)
    arr = loaders.read_image(good, 8)
    assert arr.shape == (3, 8, 8) and np.abs(arr.astype(int) - 90).max() <= 2
    with pytest.raises(DataError) as info:
        loaders.read_image(big, 8)
    kind = "tile" if tile else "strip"
    assert str(info.value) == (f"{big}: a JPEG {kind} of 64 x 64 pixels of 1 component (4,096 bytes decoded), more "
                               f"than the 256 bytes its tags say it holds (a decompression bomb, or a damaged file)")
    assert "JPEGPreDecode" not in capfd.readouterr().err  # refused before libtiff decoded it
