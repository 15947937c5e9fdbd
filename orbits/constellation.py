"""Walker constellations built directly with ``Satrec.sgp4init`` (no TLE download).

Walker notation ``i: T/P/F``: ``T`` satellites in ``P`` equally spaced planes
(``S = T/P`` per plane), inclination ``i``, relative phasing ``F`` in
``0..P-1``. Satellite ``j`` of plane ``p`` has

* right ascension of the ascending node ``RAAN = p * spread / P`` with
  ``spread = 360 deg`` (Walker delta) or ``180 deg`` (Walker star / polar);
* mean anomaly ``M = 360 deg * (j / S + F * p / T)``.

Orbits are circular (eccentricity ``1e-7``, which SGP4 propagates like 0, to 1e-9 km: it
clamps its working eccentricity at ``1e-6``), with the
SGP4 (Kozai) mean motion set to the Keplerian value ``sqrt(mu / a^3)`` for
``a = R_earth + altitude`` (WGS-72 ``mu`` and ``R_earth``, as SGP4 uses).
J2 makes the measured nodal period shorter than ``2 pi sqrt(a^3/mu)`` by
about ``0.75 J2 (R/a)^2 (5 cos^2 i - 1)``: 0.06 % at 550 km and 53 deg,
0.19 % at 30 deg, and 0.06 % longer at 97.6 deg (sun-synchronous), as
SGP4 turns the Kozai mean motion into Brouwer's before adding the J2 rates.
For the same reason the mean orbital radius is ``a`` only to a few km (for
550 km: 546.8 km above ``R`` at 0 deg, 549.9 at 53 deg, 551.5 at 97.6 deg).

Example:
    >>> from orbits.timeutil import parse_utc
    >>> c = walker_delta(24, 3, 1, 550.0, 53.0, parse_utc("2025-01-01T00:00:00Z"))
    >>> len(c), c.names[0], c.planes[-1], c.slots[-1]
    (24, 'WD-P00-S00', 2, 7)
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from sgp4.api import Satrec

from swarmbase.tomlcheck import shown

from .constants import EARTH_RADIUS_KM, MU_KM3_S2, SGP4_GRAVITY, SGP4_MAX_SATNUM
from .errors import OrbitError, check_elements
from .timeutil import parse_utc, sgp4_epoch_days

log = logging.getLogger(__name__)

#: Eccentricity of the "circular" orbits; SGP4 raises anything below 1e-6 to 1e-6, so 0 gives the same positions.
CIRCULAR_ECCENTRICITY = 1e-7


@dataclass
class Constellation:
    """A set of SGP4 satellites with names and (for Walker shells) plane/slot.

    ``satrecs[i]`` is the ``sgp4.api.Satrec`` of satellite ``names[i]``;
    ``planes``/``slots`` are -1 when unknown (satellites read from TLE files).
    ``catalog_numbers[i]`` is the satellite's NORAD catalog number; it defaults
    to ``satrecs[i].satnum`` and may exceed what the installed sgp4 can hold
    (339999, the last Alpha-5 number) when read from an OMM file.
    """

    names: list[str]
    satrecs: list[Satrec]
    epoch: _dt.datetime | None = None
    planes: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    description: str = ""
    catalog_numbers: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.names) != len(self.satrecs):
            raise OrbitError(
                f"constellation: {len(self.names)} names for {len(self.satrecs)} satellites"
            )
        if not self.planes:
            self.planes = [-1] * len(self.names)
        if not self.slots:
            self.slots = [-1] * len(self.names)
        if not self.catalog_numbers:
            self.catalog_numbers = [int(s.satnum) for s in self.satrecs]
        if len(self.catalog_numbers) != len(self.satrecs):
            raise OrbitError(f"constellation: {len(self.catalog_numbers)} catalog numbers for "
                             f"{len(self.satrecs)} satellites")

    def __len__(self) -> int:
        return len(self.satrecs)


class SatelliteNames:
    """How the TLE and OMM readers name satellites: by the file's name (``SAT-<catalog number>``
    without one); a name two satellites share gets ``-<catalog number>`` on its second use, and the
    same name and number twice is an error (the names key the contact plan's nodes). The catalog
    number is written in decimal, unpadded, whichever way the file spells it (TLE ``00001`` and OMM
    ``1`` are both ``SAT-1``, Alpha-5 ``A0000`` is ``SAT-100000``), so one satellite has one name in
    either format.

    >>> book = SatelliteNames()
    >>> [book.claim("ISS", 25544, "twice", lambda n: n), book.claim("ISS", 99999, "twice", lambda n: n)]
    ['ISS', 'ISS-99999']
    >>> book.claim("", 1, "twice", lambda n: n)
    'SAT-1'
    """

    def __init__(self) -> None:
        self._names: set[str] = set()
        self._sets: set[tuple[str, int]] = set()
        self._first: dict[int, str] = {}  # catalog number -> the first name it came with

    def claim(self, name: str | None, number: int, repeated: str, clash: Callable[[str], str],
              where: str = "") -> str:
        """The unique name of satellite ``name`` (``None`` or ``""``: unnamed) / catalog ``number``;
        :class:`OrbitError` with the message ``repeated`` when this pair came before, ``clash(name)``
        when even the numbered name is taken. A catalog number other than 0 (which home-made
        element sets share) that came before under another name is a warning naming ``where``:
        two element sets of one satellite (two downloads that name it differently) are two
        nodes at one place, always in contact."""
        number = int(number)
        name = name or f"SAT-{number}"
        if (name, number) in self._sets:
            raise OrbitError(repeated)
        self._sets.add((name, number))
        first = self._first.setdefault(number, name)
        if first != name and number != 0:
            log.warning("%s: catalog number %d is also satellite %s: two element sets of one satellite "
                        "make two nodes at one place; keep one of them", where or "elements", number, shown(first))
        if name in self._names:
            name = f"{name}-{number}"
        if name in self._names:
            raise OrbitError(clash(name))
        self._names.add(name)
        return name


def mean_motion_rad_min(altitude_km: float) -> float:
    """Keplerian mean motion (rad/min) of a circular orbit at ``altitude_km``."""
    a = EARTH_RADIUS_KM + altitude_km
    return math.sqrt(MU_KM3_S2 / a**3) * 60.0


def keplerian_period_s(altitude_km: float) -> float:
    """``2 pi sqrt(a^3 / mu)`` in seconds for ``a = R_earth + altitude_km`` (WGS-72)."""
    a = EARTH_RADIUS_KM + altitude_km
    return 2.0 * math.pi * math.sqrt(a**3 / MU_KM3_S2)


def circular_satrec(satnum: int, epoch: _dt.datetime, altitude_km: float,
                    inclination_deg: float, raan_deg: float, mean_anomaly_deg: float) -> Satrec:
    """One circular-orbit ``Satrec`` from SGP4 mean elements (no drag).

    Angles in degrees, altitude in km above the WGS-72 equatorial radius.
    """
    sat = Satrec()
    sat.sgp4init(
        SGP4_GRAVITY, "i", int(satnum), sgp4_epoch_days(epoch),
        0.0, 0.0, 0.0,  # bstar, ndot, nddot
        CIRCULAR_ECCENTRICITY,
        0.0,  # argument of perigee, rad
        math.radians(inclination_deg),
        math.radians(mean_anomaly_deg % 360.0),
        mean_motion_rad_min(altitude_km),
        math.radians(raan_deg % 360.0),
    )
    check_elements(sat, f"satellite {satnum}")
    return sat


def check_walker(total: int, planes: int, phasing: int, altitude_km: float,
                 inclination_deg: float, first_satnum: int = 1) -> None:
    """Refuse Walker parameters :func:`walker` cannot build (:class:`OrbitError` naming the
    ``constellation.<field>``); nothing is built, so a scenario can check them when read."""
    for name, value in (("total", total), ("planes", planes), ("phasing", phasing)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise OrbitError(f"constellation.{name}: expected an integer, got {value!r}")
    if total < 1:
        raise OrbitError(f"constellation.total: expected a positive satellite count, got {total}")
    if first_satnum + total - 1 > SGP4_MAX_SATNUM:  # checked before any record is built
        raise OrbitError(f"constellation.total: expected at most {SGP4_MAX_SATNUM - first_satnum + 1} satellites "
                         f"(numbered from {first_satnum}; sgp4's catalog numbers end at {SGP4_MAX_SATNUM}), "
                         f"got {shown(total)}")
    if planes < 1:
        raise OrbitError(f"constellation.planes: expected a positive plane count, got {planes}")
    if total % planes:
        raise OrbitError(
            f"constellation.planes: {shown(planes)} planes do not divide {total} satellites evenly"
        )
    if not 0 <= phasing < planes:
        raise OrbitError(f"constellation.phasing: expected 0..{planes - 1}, got {shown(phasing)}")
    if not 100.0 <= float(altitude_km) <= 50000.0:
        raise OrbitError(
            f"constellation.altitude_km: expected 100..50000 km above the Earth, got {altitude_km}"
        )
    if not 0.0 <= float(inclination_deg) <= 180.0:
        raise OrbitError(
            f"constellation.inclination_deg: expected 0..180 deg, got {inclination_deg}"
        )


def walker(total: int, planes: int, phasing: int, altitude_km: float, inclination_deg: float,
           epoch: _dt.datetime | str, raan_spread_deg: float = 360.0,
           name_prefix: str = "WD", first_satnum: int = 1) -> Constellation:
    """Generic Walker shell; ``raan_spread_deg`` 360 (delta) or 180 (star)."""
    check_walker(total, planes, phasing, altitude_km, inclination_deg, first_satnum)
    epoch = parse_utc(epoch, field="constellation.epoch")
    per_plane = total // planes
    names, sats, plane_ids, slot_ids = [], [], [], []
    for p in range(planes):
        raan = raan_spread_deg * p / planes
        for j in range(per_plane):
            m = 360.0 * (j / per_plane + phasing * p / total)
            satnum = first_satnum + p * per_plane + j
            sats.append(circular_satrec(satnum, epoch, altitude_km, inclination_deg, raan, m))
            names.append(f"{name_prefix}-P{p:02d}-S{j:02d}")
            plane_ids.append(p)
            slot_ids.append(j)
    kind = "delta" if raan_spread_deg == 360.0 else "star"
    desc = (f"Walker-{kind} {inclination_deg:g} deg: {total}/{planes}/{phasing}, "
            f"{altitude_km:g} km")
    return Constellation(names, sats, epoch, plane_ids, slot_ids, desc)


def walker_delta(total: int, planes: int, phasing: int, altitude_km: float,
                 inclination_deg: float, epoch: _dt.datetime | str) -> Constellation:
    """Walker-delta shell: planes spread over 360 deg of RAAN (e.g. Starlink 1584/72/1, 53 deg)."""
    return walker(total, planes, phasing, altitude_km, inclination_deg, epoch, 360.0, "WD")


def walker_star(total: int, planes: int, phasing: int, altitude_km: float,
                inclination_deg: float, epoch: _dt.datetime | str) -> Constellation:
    """Walker-star (polar) shell: planes spread over 180 deg of RAAN (e.g. Iridium 66/6/2, 86.4 deg)."""
    return walker(total, planes, phasing, altitude_km, inclination_deg, epoch, 180.0, "WS")
