"""The options that read a multispectral TIFF's bands (``bands``, ``scale``, with ``coords``)
go by one rule, :func:`fol.defaults.check_band_options`, in each of the four front ends that
take them: the loader's keywords, a ``--data`` spec, ``fol data info`` and a scenario's
``[data]``. The same bad combination gets the same first complaint in each, naming the front
end's own fields. No image is read: the refusals come before any file is opened."""

from __future__ import annotations

import pytest

from fol.cli import main
from fol.data.registry import load_dataset
from fol.errors import ConfigError
from fol.nodedata import parse_node_data
from fol.simulation.scenario import parse_scenario

#: How each front end names the fields: a line's start (``head``), a field within a sentence
#: (``bands``), the image-folder dataset, and the start of a line refusing a value (``value``,
#: given the value as the front end's text holds it).
FRONT_ENDS = {
    "loader": dict(head={"bands": "bands:", "scale": "scale:", "coords": "coords:"}, bands="bands",
                   dataset="dataset 'imagefolder'", value=lambda key, text: key),
    "spec": dict(head={"bands": "--data: bands=", "scale": "--data: scale="}, bands="bands=",
                 dataset="dataset=imagefolder", value=lambda key, text: f"--data: {key}={text}"),
    "info": dict(head={"bands": "--bands:", "scale": "--scale:", "coords": "--coords:"}, bands="--bands",
                 dataset="imagefolder:PATH", value=lambda key, text: f"--{key}"),
    "scenario": dict(head={"bands": "data.bands:", "scale": "data.scale:", "coords": "data.coords:"},
                     bands="data.bands", dataset="dataset 'imagefolder'", value=lambda key, text: f"data.{key}"),
}

ANOTHER_DATASET = "{head[%s]} only applies to {dataset} (a folder of multispectral TIFFs), not 'cifar10'"
SCALE_WITHOUT_BANDS = "{head[scale]} only applies with {bands} (the bands of TIFFs read with tifffile)"
EXIF = ("{head[coords]} 'exif' is read as Pillow opens an image, not with {bands} (TIFFs read with tifffile); "
        "give the places of a folder read with {bands} by 'geotiff', 'csv' or 'filename'")
BAD_BANDS = "{bands_value}: expected three band numbers in 1..64 (1-based, for the model's 3 input channels"
BAD_SCALE = "{scale_value}: expected a finite number > 0 (a band's values are divided by it"

#: (dataset, bands, scale, coords, the first complaint): several things wrong at once, the
#: first in the rule's order (dataset, scale without bands, exif with bands, bands, scale).
CASES = [
    pytest.param("cifar10", None, 10000, "none", ANOTHER_DATASET % "scale", id="scale-of-another-dataset"),
    # not the malformed bands nor the scale's value
    pytest.param("cifar10", [4, 3], -1, "none", ANOTHER_DATASET % "bands", id="bad-bands-of-another-dataset"),
    # nor --coords of another dataset
    pytest.param("cifar10", [4, 3, 2], None, "exif", ANOTHER_DATASET % "bands", id="exif-of-another-dataset"),
    pytest.param("imagefolder", None, -1, "none", SCALE_WITHOUT_BANDS, id="bad-scale-without-bands"),
    pytest.param("imagefolder", None, 10000, "exif", SCALE_WITHOUT_BANDS, id="exif-and-scale-without-bands"),
    pytest.param("imagefolder", [4, 3], 10000, "exif", EXIF, id="exif-with-bad-bands"),
    pytest.param("imagefolder", [4, 3, 70], 0, "none", BAD_BANDS, id="bad-bands-and-scale"),
    pytest.param("imagefolder", [4, 3, 2], 0, "none", BAD_SCALE, id="bad-scale"),
]


def _loader(tmp_path, dataset, bands, scale, coords):
    kw = {"path": tmp_path / "imgs"} if dataset == "imagefolder" else {}
    kw.update({k: v for k, v in (("bands", bands), ("scale", scale)) if v is not None})
    if coords != "none":
        kw["coords"] = coords
    with pytest.raises(ConfigError) as info:
        load_dataset(dataset, root=tmp_path, **kw)
    return str(info.value)


def _spec(tmp_path, dataset, bands, scale, coords):
    text = f"dataset={dataset}" + (f",path={tmp_path / 'imgs'}" if dataset == "imagefolder" else "")
    text += f",bands={'+'.join(map(str, bands))}" if bands is not None else ""
    text += f",scale={scale}" if scale is not None else ""
    with pytest.raises(ConfigError) as info:
        parse_node_data(text)
    return str(info.value)


def _info(tmp_path, dataset, bands, scale, coords, capsys):
    argv = ["data", "info", f"imagefolder:{tmp_path / 'imgs'}" if dataset == "imagefolder" else dataset]
    argv += [f"--bands={','.join(map(str, bands))}"] if bands is not None else []
    argv += [f"--scale={scale}"] if scale is not None else []
    argv += [f"--coords={coords}"] if coords != "none" else []
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fol data: error: "), err
    return err[0][len("fol data: error: "):]


def _scenario(tmp_path, dataset, bands, scale, coords):
    data = {"dataset": dataset, "coords": coords, **({"path": "imgs"} if dataset == "imagefolder" else {}),
            **{k: v for k, v in (("bands", bands), ("scale", scale)) if v is not None}}
    doc = {"drones": {"radio_range_km": 1.0, "waypoints_csv": "wp.csv"},
           "time": {"duration_s": 600.0, "step_s": 10.0}, "link": {"rate_bps": 1e6}, "rounds": {"count": 1},
           "data": data}
    with pytest.raises(ConfigError) as info:
        parse_scenario(doc, tmp_path, "s.toml")
    text = str(info.value)
    assert text.startswith("s.toml: "), text
    return text[len("s.toml: "):]


@pytest.mark.parametrize("dataset, bands, scale, coords, first", CASES)
def test_every_front_end_gives_the_same_first_complaint_naming_its_own_fields(tmp_path, capsys, dataset, bands,
                                                                              scale, coords, first):
    for cls in ("burnt", "intact"):  # never opened: each refusal comes first
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        (tmp_path / "imgs" / cls / "a.tif").write_bytes(b"")
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\nb,0,0.2,0,0.1\n")
    runs = {"loader": lambda: _loader(tmp_path, dataset, bands, scale, coords),
            "info": lambda: _info(tmp_path, dataset, bands, scale, coords, capsys),
            "scenario": lambda: _scenario(tmp_path, dataset, bands, scale, coords)}
    if coords == "none":  # a --data spec takes no coords
        runs["spec"] = lambda: _spec(tmp_path, dataset, bands, scale, coords)
    texts = {"loader": (bands, scale), "scenario": (bands, scale), "info": (",".join(map(str, bands or ())), scale),
             "spec": ("+".join(map(str, bands or ())), scale)}
    for front, run in runs.items():
        names = FRONT_ENDS[front]
        bands_text, scale_text = texts[front]
        expected = first.format(head=names["head"], bands=names["bands"], dataset=names["dataset"],
                                bands_value=names["value"]("bands", bands_text),
                                scale_value=names["value"]("scale", scale_text))
        got = run()
        if first in (BAD_BANDS, BAD_SCALE):  # then the value as given, in the front end's own form
            assert got.startswith(expected), (front, got)
        else:
            assert got == expected, (front, got)
        others = {n for f, v in FRONT_ENDS.items() if f != front for n in v["head"].values()} - \
            set(names["head"].values())
        assert not any(got.startswith(n) for n in others), (front, got)
