"""Deterministic synthetic geo-tagged imagery: the embedded default dataset.

``make_synthetic("wildfire" | "hurricane", n, seed)`` renders ``n`` small
"satellite" images (3 x S x S, default S = 32, float32 in [0, 1]) at sampled
locations, so that the toolkit runs end to end with no files. It is a
stand-in, not a simulation of real sensors; what matters is that

* the **background depends smoothly on location**: a hand-made terrain model
  (:func:`geo_fields`) turns latitude / longitude into aridity, vegetation,
  cold, urban density and water; these set the ground colour and texture
  (desert dunes, forest canopy, tundra, coast and lakes, street grids with
  roofs whose colour varies by region), the illumination (low sun at high
  latitude) and haze. Nodes that see different regions therefore see
  different feature distributions;
* the **class signal varies with region** in form and strength: a wildfire
  image shows one of smoke plumes (drifting with a region-dependent wind), hot
  spots or burn scars, with shares that follow vegetation and aridity;
  hurricane damage shows one of flood water (likelier on the low-lying Gulf
  coast), roof damage, blue tarps or debris. One form per image, not a mix:
  a model has to see every form to recognise it. Look-alike **distractors**
  occur in both classes (clouds, dark lakes, red soil; ponds, pools, dirt
  lots), so a model needs many examples from many regions to tell them apart;
* **regional look-alikes make location matter**: straight-edged fuel-reduction
  burns (black, without smoke or hot spots) are common in south-east Australia
  and painted blue / teal roofs (close to blue tarps) in the Caribbean, and rare
  elsewhere, so a model trained on one region loses accuracy on a far one
  (``benchmarks/calibrate_synthetic.py`` measures the drop);
* the label is the event or not (two classes, as the paper's datasets), or,
  with ``classes="type"``, the form the event takes (wildfire: none, smoke,
  burn scar, hot spots; hurricane: none, flood, roof damage, blue tarps,
  debris), on the same images. With more classes a label-skewed node is less
  often nearly one class, so training alone leaves more to learn from others;
* a fraction ``label_noise`` of the labels is flipped (default
  :data:`DEFAULT_LABEL_NOISE`, 0: the calibration targets, pooled >= 95 %
  and local >= majority rate + 5 points, leave no room for label noise).

Locations are drawn uniformly by area inside task-specific boxes (see
:data:`TASK_REGIONS`), or inside a user box ``region=(lat_min, lat_max,
lon_min, lon_max)`` (degrees). The positive-class rate depends on the place
too (fires are likelier where it is dry, damage where it is low and coastal),
overall close to one half.

Determinism: images are produced in blocks of :data:`BLOCK` with private
generators seeded from ``(seed, task, block)``, so the output depends only on
the arguments (not on the global RNG), and the first ``k`` images of a call
with ``n > k`` equal those of a call with ``n = k``. The label-noise flips use
their own stream: changing ``label_noise`` changes labels only, never images.

>>> ds = make_synthetic("wildfire", n=8, seed=0)
>>> ds.images.shape, ds.class_names
(torch.Size([8, 3, 32, 32]), ['nowildfire', 'wildfire'])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from fol.data.geo import GeoDataset, check_pool_size
from fol.errors import DataError
from fol.threads import torch_threads

__all__ = [
    "make_synthetic",
    "geo_fields",
    "GeoBox",
    "TASK_REGIONS",
    "TASK_CLASSES",
    "TASK_TYPE_CLASSES",
    "DEFAULT_LABEL_NOISE",
    "BLOCK",
    "make_position_task",
]

#: Fraction of labels flipped to another class by default.
DEFAULT_LABEL_NOISE = 0.0
#: Images rendered per block (fixed so that output is independent of ``n``).
BLOCK = 256

#: Class names per task; index 1 is the event (positive) class. The real-data
#: loaders use the same order, so models are interchangeable.
TASK_CLASSES: dict[str, tuple[str, str]] = {
    "wildfire": ("nowildfire", "wildfire"),
    "hurricane": ("no_damage", "damage"),
}
#: Class names per task when the label is the form the event takes
#: (``make_synthetic(..., classes="type")``); index 0 is "no event", as above.
TASK_TYPE_CLASSES: dict[str, tuple[str, ...]] = {
    "wildfire": ("nowildfire", "smoke", "burn_scar", "active_fire"),
    "hurricane": ("no_damage", "flood", "roof_damage", "blue_tarp", "debris"),
}
#: ``make_synthetic``'s ``classes``: the class names per task and the suffix of the dataset name.
_LABEL_SETS: dict[str, tuple[dict[str, tuple[str, ...]], str]] = {
    "event": (TASK_CLASSES, ""),
    "type": (TASK_TYPE_CLASSES, "-types"),
}
_TASK_ID = {"wildfire": 1, "hurricane": 2}


@dataclass(frozen=True)
class GeoBox:
    """A latitude / longitude box (degrees) with a sampling weight."""

    name: str
    lat_min: float
    lat_max: float
    lon_min: float
    lon_max: float
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not (-90 <= self.lat_min < self.lat_max <= 90 and -180 <= self.lon_min < self.lon_max <= 180):
            raise DataError(
                f"region box {self.name!r} must satisfy -90 <= lat_min < lat_max <= 90 and "
                f"-180 <= lon_min < lon_max <= 180 (degrees), got "
                f"({self.lat_min}, {self.lat_max}, {self.lon_min}, {self.lon_max})"
            )


#: Where each task's images are sampled (uniform by area in each box; boxes
#: chosen with probability proportional to ``weight``).
TASK_REGIONS: dict[str, tuple[GeoBox, ...]] = {
    "wildfire": (
        GeoBox("western North America", 32.0, 58.0, -124.0, -104.0, 0.35),
        GeoBox("Quebec / eastern Canada", 45.0, 55.0, -80.0, -60.0, 0.2),
        GeoBox("Mediterranean", 35.0, 44.0, -9.0, 28.0, 0.25),
        GeoBox("south-east Australia", -39.0, -27.0, 138.0, 153.0, 0.2),
    ),
    "hurricane": (
        GeoBox("Texas / Louisiana Gulf coast", 27.5, 31.0, -97.8, -89.0, 0.35),
        GeoBox("Florida", 25.0, 30.5, -87.5, -80.0, 0.25),
        GeoBox("US Atlantic coast", 30.5, 36.5, -81.5, -75.5, 0.2),
        GeoBox("Caribbean", 17.5, 20.0, -78.0, -64.5, 0.2),
    ),
}

# Cities: (lat, lon) in degrees; they raise the urban density around them.
_CITIES = np.array(
    [
        (29.76, -95.37), (29.95, -90.07), (25.76, -80.19), (27.95, -82.46), (30.33, -81.66),
        (32.78, -79.93), (34.23, -77.94), (18.47, -66.11), (18.49, -69.93), (18.0, -76.8),
        (34.05, -118.24), (37.77, -122.42), (47.61, -122.33), (49.28, -123.12), (45.52, -122.68),
        (33.45, -112.07), (39.74, -104.99), (51.05, -114.07), (45.50, -73.57), (46.81, -71.21),
        (40.42, -3.70), (41.39, 2.17), (37.98, 23.73), (41.90, 12.50), (43.30, 5.37), (38.72, -9.14),
        (-33.87, 151.21), (-37.81, 144.96), (-34.93, 138.60), (-27.47, 153.03), (-35.28, 149.13),
    ],
    dtype=np.float64,
)


def geo_fields(lat: np.ndarray, lon: np.ndarray) -> dict[str, np.ndarray]:
    """The terrain model: smooth fields in [0, 1] of latitude / longitude (deg).

    ``arid`` (dry belts near 30 deg and continental interiors), ``veg``
    (vegetation), ``cold`` (above ~45 deg), ``urban`` (near the cities in
    :data:`_CITIES`), ``water`` (chance of lakes / coast), ``lowland`` (low,
    flood-prone Gulf coast) and ``wind`` (prevailing wind direction, rad).
    It is a made-up but smooth geography: nearby places look alike.
    """
    lat = np.asarray(lat, dtype=np.float64)
    lon = np.asarray(lon, dtype=np.float64)
    rl, ro = np.radians(lat), np.radians(lon)
    alat = np.abs(lat)
    cold = np.clip((alat - 44.0) / 16.0, 0.0, 1.0)
    belt = np.exp(-(((alat - 31.0) / 8.0) ** 2))
    wave = 0.5 + 0.5 * np.sin(3.0 * ro + 0.9) * np.cos(5.0 * rl - 0.4)
    humid_east = np.exp(-(((lon + 84.0) / 12.0) ** 2) - ((lat - 27.0) / 10.0) ** 2)  # Gulf / Caribbean
    arid = np.clip(0.75 * belt + 0.55 * wave - 0.45 * cold - 0.6 * humid_east - 0.1, 0.0, 1.0)
    veg = np.clip((1.0 - arid) * (1.0 - 0.6 * cold), 0.0, 1.0)
    d2 = (lat[..., None] - _CITIES[:, 0]) ** 2 + ((lon[..., None] - _CITIES[:, 1]) * np.cos(rl)[..., None]) ** 2
    urban = np.clip(0.08 + 0.9 * np.exp(-d2 / (2 * 1.2**2)).sum(-1), 0.0, 1.0)
    water = np.clip(0.25 + 0.35 * np.sin(7.0 * ro + 4.0 * rl + 1.3) + 0.3 * np.cos(11.0 * rl - 2.0 * ro), 0.0, 1.0)
    lowland = np.exp(-(((lat - 29.5) / 1.8) ** 2)) * np.clip((-lon - 84.0) / 6.0, 0.0, 1.0)
    # Westerlies poleward of ~30 deg blow to the east (0 rad), trade winds to the west (pi).
    wind = np.where(alat > 30.0, 0.0, math.pi) + 0.6 * np.sin(2.0 * ro) + 0.3 * np.cos(3.0 * rl)
    return {"arid": arid, "veg": veg, "cold": cold, "urban": urban, "water": water, "lowland": lowland, "wind": wind}


# --------------------------------------------------------------------- helpers


def _sample_locations(rng: np.random.Generator, n: int, boxes: Sequence[GeoBox]) -> tuple[np.ndarray, np.ndarray]:
    w = np.array([b.weight for b in boxes], dtype=np.float64)
    which = rng.choice(len(boxes), size=n, p=w / w.sum())
    lat = np.empty(n)
    lon = np.empty(n)
    for i, b in enumerate(boxes):
        m = which == i
        k = int(m.sum())
        s0, s1 = math.sin(math.radians(b.lat_min)), math.sin(math.radians(b.lat_max))
        lat[m] = np.degrees(np.arcsin(rng.uniform(s0, s1, k)))  # uniform by area
        lon[m] = rng.uniform(b.lon_min, b.lon_max, k)
    return lat, lon


def _col(v: Sequence[float] | np.ndarray) -> torch.Tensor:
    """Colour(s) as a broadcastable [B or 1, 3, 1, 1] tensor."""
    t = torch.as_tensor(np.asarray(v, dtype=np.float32))
    return t.reshape(-1, 3, 1, 1)


def _img(v: np.ndarray) -> torch.Tensor:
    """Per-image scalar as a [B, 1, 1, 1] tensor."""
    return torch.as_tensor(np.asarray(v, dtype=np.float32)).reshape(-1, 1, 1, 1)


def _lerp(a: torch.Tensor, b: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    return a + (b - a) * alpha


class _Canvas:
    """Shared pixel grids and noise sources for one block of images."""

    def __init__(self, b: int, s: int, gen: torch.Generator) -> None:
        self.b, self.s, self.gen = b, s, gen
        c = (torch.arange(s, dtype=torch.float32) + 0.5) / s
        self.y, self.x = torch.meshgrid(c, c, indexing="ij")  # [S, S], image units in [0, 1]

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen)

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen)

    def lowfreq(self, grid: int, n: int | None = None) -> torch.Tensor:
        """Smooth noise [n, 1, S, S] (n defaults to B) with about unit std and
        ``grid`` cells per side."""
        z = self.randn(self.b if n is None else n, 1, grid + 1, grid + 1)
        up = F.interpolate(z, size=(self.s, self.s), mode="bicubic", align_corners=True)
        return up / up.flatten(1).std(1).clamp_min(1e-6).reshape(-1, 1, 1, 1)

    def blobs(
        self,
        cx: np.ndarray,
        cy: np.ndarray,
        sx: np.ndarray,
        sy: np.ndarray,
        theta: np.ndarray,
    ) -> torch.Tensor:
        """Anisotropic Gaussians; arrays of shape [B, K] (image units, rad).
        Returns the per-pixel maximum over K, [B, 1, S, S] in [0, 1]."""
        t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float32))[..., None, None]  # noqa: E731
        dx = self.x - t(cx)
        dy = self.y - t(cy)
        ct, st = torch.cos(t(theta)), torch.sin(t(theta))
        u = (dx * ct + dy * st) / t(sx)
        v = (-dx * st + dy * ct) / t(sy)
        return torch.exp(-0.5 * (u * u + v * v)).amax(1, keepdim=True)

    def hash(self, ix: torch.Tensor, iy: torch.Tensor, salt: torch.Tensor) -> torch.Tensor:
        """Pseudo-random value in [0, 1) per integer cell (the classic sine hash)."""
        h = torch.sin(ix * 12.9898 + iy * 78.233 + salt * 37.719) * 43758.5453
        return h - torch.floor(h)


# ------------------------------------------------------------------- palettes

_DESERT = np.array([0.80, 0.68, 0.48])
_SCRUB = np.array([0.60, 0.55, 0.38])
_GRASS = np.array([0.40, 0.54, 0.26])
_FOREST = np.array([0.13, 0.30, 0.14])
_TUNDRA = np.array([0.74, 0.76, 0.76])
_ROOFS = np.array(
    [
        [0.58, 0.58, 0.60],  # grey shingle / concrete
        [0.66, 0.34, 0.24],  # red tile
        [0.46, 0.38, 0.30],  # brown shingle
        [0.82, 0.82, 0.78],  # white
    ]
)


def _categorical(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    """One category index per row of ``p`` ([n, k], rows summing to 1)."""
    return (rng.random(len(p))[:, None] > np.cumsum(p, 1)).sum(1)


def _ground_colour(f: dict[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
    arid, veg, cold = f["arid"][:, None], f["veg"][:, None], f["cold"][:, None]
    green = _GRASS + (_FOREST - _GRASS) * veg
    dry = _SCRUB + (_DESERT - _SCRUB) * arid
    base = green + (dry - green) * np.clip(1.6 * arid - 0.2, 0, 1)
    base = base + (_TUNDRA - base) * 0.75 * cold
    return np.clip(base + rng.normal(0, 0.035, base.shape), 0.02, 0.98)


def _roof_palette(lat: np.ndarray, lon: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Regional roof-colour mix: red tiles around the Mediterranean and the
    Caribbean, grey / brown shingle in North America, white in the tropics."""
    med = ((lon > -10) & (lon < 40) & (lat > 30)).astype(float)
    trop = (np.abs(lat) < 23.5).astype(float)
    aus = (lon > 110).astype(float)
    p = np.stack(
        [
            0.45 + 0.0 * lat,
            0.08 + 0.6 * med + 0.25 * trop + 0.35 * aus,
            0.4 * (1 - med) * (1 - trop),
            0.07 + 0.45 * trop,
        ],
        axis=1,
    )
    p /= p.sum(1, keepdims=True)
    k = _categorical(rng, p)
    return np.clip(_ROOFS[np.minimum(k, 3)] + rng.normal(0, 0.04, (len(lat), 3)), 0, 1)


# ------------------------------------------------------------------- rendering


def _background(cv: _Canvas, f: dict[str, np.ndarray], lat: np.ndarray, lon: np.ndarray,
                rng: np.random.Generator, urban_scene: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Terrain, texture, water and streets. Returns the image [B, 3, S, S] and
    the street-grid masks reused by the hurricane signals (roof cells)."""
    b = cv.b
    ground = _col(_ground_colour(f, rng))
    l1, l2, l3 = cv.lowfreq(3), cv.lowfreq(6), cv.lowfreq(4)
    rough = _img(0.10 + 0.10 * f["veg"] + 0.05 * f["arid"])
    img = ground * (1.0 + rough * (0.9 * l1 + 0.45 * l2))
    # patches of a second land cover (fields in forest, scrub in desert)
    alt = _col(np.clip(_ground_colour({k: 1 - v if k in ("arid", "veg") else v for k, v in f.items()}, rng), 0, 1))
    img = _lerp(img, alt, 0.35 * torch.sigmoid(4 * (l3 - 0.8)))
    # forest canopy: dark speckle; desert: dunes along the wind
    canopy = F.avg_pool2d(cv.randn(b, 1, cv.s, cv.s), 3, 1, 1) * 2.0
    img = img * (1.0 + _img(0.18 * f["veg"]) * canopy.clamp(-1.5, 1.5) * 0.6)
    theta = _img(f["wind"] + rng.normal(0, 0.3, b))
    freq = _img(rng.uniform(3.0, 7.0, b))
    dunes = torch.sin(2 * math.pi * freq * (cv.x * torch.cos(theta) + cv.y * torch.sin(theta)) + _img(rng.uniform(0, 6.3, b)))
    img = img * (1.0 + _img(0.08 * f["arid"] ** 2) * dunes)

    # streets and roofs on a rotated grid
    period = rng.uniform(0.13, 0.22, b) if urban_scene else rng.uniform(0.10, 0.16, b)
    rot = _img(rng.uniform(0, math.pi / 2, b))
    xr = (cv.x * torch.cos(rot) + cv.y * torch.sin(rot)) / _img(period) + _img(rng.uniform(0, 1, b))
    yr = (-cv.x * torch.sin(rot) + cv.y * torch.cos(rot)) / _img(period) + _img(rng.uniform(0, 1, b))
    fx, fy = xr - torch.floor(xr), yr - torch.floor(yr)
    ix, iy = torch.floor(xr), torch.floor(yr)
    salt = _img(rng.uniform(0, 100, b))
    cell = cv.hash(ix, iy, salt)
    margin = _img(rng.uniform(0.14, 0.24, b))
    street = ((fx < 0.1) | (fy < 0.1)).float()
    roof_shape = ((fx > margin) & (fx < 1 - margin * 0.6) & (fy > margin) & (fy < 1 - margin * 0.6)).float()
    if urban_scene:
        density = _img(np.clip(0.55 + 0.45 * f["urban"] + rng.normal(0, 0.1, b), 0.35, 0.95))
        area = torch.sigmoid(5 * (l3 + 1.2))  # almost everywhere
    else:
        density = _img(np.clip(0.4 + 0.5 * f["urban"], 0, 0.9))
        thr = _img(2.2 - 3.0 * f["urban"] + rng.normal(0, 0.4, b))
        area = torch.sigmoid(4 * (l3 - thr))
    occupied = (cell < density).float()
    roofs = roof_shape * occupied * area
    streets = street * area
    roof_col = _col(_roof_palette(lat, lon, rng)) * (0.85 + 0.3 * cv.hash(ix, iy, salt + 1.0))
    asphalt = _col([0.36, 0.36, 0.37])
    img = _lerp(img, asphalt, 0.85 * streets)
    img = _lerp(img, roof_col, roofs)

    # water: a coast line (or lake edge) crossing the image
    has_water = rng.random(b) < f["water"] * (0.9 if urban_scene else 1.0)
    frac = rng.uniform(0.1, 0.45, b)
    phi = _img(rng.uniform(0, 2 * math.pi, b))
    d = (cv.x - 0.5) * torch.cos(phi) + (cv.y - 0.5) * torch.sin(phi) + 0.08 * l2 - _img(frac - 0.5)
    water = torch.sigmoid(-d * cv.s / 1.2) * _img(has_water.astype(float))
    tropical = np.clip((28.0 - np.abs(lat)) / 8.0, 0, 1)[:, None]
    wcol = np.array([0.08, 0.16, 0.30]) + (np.array([0.12, 0.40, 0.45]) - np.array([0.08, 0.16, 0.30])) * tropical
    wcol = wcol + rng.normal(0, 0.02, (b, 3))
    img = _lerp(img, _col(wcol) * (1 + 0.05 * l1), water)
    return img, {"roof_shape": roof_shape * area, "occupied": occupied, "cell_ix": ix, "cell_iy": iy, "salt": salt}


def _finish(cv: _Canvas, img: torch.Tensor, f: dict[str, np.ndarray], lat: np.ndarray,
            rng: np.random.Generator, pixel_noise: float) -> torch.Tensor:
    """Illumination (sun elevation falls with latitude), haze, sensor noise."""
    b = cv.b
    gain = np.clip(1.08 - 0.0045 * np.maximum(np.abs(lat) - 25, 0) + rng.normal(0, 0.05, b), 0.6, 1.3)
    haze = rng.uniform(0, 0.12, b) * (0.5 + 0.5 * f["water"])
    img = img * _img(gain)
    img = _lerp(img, _col([0.72, 0.74, 0.78]), _img(haze))
    img = img + pixel_noise * cv.randn(b, 3, cv.s, cv.s)
    return img.clamp_(0.0, 1.0)


def _overlay(img: torch.Tensor, on: np.ndarray, fn) -> torch.Tensor:
    """Paint a layer on the images where ``on`` is true. ``fn(idx)`` gets the
    indices of those images and returns ``(colour, alpha)`` for them only
    (colour [m, 3, 1|S, 1|S], alpha [m, 1, S, S] in [0, 1]), so that absent
    layers cost nothing."""
    idx = np.flatnonzero(on)
    if idx.size == 0:
        return img
    colour, alpha = fn(idx)
    t = torch.from_numpy(idx)
    img[t] = _lerp(img[t], colour, alpha.clamp(0.0, 1.0))
    return img


def _pick_components(rng: np.random.Generator, probs: list[np.ndarray], pos: np.ndarray) -> list[np.ndarray]:
    """One component per event image, drawn with weights ``probs`` (per image);
    negatives get none. Showing one form at a time (not a mix) means a model must
    have seen each form, in each region, to recognise it: the many forms are what
    a node's few hundred images cover thinly and a pooled dataset covers well."""
    b = len(pos)
    w = np.stack([np.broadcast_to(np.asarray(p, dtype=np.float64), (b,)) for p in probs], 1)
    pick = _categorical(rng, w / w.sum(1, keepdims=True))
    return [(pick == i) & pos for i in range(len(probs))]


def _form_index(on: list[np.ndarray]) -> np.ndarray:
    """0 for an image without the event, ``i + 1`` for one showing form ``i``."""
    return sum((i + 1) * m.astype(np.int64) for i, m in enumerate(on))


def _wildfire_signal(cv: _Canvas, img: torch.Tensor, pos: np.ndarray, f: dict[str, np.ndarray], lon: np.ndarray,
                     rng: np.random.Generator, strength: float) -> tuple[torch.Tensor, np.ndarray]:
    """Smoke plumes (likelier over vegetation), burn scars (likelier where
    arid) and hot spots, around one fire source; plus look-alike clouds, dark
    lakes and red soil in both classes, and straight-edged fuel-reduction burns
    that are common only in south-east Australia. Returns the images and each
    one's form (0 none, 1 smoke, 2 burn scar, 3 hot spots)."""
    b = cv.b
    smoke_on, scar_on, hot_on = _pick_components(
        rng, [0.35 + 0.55 * f["veg"], 0.25 + 0.6 * f["arid"], 0.45 + 0.25 * (1 - f["cold"])], pos)
    sx, sy = rng.uniform(0.2, 0.8, b), rng.uniform(0.2, 0.8, b)
    wind = f["wind"] + rng.normal(0, 0.35, b)
    length = rng.uniform(0.25, 0.5, b)
    width = rng.uniform(0.05, 0.10, b)
    phase = rng.uniform(0, 2 * math.pi, b)
    smoke_a = strength * rng.uniform(0.7, 0.95, b)
    scar_sx, scar_sy = rng.uniform(0.12, 0.22, b), rng.uniform(0.08, 0.15, b)
    scar_th = rng.uniform(0, math.pi, b)
    scar_a = strength * rng.uniform(0.7, 0.95, b)
    k_hot = 4
    n_hot = rng.integers(1, k_hot + 1, b)
    hx = np.clip(sx[:, None] + rng.normal(0, 0.06, (b, k_hot)), 0.03, 0.97)
    hy = np.clip(sy[:, None] + rng.normal(0, 0.06, (b, k_hot)), 0.03, 0.97)
    hs = rng.uniform(0.025, 0.045, (b, k_hot)) * np.where(np.arange(k_hot)[None, :] < n_hot[:, None], 1.0, 1e-3)
    hot_a = strength * rng.uniform(0.75, 1.0, b)

    def smoke(i: np.ndarray):
        # a cone widening down-wind from a dense puff at the fire, with streaks along the wind
        t = lambda a: torch.as_tensor(a[i], dtype=torch.float32).reshape(-1, 1, 1, 1)  # noqa: E731
        dx, dy = cv.x - t(sx), cv.y - t(sy)
        ct, st = torch.cos(t(wind)), torch.sin(t(wind))
        u, v = dx * ct + dy * st, -dx * st + dy * ct
        w = t(width) * 0.5 + 0.3 * u.clamp(min=0)
        cone = torch.sigmoid(u * cv.s) * torch.exp(-u.clamp(min=0) / t(length)) * torch.exp(-0.5 * (v / w) ** 2)
        streak = 0.7 + 0.3 * torch.sin(3.0 * v / w + t(phase))
        head = torch.exp(-0.5 * (dx * dx + dy * dy) / 0.045**2)
        return _col([0.80, 0.82, 0.86]), _img(smoke_a[i]) * (1.6 * cone * streak + 1.2 * head).clamp(0, 1)

    def scar(i: np.ndarray):
        core = cv.blobs(sx[i, None], sy[i, None], scar_sx[i, None], scar_sy[i, None], scar_th[i, None])
        mask = torch.sigmoid(10 * (core * (1 + 0.5 * cv.lowfreq(7, len(i))) - 0.45))
        return _col([0.06, 0.05, 0.04]), _img(scar_a[i]) * mask

    def hot(i: np.ndarray):
        return _col([1.0, 0.62, 0.08]), _img(hot_a[i]) * cv.blobs(hx[i], hy[i], hs[i], hs[i], np.zeros_like(hs[i]))

    img = _overlay(img, smoke_on, smoke)
    img = _overlay(img, scar_on, scar)
    img = _overlay(img, hot_on, hot)

    # --- look-alike distractors (both classes)
    k = 3
    cl = [rng.uniform(0, 1, (b, k)), rng.uniform(0, 1, (b, k)), rng.uniform(0.1, 0.22, (b, k)),
          rng.uniform(0.09, 0.2, (b, k)), rng.uniform(0, math.pi, (b, k))]
    cl_a = rng.uniform(0.25, 0.55, b)
    dk = [rng.uniform(0.15, 0.85, b), rng.uniform(0.15, 0.85, b), rng.uniform(0.07, 0.16, b),
          rng.uniform(0.05, 0.12, b), rng.uniform(0, math.pi, b)]
    dk_a = rng.uniform(0.4, 0.75, b)
    rs = rng.uniform(0.05, 0.09, (b, k))
    rd = [rng.uniform(0.05, 0.95, (b, k)), rng.uniform(0.05, 0.95, (b, k)), rs, rs * rng.uniform(0.6, 1, (b, k)),
          rng.uniform(0, math.pi, (b, k))]
    rd_a = rng.uniform(0.35, 0.6, b)
    cloud_on = rng.random(b) < 0.1 + 0.08 * f["cold"] + 0.05 * f["water"]
    dark_on = rng.random(b) < 0.1
    red_on = rng.random(b) < 0.08 + 0.15 * f["arid"]

    def cloud(i: np.ndarray):
        m = cv.blobs(*(a[i] for a in cl)) * (1 + 0.3 * cv.lowfreq(8, len(i))).clamp(0.3, 1.5)
        return _col([0.93, 0.94, 0.95]), (_img(cl_a[i]) * m).clamp(0, 0.9)

    def dark(i: np.ndarray):
        core = cv.blobs(*(a[i, None] for a in dk))
        return _col([0.05, 0.12, 0.28]), _img(dk_a[i]) * torch.sigmoid(10 * (core * (1 + 0.5 * cv.lowfreq(7, len(i))) - 0.45))

    def red(i: np.ndarray):
        return _col([0.60, 0.38, 0.28]), _img(rd_a[i]) * cv.blobs(*(a[i] for a in rd))

    # Regional look-alike: straight-edged fuel-reduction burns (old, black, no smoke or
    # hot spots) are common in south-east Australia and rare elsewhere, so a model
    # that learned "black patch = fire" in North America fails there.
    aus = (lon > 110.0).astype(float)
    fr_on = rng.random(b) < 0.03 + 0.6 * aus
    fr = [rng.uniform(0.2, 0.8, b), rng.uniform(0.2, 0.8, b), rng.uniform(0.12, 0.25, b), rng.uniform(0.08, 0.16, b),
          rng.uniform(0, math.pi, b), rng.uniform(0.8, 0.95, b)]

    def fuel_burn(i: np.ndarray):
        t = lambda a: torch.as_tensor(a[i], dtype=torch.float32).reshape(-1, 1, 1, 1)  # noqa: E731
        dx, dy = cv.x - t(fr[0]), cv.y - t(fr[1])
        ct, st = torch.cos(t(fr[4])), torch.sin(t(fr[4]))
        u, v = dx * ct + dy * st, -dx * st + dy * ct
        rect = torch.sigmoid((t(fr[2]) - u.abs()) * 3 * cv.s) * torch.sigmoid((t(fr[3]) - v.abs()) * 3 * cv.s)
        return _col([0.09, 0.07, 0.05]), t(fr[5]) * rect

    img = _overlay(img, cloud_on, cloud)
    img = _overlay(img, dark_on, dark)
    img = _overlay(img, red_on, red)
    img = _overlay(img, fr_on, fuel_burn)
    return img, _form_index([smoke_on, scar_on, hot_on])


def _hurricane_signal(cv: _Canvas, img: torch.Tensor, pos: np.ndarray, f: dict[str, np.ndarray], masks: dict,
                      lat: np.ndarray, rng: np.random.Generator, strength: float) -> tuple[torch.Tensor, np.ndarray]:
    """Flood water (likelier on the low Gulf coast), roof damage, blue tarps
    and debris over the street grid; plus look-alike ponds, pools and dirt
    lots in both classes, and painted blue roofs common only in the tropics.
    Returns the images and each one's form (0 none, 1 flood, 2 roof damage,
    3 blue tarps, 4 debris)."""
    b = cv.b
    ix, iy, salt = masks["cell_ix"], masks["cell_iy"], masks["salt"]
    roofs = masks["roof_shape"] * masks["occupied"]
    tropics = (np.abs(lat) < 23.5).astype(float)
    flood_on, roof_on, tarp_on, debris_on = _pick_components(
        rng,
        [0.25 + 0.6 * f["lowland"], 0.3 + 0.2 * f["urban"], 0.25 + 0.2 * (f["lowland"] < 0.3),
         0.25 + 0.4 * tropics + 0.1 * f["veg"]],
        pos,
    )
    cover = rng.uniform(0.35, 0.75, b)
    flood_thr = np.sqrt(2) * _erfinv(1 - 2 * cover)  # quantile of the unit-std noise
    mud = np.clip(np.array([0.40, 0.37, 0.22]) + rng.normal(0, 0.03, (b, 3)), 0, 1)
    flood_a = strength * rng.uniform(0.8, 0.95, b)
    dmg_frac = rng.uniform(0.35, 0.75, b)
    tarp_frac = rng.uniform(0.15, 0.45, b)
    tarp_a = strength * rng.uniform(0.6, 0.95, b)
    debris_dens = rng.uniform(0.04, 0.12, b)

    def flood(i: np.ndarray):
        t = torch.from_numpy(i)
        m = torch.sigmoid(6 * (cv.lowfreq(4, len(i)) - _img(flood_thr[i]))) * (1 - 0.6 * roofs[t])
        return _col(mud[i]), _img(flood_a[i]) * m

    def roof(i: np.ndarray):
        t = torch.from_numpy(i)
        hit = (cv.hash(ix[t], iy[t], salt[t] + 7.0) < _img(dmg_frac[i])).float() * roofs[t]
        rubble = 0.2 + 0.65 * cv.rand(len(i), 1, cv.s, cv.s)
        return torch.cat([rubble * 1.05, rubble * 0.95, rubble * 0.8], 1), 0.9 * strength * hit

    def tarp(i: np.ndarray):
        t = torch.from_numpy(i)
        hit = (cv.hash(ix[t], iy[t], salt[t] + 13.0) < _img(tarp_frac[i])).float() * roofs[t]
        return _col([0.16, 0.34, 0.78]), _img(tarp_a[i]) * hit

    def debris(i: np.ndarray):
        speck = (cv.rand(len(i), 1, cv.s, cv.s) < _img(debris_dens[i])).float()
        tone = torch.where(cv.rand(len(i), 1, cv.s, cv.s) < 0.5, 0.85, 0.2)
        return tone * _col([1.0, 0.95, 0.85]), 0.85 * strength * speck

    img = _overlay(img, flood_on, flood)
    img = _overlay(img, roof_on, roof)
    img = _overlay(img, tarp_on, tarp)
    img = _overlay(img, debris_on, debris)

    # --- look-alike distractors (both classes)
    pd = [rng.uniform(0.15, 0.85, b), rng.uniform(0.15, 0.85, b), rng.uniform(0.08, 0.2, b),
          rng.uniform(0.06, 0.14, b), rng.uniform(0, math.pi, b)]
    pd_a = rng.uniform(0.6, 0.95, b)
    kp = 3
    ps = rng.uniform(0.02, 0.035, (b, kp))
    pl = [rng.uniform(0.05, 0.95, (b, kp)), rng.uniform(0.05, 0.95, (b, kp)), ps, ps * 0.7, rng.uniform(0, math.pi, (b, kp))]
    dirt_a = rng.uniform(0.5, 0.9, b)
    pond_on = rng.random(b) < 0.3
    pool_on = rng.random(b) < 0.2 + 0.3 * (np.abs(lat) < 31)
    dirt_on = rng.random(b) < 0.25 + 0.2 * f["arid"]

    def pond(i: np.ndarray):
        core = cv.blobs(*(a[i, None] for a in pd))
        return _col([0.12, 0.20, 0.24]), _img(pd_a[i]) * torch.sigmoid(12 * (core * (1 + 0.4 * cv.lowfreq(6, len(i))) - 0.5))

    def pool(i: np.ndarray):
        t = torch.from_numpy(i)
        return _col([0.30, 0.70, 0.86]), 0.9 * (cv.blobs(*(a[i] for a in pl)) > 0.4).float() * (1 - roofs[t])

    def dirt(i: np.ndarray):
        t = torch.from_numpy(i)
        m = torch.sigmoid(6 * (cv.lowfreq(4, len(i)) - 1.0)) * (1 - roofs[t])
        return _col([0.62, 0.42, 0.32]) * (0.8 + 0.4 * cv.rand(len(i), 1, cv.s, cv.s)), _img(dirt_a[i]) * m

    # Regional look-alike: painted blue / teal roofs, common in the Caribbean and rare
    # on the US coasts, resemble blue tarps, so a model that learned "blue roof =
    # damage" on the Gulf coast fails there.
    painted_on = rng.random(b) < 0.03 + 0.6 * tropics
    painted_frac = rng.uniform(0.2, 0.5, b)

    def painted(i: np.ndarray):
        t = torch.from_numpy(i)
        hit = (cv.hash(ix[t], iy[t], salt[t] + 29.0) < _img(painted_frac[i])).float() * roofs[t]
        return _col([0.22, 0.48, 0.74]), hit

    img = _overlay(img, pond_on, pond)
    img = _overlay(img, pool_on, pool)
    img = _overlay(img, dirt_on, dirt)
    img = _overlay(img, painted_on, painted)
    return img, _form_index([flood_on, roof_on, tarp_on, debris_on])


def _erfinv(y: np.ndarray) -> np.ndarray:
    from scipy.special import erfinv

    return erfinv(y)


# -------------------------------------------------------------------- public


#: Difficulty knobs (tuned with ``benchmarks/calibrate_synthetic.py``).
_STRENGTH = {"wildfire": 1.5, "hurricane": 1.7}
_PIXEL_NOISE = 0.03


def _positive_rate(task: str, f: dict[str, np.ndarray]) -> np.ndarray:
    if task == "wildfire":
        return np.clip(0.3 + 0.45 * f["arid"] + 0.1 * f["veg"], 0.15, 0.85)
    return np.clip(0.35 + 0.35 * f["lowland"] + 0.15 * f["urban"], 0.15, 0.85)


def _render_block(task: str, seed: int, block: int, count: int, image_size: int, label_noise: float,
                  boxes: Sequence[GeoBox], positive_fraction: float | None,
                  classes: str = "event") -> tuple[torch.Tensor, np.ndarray, np.ndarray, np.ndarray]:
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, _TASK_ID[task], block])
    s_loc, s_lab, s_par, s_pix, s_noise = ss.spawn(5)
    rng_loc, rng_lab, rng_par = (np.random.default_rng(s) for s in (s_loc, s_lab, s_par))
    gen = torch.Generator().manual_seed(int(s_pix.generate_state(1, dtype=np.uint64)[0] & 0x7FFF_FFFF_FFFF_FFFF))
    # Always draw a full block so that the first images do not depend on ``count``.
    lat, lon = _sample_locations(rng_loc, BLOCK, boxes)
    f = geo_fields(lat, lon)
    p = _positive_rate(task, f) if positive_fraction is None else np.full(BLOCK, positive_fraction)
    clean = (rng_lab.random(BLOCK) < p).astype(np.int64)
    cv = _Canvas(BLOCK, image_size, gen)
    pos = clean.astype(bool)
    if task == "wildfire":
        img, _ = _background(cv, f, lat, lon, rng_par, urban_scene=False)
        img, form = _wildfire_signal(cv, img, pos, f, lon, rng_par, _STRENGTH[task])
    else:
        img, masks = _background(cv, f, lat, lon, rng_par, urban_scene=True)
        img, form = _hurricane_signal(cv, img, pos, f, masks, lat, rng_par, _STRENGTH[task])
    img = _finish(cv, img, f, lat, rng_par, _PIXEL_NOISE)
    true = clean if classes == "event" else form  # the noise-free label in the chosen label set
    c = len(_LABEL_SETS[classes][0][task])
    # a flipped label becomes one of the other classes, uniformly (with two classes: the other one)
    rng_noise = np.random.default_rng(s_noise)
    flips = rng_noise.random(BLOCK) < label_noise
    labels = np.where(flips, (true + rng_noise.integers(1, c, BLOCK)) % c, true)
    return img[:count].contiguous(), labels[:count], lat[:count], lon[:count]


def make_synthetic(
    task: str,
    n: int,
    seed: int,
    image_size: int = 32,
    label_noise: float = DEFAULT_LABEL_NOISE,
    region: tuple[float, float, float, float] | None = None,
    positive_fraction: float | None = None,
    progress: bool = False,
    classes: str = "event",
) -> GeoDataset:
    """Render ``n`` synthetic geo-tagged images for ``task`` ("wildfire" or
    "hurricane"); see the module docstring for what they contain.

    ``image_size`` is the side S in pixels (>= 8; every feature is defined in
    image units, so the scene is the same at any S). ``label_noise`` is the
    probability that a label is flipped to another class (uniformly among
    the others; with two classes, the other one). ``region`` =
    ``(lat_min, lat_max, lon_min, lon_max)`` (deg) replaces the task's
    default boxes (:data:`TASK_REGIONS`). ``positive_fraction`` replaces the
    location-dependent event rate with a constant (the share of images that
    show the event, whatever its form).

    ``classes`` chooses the labels of the same images: ``"event"`` (default,
    :data:`TASK_CLASSES`) two classes, the event or not, as the paper's
    datasets; ``"type"`` (:data:`TASK_TYPE_CLASSES`) the form the event takes,
    with "no event" as class 0, so without label noise an event-type label is
    0 exactly where the event label is 0. With noise the same images' labels
    are flipped in both label sets, but a flipped form can land on another
    form where the flipped event label is 0. The images and locations do not
    depend on ``classes``.

    >>> ev = make_synthetic("hurricane", n=6, seed=3)
    >>> ty = make_synthetic("hurricane", n=6, seed=3, classes="type")
    >>> ty.class_names
    ['no_damage', 'flood', 'roof_damage', 'blue_tarp', 'debris']
    >>> bool(torch.equal(ev.images, ty.images) and torch.equal(ev.labels, (ty.labels > 0).long()))
    True
    """
    if task not in TASK_CLASSES:
        raise DataError(f"synthetic task must be one of {sorted(TASK_CLASSES)}, got {task!r}")
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise DataError(f"synthetic dataset size n must be a non-negative integer, got {n!r}")
    check_pool_size(n, image_size, f"synthetic {task}")
    if not 0.0 <= label_noise < 0.5:
        raise DataError(f"label_noise must be in [0, 0.5), got {label_noise!r}")
    if positive_fraction is not None and not 0.0 <= positive_fraction <= 1.0:
        raise DataError(f"positive_fraction must be in [0, 1], got {positive_fraction!r}")
    if classes not in _LABEL_SETS:
        raise DataError(f"synthetic classes must be 'event' or 'type', got {classes!r}")
    boxes = TASK_REGIONS[task] if region is None else (GeoBox("region", *map(float, region)),)
    # rendered block by block into one preallocated tensor, so that the pool never
    # exists twice (a list of blocks, then their concatenation)
    images = torch.empty(int(n), 3, int(image_size), int(image_size))
    labels, lats, lons = [], [], []
    blocks: Iterable[int] = range(math.ceil(n / BLOCK))
    if progress:
        from tqdm.auto import tqdm

        blocks = tqdm(blocks, desc=f"synthetic-{task}", leave=False, disable=None)
    with torch_threads(1):  # many small ops: one thread is as fast, and robust on a busy machine
        for blk in blocks:
            count = min(BLOCK, n - blk * BLOCK)
            i, y, la, lo = _render_block(task, seed, blk, count, int(image_size), float(label_noise), boxes,
                                         positive_fraction, classes)
            images[blk * BLOCK: blk * BLOCK + count] = i
            labels.append(y)
            lats.append(la)
            lons.append(lo)
    if n == 0:
        y_all, lat_all, lon_all = np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    else:
        y_all, lat_all, lon_all = np.concatenate(labels), np.concatenate(lats), np.concatenate(lons)
    return GeoDataset(
        images=images,
        labels=torch.from_numpy(y_all.astype(np.int64)),
        lat=lat_all,
        lon=lon_all,
        class_names=list(_LABEL_SETS[classes][0][task]),
        name=f"synthetic-{task}{_LABEL_SETS[classes][1]}",
    )


def make_position_task(n: int, seed: int, image_size: int = 32, num_classes: int = 4) -> GeoDataset:
    """A task only a position-aware model can learn: the class is the quadrant
    (or, for ``num_classes = 2``, the half) of the image that holds one small
    bright square; the square's colour, size and exact place, and the textured
    background, are random and carry no class information.

    Global-average-pooled CNNs whose receptive field is far smaller than the
    image (``cnn-small``) are nearly blind to *where* a pattern is, so they
    cannot fit it; this is the check the model zoo's default must pass.

    >>> ds = make_position_task(8, seed=0)
    >>> ds.images.shape, ds.class_names
    (torch.Size([8, 3, 32, 32]), ['top-left', 'top-right', 'bottom-left', 'bottom-right'])
    """
    if num_classes not in (2, 4):
        raise DataError(f"position task num_classes must be 2 or 4, got {num_classes!r}")
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise DataError(f"position task size n must be a non-negative integer, got {n!r}")
    if not isinstance(image_size, (int, np.integer)) or image_size < 8:
        raise DataError(f"position task image_size must be an integer >= 8 pixels, got {image_size!r}")
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 0x905])
    s = int(image_size)
    labels = rng.integers(0, num_classes, n)
    row = labels // 2 if num_classes == 4 else rng.integers(0, 2, n)
    col = labels % 2
    side = rng.integers(max(2, s // 8), max(3, s // 4) + 1, n)
    half = s // 2
    y0 = row * half + (rng.random(n) * (half - side)).astype(np.int64)
    x0 = col * half + (rng.random(n) * (half - side)).astype(np.int64)
    images = 0.25 + 0.5 * rng.random((n, 3, 1, 1)) + 0.15 * rng.standard_normal((n, 3, s, s))
    colour = rng.random((n, 3))
    colour[np.arange(n), rng.integers(0, 3, n)] = 1.0  # always one saturated channel: visible on any background
    for i in range(n):
        images[i, :, y0[i]:y0[i] + side[i], x0[i]:x0[i] + side[i]] = colour[i][:, None, None]
    names = ["top-left", "top-right", "bottom-left", "bottom-right"] if num_classes == 4 else ["left", "right"]
    return GeoDataset(
        images=torch.from_numpy(np.clip(images, 0, 1).astype(np.float32)),
        labels=torch.from_numpy(labels.astype(np.int64)),
        lat=np.full(n, np.nan),
        lon=np.full(n, np.nan),
        class_names=names,
        name=f"position-{num_classes}",
    )
