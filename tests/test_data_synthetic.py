"""The synthetic geo-tagged generator: determinism, ranges, location dependence, noise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fol.data import TASK_REGIONS, TASK_TYPE_CLASSES, geo_fields, load_dataset, make_synthetic
from fol.errors import ConfigError, DataError


@pytest.mark.parametrize("task", ["wildfire", "hurricane"])
def test_deterministic_and_seed_dependent(task):
    a = make_synthetic(task, 300, seed=7, image_size=12)
    b = make_synthetic(task, 300, seed=7, image_size=12)
    assert a.images.numpy().tobytes() == b.images.numpy().tobytes()
    assert torch.equal(a.labels, b.labels) and np.array_equal(a.lat, b.lat) and np.array_equal(a.lon, b.lon)
    c = make_synthetic(task, 300, seed=8, image_size=12)
    assert not torch.equal(a.images, c.images) and not np.array_equal(a.lat, c.lat)
    # independent of the global RNG and a prefix of a longer draw
    torch.manual_seed(123)
    np.random.seed(123)
    longer = make_synthetic(task, 400, seed=7, image_size=12)
    assert torch.equal(longer.images[:300], a.images) and torch.equal(longer.labels[:300], a.labels)


@pytest.mark.parametrize("task, classes", [("wildfire", ["nowildfire", "wildfire"]), ("hurricane", ["no_damage", "damage"])])
def test_shapes_ranges_and_locations(task, classes):
    ds = make_synthetic(task, 500, seed=0, image_size=24)
    assert ds.images.shape == (500, 3, 24, 24) and ds.images.dtype == torch.float32
    assert float(ds.images.min()) >= 0.0 and float(ds.images.max()) <= 1.0
    assert ds.class_names == classes and ds.name == f"synthetic-{task}"
    frac = ds.labels.float().mean().item()
    assert 0.3 < frac < 0.7
    inside = np.zeros(len(ds), dtype=bool)
    for box in TASK_REGIONS[task]:
        inside |= (box.lat_min <= ds.lat) & (ds.lat <= box.lat_max) & (box.lon_min <= ds.lon) & (ds.lon <= box.lon_max)
    assert inside.all()
    assert ds.images.std().item() > 0.1  # not a flat image


def test_region_box_and_location_dependence():
    # Arctic-ish Canada vs the dry subtropical south-west: tundra / forest vs desert colours.
    north = make_synthetic("wildfire", 400, seed=1, region=(56.0, 60.0, -120.0, -110.0), positive_fraction=0.0)
    south = make_synthetic("wildfire", 400, seed=1, region=(31.0, 34.0, -115.0, -105.0), positive_fraction=0.0)
    assert north.lat.min() >= 56.0 and south.lat.max() <= 34.0
    mn, ms = north.images.mean((0, 2, 3)), south.images.mean((0, 2, 3))
    # the desert is much redder relative to blue than the northern scenes
    assert (ms[0] - ms[2]) - (mn[0] - mn[2]) > 0.1
    f = geo_fields(np.array([58.0, 32.0]), np.array([-115.0, -110.0]))
    assert f["cold"][0] > f["cold"][1] and f["arid"][1] > f["arid"][0]


def test_class_signal_is_present():
    """Fire images are on average redder (hot spots) and darker-or-smokier than non-fire."""
    ds = make_synthetic("wildfire", 768, seed=3, label_noise=0.0, image_size=16)
    img, y = ds.images, ds.labels
    redness = (img[:, 0] - img[:, 2]).amax((1, 2))
    assert redness[y == 1].mean() > redness[y == 0].mean() + 0.05
    hur = make_synthetic("hurricane", 768, seed=3, label_noise=0.0, image_size=16)
    blue = (hur.images[:, 2] - hur.images[:, 0]).amax((1, 2))  # tarps, flood vs intact roofs
    texture = (hur.images[:, :, 1:] - hur.images[:, :, :-1]).abs().mean((1, 2, 3))
    score = blue + 4 * texture
    assert score[hur.labels == 1].mean() > score[hur.labels == 0].mean()


@pytest.mark.parametrize("rate", [0.1, 0.25])
def test_label_noise_rate_and_images_unchanged(rate):
    clean = make_synthetic("hurricane", 2000, seed=5, label_noise=0.0, image_size=8)
    noisy = make_synthetic("hurricane", 2000, seed=5, label_noise=rate, image_size=8)
    assert torch.equal(clean.images, noisy.images)  # noise changes labels only
    flipped = (clean.labels != noisy.labels).float().mean().item()
    assert abs(flipped - rate) < 4 * np.sqrt(rate * (1 - rate) / 2000)


def test_location_dependent_event_rate():
    wet = make_synthetic("wildfire", 1024, seed=2, region=(50.0, 54.0, -75.0, -65.0), label_noise=0.0, image_size=8)
    dry = make_synthetic("wildfire", 1024, seed=2, region=(31.0, 34.0, -115.0, -105.0), label_noise=0.0, image_size=8)
    assert dry.labels.float().mean() > wet.labels.float().mean() + 0.05


def test_generation_speed_and_bad_arguments():
    import time

    t0 = time.perf_counter()
    make_synthetic("wildfire", 1024, seed=0)
    assert time.perf_counter() - t0 < 20.0  # ~0.4 s on one idle core
    for kw, field in [
        (dict(task="flood"), "task"),
        (dict(n=-1), "size"),
        (dict(image_size=4), "image_size"),
        (dict(label_noise=0.6), "label_noise"),
        (dict(region=(10.0, 5.0, 0.0, 1.0)), "lat_min"),
        (dict(positive_fraction=1.5), "positive_fraction"),
        (dict(classes="forms"), "classes"),
    ]:
        args = dict(task="wildfire", n=4, seed=0)
        args.update(kw)
        with pytest.raises(DataError, match=field):
            make_synthetic(**args)
    assert len(make_synthetic("wildfire", 0, seed=0)) == 0


@pytest.mark.parametrize("task", ["wildfire", "hurricane"])
def test_event_type_labels_are_the_same_images_with_finer_labels(task):
    ev = make_synthetic(task, 600, seed=4, image_size=12)
    ty = make_synthetic(task, 600, seed=4, image_size=12, classes="type")
    # same images and places; "no event" is class 0 in both; every event image has one form
    assert torch.equal(ev.images, ty.images) and np.array_equal(ev.lat, ty.lat)
    assert torch.equal(ev.labels, (ty.labels > 0).long())
    assert ty.class_names == list(TASK_TYPE_CLASSES[task]) and ty.name == f"synthetic-{task}-types"
    counts = torch.bincount(ty.labels, minlength=len(TASK_TYPE_CLASSES[task]))
    assert len(counts) == len(TASK_TYPE_CLASSES[task]) and bool((counts[1:] >= 40).all())
    # the registry names give the same datasets, and the name fixes the label set
    assert torch.equal(load_dataset(f"synthetic-{task}-types", n=600, seed=4, image_size=12).labels, ty.labels)
    with pytest.raises(ConfigError, match="classes"):
        load_dataset(f"synthetic-{task}", n=4, classes="type")


def test_event_type_label_noise_picks_another_class():
    clean = make_synthetic("hurricane", 2000, seed=5, image_size=8, classes="type")
    noisy = make_synthetic("hurricane", 2000, seed=5, image_size=8, classes="type", label_noise=0.25)
    assert torch.equal(clean.images, noisy.images)
    changed = clean.labels != noisy.labels
    assert abs(changed.float().mean().item() - 0.25) < 4 * np.sqrt(0.25 * 0.75 / 2000)
    # a flipped label lands on each other class about equally often, never outside the range
    shift = torch.bincount((noisy.labels[changed] - clean.labels[changed]) % 5, minlength=5)
    assert int(noisy.labels.min()) >= 0 and int(noisy.labels.max()) <= 4
    assert int(shift[0]) == 0 and int(shift[1:].min()) > 0.15 * int(changed.sum())


def test_noisy_event_and_type_labels_flip_the_same_images_but_need_not_agree_on_no_event():
    """What make_synthetic's docstring says of label noise over the two label sets:
    the same images are flipped in both; without noise type 0 is exactly event 0,
    with noise a flipped form can land on another form where the event label is 0."""
    kw = dict(n=1024, seed=1, image_size=8)
    ev, ty = make_synthetic("hurricane", **kw), make_synthetic("hurricane", classes="type", **kw)
    ev_n = make_synthetic("hurricane", label_noise=0.3, **kw)
    ty_n = make_synthetic("hurricane", classes="type", label_noise=0.3, **kw)
    assert torch.equal(ty.labels == 0, ev.labels == 0)
    assert torch.equal(ev_n.labels != ev.labels, ty_n.labels != ty.labels)
    disagree = (ty_n.labels == 0) != (ev_n.labels == 0)
    assert int(disagree.sum()) > 0
    assert bool((ev.labels[disagree] == 1).all() and (ty_n.labels[disagree] > 0).all())
