"""Image folders of multispectral TIFFs read with ``bands`` (and ``scale``): tifffile
reads every band count Pillow cannot; three chosen bands become the model's channels."""

from __future__ import annotations

import logging
import math
import struct
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from fol.cli import main
from fol.data import loaders
from fol.data.registry import load_dataset
from fol.errors import ConfigError, DataError
from fol.nodedata import load_node_data, parse_node_data, split_fields

from _memory import traced_peak
from _tiff import (band_strips_tiff, flat_jpeg, header_apart_ojpeg_tiff, one_segment_tiff, row_strips_tiff,
                   without_adobe_segment)

tifffile = pytest.importorskip("tifffile")


def _scene(seed: int, bands: int = 13, side: int = 16, dtype: str = "u2", high: int = 12_000) -> np.ndarray:
    """``[bands, side, side]`` of values 0..high (Sentinel-2 DN reach about 10,000, clouds more)."""
    return np.random.default_rng(seed).integers(0, high, (bands, side, side)).astype(dtype)


def _write(path: Path, bands_first: np.ndarray, layout: str = "separate", **kw: object) -> None:
    """A TIFF of ``bands_first`` (``[bands, H, W]``) in PLANARCONFIG ``layout``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if len(bands_first) == 1:  # one band: no planar configuration to choose
        tifffile.imwrite(path, bands_first[0], photometric="minisblack", **kw)
        return
    data = bands_first if layout == "separate" else bands_first.transpose(1, 2, 0)
    tifffile.imwrite(path, data, planarconfig=layout, photometric="minisblack", **kw)


def _folder(root: Path, layouts: tuple[str, str] = ("separate", "contig")) -> dict[str, np.ndarray]:
    """Two classes of one 13-band 16 x 16 uint16 scene each, one per layout."""
    scenes = {"burnt": _scene(1), "intact": _scene(2)}
    for (name, scene), layout in zip(scenes.items(), layouts):
        _write(root / name / "scene.tif", scene, layout)
    return scenes


def _pixels(ds) -> np.ndarray:
    """The dataset's images back in 0..255 (they are uint8 / 255 as float32)."""
    return (ds.images.numpy() * 255).round().astype(np.int64)


@pytest.mark.parametrize("layouts", [("separate", "contig"), ("contig", "separate")])
def test_the_chosen_bands_land_in_the_channels_scaled_as_16_bit_bands(tmp_path, layouts):
    """Bands 12, 11, 9 of either layout are channels 0, 1, 2, each value times 255 / 65535
    rounded: the rule of a 16-bit single-band image."""
    scenes = _folder(tmp_path / "imgs", layouts)
    ds = load_dataset("imagefolder", path=tmp_path / "imgs", bands=[12, 11, 9], image_size=16)
    got = _pixels(ds)
    for k, name in enumerate(ds.class_names):
        i = int(np.flatnonzero(ds.labels.numpy() == k)[0])
        expected = np.floor(scenes[name][[11, 10, 8]].astype(np.float64) * 255 / 65535 + 0.5)
        np.testing.assert_array_equal(got[i], expected)


def test_scale_divides_and_clips(tmp_path):
    """scale=10000: v / 10000 clipped to [0, 1], times 255, rounded; a value over 10,000 is white.
    Without it the same Sentinel-2-like scene is nearly black (a mean under 10 of 255)."""
    scenes = _folder(tmp_path / "imgs")
    plain = load_dataset("imagefolder", path=tmp_path / "imgs", bands=[4, 3, 2], image_size=16)
    scaled = load_dataset("imagefolder", path=tmp_path / "imgs", bands=[4, 3, 2], scale=10000, image_size=16)
    assert _pixels(plain).mean() < 25 and _pixels(scaled).mean() > 100
    for k, name in enumerate(scaled.class_names):
        i = int(np.flatnonzero(scaled.labels.numpy() == k)[0])
        v = scenes[name][[3, 2, 1]].astype(np.float64)
        expected = np.round(np.clip(v / 10000, 0, 1) * 255)
        np.testing.assert_array_equal(_pixels(scaled)[i], expected)
        assert (_pixels(scaled)[i][v > 10000] == 255).all()


def test_8_bit_and_float_bands(tmp_path):
    """8-bit bands are used as they are; float bands in [0, 1] times 255; float bands
    outside [0, 1] are refused naming the file unless scale is given."""
    eight = _scene(3, bands=4, high=256, dtype="u1")
    floats = (_scene(4, bands=5, high=1000) / 1000).astype("f4")
    _write(tmp_path / "a" / "x" / "p.tif", eight, "contig")
    _write(tmp_path / "a" / "y" / "p.tif", floats, "separate")
    ds = load_dataset("imagefolder", path=tmp_path / "a", bands=[4, 1, 2], image_size=16)
    np.testing.assert_array_equal(_pixels(ds)[0], eight[[3, 0, 1]])
    np.testing.assert_array_equal(_pixels(ds)[1], np.round(floats[[3, 0, 1]].astype(np.float64) * 255))
    _write(tmp_path / "a" / "y" / "p.tif", floats * 3, "separate")
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "a", bands=[4, 1, 2], image_size=16)
    assert str(info.value).startswith(f"{tmp_path / 'a' / 'y' / 'p.tif'}: TIFF of float32 bands with values "
                                      "outside [0, 1] (")
    assert "give the dataset option scale" in str(info.value)
    ds = load_dataset("imagefolder", path=tmp_path / "a", bands=[4, 1, 2], scale=3, image_size=16)
    np.testing.assert_array_equal(_pixels(ds)[1], np.round(np.clip(floats[[3, 0, 1]] * 3 / 3, 0, 1) * 255))


def test_signed_8_bit_bands_are_used_as_they_are(tmp_path):
    """int8 bands of 0..127 are used as they are, as 8-bit bands are (they were scaled as
    16-bit values: 100 came out 0); a negative one is refused naming the file, or clipped with scale."""
    scene = np.random.default_rng(4).integers(0, 128, (3, 8, 8)).astype("i1")
    _write(tmp_path / "s" / "a" / "x.tif", scene)
    _write(tmp_path / "s" / "b" / "x.tif", scene)
    ds = load_dataset("imagefolder", path=tmp_path / "s", bands=[1, 2, 3], image_size=8)
    np.testing.assert_array_equal(_pixels(ds)[0], scene)
    scene[0, 0, 0] = -5
    _write(tmp_path / "s" / "b" / "x.tif", scene)
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "s", bands=[1, 2, 3], image_size=8)
    assert str(info.value).startswith(f"{tmp_path / 's' / 'b' / 'x.tif'}: TIFF of int8 bands with values below 0 "
                                      f"(-5..")
    ds = load_dataset("imagefolder", path=tmp_path / "s", bands=[1, 2, 3], scale=127, image_size=8)
    assert _pixels(ds).min() == 0


def test_a_single_band_tiff_is_grey(tmp_path):
    """A one-band TIFF read with bands 1/1/1 is the band in every channel."""
    band = _scene(5, bands=1)
    _write(tmp_path / "g" / "x" / "a.tif", band, "contig")
    _write(tmp_path / "g" / "y" / "a.tif", band, "contig")
    ds = load_dataset("imagefolder", path=tmp_path / "g", bands=[1, 1, 1], image_size=16)
    expected = np.floor(band[0].astype(np.float64) * 255 / 65535 + 0.5)
    for c in range(3):
        np.testing.assert_array_equal(_pixels(ds)[0, c], expected)


def test_a_band_past_the_files_count_is_one_line_naming_the_file(tmp_path):
    _folder(tmp_path / "imgs")
    _write(tmp_path / "imgs" / "burnt" / "four.tif", _scene(6, bands=4), "contig")
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[12, 11, 9], image_size=16)
    assert str(info.value) == f"{tmp_path / 'imgs' / 'burnt' / 'four.tif'}: bands 12/11/9 name band 12, but this " \
                              f"TIFF has 4 bands"


def test_a_band_past_the_first_image_of_a_multi_page_tiff_says_only_it_is_read(tmp_path):
    """tifffile.imwrite of a [13, H, W] grey array writes 13 pages of one band each; only the
    first image is read, and the line says so, where it said the TIFF has 1 band."""
    _folder(tmp_path / "imgs")
    stack = tmp_path / "imgs" / "burnt" / "stack.tif"
    tifffile.imwrite(stack, _scene(5), photometric="minisblack", metadata=None)
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[4, 3, 2], image_size=16)
    assert str(info.value) == (f"{stack}: bands 4/3/2 name band 4, but this TIFF has 1 band in its first image, "
                               f"the only one read (it holds 13 images: write the bands into one image, "
                               f"planarconfig='separate' with tifffile)")


@pytest.mark.parametrize("bands", [[1, 2], [1, 2, 3, 4], [0, 1, 2], [1, 2, 65], ["4", 3, 2], [1.0, 2, 3], [True, 2, 3],
                                   "4/3/2"])
def test_bands_that_are_not_three_band_numbers_are_refused(tmp_path, bands):
    _folder(tmp_path / "imgs")
    with pytest.raises(ConfigError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=bands)
    assert str(info.value).startswith("bands: expected three band numbers in 1..64 (1-based, for the model's 3 "
                                      "input channels, e.g. 4, 3, 2), got ")


def test_options_that_do_not_go_with_bands_are_refused(tmp_path):
    _folder(tmp_path / "imgs")
    with pytest.raises(ConfigError, match=r"^scale: only applies with bands"):
        load_dataset("imagefolder", path=tmp_path / "imgs", scale=10000)
    for scale in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match=r"^scale: expected a finite number > 0"):
            load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3], scale=scale)
    with pytest.raises(ConfigError, match=r"^coords: 'exif' is read .* not with bands"):
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3], coords="exif")
    with pytest.raises(ConfigError, match=r"^bands: only applies to dataset 'imagefolder' \(a folder of "
                                          r"multispectral TIFFs\), not 'wildfire'$"):
        load_dataset("wildfire", root=tmp_path, bands=[1, 2, 3])


def test_bands_on_a_folder_that_is_not_of_tiffs_is_one_line_before_any_read(tmp_path, monkeypatch):
    _folder(tmp_path / "imgs")
    (tmp_path / "imgs" / "intact" / "photo.png").write_bytes(b"not read")
    monkeypatch.setattr(loaders, "_read_tiff_bands", lambda *a: pytest.fail("a file was read"))
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3])
    assert str(info.value) == (f"{tmp_path / 'imgs' / 'intact' / 'photo.png'}: not a TIFF, where bands reads the "
                               f"bands of TIFF files; 1 of the 3 images of {tmp_path / 'imgs'} are other files "
                               f"(read a folder of TIFFs with bands, or leave bands out)")


def test_a_corrupt_tiff_is_named_and_can_be_skipped(tmp_path, caplog):
    _folder(tmp_path / "imgs")
    good = (tmp_path / "imgs" / "burnt" / "scene.tif").read_bytes()
    bad = tmp_path / "imgs" / "burnt" / "cut.tif"
    bad.write_bytes(good[:300])  # the header and the start of the first band only
    (tmp_path / "imgs" / "burnt" / "junk.tif").write_bytes(b"II*\0junk")
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3], workers=1)
    assert str(info.value).startswith(f"{bad}: cannot read TIFF (") and "\n" not in str(info.value)
    with caplog.at_level(logging.WARNING):
        ds = load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3], skip_corrupt=True)
    assert len(ds) == 2
    assert any("skipped 2 unreadable image(s)" in r.getMessage() for r in caplog.records)


@pytest.fixture
def without_imagecodecs(monkeypatch):
    """tifffile as it is where imagecodecs is not installed, installed or not: imported afresh
    with ``import imagecodecs`` failing, so it takes its own codecs (zlib, LZMA, PackBits) and
    refuses the others; the modules as they were are put back after the test. imagecodecs is
    hidden only for that import: the real tifffile, which writes the test's files, may still
    load codecs from it (hidden while it does, imagecodecs keeps a failing stub for good)."""
    before = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "tifffile"}
    for name in before:
        monkeypatch.delitem(sys.modules, name)
    with monkeypatch.context() as hidden:
        hidden.setitem(sys.modules, "imagecodecs", None)  # import imagecodecs raises ImportError
        import tifffile as fresh
    assert fresh is not tifffile and fresh.tifffile.imagecodecs is fresh._imagecodecs
    yield fresh
    for name in [name for name in sys.modules if name.split(".")[0] == "tifffile" and name not in before]:
        del sys.modules[name]  # the fresh modules monkeypatch does not put back: a later import gets the real ones


def test_an_lzw_tiff_without_imagecodecs_says_what_to_install(tmp_path, without_imagecodecs):
    """GDAL's usual compression, LZW (its COG driver's default), is decoded by tifffile only with imagecodecs."""
    from PIL import Image

    _folder(tmp_path / "imgs")
    lzw = tmp_path / "imgs" / "burnt" / "lzw.tif"
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(lzw, compression="tiff_lzw")
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 1, 1])
    assert str(info.value) == (f"{lzw}: a TIFF compressed with LZW, which tifffile decodes only with the imagecodecs "
                               f"package: pip install imagecodecs")


def test_a_floating_point_predictor_without_imagecodecs_is_named_as_such(tmp_path, without_imagecodecs):
    """GDAL writes float bands with PREDICTOR=3, which tifffile undoes only with imagecodecs:
    the line names the predictor, not the Deflate compression tifffile decodes alone."""
    _folder(tmp_path / "imgs")
    path = tmp_path / "imgs" / "burnt" / "pred.tif"
    _write(path, _scene(3, bands=3), compression="zlib", predictor=2)
    with tifffile.TiffFile(path) as tif:
        at = tif.pages.first.tags[317].valueoffset
    with open(path, "r+b") as fh:  # tifffile writes predictor 3 only with imagecodecs
        fh.seek(at)
        fh.write(struct.pack("<H", 3))
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3])
    assert str(info.value) == (f"{path}: a TIFF with predictor FLOATINGPOINT (tag 317), which tifffile decodes "
                               f"only with the imagecodecs package: pip install imagecodecs")


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="tifffile decodes ZSTD with Python 3.14's compression.zstd")
def test_a_zstd_tiff_without_imagecodecs_says_what_to_install(tmp_path, without_imagecodecs):
    """ZSTD (GDAL's COMPRESS=ZSTD): tifffile reaches for Python 3.14's compression.zstd without
    imagecodecs; the line said 'cannot read TIFF (ModuleNotFoundError: No module named 'compression')'."""
    path = tmp_path / "zstd.tif"
    one_segment_tiff(path, 16, b"\x28\xb5\x2f\xfd" + bytes(12), 50000)  # a ZSTD frame's magic number
    with pytest.raises(DataError) as info:
        loaders._read_tiff_bands(path, 16, [1, 1, 1], None, None)
    assert str(info.value) == (f"{path}: a TIFF compressed with ZSTD, which tifffile decodes only with the "
                               f"imagecodecs package: pip install imagecodecs")


#: The value of each band of the JPEG TIFFs below (JPEG keeps a flat band's value to within one or two).
_JPEG_BANDS = (40, 90, 140, 190, 230)


def _refused_with_peak(path: Path, image_size: int) -> tuple[str, int]:
    """The line of the DataError that reading bands 1, 2 and 3 of ``path`` raises, and the traced peak of the read."""
    said: list[str] = []

    def read() -> None:
        with pytest.raises(DataError) as info:
            loaders._read_image_and_place(path, image_size, None, (1, 2, 3))
        said.append(str(info.value))

    peak = traced_peak(read)
    return said[0], peak


@pytest.mark.parametrize("compression", [7, 33007, 34892])
def test_a_jpeg_tiff_of_four_or_five_bands_is_read_with_bands_or_refused_in_one_line(tmp_path, compression):
    """JPEG in TIFF (7), ALT JPEG (33007) and DNG's lossy JPEG (34892) of 4 and 5 bands, stored together (one
    4-component JPEG a strip) or apart (one 1-component JPEG a band): tifffile decodes all three as JPEG
    streams, but 33007 and 34892 were refused with bands as 'an image codec' (and read_image said to read
    them with bands). Each is read with bands now, its frames bounded as compression 7's; without bands it is
    one line naming the file and its bands; a strip of other components than its bands, one line naming
    the file. Failed before for 33007 and 34892."""
    pytest.importorskip("imagecodecs")  # tifffile decodes JPEG with it
    together = tmp_path / "together.tif"
    one_segment_tiff(together, 16, flat_jpeg(_JPEG_BANDS[:4]), compression, bits=8, samples=4)
    cases = [(together, 4)]
    for n in (4, 5):
        apart = tmp_path / f"apart{n}.tif"
        band_strips_tiff(apart, 16, [flat_jpeg((v,)) for v in _JPEG_BANDS[:n]], compression)
        cases.append((apart, n))
    for path, n in cases:
        arr, _ = loaders._read_image_and_place(path, 8, None, (n, 2, 1))
        assert arr.shape == (3, 8, 8), path
        assert np.abs(arr.reshape(3, -1).astype(int) - np.array([[_JPEG_BANDS[n - 1]], [90], [40]])).max() <= 2, path
        with pytest.raises(DataError) as info:
            loaders.read_image(path, 8)
        assert str(info.value).startswith(f"{path}: a TIFF of {n} bands of 8 bits, which cannot be read as an image; "
                                          "choose 3 of its bands with the dataset option bands"), path
    wrong = [(tmp_path / "rgb-strips.tif", "a JPEG strip of 16 x 16 pixels of 3 components (768 bytes decoded), "
                                           "more than the 256 bytes its tags say it holds"),
             (tmp_path / "grey-strip.tif", "a JPEG strip of 1 component, where its tags say a strip holds 5 "
                                           "(SamplesPerPixel, tag 277): a damaged or mislabelled file")]
    band_strips_tiff(wrong[0][0], 16, [flat_jpeg(_JPEG_BANDS[:3])] * 4, compression)
    one_segment_tiff(wrong[1][0], 16, flat_jpeg(_JPEG_BANDS[:1]), compression, bits=8, samples=5)
    for path, says in wrong:
        said, peak = _refused_with_peak(path, 8)
        assert peak < 1 << 20
        assert said.startswith(f"{path}: {says}") and "\n" not in said, said


@pytest.mark.parametrize("bands", [None, (1, 1, 1)])
@pytest.mark.parametrize("tile", [None, 16])
def test_a_jpeg_strip_of_other_components_than_its_samples_is_one_line_naming_both(tmp_path, bands, tile, capfd):
    """An RGB JPEG TIFF (3 samples) whose strip or tile is a grey JPEG (1 component), and a grey one (1 sample)
    whose strip is an RGB JPEG of as many bytes (3 components, 8 x 8 pixels of a 16 x 16 image): with bands,
    tifffile read the first as grey turned RGB and refused the second in its own words ('cannot read TIFF
    (TiffFileError: corrupted strip cannot be reshaped from (8, 8, 3) to (1, 16, 16, 1))'); without bands, it
    was 'cannot read image (OSError: decoder error -2)', libtiff printing 'JPEGPreDecode: Improper JPEG
    component count' on standard error. Now one line naming the file, the components and its samples.
    A strip of as many components as its samples is read (an RGB JPEG in a YCbCr TIFF). Failed before."""
    pytest.importorskip("imagecodecs")  # tifffile decodes JPEG with it
    fewer, more, good = tmp_path / "fewer.tif", tmp_path / "more.tif", tmp_path / "good.tif"
    one_segment_tiff(fewer, 16, flat_jpeg((90,)), 7, bits=8, samples=3, tile=tile)
    one_segment_tiff(more, 16, flat_jpeg((90, 40, 30), 8), 7, bits=8, samples=1, tile=tile)
    one_segment_tiff(good, 16, flat_jpeg((90, 40, 30)), 7, bits=8, samples=3, tile=tile, photometric=6)  # YCbCr
    kind = "tile" if tile else "strip"
    for path, found, holds in ((fewer, "1 component", 3), (more, "3 components", 1)):
        with pytest.raises(DataError) as info:
            loaders._read_image_and_place(path, 8, None, bands)
        assert str(info.value) == (f"{path}: a JPEG {kind} of {found}, where its tags say a {kind} holds {holds} "
                                   f"(SamplesPerPixel, tag 277): a damaged or mislabelled file")
    arr, _ = loaders._read_image_and_place(good, 8, None, bands)
    assert np.abs(arr.reshape(3, -1).astype(int) - (np.array([[90], [90], [90]]) if bands else
                                                    np.array([[90], [40], [30]]))).max() <= 3
    assert "JPEGPreDecode" not in capfd.readouterr().err  # refused before libtiff decoded it


def test_an_old_style_jpeg_tiff_whose_strip_is_no_jpeg_stream_is_refused_with_bands_naming_its_compression(tmp_path):
    """An old-style JPEG TIFF (compression 6) as libtiff reads it, its JPEG header in JPEGInterchangeFormat (tag
    513) and its strip the scan data alone: tifffile decodes only a strip that is a whole JPEG stream ('Not a
    JPEG file'), and bands refused it as 'a JPEG strip without a frame header (SOF marker) before its scan (a
    damaged file)'. It is one line naming the compression, and what reads it: without bands, Pillow reads it
    as the same file whose strip is the whole stream (read with bands and without alike). Failed before."""
    import io

    from PIL import Image

    pytest.importorskip("imagecodecs")  # tifffile decodes JPEG with it
    rgb = np.zeros((16, 16, 3), np.uint8)
    rgb[:8], rgb[8:] = (200, 60, 30), (20, 120, 220)
    stream = io.BytesIO()
    Image.fromarray(rgb).save(stream, "JPEG", quality=95)
    whole, apart = tmp_path / "whole.tif", tmp_path / "apart.tif"
    one_segment_tiff(whole, 16, stream.getvalue(), 6, bits=8, samples=3)
    header_apart_ojpeg_tiff(apart, 16, stream.getvalue())
    far = np.r_[0:5, 11:16]  # the rows away from the edge, where libtiff's and tifffile's chroma upsampling differ
    seen = loaders.read_image(whole, 16).astype(int)
    assert np.abs(seen - rgb.transpose(2, 0, 1)).max() <= 4
    assert np.abs(loaders._read_image_and_place(whole, 16, None, (1, 2, 3))[0][:, far] - seen[:, far]).max() <= 2
    assert np.abs(loaders.read_image(apart, 16) - seen).max() == 0
    said, peak = _refused_with_peak(apart, 16)
    assert peak < 1 << 20
    assert said == (f"{apart}: an old-style JPEG TIFF (compression 6) whose strips are no whole JPEG streams "
                    f"(its JPEG header kept apart, in JPEGInterchangeFormat, tag 513, or tags 519-521), which "
                    f"tifffile does not decode and bands does not read: read it without bands (Pillow reads it "
                    f"as an RGB or grey image), or save it with JPEG (compression 7)")


@pytest.mark.parametrize("apart", [False, True])
def test_an_old_style_jpeg_tiff_whose_frame_does_not_fit_its_tags_is_one_line_without_bands(tmp_path, capfd, apart):
    """An old-style JPEG TIFF (compression 6) read without bands, its frame header (in the strip, or kept apart in
    JPEGInterchangeFormat, tag 513, where libtiff reads it first) wider or smaller than its tags give: libtiff
    refused it with a line on standard error naming no file ('OJPEGReadHeaderInfoSecStreamSof: JPEG compressed
    data image width exceeds expected image width', '... indicates unexpected height') and Pillow's 'cannot read
    image (OSError: decoder error -2)'. It is one line naming the file, the frame and the tags, read before libtiff
    decodes it; a frame of the image's size still reads. Failed before (both refusals, both layouts)."""
    def tiff(path, jpeg, samples=3):
        if apart:
            header_apart_ojpeg_tiff(path, 16, jpeg, samples)
        else:
            one_segment_tiff(path, 16, jpeg, 6, bits=8, samples=samples)

    where = "in JPEGInterchangeFormat (tag 513)" if apart else "in its first strip"
    for values, side, says in (
            ((90, 40, 30), 64, "is 64 x 64 pixels, wider than the 16 pixels its tags give a strip (ImageWidth, tag 256)"),
            ((90,), 64, "is 64 x 64 pixels, wider than the 16 pixels its tags give a strip (ImageWidth, tag 256)"),
            ((90, 40, 30), 8, "is 8 x 8 pixels, smaller than the 16 x 16 image its tags give (ImageWidth and "
                              "ImageLength, tags 256 and 257)")):
        path = tmp_path / f"{len(values)}-{side}.tif"
        tiff(path, flat_jpeg(values, side), len(values))
        with pytest.raises(DataError) as info:
            loaders.read_image(path, 16)
        assert str(info.value) == (f"{path}: an old-style JPEG TIFF (compression 6) whose JPEG frame {where} {says}, "
                                   f"which libtiff does not decode (a damaged file)")
    assert "OJPEG" not in capfd.readouterr().err  # refused before libtiff read it
    good = tmp_path / "good.tif"
    tiff(good, flat_jpeg((90, 40, 30)))
    assert np.abs(loaders.read_image(good, 16).reshape(3, -1).astype(int) - [[90], [40], [30]]).max() <= 3


def test_a_cmyk_jpeg_tiff_marked_by_adobe_reads_as_the_same_image_uncompressed(tmp_path, capfd):
    """A CMYK JPEG TIFF (photometric 5) whose strip Pillow (as Photoshop) wrote stores the inks inverted and says so
    with an Adobe APP14 segment: libjpeg decodes it as stored, and it was read inverted, with bands (band 1 was 215
    where the same image uncompressed holds 40) and without (the RGB 30 where the uncompressed reads 55). It reads
    as the image uncompressed now, with and without bands, and as its strip's stream read as a .jpg, as does the
    CMYK JPEG TIFFs libtiff and tifffile write (no Adobe segment, their inks as they are: not turned). Strips
    some marked and some not are one line. Failed before."""
    import io

    from PIL import Image

    pytest.importorskip("imagecodecs")  # tifffile decodes JPEG with it
    cmyk = np.zeros((16, 16, 4), np.uint8)
    cmyk[:8], cmyk[8:] = (40, 90, 140, 190), (200, 30, 60, 20)
    image = Image.fromarray(cmyk, "CMYK")
    plain, libtiff, adobe = tmp_path / "plain.tif", tmp_path / "libtiff.tif", tmp_path / "adobe.tif"
    image.save(plain)
    image.save(libtiff, compression="jpeg")
    written = tmp_path / "tifffile.tif"  # tifffile's CMYK JPEG: no Adobe segment either
    tifffile.imwrite(written, cmyk, photometric="separated", compression="jpeg")
    stream = io.BytesIO()
    image.save(stream, "JPEG", quality=95)
    assert stream.getvalue()[2:4] == b"\xff\xee"  # Pillow's Adobe APP14, first of its segments
    one_segment_tiff(adobe, 16, stream.getvalue(), 7, bits=8, samples=4, photometric=5)
    far = np.r_[0:5, 11:16]  # the rows away from the edge, where the JPEGs blur the two halves together
    for bands in (None, (1, 2, 3), (4, 3, 2)):
        seen = loaders._read_image_and_place(plain, 16, None, bands)[0].astype(int)[:, far]
        for path in (libtiff, written, adobe):
            arr = loaders._read_image_and_place(path, 16, None, bands)[0].astype(int)[:, far]
            assert np.abs(arr - seen).max() <= 4, (path.name, bands, arr[:, 0, 0], seen[:, 0, 0])
    jpg = tmp_path / "adobe.jpg"  # the strip's stream as a file of its own: Pillow's JPEG reader turns it back
    jpg.write_bytes(stream.getvalue())
    assert np.array_equal(loaders.read_image(jpg, 16), loaders.read_image(adobe, 16))
    mixed = tmp_path / "mixed.tif"  # the top strip as Pillow writes it, the bottom one without its Adobe segment
    halves = [io.BytesIO(), io.BytesIO()]
    for y, half in zip((0, 8), halves):
        image.crop((0, y, 16, y + 8)).save(half, "JPEG", quality=95)
    top, bottom = (half.getvalue() for half in halves)
    row_strips_tiff(mixed, 16, [top, without_adobe_segment(bottom)], 7, samples=4, photometric=5)
    for bands in (None, (1, 2, 3)):
        with pytest.raises(DataError) as info:
            loaders._read_image_and_place(mixed, 16, None, bands)
        assert str(info.value) == (f"{mixed}: a JPEG TIFF of 1 CMYK strip marked as stored inverted (an Adobe APP14 "
                                   f"segment, as Photoshop writes them) and 1 not: a damaged file, or one of two "
                                   f"writers' strips")
    assert capfd.readouterr().err == ""


def test_an_empty_strip_of_a_cmyk_jpeg_tiff_marked_by_adobe_reads_as_in_an_unmarked_file(tmp_path):
    """A CMYK JPEG TIFF marked by Adobe's APP14 (its inks stored inverted) read with bands, one strip of it empty
    (byte count 0): tifffile fills that strip with 0, as in an unmarked file, and the turn-back of the whole image
    made it 255. Only the strips decoded are turned back now; the empty one reads 0, as in the same file whose
    decoded strip is unmarked. Failed before (the bottom rows 255)."""
    import io

    from PIL import Image

    pytest.importorskip("imagecodecs")  # tifffile decodes JPEG with it
    cmyk = np.full((8, 16, 4), (40, 90, 140, 190), np.uint8)  # the top strip, 16 x 8
    stream = io.BytesIO()
    Image.fromarray(cmyk, "CMYK").save(stream, "JPEG", quality=95)
    top = stream.getvalue()
    unmarked_top = without_adobe_segment(top)
    marked, unmarked = tmp_path / "marked.tif", tmp_path / "unmarked.tif"
    row_strips_tiff(marked, 16, [top, b""], 7, samples=4, photometric=5)
    row_strips_tiff(unmarked, 16, [unmarked_top, b""], 7, samples=4, photometric=5)
    assert not tifffile.imread(marked)[8:].any()  # tifffile's fill
    arr = loaders._read_image_and_place(marked, 16, None, (1, 2, 3))[0].astype(int)
    plain = loaders._read_image_and_place(unmarked, 16, None, (1, 2, 3))[0].astype(int)
    assert np.abs(arr[:, :8] - np.array([40, 90, 140])[:, None, None]).max() <= 3  # the decoded strip turned back
    assert np.array_equal(arr[:, 8:], plain[:, 8:]) and not arr[:, 8:].any()


def test_a_jpeg_tiff_with_an_empty_strip_read_without_bands_is_one_line_naming_the_strip(tmp_path, capfd):
    """A JPEG TIFF (compression 7) of a strip of byte count 0, read without bands: libtiff refused it with
    'TIFFFillStrip: Invalid strip byte count 0, strip 1.' on standard error, naming no file, and the reader said
    'cannot read image (OSError: decoder error -2)'. It is one line naming the file and the strip, before libtiff
    reads it. Failed before."""
    import io

    from PIL import Image

    top = io.BytesIO()  # the top strip, 16 x 8
    Image.fromarray(np.full((8, 16, 3), (90, 40, 30), np.uint8)).save(top, "JPEG", quality=95)
    path = tmp_path / "empty.tif"
    row_strips_tiff(path, 16, [top.getvalue(), b""], 7, samples=3, photometric=2)
    with pytest.raises(DataError) as info:
        loaders.read_image(path, 16)
    assert str(info.value) == (f"{path}: a JPEG TIFF whose strip 2 of 2 is empty (a byte count of 0, StripByteCounts, "
                               f"tag 279), which libtiff does not decode (a damaged file); with bands it reads 0 "
                               f"there, as tifffile fills it")
    assert "TIFFFillStrip" not in capfd.readouterr().err


def test_a_jpeg_tiff_whose_strip_starts_outside_the_file_is_one_line_naming_the_strip(tmp_path, capfd):
    """A JPEG TIFF (compression 7) whose second strip's offset (StripOffsets, tag 273) is past the file's end, its
    byte count not 0 (a file cut short, or a damaged tag): read with bands, tifffile's JPEG decoder was handed
    no bytes and the reader said 'cannot read TIFF (Jpeg8Error: Empty input file)', naming neither the strip nor
    why; without bands, 'cannot read image (OSError: decoder error -2)' and a libtiff line on standard error. It is
    one line naming the file, the strip, its offset and the file's size, either way. Failed before."""
    import io

    pytest.importorskip("imagecodecs")  # tifffile decodes JPEG with it
    from PIL import Image

    top = io.BytesIO()  # each strip 16 x 8
    Image.fromarray(np.full((8, 16, 3), (90, 40, 30), np.uint8)).save(top, "JPEG", quality=95)
    path = tmp_path / "outside.tif"
    row_strips_tiff(path, 16, [top.getvalue(), top.getvalue()], 7, samples=3, photometric=2)
    data = bytearray(path.read_bytes())
    offsets_at = 8 + 2 + 10 * 12 + 4  # row_strips_tiff's 8 tags and 273/279, then the offsets of its 2 strips
    assert struct.unpack_from("<I", data, offsets_at + 4)[0] == offsets_at + 16 + len(top.getvalue())
    struct.pack_into("<I", data, offsets_at + 4, len(data) + 1000)
    path.write_bytes(bytes(data))
    said = (f"{path}: a JPEG TIFF whose strip 2 of 2 starts at byte {len(data) + 1000:,} (StripOffsets, tag 273), "
            f"outside the file of {len(data):,} bytes (a truncated or damaged file)")
    _refused_with_bands_and_without(path, said, capfd)



def _refused_with_bands_and_without(path: Path, said: str, capfd) -> None:
    """``path`` (16 x 16) refused with the one line ``said``, read with bands 1, 2, 3 and without them, and
    nothing on standard error (libtiff's lines name no file)."""
    for read in (lambda: loaders._read_image_and_place(path, 16, None, (1, 2, 3)), lambda: loaders.read_image(path, 16)):
        with pytest.raises(DataError) as info:
            read()
        assert str(info.value) == said
    assert capfd.readouterr().err == ""

def _strip_payload(compression: int, raw: bytes) -> bytes:
    """``raw`` as a strip of TIFF ``compression`` stores it: none (1), Deflate (8), LZMA (34925), PackBits (32773,
    literal runs of up to 128 bytes), ZSTD (50000) or LZW (5), the last two encoded with imagecodecs."""
    import lzma
    import zlib

    if compression == 1:
        return raw
    if compression == 8:
        return zlib.compress(raw)
    if compression == 34925:
        return lzma.compress(raw)
    if compression == 32773:
        return b"".join(bytes([len(raw[i:i + 128]) - 1]) + raw[i:i + 128] for i in range(0, len(raw), 128))
    imagecodecs = pytest.importorskip("imagecodecs")
    return {50000: imagecodecs.zstd_encode, 5: imagecodecs.lzw_encode}[compression](raw)


def _moved_chunk(path: Path, index: int, to: int) -> None:
    """``path``'s strip or tile ``index`` (its offset in StripOffsets or TileOffsets, tags 273 or 324) said to
    start at byte ``to``, its byte count kept."""
    with tifffile.TiffFile(path) as tif:
        tags = tif.pages.first.tags
        at = (tags[324] if 324 in tags else tags[273]).valueoffset
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, at + 4 * index, to)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("compression", [1, 8, 34925, 32773, 50000, 5])
def test_a_tiff_whose_strip_starts_outside_the_file_is_one_line_naming_the_strip_whatever_its_compression(
        tmp_path, capfd, compression):
    """A TIFF of any compression read with bands (none, Deflate, LZMA and PackBits by _inflate_chunks; ZSTD and
    LZW by tifffile) or without them (by libtiff), its second strip's offset past the file's end and its byte
    count not 0: with bands, tifffile said 'cannot read TIFF (TiffFileError: corrupted strip cannot be reshaped
    from (0,) to (1, 8, 16, 3))' or 'DeflateError: libdeflate_zlib_decompress returned LIBDEFLATE_BAD_DATA';
    without them 'cannot read image (OSError: decoder error -2)' and libtiff's 'TIFFFillStrip: Read error on
    strip 1; got 18446744073709550616 bytes' on standard error, naming no file (uncompressed, which Pillow decodes
    itself: 'image file is truncated'). It is the JPEG TIFF's line (a TIFF, not a JPEG one), either way, and nothing on standard error; the same
    file undamaged reads. Failed before."""
    raw = np.full((8, 16, 3), (90, 40, 30), np.uint8).tobytes()  # each strip 16 x 8
    path = tmp_path / "outside.tif"
    row_strips_tiff(path, 16, [_strip_payload(compression, raw)] * 2, compression, samples=3, photometric=2)
    whole, _ = loaders._read_image_and_place(path, 16, None, (1, 2, 3))
    assert whole.shape == (3, 16, 16) and whole.reshape(3, -1).min(axis=1).tolist() == [90, 40, 30]
    size = path.stat().st_size
    _moved_chunk(path, 1, size + 1000)
    said = (f"{path}: a TIFF whose strip 2 of 2 starts at byte {size + 1000:,} (StripOffsets, tag 273), "
            f"outside the file of {size:,} bytes (a truncated or damaged file)")
    _refused_with_bands_and_without(path, said, capfd)


@pytest.mark.parametrize("compression", [1, 8, 34925, 32773, 50000, 5])
def test_a_tiff_whose_strip_runs_past_the_files_end_is_one_line_naming_the_strip_whatever_its_compression(
        tmp_path, capfd, compression):
    """A TIFF of any compression cut short in its last strip (which starts inside the file, its byte count running
    past the end): with bands, tifffile's words ('failed to read 768 bytes, got 576', 'DeflateError: ...',
    'corrupted strip cannot be reshaped from (1,) ...', 'ImcdError: ... IMCD_INPUT_CORRUPT', 'ZstdError: ...');
    without them 'image file is truncated' (none) or 'decoder error -2' and libtiff's 'TIFFFillStrip: Read error
    on strip 1; got 38 bytes, expected 76.' on standard error, naming no file. It is one line naming the file, the
    strip, its offset, its byte count and the file's size, either way, and nothing on standard error. The same
    strip complete under a byte count 100 bytes past the end still reads with bands (and, uncompressed, without
    them: libtiff reads no such strip). Failed before."""
    raw = np.full((8, 16, 3), (90, 40, 30), np.uint8).tobytes()  # each strip 16 x 8
    payload = _strip_payload(compression, raw)
    path = tmp_path / "past.tif"
    row_strips_tiff(path, 16, [payload] * 2, compression, samples=3, photometric=2)
    whole = path.read_bytes()
    with tifffile.TiffFile(path) as tif:
        offset = int(tif.pages.first.dataoffsets[1])
        counts_at = tif.pages.first.tags[279].valueoffset
    overstated = bytearray(whole)
    struct.pack_into("<I", overstated, counts_at + 4, len(payload) + 100)
    path.write_bytes(bytes(overstated))
    for read in [lambda: loaders._read_image_and_place(path, 16, None, (1, 2, 3))[0]] + (
            [lambda: loaders.read_image(path, 16)] if compression == 1 else []):
        assert read().reshape(3, -1).min(axis=1).tolist() == [90, 40, 30]
    size = len(whole) - len(payload) // 2
    path.write_bytes(whole[:size])
    said = (f"{path}: a TIFF whose strip 2 of 2, at byte {offset:,} (StripOffsets, tag 273) and of {len(payload):,} "
            f"bytes (StripByteCounts, tag 279), runs past the end of the file of {size:,} bytes: a truncated file")
    _refused_with_bands_and_without(path, said, capfd)


@pytest.mark.parametrize("compression", [7, 6])
def test_a_jpeg_tiff_cut_short_in_its_strip_is_one_line_naming_the_strip(tmp_path, capfd, compression):
    """A JPEG TIFF (7) or an old-style one (6, which libtiff reads its own way, so is refused only once decoding
    fails) of one strip, a whole JPEG stream, the file cut a third of the way into it from its end: with bands,
    tifffile's JPEG decoder refused it in its own words; without them Pillow's 'decoder error -2'. It is the line
    naming the strip, its offset and byte count and the file's size, and nothing on standard error. Failed before."""
    jpeg = flat_jpeg((90, 40, 30))
    path = tmp_path / "cut.tif"
    one_segment_tiff(path, 16, jpeg, compression, bits=8, samples=3)
    whole = path.read_bytes()
    offset = whole.index(jpeg)
    size = len(whole) - len(jpeg) // 3
    path.write_bytes(whole[:size])
    said = (f"{path}: a JPEG TIFF whose strip 1 of 1, at byte {offset:,} (StripOffsets, tag 273) and of "
            f"{len(jpeg):,} bytes (StripByteCounts, tag 279), runs past the end of the file of {size:,} bytes: a "
            f"truncated file")
    _refused_with_bands_and_without(path, said, capfd)


def test_a_tiled_tiff_whose_tile_starts_at_the_files_end_is_one_line_naming_the_tile(tmp_path, capfd):
    """A Deflate TIFF of one 16 x 16 tile whose offset (TileOffsets, tag 324) is the file's size, its byte count
    not 0: with bands it is refused in one line naming the tile, as without them. Failed before (tifffile:
    'DeflateError: ... LIBDEFLATE_BAD_DATA'; libtiff: 'decoder error -2' and a line on standard error)."""
    path = tmp_path / "tile.tif"
    one_segment_tiff(path, 16, _strip_payload(8, bytes(range(256)) * 3), 8, bits=8, samples=3, tile=16)
    size = path.stat().st_size
    _moved_chunk(path, 0, size)
    said = (f"{path}: a TIFF whose tile 1 of 1 starts at byte {size:,} (TileOffsets, tag 324), outside the file "
            f"of {size:,} bytes (a truncated or damaged file)")
    _refused_with_bands_and_without(path, said, capfd)


@pytest.mark.parametrize("header", ["in the strip", "apart"])
def test_an_old_style_jpeg_tiff_whose_strip_starts_outside_the_file_is_one_line_naming_the_strip(
        tmp_path, capfd, header):
    """An old-style JPEG TIFF (compression 6) of one strip, a whole JPEG stream or its scan alone (its header in
    JPEGInterchangeFormat, tag 513), the strip's offset past the file's end: without bands, which
    _check_pillow_ojpeg_tiff let through (it found no frame there, or read the one of tag 513), Pillow said
    'cannot read image (OSError: decoder error -2)', naming neither the strip nor why. It is the line a JPEG TIFF
    of compression 7 gets, and nothing on standard error; the same file undamaged reads. Failed before."""
    jpeg = flat_jpeg((90, 40, 30))
    path = tmp_path / "ojpeg.tif"
    if header == "apart":
        header_apart_ojpeg_tiff(path, 16, jpeg)
    else:
        one_segment_tiff(path, 16, jpeg, 6, bits=8, samples=3)
    assert np.abs(loaders.read_image(path, 16).reshape(3, -1).astype(int) - [[90], [40], [30]]).max() <= 4
    size = path.stat().st_size
    _moved_chunk(path, 0, size + 7)
    with pytest.raises(DataError) as info:
        loaders.read_image(path, 16)
    assert str(info.value) == (f"{path}: a JPEG TIFF whose strip 1 of 1 starts at byte {size + 7:,} (StripOffsets, "
                               f"tag 273), outside the file of {size:,} bytes (a truncated or damaged file)")
    assert capfd.readouterr().err == ""


def _lzw_and_plain_geotiffs(root: Path) -> np.ndarray:
    """The same 4-band 40 x 40 uint16 GeoTIFF (EPSG:4326) as ``plain/x.tif``, uncompressed,
    and ``lzw/x.tif``, LZW-compressed with horizontal differencing in 16 x 16 tiles, as GDAL
    writes COGs (its COG driver compresses with LZW unless told otherwise)."""
    scene = _scene(21, bands=4, side=40)
    geo = [(33550, "d", 3, (0.01, 0.01, 0.0), True), (33922, "d", 6, (0.0, 0.0, 0.0, 10.0, 45.0, 0.0), True),
           (34735, "H", 16, _geokeys_geographic(), True)]
    _write(root / "plain" / "x.tif", scene, "contig", extratags=geo)
    _write(root / "lzw" / "x.tif", scene, "contig", extratags=geo, compression="lzw", predictor=2, tile=(16, 16))
    return scene


def test_with_imagecodecs_an_lzw_geotiff_reads_as_the_uncompressed_one(tmp_path):
    """With imagecodecs (the tiff and dev extras), tifffile decodes LZW: the pixels and the
    place are those of the same file uncompressed."""
    pytest.importorskip("imagecodecs")
    _lzw_and_plain_geotiffs(tmp_path / "imgs")
    with tifffile.TiffFile(tmp_path / "imgs" / "lzw" / "x.tif") as tif:
        assert tif.pages.first.compression.name == "LZW" and tif.pages.first.is_tiled
    ds = load_dataset("imagefolder", path=tmp_path / "imgs", bands=[3, 2, 1], coords="geotiff", image_size=40)
    got = _pixels(ds)
    np.testing.assert_array_equal(got[0], got[1])
    assert got.max() > 0
    np.testing.assert_allclose(np.asarray(ds.lat), [44.8, 44.8])
    np.testing.assert_allclose(np.asarray(ds.lon), [10.2, 10.2])


def test_with_imagecodecs_an_lzw_strip_is_decoded_no_further_than_its_size(tmp_path):
    """No LZW decoder comes with Python, so the size check cannot inflate an LZW strip: the
    bound is tifffile's, which hands imagecodecs each strip's size as the output buffer, and
    the header's (all strips at that size within 357,913,940 bytes). A 16 x 16 strip (512 bytes)
    stored as 64 MiB of zeros in 50 kB is decoded to its first 512 bytes, holding little."""
    imagecodecs = pytest.importorskip("imagecodecs")
    bomb = tmp_path / "bomb.tif"
    one_segment_tiff(bomb, 16, imagecodecs.lzw_encode(bytes(64 << 20)), 5)
    assert bomb.stat().st_size < 100_000
    got = []
    peak = traced_peak(lambda: got.append(loaders._read_tiff_bands(bomb, 16, [1, 1, 1], None, None)[0]))
    assert peak < 4 << 20, f"{peak:,} bytes held"
    np.testing.assert_array_equal(got[0], np.zeros((16, 16, 3), np.uint8))


def test_with_imagecodecs_a_deflate_bomb_is_still_refused_by_the_size_check(tmp_path):
    """imagecodecs does not change who inflates Deflate: the size check, bounded, refuses it."""
    pytest.importorskip("imagecodecs")
    import zlib

    bomb = tmp_path / "bomb.tif"
    one_segment_tiff(bomb, 16, zlib.compress(bytes(64 << 20), 9), 8)
    with pytest.raises(DataError, match="decompresses to more than the 512 bytes its tags say it holds"):
        loaders._read_tiff_bands(bomb, 16, [1, 1, 1], None, None)


@pytest.mark.parametrize("logger", ["tifffile", "tifffile.tifffile"])
def test_tifffiles_log_lines_name_the_file(tmp_path, caplog, monkeypatch, logger):
    """tifffile logs a damaged tag naming a page ('<tifffile.TiffPage 0 @8>'); the line names the file.
    tifffile logs as 'tifffile', and 2023.1 (pyproject.toml asks for 2023.1 on) as 'tifffile.tifffile'."""
    import tifffile.tifffile as module

    if hasattr(module, "logger"):
        monkeypatch.setattr(module, "logger", lambda: logging.getLogger(logger))
    elif logger == "tifffile":
        pytest.skip("this tifffile logs as 'tifffile.tifffile'")
    _folder(tmp_path / "imgs")
    bad = tmp_path / "imgs" / "burnt" / "bad.tif"
    _tiff_header(bad, 8, 8, 13, strips=2**30)  # a StripOffsets count of 2**30 in a file of 300 bytes
    with caplog.at_level(logging.WARNING), pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3])
    assert str(info.value).startswith(f"{bad}: cannot read TIFF (")
    lines = [r.getMessage() for r in caplog.records if r.name == logger]
    assert lines and all(line.startswith(f"{bad}: ") and line.endswith(" (tifffile)") for line in lines), lines


def _tiff_header(path: Path, width: int, height: int, bands: int, strips: int = 1) -> None:
    """A TIFF of a few hundred bytes whose header says ``width`` x ``height`` x ``bands``
    16-bit samples (one strip of 16 bytes): the pixels it claims are never there."""
    bits_at = 8 + 2 + 10 * 12 + 4
    tags = [(256, 4, 1, width), (257, 4, 1, height), (258, 3, bands, bits_at), (259, 3, 1, 1), (262, 3, 1, 1),
            (273, 4, strips, bits_at + 2 * bands), (277, 3, 1, bands), (278, 4, 1, height), (279, 4, 1, 16),
            (284, 3, 1, 1)]
    ifd = struct.pack("<H", len(tags)) + b"".join(struct.pack("<HHII", *t) for t in tags) + struct.pack("<I", 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"II*\0" + struct.pack("<I", 8) + ifd + struct.pack(f"<{bands}H", *[16] * bands) + bytes(16))


def test_sizes_and_band_counts_are_refused_from_the_header(tmp_path, monkeypatch):
    """A 300-byte file claiming 100,000 x 100,000 pixels, or 200 bands, is refused before
    anything is decoded (tifffile would allocate the whole array first)."""
    _folder(tmp_path / "imgs")
    huge = tmp_path / "imgs" / "burnt" / "huge.tif"
    _tiff_header(huge, 100_000, 100_000, 13)
    assert huge.stat().st_size < 400
    monkeypatch.setattr(tifffile.TiffPage, "asarray", lambda *a, **k: pytest.fail("decoded"))
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3])
    assert str(info.value) == (f"{huge}: 100,000 x 100,000 pixels, more than the 89,478,485 pixels an image may "
                               f"have (a decompression bomb, or a whole scene: cut it into tiles of the size the "
                               f"model sees)")
    _tiff_header(huge, 8, 8, 200)
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3])
    assert str(info.value) == f"{huge}: a TIFF of 200 bands, more than the 64 one may have"
    _tiff_header(huge, 5000, 5000, 13)  # under the pixel limit, but 650 MB of bands decoded
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3])
    assert str(info.value) == (f"{huge}: 5,000 x 5,000 pixels of 13 bands of uint16 are 650,000,000 bytes decoded, "
                               f"more than the 357,913,940 allowed: cut it into tiles of the size the model sees")


def test_without_tifffile_the_line_says_what_to_install(tmp_path, monkeypatch):
    _folder(tmp_path / "imgs")
    monkeypatch.setitem(sys.modules, "tifffile", None)  # import tifffile raises ImportError
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 2, 3], workers=1)
    assert str(info.value) == (f"{tmp_path / 'imgs' / 'burnt' / 'scene.tif'}: reading the bands of a TIFF needs "
                               f"tifffile: pip install 'fol-swarm[tiff]'")


def _geokeys_geographic() -> tuple[int, ...]:
    """GeoKeyDirectoryTag of EPSG:4326, pixels as areas."""
    return (1, 1, 0, 3, 1024, 0, 1, 2, 1025, 0, 1, 1, 2048, 0, 1, 4326)


def test_geotiff_places_of_a_13_band_file(tmp_path):
    """coords='geotiff' reads the centre of a 13-band GeoTIFF (which Pillow cannot open)
    from the tags tifffile reads, by the same rule as for the files Pillow reads."""
    for k, (name, layout) in enumerate((("burnt", "separate"), ("intact", "contig"))):
        tie = (0.0, 0.0, 0.0, 10.0 + k, 45.0, 0.0)  # the top-left corner at 10 + k E, 45 N
        _write(tmp_path / "imgs" / name / "s.tif", _scene(k), layout,
               extratags=[(33550, "d", 3, (0.01, 0.02, 0.0), True), (33922, "d", 6, tie, True),
                          (34735, "H", 16, _geokeys_geographic(), True)])
    ds = load_dataset("imagefolder", path=tmp_path / "imgs", bands=[4, 3, 2], coords="geotiff", image_size=16)
    order = np.argsort(ds.labels.numpy())
    np.testing.assert_allclose(ds.lon.numpy()[order] if hasattr(ds.lon, "numpy") else np.asarray(ds.lon)[order],
                               [10.08, 11.08])
    np.testing.assert_allclose(np.asarray(ds.lat)[order], [45 - 0.16, 45 - 0.16])
    _write(tmp_path / "imgs" / "burnt" / "s.tif", _scene(0), "separate")  # no GeoTIFF tags
    with pytest.raises(DataError, match=r"s\.tif: no GeoKeyDirectoryTag \(34735\)"):
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[4, 3, 2], coords="geotiff", image_size=16)


def test_a_turned_geotiffs_centre_is_the_same_by_either_path(tmp_path):
    """A 10 x 6 GeoTIFF of orientation 6: its centre is of the raster as stored (column 5,
    row 3: 10.05 E, 44.94 N) by Pillow's path as by tifffile's; Pillow gives such a TIFF
    the turned size (6 x 10), which put it at 10.03 E, 44.90 N."""
    from fol.data.loaders import _read_image_and_place

    path = tmp_path / "geo.tif"
    tifffile.imwrite(path, np.zeros((6, 10, 3), "u1"), photometric="rgb",
                     extratags=[(274, "H", 1, 6, True), (33550, "d", 3, (0.01, 0.02, 0.0), True),
                                (33922, "d", 6, (0.0, 0.0, 0.0, 10.0, 45.0, 0.0), True),
                                (34735, "H", 16, _geokeys_geographic(), True)])
    for where in (_read_image_and_place(path, 8, "geotiff")[1], loaders._read_tiff_bands(path, 8, [1, 2, 3], None,
                                                                                         "geotiff")[1]):
        np.testing.assert_allclose(where, (44.94, 10.05))


def test_a_data_spec_takes_bands_and_scale(tmp_path):
    """--data ...,bands=4+3+2,scale=10000 (',' separates the pairs, '+' the bands, as splits=)."""
    scenes = [_scene(k, side=32) for k in range(24)]  # 32 x 32: the default image size, no resizing
    for k, scene in enumerate(scenes):  # enough images for a node's 70 / 15 / 15 split
        _write(tmp_path / "imgs" / ("burnt" if k % 2 else "intact") / f"s{k}.tif", scene, "contig")
    spec = parse_node_data(f"dataset=imagefolder,path={tmp_path / 'imgs'},partition=all,bands=4+3+2,scale=10000")
    assert spec.bands == (4, 3, 2) and spec.scale == 10000
    data = load_node_data(spec)
    images = np.concatenate([d.images.numpy() for d in (data.train, data.val, data.test)])
    expected = {tuple(np.round(np.clip(s[[3, 2, 1]] / 10000, 0, 1) * 255).reshape(-1)) for s in scenes}
    assert {tuple((im * 255).round().reshape(-1)) for im in images} == expected
    for text, message in [("bands=4/3/2", "--data: bands=4/3/2: expected three band numbers in 1..64"),
                          ("bands=4+3", "--data: bands=4+3: expected three band numbers"),
                          ("scale=10000", "--data: scale= only applies with bands="),
                          ("bands=4+3+2,scale=0", "--data: scale=0: expected a finite number > 0")]:
        with pytest.raises(ConfigError) as info:
            parse_node_data(f"dataset=imagefolder,path={tmp_path / 'imgs'},{text}")
        assert str(info.value).startswith(message), str(info.value)
    with pytest.raises(ConfigError, match=r"^--data: bands= only applies to dataset=imagefolder"):
        parse_node_data("dataset=synthetic-wildfire,bands=1+2+3")
    # other bands or another scale are other images: a model card's spec does not match them
    base = f"dataset=imagefolder,path={tmp_path / 'imgs'},partition=all"
    fields = {split_fields(parse_node_data(f"{base}{extra}"))
              for extra in ("", ",bands=4+3+2", ",bands=12+11+9", ",bands=4+3+2,scale=10000")}
    assert len(fields) == 4


def test_fol_data_info_and_pretrain_read_bands(tmp_path, capsys):
    """The whole path from the command line: fol data info --bands, and fol pretrain --data
    with bands=, and a band past the count refused in one line naming the file."""
    root = tmp_path / "imgs"
    for k in range(24):  # enough images for a node's 70 / 15 / 15 split
        _write(root / ("burnt" if k % 2 else "intact") / f"s{k}.tif", _scene(k, side=8), "contig")
    assert main(["data", "info", f"imagefolder:{root}", "--bands", "12,11,9", "--scale", "10000"]) == 0
    out = capsys.readouterr().out
    assert "24 images, 3x32x32" in out
    assert main(["data", "info", f"imagefolder:{root}", "--bands", "14,11,9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{root / 'burnt' / 's1.tif'}: bands 14/11/9 name band 14, but this TIFF has 13 " \
                             f"bands" in err[0], err
    model = tmp_path / "m.safetensors"
    assert main(["pretrain", "--data", f"dataset=imagefolder,path={root},partition=all,bands=12+11+9,scale=10000",
                 "--epochs", "1", "--out", str(model)]) == 0
    assert model.is_file()


_DRONES = """
[scenario]
name = "tiny-drones"
seeds = [0]
[drones]
radio_range_km = 1.0
waypoints_csv = "wp.csv"
[time]
duration_s = 600.0
step_s = 10.0
[link]
rate_bps = 1e6
[rounds]
count = 1
[data]
dataset = "imagefolder"
path = "imgs"
image_size = 16
partition = "dirichlet"
psi = 1.0
per_node = 40
min_samples = 20
{data}
[methods]
run = ["local"]
[run]
executor = "local"
threads = 1
"""


@pytest.mark.parametrize("data, expected", [
    ("bands = [4, 3, 2]\nscale = 10000", None),
    ("bands = [4, 3]", "data.bands: expected three band numbers in 1..64 (1-based, for the model's 3 input "
                       "channels, e.g. 4, 3, 2), got [4, 3]"),
    ('bands = "4/3/2"', "data.bands: expected three band numbers"),
    ("scale = 10000", "data.scale: only applies with data.bands"),
    ("bands = [4, 3, 2]\nscale = -1", "data.scale: expected a finite number > 0 (a band's values are divided by it "
                                     "and clipped to [0, 1], e.g. 10000 for Sentinel-2 reflectances), got -1"),
    ("bands = [4, 3, 2]\nscale = inf", "data.scale: expected a finite number > 0"),
    ('bands = [4, 3, 2]\nscale = "10000"', "data.scale: expected a finite number > 0"),
    ('bands = [4, 3, 2]\ncoords = "exif"', "data.coords: 'exif' is read as Pillow opens an image, not with "
                                           "data.bands"),
])
def test_a_scenarios_data_table_takes_bands_and_scale(tmp_path, capsys, data, expected):
    _folder(tmp_path / "imgs")
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    scenario = tmp_path / "s.toml"
    scenario.write_text(_DRONES.format(data=data))
    rc = main(["simulate", "--check", str(scenario)])
    err = capsys.readouterr().err.strip().splitlines()
    if expected is None:
        assert rc == 0, err
        from fol.simulation import load_scenario

        options = load_scenario(scenario).data.loader_options(0)
        assert options["bands"] == [4, 3, 2] and options["scale"] == 10000
    else:
        assert rc == 2 and len(err) == 1 and f"{scenario}: {expected}" in err[0], err


def test_a_scenario_of_another_dataset_refuses_bands(tmp_path, capsys):
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    scenario = tmp_path / "s.toml"
    text = _DRONES.format(data="bands = [4, 3, 2]").replace('dataset = "imagefolder"\npath = "imgs"\n',
                                                             'dataset = "synthetic-wildfire"\nsize = 400\n')
    scenario.write_text(text)
    assert main(["simulate", "--check", str(scenario)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fol simulate: error: {scenario}: data.bands: only applies to dataset 'imagefolder' (a folder of "
                   f"multispectral TIFFs), not 'synthetic-wildfire'"], err


def test_the_scenario_check_refuses_bands_on_a_folder_not_of_tiffs(tmp_path, capsys):
    """fol simulate --check: a folder with another file than a TIFF, read with bands, is one
    line naming the scenario, the field and the file, before any image is read."""
    _folder(tmp_path / "imgs")
    (tmp_path / "imgs" / "intact" / "photo.jpg").write_bytes(b"never read")
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    scenario = tmp_path / "s.toml"
    scenario.write_text(_DRONES.format(data="bands = [4, 3, 2]"))
    assert main(["simulate", "--check", str(scenario)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{scenario}: data.bands: {tmp_path / 'imgs' / 'intact' / 'photo.jpg'}: not a TIFF, " \
                             f"where bands reads the bands of TIFF files" in err[0], err


def test_the_orientation_tag_turns_the_image_as_for_pillows_files(tmp_path):
    """Orientation 3 (bottom-right) turns the bands by 180 degrees, as read_image turns an
    image Pillow reads; the same file without the tag is used as stored."""
    scene = np.zeros((4, 8, 8), "u1")
    scene[:, 0, 0] = 200
    _write(tmp_path / "o" / "turned" / "x.tif", scene, "separate", extratags=[(274, "H", 1, 3, True)])
    _write(tmp_path / "o" / "upright" / "x.tif", scene, "separate")
    ds = load_dataset("imagefolder", path=tmp_path / "o", bands=[1, 2, 3], image_size=8)
    lit = {ds.class_names[int(label)]: np.argwhere(_pixels(ds)[i, 0]).tolist()
           for i, label in enumerate(ds.labels.tolist())}
    assert lit == {"turned": [[7, 7]], "upright": [[0, 0]]}


@pytest.mark.parametrize("codec", ["zlib", "lzma"])
def test_a_strip_that_decompresses_past_its_size_is_refused_without_decompressing_it(tmp_path, codec, caplog):
    """A 16 x 16 strip (512 bytes) stored as 64 MiB of zeros compressed to some kB: tifffile
    (without imagecodecs) decompresses a strip whole, so it took the 64 MiB (a 1 MB file, 1 GB)
    and read the image; it is refused in one line naming the file, holding little memory,
    and skipped with skip_corrupt as an unreadable file. Inflated to no more than its size + 1
    byte, it holds some MiB (LZMA's 8 MiB dictionary) whatever it would inflate to."""
    import lzma
    import zlib

    _folder(tmp_path / "imgs")
    bomb = tmp_path / "imgs" / "burnt" / "bomb.tif"
    zeros = bytes(64 << 20)
    payload, compression = ((zlib.compress(zeros, 9), 8) if codec == "zlib"
                            else (lzma.compress(zeros, format=lzma.FORMAT_ALONE), 34925))
    del zeros
    one_segment_tiff(bomb, 16, payload, compression)
    assert bomb.stat().st_size < 200_000
    name = "ADOBE_DEFLATE" if codec == "zlib" else "LZMA"
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 1, 1], workers=1)
    assert str(info.value) == (f"{bomb}: a strip compressed with {name} that decompresses to more than the 512 "
                               f"bytes its tags say it holds (a decompression bomb, or a damaged file)")
    peak = traced_peak(lambda: pytest.raises(DataError, loaders._read_tiff_bands, bomb, 16, [1, 1, 1], None, None))
    assert peak < 16 << 20, f"{peak:,} bytes held"  # LZMA's dictionary is 8 MiB
    with caplog.at_level(logging.WARNING):
        ds = load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 1, 1], skip_corrupt=True)
    assert len(ds) == 2


def test_tiles_are_bounded_as_tifffile_decodes_them_whole(tmp_path):
    """A 16 x 16 image in one tile of 65,536 x 65,536 is 8 GiB decoded as tifffile decodes a
    tile (whole, edge tiles too): refused from the header, before its 64 MiB of compressed
    zeros are inflated (tifffile inflated them and then failed to reshape the tile)."""
    import zlib

    _folder(tmp_path / "imgs")
    tiled = tmp_path / "imgs" / "burnt" / "tiled.tif"
    one_segment_tiff(tiled, 16, zlib.compress(bytes(64 << 20), 9), 8, tile=65536)
    peak = traced_peak(lambda: pytest.raises(DataError, loaders._read_tiff_bands, tiled, 16, [1, 1, 1], None, None))
    assert peak < 8 << 20, f"{peak:,} bytes held"
    with pytest.raises(DataError) as info:
        load_dataset("imagefolder", path=tmp_path / "imgs", bands=[1, 1, 1], workers=1)
    assert str(info.value) == (f"{tiled}: 1 tile of 65,536 x 65,536 samples of uint16 are 8,589,934,592 bytes "
                               f"decoded, more than the 357,913,940 allowed")


@pytest.mark.parametrize("layout", ["separate", "contig"])
@pytest.mark.parametrize("compression", [None, "zlib", "lzma"])
def test_tiled_and_compressed_tiffs_read_as_plain_ones(tmp_path, layout, compression):
    """GDAL writes tiled GeoTIFFs, often deflated with a predictor: 24 x 24 in 16 x 16 tiles
    (edge tiles padded) read to the same pixels as the plain strip file, in either layout."""
    scene = _scene(7, bands=5, side=24)
    _write(tmp_path / "a" / "plain" / "x.tif", scene, layout)
    kw = {} if compression is None else {"compression": compression, "predictor": 2}
    _write(tmp_path / "a" / "tiled" / "x.tif", scene, layout, tile=(16, 16), **kw)
    ds = load_dataset("imagefolder", path=tmp_path / "a", bands=[5, 3, 1], image_size=24)
    got = _pixels(ds)
    np.testing.assert_array_equal(got[0], got[1])
    assert got.max() > 0


def test_every_orientation_reads_as_pillows_path_reads_the_same_file(tmp_path):
    """An RGB TIFF of 6 x 10 pixels with each orientation (274 = 1..8) reads, with bands 1/2/3,
    to the pixels read_image (Pillow) gives of the same file: turned once, by either path."""
    from fol.data.loaders import read_image

    rgb = np.random.default_rng(1).integers(0, 256, (6, 10, 3)).astype("u1")
    for orientation in range(1, 9):
        path = tmp_path / f"o{orientation}.tif"
        tifffile.imwrite(path, rgb, photometric="rgb", extratags=[(274, "H", 1, orientation, True)])
        tiff, _ = loaders._read_tiff_bands(path, 8, [1, 2, 3], None, None)
        np.testing.assert_array_equal(tiff.transpose(2, 0, 1), read_image(path, 8), err_msg=f"orientation {orientation}")


def test_an_lzma_strip_of_two_streams_is_bounded_in_both(tmp_path):
    """lzma.decompress (tifffile's, without imagecodecs) reads LZMA streams one after another:
    a strip of 512 bytes in one stream and 64 MiB of zeros in a second (a 10 kB file) took
    157 MB, the check having stopped at the end of the first stream. It is refused, holding little."""
    import lzma

    bomb = tmp_path / "two.tif"
    one_segment_tiff(bomb, 16, lzma.compress(bytes(512)) + lzma.compress(bytes(64 << 20)), 34925)
    assert bomb.stat().st_size < 20_000
    peak = traced_peak(lambda: pytest.raises(DataError, loaders._read_tiff_bands, bomb, 16, [1, 1, 1], None, None))
    assert peak < 16 << 20, f"{peak:,} bytes held"  # LZMA's dictionary is 8 MiB
    with pytest.raises(DataError) as info:
        loaders._read_tiff_bands(bomb, 16, [1, 1, 1], None, None)
    assert str(info.value) == (f"{bomb}: a strip compressed with LZMA that decompresses to more than the 512 bytes "
                               f"its tags say it holds (a decompression bomb, or a damaged file)")


def test_two_lzma_streams_of_a_strip_or_trailing_bytes_read_as_tifffile_reads_them(tmp_path):
    """Within its size, a strip of two LZMA streams is read whole, and bytes after the last
    stream that are no stream are ignored, as lzma.decompress does."""
    import lzma

    values = np.arange(256, dtype="<u2").reshape(16, 16)
    raw = values.tobytes()
    for name, payload in (("two", lzma.compress(raw[:200]) + lzma.compress(raw[200:])),
                          ("tail", lzma.compress(raw) + b"not a stream")):
        path = tmp_path / f"{name}.tif"
        one_segment_tiff(path, 16, payload, 34925)
        got, _ = loaders._read_tiff_bands(path, 16, [1, 1, 1], None, None)
        expected = np.floor(values.astype(np.float64) * 255 / 65535 + 0.5)
        np.testing.assert_array_equal(got, np.repeat(expected[..., None], 3, axis=2), err_msg=name)


class _Tally:
    """Bytes every zlib / LZMA decompression in the process gives back while installed
    (``zlib.decompress``, as tifffile calls it without imagecodecs, and the decompressor objects,
    which ``lzma.decompress`` uses too): how many times a file's strips were inflated."""

    def __init__(self, monkeypatch) -> None:
        import lzma
        import zlib

        self.bytes = 0
        tally = self

        class Counting:
            def __init__(self, real) -> None:
                self.real = real

            def decompress(self, *args, **kwargs):
                out = self.real.decompress(*args, **kwargs)
                tally.bytes += len(out)
                return out

            def __getattr__(self, name):
                return getattr(self.real, name)

        def counted(fn):
            def run(*args, **kwargs):
                out = fn(*args, **kwargs)
                tally.bytes += len(out)
                return out
            return run

        monkeypatch.setattr(zlib, "decompress", counted(zlib.decompress))
        real_zlib, real_lzma = zlib.decompressobj, lzma.LZMADecompressor
        monkeypatch.setattr(zlib, "decompressobj", lambda *a, **k: Counting(real_zlib(*a, **k)))
        monkeypatch.setattr(lzma, "LZMADecompressor", lambda *a, **k: Counting(real_lzma(*a, **k)))


@pytest.mark.parametrize("compression", ["zlib", "lzma"])
@pytest.mark.parametrize("tiled", [False, True])
def test_each_compressed_strip_or_tile_is_inflated_once(tmp_path, monkeypatch, compression, tiled):
    """The size check of each Deflate / LZMA strip or tile (bounded, see the bomb tests) gives
    the pixels too: the file's chunks are inflated once, not once to count them and again by
    tifffile (1.3 x the read time of a 4-band 2048 x 2048 tiled GeoTIFF)."""
    scene = _scene(11, bands=4, side=40)
    path = tmp_path / "x.tif"
    kw = {"tile": (16, 16)} if tiled else {"rowsperstrip": 7}
    _write(path, scene, "contig", compression=compression, predictor=2, **kw)
    with tifffile.TiffFile(path) as tif:
        page = tif.pages.first
        decoded = math.prod(page.chunked) * math.prod(page.chunks) * 2 if tiled else scene.nbytes
    tally = _Tally(monkeypatch)
    # nor does tifffile decode it again (with imagecodecs, its inflating would not be counted above)
    monkeypatch.setattr(tifffile.TiffPage, "asarray", lambda *a, **k: pytest.fail("decoded by tifffile"))
    got, _ = loaders._read_tiff_bands(path, 40, [4, 2, 1], None, None)
    assert tally.bytes == decoded, f"{tally.bytes:,} bytes inflated for {decoded:,} decoded"
    expected = np.floor(scene[[3, 1, 0]].astype(np.float64) * 255 / 65535 + 0.5).transpose(1, 2, 0)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("compression", ["zlib", "lzma", "packbits", "zstd"])
def test_inflated_chunks_assemble_to_tifffiles_array_in_every_layout(tmp_path, compression, request):
    """The image built from the inflated strips or tiles is tifffile's own array of the file, in
    either planar layout, strips (the last one short) or tiles (edge ones cropped), with and
    without horizontal differencing (wrapping in the sample type), every integer and float type,
    either byte order, one band or several. tifffile writes PackBits and ZSTD with imagecodecs;
    ZSTD is decoded here where Python has compression.zstd (see :func:`python_zstd`)."""
    if compression in ("packbits", "zstd"):
        pytest.importorskip("imagecodecs")
    if compression == "zstd":
        request.getfixturevalue("python_zstd")
    rng = np.random.default_rng(5)
    checked = 0
    dtypes = ("u1", "i1", "u2", "i2", "u4", "i4", "i8", "f4", "f8") if compression == "zlib" else ("i1", "u2", "f8")
    for dtype in dtypes:
        for bands in (1, 3):
            for layout in ("separate", "contig"):
                if bands == 1 and layout == "contig":
                    continue
                info = np.iinfo(dtype) if dtype[0] in "ui" else None
                scene = (rng.integers(info.min, info.max, (bands, 21, 19), endpoint=True, dtype=dtype) if info
                         else rng.standard_normal((bands, 21, 19)).astype(dtype))
                for chunking in ({"rowsperstrip": 4}, {"tile": (16, 16)}):
                    for predictor in ((None, 2) if info else (None,)):
                        for byteorder in "<>":
                            path = tmp_path / f"{checked}.tif"
                            _write(path, scene, layout, compression=compression, predictor=predictor,
                                   byteorder=byteorder, **chunking)
                            with tifffile.TiffFile(path) as tif:
                                page = tif.pages.first
                                segment_bytes = math.prod(page.chunks) * page.dtype.itemsize
                                got = loaders._inflate_chunks(path, tif, page, "strip", segment_bytes)
                                expected = page.asarray()
                            assert got is not None, (dtype, bands, layout, chunking, predictor, byteorder)
                            assert got.dtype == expected.dtype and got.shape == expected.shape
                            np.testing.assert_array_equal(got, expected, err_msg=str(
                                (dtype, bands, layout, chunking, predictor, byteorder)))
                            np.testing.assert_array_equal(got, scene[0] if bands == 1 else scene if
                                                          layout == "separate" else scene.transpose(1, 2, 0))
                            checked += 1
    # 3 band layouts x 2 chunkings x 2 byte orders, and again with a predictor for integers
    assert checked == 3 * 2 * 2 * (len(dtypes) + sum(d[0] in "ui" for d in dtypes))



def test_a_damaged_compressed_strip_is_one_line_naming_the_file(tmp_path):
    """A Deflate strip cut short is left to tifffile (it is not assembled), which reports it
    (zlib's error, or imagecodecs' DeflateError where it is installed)."""
    import zlib

    path = tmp_path / "cut.tif"
    one_segment_tiff(path, 16, zlib.compress(bytes(512))[:-6], 8)
    with tifffile.TiffFile(path) as tif:
        assert loaders._inflate_chunks(path, tif, tif.pages.first, "strip", 512) is None
    with pytest.raises(DataError) as info:
        loaders._read_tiff_bands(path, 16, [1, 1, 1], None, None)
    assert str(info.value).startswith(f"{path}: cannot read TIFF (") and "\n" not in str(info.value)


def test_a_tiff_of_fill_order_2_is_size_checked_in_the_bytes_tifffile_inflates(tmp_path):
    """Fill order 2 (tag 266): tifffile reverses the bits of each stored byte, then inflates.
    The check inflated the bytes as stored (no stream: left to tifffile), so a 65 kB file whose
    reversed strip is 64 MiB of zeros took 150 MB to read; it is refused, holding little. A
    file of fill order 2 within its size reads to tifffile's pixels, inflated once."""
    import zlib

    def reversed_bits(data: bytes) -> bytes:
        return bytes(int(f"{b:08b}"[::-1], 2) for b in data)

    bomb = tmp_path / "bomb.tif"
    one_segment_tiff(bomb, 16, reversed_bits(zlib.compress(bytes(64 << 20), 9)), 8, extra=((266, 3, 1, 2),))
    assert bomb.stat().st_size < 70_000
    peak = traced_peak(lambda: pytest.raises(DataError, loaders._read_tiff_bands, bomb, 16, [1, 1, 1], None, None))
    assert peak < 8 << 20, f"{peak:,} bytes held"
    with pytest.raises(DataError) as info:
        loaders._read_tiff_bands(bomb, 16, [1, 1, 1], None, None)
    assert str(info.value) == (f"{bomb}: a strip compressed with ADOBE_DEFLATE that decompresses to more than the "
                               f"512 bytes its tags say it holds (a decompression bomb, or a damaged file)")
    values = np.arange(0, 65536, 256, dtype="<u2").reshape(16, 16)
    path = tmp_path / "fill2.tif"
    one_segment_tiff(path, 16, reversed_bits(zlib.compress(values.tobytes())), 8, extra=((266, 3, 1, 2),))
    with tifffile.TiffFile(path) as tif:
        page = tif.pages.first
        assert int(page.fillorder) == 2
        np.testing.assert_array_equal(page.asarray(), values)
        np.testing.assert_array_equal(loaders._inflate_chunks(path, tif, page, "strip", 512), values)


@pytest.fixture
def python_zstd(monkeypatch):
    """compression.zstd as Python 3.14 has it: the real module there; before 3.14, backports.zstd
    (the same module published for older Pythons, which the dev extra installs) in its place for
    the test, so that this reader and a tifffile imported during the test find it."""
    try:
        from compression import zstd
    except ImportError:
        zstd = pytest.importorskip("backports.zstd")
        package = types.ModuleType("compression")
        package.__path__ = []
        package.zstd = zstd
        monkeypatch.setitem(sys.modules, "compression", package)
        monkeypatch.setitem(sys.modules, "compression.zstd", zstd)
    return zstd


@pytest.fixture
def zstd_without_imagecodecs(python_zstd, without_imagecodecs):
    """tifffile as it is on Python 3.14 without imagecodecs: it decodes ZSTD with
    ``compression.zstd.decompress``, which decompresses a strip or tile whole."""
    assert without_imagecodecs._imagecodecs.zstd_decode(python_zstd.compress(b"ok")) == b"ok"
    return without_imagecodecs


def _zstd_zeros(total: int, declared: int | None) -> bytes:
    """One ZSTD frame of ``total`` zero bytes in RLE blocks of 128 KiB (4 bytes each: a 1 GiB
    frame is 32 kB), its header declaring ``declared`` bytes (Frame_Content_Size) or, as
    libtiff's streaming writer leaves it, no size (RFC 8878, 3.1.1)."""
    header = (bytes([0x00, 0x38]) if declared is None  # no size; window 2**17 (Window_Descriptor)
              else bytes([0xC0, 0x38]) + struct.pack("<Q", declared))  # an 8-byte Frame_Content_Size
    blocks = []
    while total:
        size = min(total, 1 << 17)
        total -= size
        blocks.append(struct.pack("<I", (total == 0) | 1 << 1 | size << 3)[:3] + b"\0")  # last?, RLE, size
    return b"\x28\xb5\x2f\xfd" + header + b"".join(blocks)


def _warm_packbits() -> None:
    """numba loaded and the PackBits loop compiled (or read from its cache) before a test
    measures what one file costs (numba's import is some MB of its own)."""
    from fol.data.packbits import unpack_bits

    unpack_bits(np.frombuffer(b"\x00\x07", np.uint8), np.empty(1, np.uint8))  # read-only, as the loader's


def test_packbits_is_decoded_as_tifffiles_own_decoder_decodes_it():
    """Random runs, cut short or not (a literal cut short gives the bytes there, a repeat
    without its byte nothing), decode to tifffile's own decoder's bytes; past the buffer's
    size they are refused, nothing being written past it."""
    from tifffile import _imagecodecs

    from fol.data.packbits import TOO_LONG, unpack_bits

    rng = np.random.default_rng(3)
    seen = {"whole": 0, "cut": 0, "too long": 0}
    for _ in range(400):
        data = rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8)
        expected = _imagecodecs.packbits_decode(data.tobytes())
        size = int(rng.integers(0, 1200))
        out = np.full(size + 8, 77, np.uint8)
        written, cut = unpack_bits(data, out[:size])
        assert (out[size:] == 77).all()
        if written == TOO_LONG:
            assert len(expected) > size
            seen["too long"] += 1
            continue
        assert len(expected) <= size and out[:written].tobytes() == expected
        seen["cut" if cut else "whole"] += 1
    assert min(seen.values()) > 20, seen
    assert unpack_bits(np.frombuffer(b"\x80\x01ab\xfdz\x80", np.uint8), np.empty(6, np.uint8)) == (6, False)


@pytest.mark.parametrize("codecs", ["imagecodecs", "tifffile's own"])
def test_a_packbits_strip_that_decodes_past_its_size_is_refused_before_it_is_decoded(tmp_path, codecs, request):
    """A 16 x 16 strip (512 bytes) stored as 128 KiB of two-byte runs of 128 zeros each (8 MiB):
    tifffile's own decoder (without imagecodecs) decoded it whole into a Python list (79 MiB
    held, 588 MiB for a 1 MiB strip) and read the image; with imagecodecs it was refused as
    'cannot read TIFF (ImcdError: ...)'. Decoded here into a buffer of its size, it is refused
    in the line of a Deflate bomb, holding little, whichever decoder tifffile has."""
    if codecs == "imagecodecs":
        pytest.importorskip("imagecodecs")
    else:
        request.getfixturevalue("without_imagecodecs")
    bomb = tmp_path / "bomb.tif"
    one_segment_tiff(bomb, 16, b"\x81\x00" * (64 << 10), 32773)
    _warm_packbits()
    peak = traced_peak(lambda: pytest.raises(DataError, loaders._read_tiff_bands, bomb, 16, [1, 1, 1], None, None))
    assert peak < 1 << 20, f"{peak:,} bytes held"
    with pytest.raises(DataError) as info:
        loaders._read_tiff_bands(bomb, 16, [1, 1, 1], None, None)
    assert str(info.value) == (f"{bomb}: a strip compressed with PACKBITS that decompresses to more than the 512 "
                               f"bytes its tags say it holds (a decompression bomb, or a damaged file)")


@pytest.mark.parametrize("compression", ["packbits", "zstd"])
def test_a_packbits_or_zstd_tiff_is_decoded_once_to_tifffiles_pixels(tmp_path, monkeypatch, compression, request):
    """A PackBits GeoTIFF-like tiled file (and ZSTD, where Python decodes it) reads to the
    pixels of the same file uncompressed, its chunks decoded here and not again by tifffile."""
    pytest.importorskip("imagecodecs")  # tifffile writes PackBits and ZSTD with it
    if compression == "zstd":
        request.getfixturevalue("python_zstd")
    scene = _scene(12, bands=4, side=40)
    _write(tmp_path / "plain.tif", scene, "contig")
    _write(tmp_path / "packed.tif", scene, "contig", compression=compression, tile=(16, 16))
    plain, _ = loaders._read_tiff_bands(tmp_path / "plain.tif", 40, [4, 2, 1], None, None)
    monkeypatch.setattr(tifffile.TiffPage, "asarray", lambda *a, **k: pytest.fail("decoded by tifffile"))
    packed, _ = loaders._read_tiff_bands(tmp_path / "packed.tif", 40, [4, 2, 1], None, None)
    np.testing.assert_array_equal(packed, plain)
    assert plain.max() > 0


def test_a_packbits_strip_cut_short_is_left_to_tifffile(tmp_path):
    """The last run of a PackBits strip cut short is damage: not assembled here, it is
    decoded by tifffile, which reads it as its decoder does (imagecodecs refuses it)."""
    path = tmp_path / "cut.tif"
    one_segment_tiff(path, 16, b"\x7f" + bytes(128) * 3 + b"\x7f" + bytes(100), 32773)  # 484 of 512 bytes
    with tifffile.TiffFile(path) as tif:
        assert loaders._inflate_chunks(path, tif, tif.pages.first, "strip", 512) is None
        try:
            expected = tif.pages.first.asarray()
        except Exception:  # imagecodecs: IMCD_INPUT_CORRUPT
            expected = None
    if expected is None:
        with pytest.raises(DataError) as info:
            loaders._read_tiff_bands(path, 16, [1, 1, 1], None, None)
        assert str(info.value).startswith(f"{path}: cannot read TIFF (") and "\n" not in str(info.value)
    else:
        got, _ = loaders._read_tiff_bands(path, 16, [1, 1, 1], None, None)
        assert got.shape == (16, 16, 3) and not got.any()


@pytest.mark.parametrize("declared", ["its size", "no size", "a size too small"])
def test_a_zstd_strip_that_decompresses_past_its_size_is_refused_without_decompressing_it(
        tmp_path, zstd_without_imagecodecs, declared):
    """Python 3.14 without imagecodecs: tifffile decompresses a ZSTD strip whole with
    compression.zstd. A 16 x 16 strip (512 bytes) stored as 64 MiB of zeros in 2 kB, its frame
    declaring that size or none, took 141 MiB and read the image (1 GiB in 32 kB took 2 GiB).
    Decompressed here to no more than its size and a byte, it is refused, holding little.
    A frame declaring 512 bytes that holds more, zstd itself stops as damaged (tifffile's line)."""
    size = {"its size": 64 << 20, "no size": None, "a size too small": 512}[declared]
    bomb = tmp_path / "bomb.tif"
    one_segment_tiff(bomb, 16, _zstd_zeros(64 << 20, size), 50000)
    assert bomb.stat().st_size < 3_000
    peak = traced_peak(lambda: pytest.raises(DataError, loaders._read_tiff_bands, bomb, 16, [1, 1, 1], None, None))
    assert peak < 1 << 20, f"{peak:,} bytes held"
    with pytest.raises(DataError) as info:
        loaders._read_tiff_bands(bomb, 16, [1, 1, 1], None, None)
    if size == 512:
        assert str(info.value).startswith(f"{bomb}: cannot read TIFF (ZstdError: ") and "\n" not in str(info.value)
    else:
        assert str(info.value) == (f"{bomb}: a strip compressed with ZSTD that decompresses to more than the 512 "
                                   f"bytes its tags say it holds (a decompression bomb, or a damaged file)")


def test_zstd_frames_read_as_compression_zstd_reads_them(tmp_path, zstd_without_imagecodecs, python_zstd):
    """Frames declaring their size or not (libtiff's), two frames in a strip, a skippable frame:
    decoded here to tifffile's pixels. Bytes after the last frame that are no frame, or a frame
    cut short, are damage left to tifffile, which refuses them."""
    values = np.arange(256, dtype="<u2").reshape(16, 16)
    raw = values.tobytes()
    streamed = python_zstd.ZstdCompressor()
    without_size = streamed.compress(raw) + streamed.flush()  # FLUSH_FRAME: no size in its header
    assert python_zstd.get_frame_info(without_size).decompressed_size is None
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    expected = np.repeat(np.floor(values.astype(np.float64) * 255 / 65535 + 0.5)[..., None], 3, axis=2)
    for name, payload in (("sized", python_zstd.compress(raw)), ("streamed", without_size),
                          ("two", python_zstd.compress(raw[:100]) + python_zstd.compress(raw[100:])),
                          ("skippable", skippable + python_zstd.compress(raw))):
        path = tmp_path / f"{name}.tif"
        one_segment_tiff(path, 16, payload, 50000)
        with tifffile.TiffFile(path) as tif:
            np.testing.assert_array_equal(loaders._inflate_chunks(path, tif, tif.pages.first, "strip", 512), values)
        got, _ = loaders._read_tiff_bands(path, 16, [1, 1, 1], None, None)
        np.testing.assert_array_equal(got, expected, err_msg=name)
    for name, payload in (("tail", python_zstd.compress(raw) + b"not a frame"),
                          ("cut", python_zstd.compress(raw)[:-3])):
        path = tmp_path / f"{name}.tif"
        one_segment_tiff(path, 16, payload, 50000)
        with tifffile.TiffFile(path) as tif:
            assert loaders._inflate_chunks(path, tif, tif.pages.first, "strip", 512) is None
        with pytest.raises(DataError) as info:
            loaders._read_tiff_bands(path, 16, [1, 1, 1], None, None)
        assert str(info.value).startswith(f"{path}: cannot read TIFF (") and "\n" not in str(info.value), name


def test_with_imagecodecs_a_zstd_strip_is_decoded_no_further_than_its_size(tmp_path):
    """Where Python has no compression.zstd (before 3.14), tifffile decodes ZSTD with imagecodecs,
    handing it each strip's size as its output buffer: a 16 x 16 strip (512 bytes) stored as
    1 GiB of zeros in 32 kB, its frame declaring that size or none, is refused in one line,
    holding little (measured so before any change here)."""
    pytest.importorskip("imagecodecs")
    for size in (1 << 30, None):
        bomb = tmp_path / "bomb.tif"
        one_segment_tiff(bomb, 16, _zstd_zeros(1 << 30, size), 50000)
        peak = traced_peak(lambda: pytest.raises(DataError, loaders._read_tiff_bands, bomb, 16, [1, 1, 1], None, None))
        assert peak < 1 << 20, f"{peak:,} bytes held"
        with pytest.raises(DataError) as info:
            loaders._read_tiff_bands(bomb, 16, [1, 1, 1], None, None)
        assert str(info.value).startswith(f"{bomb}: ") and "\n" not in str(info.value)
