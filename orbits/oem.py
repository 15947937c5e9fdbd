"""Orbit Ephemeris Messages (CCSDS OEM, CCSDS 502.0-B-3, in KVN text or NDM/XML): read, interpolate and write.

An OEM is what flight-dynamics tools (GMAT, Orekit, STK) and Space-Track's operator ephemerides
export: a header (``CCSDS_OEM_VERS``, ``CREATION_DATE``, ``ORIGINATOR``), then one or more
segments, each a metadata block (``META_START`` .. ``META_STOP``: object, centre, frame, time
system, the segment's span and its interpolation) followed by data lines
``epoch x y z vx vy vz [ax ay az]`` in km, km/s (and km/s**2), and maybe covariance blocks
(``COVARIANCE_START`` .. ``COVARIANCE_STOP``), which are skipped: nothing here uses them.

The same message in NDM/XML (section 8 of the standard; Orekit and several operators write it) is an
``<oem id="CCSDS_OEM_VERS" version="2.0">`` of a ``<header>`` (``CREATION_DATE``, ``ORIGINATOR``) and a
``<body>`` of ``<segment>`` elements, each a ``<metadata>`` (the KVN keywords as elements) and a ``<data>`` of
``<stateVector>`` elements (``EPOCH``, ``X`` .. ``Z_DOT``, maybe ``X_DDOT`` .. ``Z_DDOT``) and maybe
``<covarianceMatrix>`` elements, skipped as KVN's blocks are. :func:`oem_format` tells the layouts apart as
:func:`orbits.omm.omm_format` tells OMM's: by the text first (``CCSDS_OEM_VERS =`` is KVN), then by a
``.xml`` name or a first ``<``. Both layouts feed one set of checks and one builder (:class:`_Builder`), so
they give the same :class:`Ephemeris`; XML is parsed by expat as it streams (no tree of the file, no
document type: :func:`swarmbase.xmlguard.refuse_doctype` first, so no entity is ever expanded).

:func:`read_oem` checks everything before it builds an array (the file's size, the number of data
lines or state vectors, each number, the order of the epochs, the span) and refuses a bad file with one
:class:`OrbitError` line naming ``file:line`` (in XML the element's line; a value of a state vector, the
line of its ``<stateVector>``). :meth:`Ephemeris.positions_teme_km` interpolates
(Hermite on positions and velocities, or Lagrange on positions, of the segment's stated degree,
in Newton's form, every time's window at once) and rotates the result into TEME, the frame of SGP4 and of
the rest of :mod:`orbits` and :mod:`contact_sim`; for the ground tracks,
:meth:`Ephemeris.positions_teme_or_itrf_km` leaves ITRF states Earth-fixed as interpolated.

:func:`write_oem` writes the states of a constellation (SGP4) or of an :class:`Ephemeris` (re-sampled)
every ``step_s`` over a span, one segment per satellite, in TEME (as computed) or rotated into EME2000,
GCRF, ICRF or ITRF (the transpose of the reader's rotation), in KVN or (a ``.xml`` path, or ``fmt="xml"``)
NDM/XML, in a file :func:`read_oem` reads back.

Frames: ``CENTER_NAME = EARTH`` only; ``REF_FRAME`` TEME, GCRF or ICRF (GCRS axes), EME2000 (the mean
equator and equinox of J2000: GCRS axes turned by the 23 mas frame bias, Skyfield's
``framelib.ICRS_to_J2000``; up to 0.76 m in LEO, down to none along the bias's axis, 0.45 to 0.76 m for
``examples/leo_oem.tle``'s satellites; up to 4.7 m at GEO) or ITRF (ITRF2000, ITRF-93, ITRF-97 and the later
ITRF20xx realisations, Earth-fixed, taken as Skyfield's ITRS, with the polar motion and UT1 of an IERS finals
file when one is given, :class:`orbits.iers.PolarMotion`, else without polar motion and on Skyfield's built-in
UT1). Time systems: UTC, TT, TAI and GPS (converted
to UTC with Skyfield's leap-second table; a segment in TT, TAI or GPS may not span a leap second).

Example:
    >>> text = '''CCSDS_OEM_VERS = 2.0
    ... CREATION_DATE = 2026-08-01T00:00:00
    ... ORIGINATOR = EXAMPLE
    ... META_START
    ... OBJECT_NAME = SAT A
    ... OBJECT_ID = 2026-001A
    ... CENTER_NAME = EARTH
    ... REF_FRAME = TEME
    ... TIME_SYSTEM = UTC
    ... START_TIME = 2026-08-01T00:00:00
    ... STOP_TIME = 2026-08-01T00:02:00
    ... INTERPOLATION = HERMITE
    ... INTERPOLATION_DEGREE = 3
    ... META_STOP
    ... 2026-08-01T00:00:00 7000.0 0.0 0.0 0.0 7.5 0.0
    ... 2026-08-01T00:01:00 6997.0 450.0 0.0 -0.1 7.5 0.0
    ... 2026-08-01T00:02:00 6988.0 899.0 0.0 -0.2 7.5 0.0
    ... '''
    >>> eph = parse_oem_text(text, "mem.oem")
    >>> eph.names, eph.segments[0].epochs_s.tolist()
    (['SAT A'], [0.0, 60.0, 120.0])
    >>> eph.positions_teme_km("2026-08-01T00:00:00Z", [30.0]).round(1).tolist()
    [[[6999.2, 225.0, 0.0]]]
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat
from xml.sax.saxutils import escape

import numpy as np

from swarmbase.fileio import atomic_writer
from swarmbase.tomlcheck import (brief, check_name_length, decimal_number, is_decimal, numbered_text_lines,
                                 read_text_file, shown)
from swarmbase.xmlguard import refuse_doctype

from .constants import EARTH_ROTATION_RAD_S
from .constellation import Constellation
from .errors import OrbitError
from .iers import PolarMotion
from .omm import _KVN_LINE, kvn_start, omm_records
from .propagation import propagate_offsets
from .timeutil import ccsds_datetime, parse_utc, skyfield_times, utc_offset_s, utc_text

#: Files larger than this are refused before they are read.
MAX_OEM_BYTES = 64 * 1024 * 1024
#: Data lines a file may hold in all (counted before any array is built): 60 s steps for 347 days;
#: the arrays they fill take at most 36 MB.
MAX_OEM_POINTS = 500_000
#: Largest position coordinate a state may have (km): ten million km, seven times the radius of the Earth's Hill
#: sphere (1.5 million km), past which nothing orbits the Earth. A state of 1e308 km (finite, so read) made the
#: interpolated positions infinite, a traceback in the window search; an interpolated position past it (states
#: that are no smooth orbit, a polynomial through points microseconds apart) is refused as well.
MAX_OEM_POSITION_KM = 1.0e7
#: Largest velocity component a state may have (km/s): an Earth-fixed (ITRF) state at :data:`MAX_OEM_POSITION_KM`
#: turns with the Earth at 729 km/s.
MAX_OEM_VELOCITY_KM_S = 1.0e3
#: Highest INTERPOLATION_DEGREE read (a Lagrange polynomial of 15 takes 16 points; higher degrees
#: oscillate between the points rather than gain accuracy).
MAX_OEM_DEGREE = 15
#: INTERPOLATION when a segment names none (OEM always carries velocities, which Hermite uses).
DEFAULT_INTERPOLATION, DEFAULT_DEGREE = "HERMITE", 5
#: CCSDS_OEM_VERS values read (KVN layouts of 502.0-B-2 and -3).
OEM_VERSIONS = ("1.0", "2.0", "3.0")
#: Times interpolated together (their divided differences: a few MB).
_CHUNK = 16_384
#: Accepted REF_FRAME values: inertial (GCRS axes; EME2000 with the frame bias), TEME, and Earth-fixed ITRF
#: realisations.
INERTIAL_FRAMES = ("EME2000", "GCRF", "ICRF")
ITRF_FRAMES = ("ITRF", "ITRF-93", "ITRF-97", "ITRF93", "ITRF97", "ITRF2000", "ITRF2005", "ITRF2008", "ITRF2014",
               "ITRF2020")
OEM_FRAMES = ("TEME",) + INERTIAL_FRAMES + ITRF_FRAMES
#: REF_FRAME values :func:`write_oem` writes: TEME (the states as computed), GCRS axes (GCRF, ICRF), the mean
#: equator and equinox of J2000 (EME2000: GCRS axes turned by the frame bias) and Earth-fixed ITRF (Skyfield's
#: ITRS, the velocity relative to the turning Earth).
EXPORT_FRAMES = ("TEME", "EME2000", "GCRF", "ICRF", "ITRF")
#: Accepted TIME_SYSTEM values.
OEM_TIME_SYSTEMS = ("UTC", "TT", "TAI", "GPS")
OEM_INTERPOLATIONS = ("HERMITE", "LAGRANGE", "LINEAR")

_HEADER_KEYS = ("CCSDS_OEM_VERS", "CREATION_DATE", "ORIGINATOR", "MESSAGE_ID", "CLASSIFICATION")
_META_KEYS = ("OBJECT_NAME", "OBJECT_ID", "CENTER_NAME", "REF_FRAME", "REF_FRAME_EPOCH", "TIME_SYSTEM",
              "START_TIME", "USEABLE_START_TIME", "USEABLE_STOP_TIME", "STOP_TIME", "INTERPOLATION",
              "INTERPOLATION_DEGREE")
_META_REQUIRED = ("OBJECT_NAME", "OBJECT_ID", "CENTER_NAME", "REF_FRAME", "TIME_SYSTEM", "START_TIME", "STOP_TIME")
#: The first line of a KVN OEM, after any blank or COMMENT lines (the rule an OMM's is found by).
_KVN_START = kvn_start("CCSDS_OEM_VERS")


@dataclass
class OemSegment:
    """One segment of an OEM: its metadata and its states, epochs in seconds after ``epoch0`` (UTC).

    ``pos_km``/``vel_km_s`` are ``(n, 3)`` in ``ref_frame``; ``epochs_s`` increase strictly and lie in
    ``[start_s, stop_s]``; ``useable_start_s``/``useable_stop_s`` bound the times it interpolates.
    ``line`` is the file line of its ``META_START``.
    """

    object_name: str
    object_id: str
    ref_frame: str
    time_system: str
    interpolation: str
    degree: int
    epoch0: _dt.datetime
    epochs_s: np.ndarray
    pos_km: np.ndarray
    vel_km_s: np.ndarray
    start_s: float
    stop_s: float
    useable_start_s: float
    useable_stop_s: float
    source: str = "<text>"
    line: int = 0
    comments: list[str] = field(default_factory=list)

    @property
    def points(self) -> int:
        """Data points each interpolation takes: degree + 1 (Lagrange), (degree + 1) / 2 rounded up (Hermite,
        which takes a position and a velocity at each), and at least 2 (Hermite of degree 1 on one point would
        step along the velocity from it: 15.6 km off over 60 s in LEO)."""
        return self.degree + 1 if self.interpolation != "HERMITE" else max(2, (self.degree + 2) // 2)

    def interpolate_km(self, t_s: np.ndarray) -> np.ndarray:
        """Positions (km, ``ref_frame``) at ``t_s`` (seconds after ``epoch0``, inside the useable span), ``(n, 3)``."""
        return self.interpolate_states(t_s)[0]

    def interpolate_states(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions (km) and velocities (km/s, the interpolating polynomial's derivative), ``ref_frame``,
        at ``t_s`` (seconds after ``epoch0``, inside the useable span), each ``(n, 3)``.

        Each time takes the polynomial of the :attr:`points` data points around it (the window whose middle
        is nearest, kept inside the data), in Newton's form with the times counted from the window's middle:
        the divided differences of every time's window at once (a repeated node takes the velocity given
        there, Hermite's rule), then Horner's scheme for the value and its derivative; at most
        :data:`_CHUNK` times at a time, so memory stays bounded. The same polynomial as scipy's
        ``KroghInterpolator`` (to 1e-11 km), built once per time instead of once per window in Python."""
        t_s = np.asarray(t_s, dtype=float).ravel()
        pos, vel = np.empty(t_s.shape + (3,)), np.empty(t_s.shape + (3,))
        for lo in range(0, t_s.size, _CHUNK):
            pos[lo:lo + _CHUNK], vel[lo:lo + _CHUNK] = self._newton(t_s[lo:lo + _CHUNK])
        return pos, vel

    def _newton(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, k = self.epochs_s.size, self.points
        first = np.clip(np.searchsorted(self.epochs_s, t_s, side="right") - (k + 1) // 2, 0, n - k)
        window = first[:, None] + np.arange(k)  # (m, k) data points of each time
        middle = self.epochs_s[first + (k - 1) // 2]  # seconds from the window's middle: well conditioned
        x = self.epochs_s[window] - middle[:, None]
        u = t_s - middle
        hermite = self.interpolation == "HERMITE"
        z = np.repeat(x, 2, axis=1) if hermite else x  # nodes: each twice for Hermite (value, then derivative)
        q = np.repeat(self.pos_km[window], 2, axis=1) if hermite else self.pos_km[window]
        coef = [q[:, 0]]
        for order in range(1, z.shape[1]):  # divided differences of this order, (m, nodes - order, 3)
            dz = z[:, order:] - z[:, :-order]
            if hermite and order == 1:  # a node and its repeat: the velocity there; else the slope between
                repeated = dz == 0
                q = np.where(repeated[..., None], np.repeat(self.vel_km_s[window], 2, axis=1)[:, :-1],
                             (q[:, 1:] - q[:, :-1]) / np.where(repeated, 1.0, dz)[..., None])
            else:
                q = (q[:, 1:] - q[:, :-1]) / dz[..., None]
            coef.append(q[:, 0])
        value, slope = coef[-1], np.zeros_like(coef[-1])
        for j in range(len(coef) - 2, -1, -1):  # Horner, with the derivative alongside
            step = (u - z[:, j])[:, None]
            slope = slope * step + value
            value = value * step + coef[j]
        return value, slope


@dataclass
class Ephemeris:
    """An OEM's header and segments; ``names`` are the objects, in the order they first appear."""

    version: str
    creation_date: str
    originator: str
    segments: list[OemSegment]
    source: str = "<text>"
    names: list[str] = field(default_factory=list)
    #: The polar motion its ITRF segments are turned into TEME with (None: Skyfield's ITRS without it).
    polar_motion: PolarMotion | None = None

    def __post_init__(self) -> None:
        if not self.names:
            self.names = list(dict.fromkeys(s.object_name for s in self.segments))

    def positions_teme_km(self, start: _dt.datetime | str, offsets_s) -> np.ndarray:
        """TEME positions (km) of every object at ``start + offsets_s`` (seconds, UTC), shaped
        ``(n_objects, n_times, 3)`` as :func:`orbits.propagate_offsets` gives them. A time outside every
        useable span of an object raises :class:`OrbitError` naming the object and the spans it has."""
        return self.states_teme_km(start, offsets_s)[0]

    def states_teme_km(self, start: _dt.datetime | str, offsets_s) -> tuple[np.ndarray, np.ndarray]:
        """TEME positions (km) and velocities (km/s) of every object at ``start + offsets_s``, each
        ``(n_objects, n_times, 3)``, as :func:`orbits.propagate_offsets` returns them (which takes an
        :class:`Ephemeris` too). Velocities are the interpolant's derivative, rotated as the positions are;
        from ITRF the Earth's rotation is added (``omega x r``, as for ground stations); the inertial frames'
        slow precession (under 1e-7 km/s) is not. ITRF states are turned with :attr:`polar_motion` when it is
        set, and a time it does not cover is refused (:meth:`orbits.iers.PolarMotion.check_covers`)."""
        out, out_v, _ = self._states_km(start, offsets_s, turn_itrf=True)
        return out, out_v

    def positions_teme_or_itrf_km(self, start: _dt.datetime | str, offsets_s) -> tuple[np.ndarray, np.ndarray]:
        """Positions (km) of every object at ``start + offsets_s``, ``(n_objects, n_times, 3)``, for the ground
        tracks (:func:`orbits.ground_track`): where an ITRF segment gives the state, its interpolated position as the
        file holds it, Earth-fixed, turned by nothing (so neither :attr:`polar_motion` nor UT1 enters, and no time
        needs it); elsewhere the TEME position :meth:`positions_teme_km` gives, to the bit. Also the
        ``(n_objects, n_times)`` mask, True where the position is Earth-fixed."""
        out, _, fixed = self._states_km(start, offsets_s, turn_itrf=False)
        return out, fixed

    @property
    def all_itrf(self) -> bool:
        """Whether every segment's states are ITRF (Earth-fixed): its ground tracks need no Earth rotation."""
        return all(s.ref_frame in ITRF_FRAMES for s in self.segments)

    def _states_km(self, start: _dt.datetime | str, offsets_s, turn_itrf: bool
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The states of :meth:`states_teme_km`, ITRF ones left Earth-fixed unless ``turn_itrf``, and the mask of
        the states left Earth-fixed."""
        start = parse_utc(start, field="start")
        offsets = np.asarray(offsets_s, dtype=float).ravel()
        if not np.isfinite(offsets).all():
            raise OrbitError("positions_teme_km: offsets_s must be finite numbers")
        out = np.full((len(self.names), offsets.size, 3), np.nan)
        out_v = np.full((len(self.names), offsets.size, 3), np.nan)
        fixed = np.zeros((len(self.names), offsets.size), dtype=bool)
        rotations: dict[str, np.ndarray] = {}
        rows = {name: i for i, name in enumerate(self.names)}
        for s in self.segments:
            row = rows[s.object_name]
            t = (start - s.epoch0).total_seconds() + offsets
            sel = (t >= s.useable_start_s) & (t <= s.useable_stop_s) & np.isnan(out[row, :, 0])
            if not sel.any():
                continue
            r, v = s.interpolate_states(t[sel])
            far = ~((np.abs(r) <= MAX_OEM_POSITION_KM) & (np.abs(v) <= MAX_OEM_VELOCITY_KM_S)).all(axis=-1)
            if far.any():  # bounded states, and yet a polynomial of degree 15 through points 1 us apart
                j = int(np.argmax(far))
                k = int(np.flatnonzero(sel)[j])
                raise OrbitError(f"{brief(self.source)}: {s.object_name}: the state interpolated at {start.isoformat()} + "
                                 f"{offsets[k]:g} s ({np.linalg.norm(r[j]):.3g} km from the Earth's centre, "
                                 f"{np.linalg.norm(v[j]):.3g} km/s) is past what a state may have (+-"
                                 f"{MAX_OEM_POSITION_KM:g} km, +-{MAX_OEM_VELOCITY_KM_S:g} km/s a coordinate); the "
                                 f"states of the segment of line {s.line} around it are not one smooth orbit")
            if s.ref_frame in ITRF_FRAMES and not turn_itrf:
                fixed[row, sel] = True
            elif s.ref_frame != "TEME":
                if s.ref_frame not in rotations:
                    rotations[s.ref_frame] = _to_teme_matrices(s.ref_frame, start, offsets, self.polar_motion)
                r = np.einsum("nij,nj->ni", rotations[s.ref_frame][sel], r)
                v = np.einsum("nij,nj->ni", rotations[s.ref_frame][sel], v)
                if s.ref_frame in ITRF_FRAMES:  # Earth-fixed: the frame turns under the satellite
                    v = v + np.cross([0.0, 0.0, EARTH_ROTATION_RAD_S], r)
            out[row, sel], out_v[row, sel] = r, v
        missing = np.isnan(out[..., 0])
        if missing.any():
            row, k = np.argwhere(missing)[0]
            when = f"{start.isoformat()} + {offsets[k]:g} s"
            raise OrbitError(f"{brief(self.source)}: {self.names[row]}: no ephemeris at {when}; the useable span is "
                             f"{self.spans_text(self.names[row])}")
        return out, out_v, fixed

    def useable_spans(self) -> dict[str, list[tuple[_dt.datetime, _dt.datetime]]]:
        """The UTC spans in which each object is interpolated, by name, in file order (one pass)."""
        spans: dict[str, list[tuple[_dt.datetime, _dt.datetime]]] = {name: [] for name in self.names}
        for s in self.segments:
            spans[s.object_name].append((s.epoch0 + _dt.timedelta(seconds=s.useable_start_s),
                                         s.epoch0 + _dt.timedelta(seconds=s.useable_stop_s)))
        return spans

    def spans_text(self, name: str) -> str:
        return ", ".join(f"{_iso(s.epoch0, s.useable_start_s)}..{_iso(s.epoch0, s.useable_stop_s)}"
                         for s in self.segments if s.object_name == name)

    def check_covers(self, start: _dt.datetime | str, duration_s: float, field: str = "time") -> None:
        """Refuse, in one :class:`OrbitError` line naming ``field``, a horizon ``start .. start + duration_s``
        that some object's useable spans (joined where they meet or overlap) do not cover whole."""
        start = parse_utc(start, field=field)
        end = start + _dt.timedelta(seconds=float(duration_s))
        for name, spans in self.useable_spans().items():
            reach = start  # covered from start up to reach
            for a, b in sorted(spans):
                if a <= reach:
                    reach = max(reach, b)
            if reach < end:
                raise OrbitError(f"{field}: the horizon {utc_text(start, 'seconds')} + {float(duration_s):g} s is not "
                                 f"inside the useable span of {name} in {brief(self.source)} "
                                 f"({self.spans_text(name)}); no ephemeris from "
                                 f"{utc_text(reach)}")


def _iso(epoch0: _dt.datetime, seconds: float) -> str:
    return utc_text(epoch0 + _dt.timedelta(seconds=seconds))


#: Times whose rotations are computed at once: Skyfield's precession-nutation series holds about 21 kB a
#: time while it runs (2.1 GB for the 100,001 states of a 1 s step over 100,000 s; an export may write 500,000).
_ROTATION_CHUNK = 2_048


def _to_teme_matrices(frame: str, start: _dt.datetime, offsets: np.ndarray,
                      polar_motion: PolarMotion | None = None) -> np.ndarray:
    """Rotations ``frame`` -> TEME at ``start + offsets`` (UTC), ``(n, 3, 3)``, computed
    :data:`_ROTATION_CHUNK` times at a time so that memory stays bounded: GCRF and ICRF (GCRS axes) by
    Skyfield's ``TEME`` frame; EME2000, the mean equator and equinox of J2000, by the same after the frame
    bias is undone (the transpose of Skyfield's ``framelib.ICRS_to_J2000``, 23 mas); an ITRF by the transpose
    of TEME -> ITRS (Skyfield's ``itrs``; with ``polar_motion``, on its time scale, which adds the file's pole
    and UT1, once the file is checked to cover the times). Their transposes turn TEME into ``frame``."""
    from skyfield.framelib import ICRS_to_J2000

    from .groundtrack import gcrs_to_teme_matrices, teme_to_itrs_matrices

    offsets = np.asarray(offsets, dtype=float).ravel()
    ts = None
    if polar_motion is not None and frame in ITRF_FRAMES:
        ts = polar_motion.timescale_for(start, offsets, f"{frame} states")
    out = np.empty((offsets.size, 3, 3))
    for lo in range(0, offsets.size, _ROTATION_CHUNK):
        t = skyfield_times(start, offsets[lo:lo + _ROTATION_CHUNK], ts)
        if frame in ITRF_FRAMES:
            out[lo:lo + _ROTATION_CHUNK] = teme_to_itrs_matrices(t).transpose(0, 2, 1)
        elif frame == "EME2000":  # J2000 -> GCRS axes (B^T), then GCRS -> TEME
            out[lo:lo + _ROTATION_CHUNK] = gcrs_to_teme_matrices(t) @ ICRS_to_J2000.T
        else:
            out[lo:lo + _ROTATION_CHUNK] = gcrs_to_teme_matrices(t)
    return out


class _Builder:
    """The checks and the building both layouts share: a front end (:class:`_Reader` for KVN lines,
    :class:`_XmlReader` for NDM/XML elements) hands it the header, each segment's metadata (``KEY: (value,
    line)``) and data rows, and it checks them and builds the :class:`OemSegment` objects. A front end gives
    ``fields(number, row)`` (a row's texts: epoch, x y z, vx vy vz, maybe ax ay az) and ``label(j)`` (what a
    message calls text ``j``); the words of the messages that name a layout's own pieces are its class
    attributes below."""

    #: What starts a segment, and what its header must be complete before.
    SEGMENT = "META_START"
    #: One state, and what "the previous" one is called.
    ROW, PREVIOUS = "data line", "the previous line's"

    def __init__(self, source: str) -> None:
        self.source = source
        self.where = brief(source)  # how a message names the file (a long path cut)
        self.points = 0
        self.first_of: dict[str, OemSegment] = {}  # each object's first segment (its OBJECT_ID), by name

    def fail(self, number: int, message: str) -> OrbitError:
        return OrbitError(f"{self.where}:{number}: {message}")

    def time(self, number: int, key: str, value: str) -> _dt.datetime:
        try:
            return ccsds_datetime(value)
        except (ValueError, OverflowError):
            raise self.fail(number, f"{key}: expected a CCSDS time like 2026-08-01T06:30:00.000 or "
                                    f"2026-213T06:30:00, got {shown(value)}") from None

    def count_point(self, number: int) -> None:
        """Count one more state (line ``number``), refusing the one past :data:`MAX_OEM_POINTS` before any
        number of it is read."""
        self.points += 1
        if self.points > MAX_OEM_POINTS:
            raise self.fail(number, f"more than {MAX_OEM_POINTS:,} {self.ROW}s; split the ephemeris into "
                                    "several files")

    def header_value(self, header: dict[str, tuple[str, int]], key: str, value: str, number: int) -> None:
        """Check and keep one header value."""
        if key in header:
            raise self.fail(number, f"{key}: given twice (first on line {header[key][1]})")
        if key == "CCSDS_OEM_VERS" and value not in OEM_VERSIONS:
            raise self.fail(number, f"CCSDS_OEM_VERS: expected one of {', '.join(OEM_VERSIONS)}, got {shown(value)}")
        if key == "CREATION_DATE":
            self.time(number, key, value)
        header[key] = (value, number)

    def header_complete(self, header: dict[str, tuple[str, int]], number: int) -> None:
        """Refuse a header without CREATION_DATE or ORIGINATOR when the first segment starts (line ``number``)."""
        for key in ("CREATION_DATE", "ORIGINATOR"):
            if key not in header:
                raise self.fail(number, f"{key}: missing from the header (required before {self.SEGMENT})")

    def ephemeris(self, header: dict[str, tuple[str, int]], segments: list[OemSegment]) -> Ephemeris:
        if not segments:
            raise OrbitError(f"{self.where}: no segment ({self.SEGMENT} .. META_STOP, then data lines) found"
                             if self.SEGMENT == "META_START" else f"{self.where}: no <segment> found")
        return Ephemeris(header["CCSDS_OEM_VERS"][0], header.get("CREATION_DATE", ("", 0))[0],
                         header.get("ORIGINATOR", ("", 0))[0], segments, self.source)

    def open_segment(self, meta: dict[str, tuple[str, int]], start_line: int, comments: list[str]
                     ) -> tuple[OemSegment, _dt.datetime]:
        """The segment (no data yet) of the metadata ``meta`` read from line ``start_line`` on, and its
        START_TIME in its own time system."""
        for key in _META_REQUIRED:
            if key not in meta:
                raise self.fail(start_line, f"{key}: missing from the segment's metadata (required)")
        return self.metadata(meta, start_line, comments)

    def close_segment(self, seg: OemSegment, start: _dt.datetime, rows: list, start_line: int,
                      meta: dict[str, tuple[str, int]], segments: list[OemSegment]) -> None:
        """Fill ``seg`` with its data ``rows`` and add it to ``segments``."""
        self.fill(seg, start, rows, start_line)
        other = self.first_of.setdefault(seg.object_name, seg)  # the name keys the object (a plan's node)
        if other.object_id != seg.object_id:
            raise self.fail(meta["OBJECT_ID"][1], f"OBJECT_ID: {shown(seg.object_id)}, but the segment of line "
                                                  f"{other.line} gives {shown(seg.object_name)} the OBJECT_ID "
                                                  f"{shown(other.object_id)}; two objects need two names")
        segments.append(seg)

    def metadata(self, meta: dict[str, tuple[str, int]], start_line: int, comments: list[str]
                 ) -> tuple[OemSegment, _dt.datetime]:
        """The segment of metadata ``meta`` (no data yet) and its START_TIME in its own time system."""
        def value(key: str) -> str:
            return meta[key][0]

        def choice(key: str, allowed: tuple[str, ...], what: str) -> str:
            got = value(key).upper()
            if got not in allowed:
                raise self.fail(meta[key][1], f"{key}: expected {what} ({', '.join(allowed)}), got {shown(value(key))}")
            return got

        name = value("OBJECT_NAME")
        if not name or not name.isprintable():
            raise self.fail(meta["OBJECT_NAME"][1], f"OBJECT_NAME: expected a name, got {shown(name)}")
        check_name_length(name, f"{self.where}:{meta['OBJECT_NAME'][1]}: OBJECT_NAME", OrbitError)
        choice("CENTER_NAME", ("EARTH",), "an Earth-centred ephemeris")
        frame = choice("REF_FRAME", OEM_FRAMES, "a frame this reader rotates into TEME")
        if "REF_FRAME_EPOCH" in meta:  # only meaningful for frames of date other than TEME; none of ours needs it
            self.time(meta["REF_FRAME_EPOCH"][1], "REF_FRAME_EPOCH", value("REF_FRAME_EPOCH"))
        scale = choice("TIME_SYSTEM", OEM_TIME_SYSTEMS, "a time system convertible to UTC")
        if "INTERPOLATION" in meta:
            method = choice("INTERPOLATION", OEM_INTERPOLATIONS, "an interpolation method")
            if "INTERPOLATION_DEGREE" not in meta:
                raise self.fail(meta["INTERPOLATION"][1], "INTERPOLATION_DEGREE: missing (required with INTERPOLATION)")
        else:
            method = DEFAULT_INTERPOLATION
        degree = DEFAULT_DEGREE if method == DEFAULT_INTERPOLATION and "INTERPOLATION" not in meta else None
        if "INTERPOLATION_DEGREE" in meta:
            text, number = meta["INTERPOLATION_DEGREE"]
            if not is_decimal(text, 3) or not 1 <= int(text) <= MAX_OEM_DEGREE:
                raise self.fail(number, f"INTERPOLATION_DEGREE: expected an integer 1..{MAX_OEM_DEGREE}, got {shown(text)}")
            degree = int(text)
        if method == "LINEAR":
            method, degree = "LAGRANGE", 1
        times = {key: self.time(meta[key][1], key, value(key))
                 for key in ("START_TIME", "USEABLE_START_TIME", "USEABLE_STOP_TIME", "STOP_TIME") if key in meta}
        start, stop = times["START_TIME"], times["STOP_TIME"]
        if stop <= start:
            raise self.fail(meta["STOP_TIME"][1], f"STOP_TIME: expected a time after START_TIME {start.isoformat()}, "
                                                  f"got {shown(value('STOP_TIME'))}")
        u_start, u_stop = times.get("USEABLE_START_TIME", start), times.get("USEABLE_STOP_TIME", stop)
        for key, t in (("USEABLE_START_TIME", u_start), ("USEABLE_STOP_TIME", u_stop)):
            if key in meta and not start <= t <= stop:
                raise self.fail(meta[key][1], f"{key}: expected a time within START_TIME..STOP_TIME, "
                                              f"got {shown(value(key))}")
        if u_stop <= u_start:
            key = "USEABLE_STOP_TIME" if "USEABLE_STOP_TIME" in meta else "USEABLE_START_TIME"
            first = value("USEABLE_START_TIME") if "USEABLE_START_TIME" in meta else value("START_TIME")
            last = value("USEABLE_STOP_TIME") if "USEABLE_STOP_TIME" in meta else value("STOP_TIME")
            raise self.fail(meta[key][1], f"{key}: the useable span {brief(first, 60)}..{brief(last, 60)} is empty")
        if scale != "UTC" and start < _dt.datetime(1972, 1, 1):  # UTC has had whole leap seconds since 1972
            raise self.fail(meta["START_TIME"][1], f"START_TIME: a segment in {scale} must start in 1972 or later "
                                                   f"(converted to UTC with the leap seconds), got {shown(value('START_TIME'))}")
        offset = utc_offset_s(scale, start)
        if utc_offset_s(scale, stop) != offset:
            raise self.fail(meta["STOP_TIME"][1], f"TIME_SYSTEM {scale}: the segment spans a leap second, which "
                                                  "this reader does not convert; split it there or give it in UTC")
        epoch0 = (start - _dt.timedelta(seconds=offset)).replace(tzinfo=_dt.timezone.utc)
        return OemSegment(name, value("OBJECT_ID"), frame, scale, method, degree, epoch0,
                          np.empty(0), np.empty((0, 3)), np.empty((0, 3)), 0.0, (stop - start).total_seconds(),
                          (u_start - start).total_seconds(), (u_stop - start).total_seconds(),
                          self.source, start_line, comments), start

    def fill(self, seg: OemSegment, start: _dt.datetime, rows: list, start_line: int) -> None:
        """Parse the segment's data rows (``(number, row)``, whose texts the front end's ``fields`` gives and
        whose values its ``label`` names) into its arrays, checking each; epochs are seconds after ``start``
        (START_TIME) in the file's own time system (uniform: a UTC day is 86,400 s, as SGP4 and the rest of
        the project count it)."""
        if len(rows) < seg.points:
            raise self.fail(start_line, f"{len(rows)} {self.ROW}{'s' * (len(rows) != 1)}; {seg.interpolation} "
                                        f"interpolation of degree {seg.degree} needs at least {seg.points}")
        epochs = np.empty(len(rows))
        states = np.empty((len(rows), 6))
        for k, (number, row) in enumerate(rows):
            fields = self.fields(number, row)
            epochs[k] = (self.time(number, self.label(0), fields[0]) - start).total_seconds()
            for j, text in enumerate(fields[1:], 1):
                try:  # ASCII digits (float() reads every script's: -4𝟙.03 was -41.03), no nan, inf or 1_000
                    number_value = decimal_number(text, special=False)
                except ValueError:
                    raise self.fail(number, f"{self.label(j)}: expected a decimal number, got {shown(text)}") from None
                if not math.isfinite(number_value):  # 1e999
                    raise self.fail(number, f"{self.label(j)}: expected a finite number, got {shown(text)}")
                if j <= 6:
                    top, unit = (MAX_OEM_POSITION_KM, "km") if j <= 3 else (MAX_OEM_VELOCITY_KM_S, "km/s")
                    if not abs(number_value) <= top:
                        raise self.fail(number, f"{self.label(j)}: expected a number within +-{top:g} {unit} of an "
                                                f"Earth-centred state, got {shown(text)}")
                    states[k, j - 1] = number_value
            if not seg.start_s <= epochs[k] <= seg.stop_s:
                raise self.fail(number, f"epoch {brief(fields[0], 60)} is outside the segment's START_TIME..STOP_TIME "
                                        f"({self.SEGMENT} on line {start_line})")
            if k and epochs[k] <= epochs[k - 1]:
                raise self.fail(number, f"epoch {brief(fields[0], 60)} does not follow {self.PREVIOUS}; epochs must increase")
        seg.epochs_s, seg.pos_km, seg.vel_km_s = epochs, states[:, :3], states[:, 3:]
        # never extrapolate: the useable span ends at the first and last data points too
        seg.useable_start_s = max(seg.useable_start_s, float(epochs[0]))
        seg.useable_stop_s = min(seg.useable_stop_s, float(epochs[-1]))
        if seg.useable_stop_s <= seg.useable_start_s:
            raise self.fail(start_line, f"the {self.ROW}s do not cover any of the useable span "
                                        "(USEABLE_START_TIME..USEABLE_STOP_TIME, else START_TIME..STOP_TIME)")


class _Reader(_Builder):
    """The KVN front end: one pass over the lines, segment by segment."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(source)
        # one at a time (no list of every line of a 64 MiB file); a line ends at LF, CR LF or CR alone, as the
        # OMM KVN reader's (swarmbase.tomlcheck.text_lines), so a message names the line an editor shows
        self.lines = numbered_text_lines(text)
        self.held: tuple[int, str] | None = None  # a line read ahead (the next segment's META_START)

    def next_line(self) -> tuple[int, str] | None:
        """``(number, line)`` of the next line, or None at the end."""
        if self.held is not None:
            line, self.held = self.held, None
            return line
        return next(self.lines, None)

    def key_value(self, number: int, body: str, expected: str = "a 'KEY = value' line or a COMMENT line"
                  ) -> tuple[str, str]:
        match = _KVN_LINE.fullmatch(body)
        if match is None:
            raise self.fail(number, f"expected {expected}, got {shown(body)}")
        return match.group(1).upper(), match.group(2).strip()

    def read(self) -> Ephemeris:
        header: dict[str, tuple[str, int]] = {}
        segments: list[OemSegment] = []
        while (line := self.next_line()) is not None:
            number, body = line[0], line[1].strip()
            if not body or body.split(None, 1)[0] == "COMMENT":
                continue
            if body == "META_START":
                if not header:
                    raise self.fail(number, "META_START: an OEM must start with a CCSDS_OEM_VERS line")
                self.header_complete(header, number)
                self.segment(number, segments)
                continue
            if body in ("META_STOP", "COVARIANCE_START", "COVARIANCE_STOP"):
                raise self.fail(number, f"{body} outside a segment (expected META_START first)")
            key, value = self.key_value(number, body)
            if segments or key not in _HEADER_KEYS:
                raise self.fail(number, f"{brief(key, 60)}: not a header keyword ({', '.join(_HEADER_KEYS)}); "
                                        "a segment starts with META_START")
            if not header and key != "CCSDS_OEM_VERS":
                raise self.fail(number, f"{brief(key, 60)}: an OEM must start with a CCSDS_OEM_VERS line")
            self.header_value(header, key, value, number)
        if "CCSDS_OEM_VERS" not in header:
            raise OrbitError(f"{self.where}: not an OEM (no CCSDS_OEM_VERS line)")
        return self.ephemeris(header, segments)

    def segment(self, start_line: int, segments: list[OemSegment]) -> None:
        """Read the segment whose META_START is line ``start_line`` (the line just read) into ``segments``."""
        meta: dict[str, tuple[str, int]] = {}
        comments: list[str] = []
        while True:
            line = self.next_line()
            if line is None:
                raise self.fail(start_line, "META_START without its META_STOP")
            number, body = line[0], line[1].strip()
            if not body:
                continue
            if body.split(None, 1)[0] == "COMMENT":
                comments.append(body[7:].strip())
                continue
            if body == "META_STOP":
                break
            key, value = self.key_value(number, body, "a 'KEY = value' line, a COMMENT line or META_STOP")
            if key not in _META_KEYS:
                raise self.fail(number, f"{brief(key, 60)}: not an OEM metadata keyword (expected META_STOP or one of "
                                        f"{', '.join(_META_KEYS)})")
            if key in meta:
                raise self.fail(number, f"{key}: given twice in one segment (first on line {meta[key][1]})")
            meta[key] = (value, number)
        seg, start = self.open_segment(meta, start_line, comments)
        # data lines, then maybe covariance blocks, up to the next META_START or the end
        rows: list[tuple[int, str]] = []
        covariance = None
        while (line := self.next_line()) is not None:
            number, body = line[0], line[1].strip()
            if body == "META_START":
                self.held = line
                break
            if covariance is not None:
                if body == "COVARIANCE_STOP":
                    covariance = None
                continue
            if not body:
                continue
            head = body.split(None, 1)[0]
            if head == "COMMENT":
                if rows:
                    raise self.fail(number, "COMMENT between data lines (CCSDS allows them only before the first)")
                seg.comments.append(body[7:].strip())
                continue
            if body == "COVARIANCE_START":
                covariance = number
                continue
            if covariance is None and body in ("COVARIANCE_STOP", "META_STOP"):
                raise self.fail(number, f"{body} without its opening line")
            self.count_point(number)
            rows.append((number, body))
        if covariance is not None:
            raise self.fail(covariance, "COVARIANCE_START without its COVARIANCE_STOP")
        self.close_segment(seg, start, rows, start_line, meta, segments)

    def fields(self, number: int, body: str) -> list[str]:
        """The fields of data line ``number``: 7 or 10."""
        fields = body.split(None, 10)  # 11 pieces or fewer: a line of 30 million numbers is not split up
        if len(fields) not in (7, 10):
            raise self.fail(number, f"expected a data line 'epoch x y z vx vy vz' (km, km/s; maybe ax ay az, "
                                    f"km/s**2), got {len(fields) if len(fields) <= 10 else 'more than 10'} "
                                    f"field{'s' * (len(fields) != 1)}: "
                                    f"{shown(body)}")
        return fields

    @staticmethod
    def label(j: int) -> str:
        return "epoch" if j == 0 else f"field {j + 1}"


#: The elements of an NDM/XML ``stateVector``, in the schema's order (the last three, the accelerations,
#: optional), with the unit a ``units`` attribute may give each.
_XML_STATE = ("EPOCH", "X", "Y", "Z", "X_DOT", "Y_DOT", "Z_DOT", "X_DDOT", "Y_DDOT", "Z_DDOT")
_XML_UNITS = dict.fromkeys(_XML_STATE[1:4], "km") | dict.fromkeys(_XML_STATE[4:7], "km/s") | dict.fromkeys(
    _XML_STATE[7:], "km/s**2")
#: Header elements of the XML layout (its version is the ``version`` attribute of ``<oem id="CCSDS_OEM_VERS">``).
_XML_HEADER = tuple(key for key in _HEADER_KEYS if key != "CCSDS_OEM_VERS")
#: The elements each container holds (``COMMENT`` anywhere a KVN COMMENT line may be).
_XML_CHILDREN = {"oem": ("header", "body"), "header": ("COMMENT",) + _XML_HEADER, "body": ("segment",),
                 "segment": ("metadata", "data"), "metadata": ("COMMENT",) + _META_KEYS,
                 "data": ("COMMENT", "stateVector", "covarianceMatrix"), "stateVector": _XML_STATE}


class _XmlReader(_Builder):
    """The NDM/XML front end (CCSDS 502.0-B-3 section 8 and its ``ndmxml`` OEM schema): the elements are
    read as expat meets them (a ``stateVector``'s values kept as texts, as the KVN front end keeps its
    lines), each container's children checked against the schema's, and the header, each segment's metadata
    and its state vectors handed to :class:`_Builder` as the KVN front end hands its lines. Covariance
    matrices are skipped whole, as KVN's COVARIANCE blocks are; an element the schema does not put where it
    stands is refused, as an unknown KVN keyword is. Messages name ``file:line`` of the element (a state
    vector's values: the line of its ``stateVector``)."""

    SEGMENT = "<segment>"
    ROW, PREVIOUS = "stateVector", "the previous stateVector's"

    def __init__(self, text: str, source: str) -> None:
        super().__init__(source)
        self.text = text
        self.parser = expat.ParserCreate(namespace_separator=" ")  # a namespace is dropped from each name
        self.open: list[tuple[str, int]] = []  # the open elements: (name, line)
        self.text_parts: list[str] | None = None  # the text of the open element, when it holds a value
        self.skip = 0  # depth inside a covarianceMatrix (skipped)
        self.header: dict[str, tuple[str, int]] = {}
        self.segments: list[OemSegment] = []
        self.meta: dict[str, tuple[str, int]] = {}
        self.comments: list[str] = []
        self.seg: tuple[OemSegment, _dt.datetime] | None = None  # the segment read and its START_TIME
        self.segment_line = 0  # the line of its <segment>
        self.rows: list[tuple[int, tuple[str, ...]]] = []
        self.state: list[str] = []
        self.seen: set[str] = set()  # the containers met (header, body; metadata, data of the open segment)

    def read(self) -> Ephemeris:
        refuse_doctype(self.text, self.where, OrbitError)  # no entity is ever expanded
        self.parser.StartElementHandler = self.start
        self.parser.EndElementHandler = self.end
        self.parser.CharacterDataHandler = self.characters
        try:
            self.parser.Parse(self.text, True)
        except expat.ExpatError as exc:
            raise self.fail(exc.lineno, f"not well-formed XML ({expat.ErrorString(exc.code)}, column "
                                        f"{exc.offset + 1})") from None
        return self.ephemeris(self.header, self.segments)

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        name, line = tag.rpartition(" ")[2], self.parser.CurrentLineNumber
        if self.skip:
            self.skip += 1
            return
        if self.text_parts is not None:
            raise self.fail(line, f"<{brief(name, 60)}> inside <{self.open[-1][0]}>: expected a value, not an element")
        parent = self.open[-1][0] if self.open else None
        if parent is None:
            if name != "oem" or attrs.get("id") != "CCSDS_OEM_VERS":
                raise self.fail(line, f"<{brief(name, 60)}>: expected the root element <oem id=\"CCSDS_OEM_VERS\" "
                                      "version=\"...\"> of a CCSDS OEM in NDM/XML")
            self.header_value(self.header, "CCSDS_OEM_VERS", attrs.get("version", ""), line)
        elif name not in _XML_CHILDREN[parent]:
            raise self.fail(line, f"<{brief(name, 60)}>: not an element of <{parent}> in an OEM (expected "
                                  f"{', '.join(_XML_CHILDREN[parent])})")
        self.open.append((name, line))
        if name in ("header", "body", "metadata", "data"):
            order = {"body": "header", "data": "metadata"}
            if name in self.seen or (name in order and order[name] not in self.seen):
                what = "given twice" if name in self.seen else f"expected after <{order[name]}>"
                raise self.fail(line, f"<{name}>: {what}")
            self.seen.add(name)
        if name == "body":
            self.header_complete(self.header, line)
        elif name == "segment":
            self.seen -= {"metadata", "data"}
            self.meta, self.comments, self.rows, self.segment_line = {}, [], [], line
        elif name == "covarianceMatrix":
            self.skip = 1  # skipped whole, as a KVN COVARIANCE block
            return
        elif name == "stateVector":
            self.count_point(line)
            self.state = []
        elif parent == "stateVector":
            expected = f"<{_XML_STATE[len(self.state)]}>" if len(self.state) < len(_XML_STATE) else "</stateVector>"
            if name != expected[1:-1]:
                raise self.fail(line, f"stateVector: expected {expected} here, got <{name}> (a stateVector holds "
                                      f"{', '.join(_XML_STATE[:7])}, maybe {', '.join(_XML_STATE[7:])}, in "
                                      "this order)")
            unit = attrs.get("units")
            if unit is not None and name not in _XML_UNITS:  # the EPOCH: the schema gives it no unit
                raise self.fail(line, f"{name}: expected no unit (a time), got {shown(unit)}")
            if unit is not None and unit.replace(" ", "").lower() != _XML_UNITS[name]:
                raise self.fail(line, f"{name}: expected the unit {_XML_UNITS[name]} or none, got {shown(unit)}")
        if name not in _XML_CHILDREN:  # an element holding a value
            self.text_parts = []

    def characters(self, data: str) -> None:
        if self.skip:
            return
        if self.text_parts is not None:
            self.text_parts.append(data)
        elif data.strip():
            where = f"<{self.open[-1][0]}>" if self.open else "after the root element"
            raise self.fail(self.parser.CurrentLineNumber, f"text {shown(data.strip())} in {where}: expected "
                                                           "elements only")

    def end(self, tag: str) -> None:
        if self.skip:  # the end of an element in a covarianceMatrix, or of the matrix
            self.skip -= 1
            if self.skip:
                return
        name, line = self.open.pop()
        value = "".join(self.text_parts).strip() if self.text_parts is not None else ""
        self.text_parts = None
        parent = self.open[-1][0] if self.open else None
        if name == "COMMENT":
            if parent == "metadata":
                self.comments.append(value)
            elif parent == "data":
                if self.rows:
                    raise self.fail(line, "COMMENT between state vectors (CCSDS allows them only before the first)")
                self.seg[0].comments.append(value)
        elif parent == "header":
            self.header_value(self.header, name, value, line)
        elif parent == "metadata":
            if name in self.meta:
                raise self.fail(line, f"{name}: given twice in one segment (first on line {self.meta[name][1]})")
            self.meta[name] = (value, line)
        elif parent == "stateVector":
            self.state.append(value)
        elif name == "stateVector":
            if len(self.state) not in (7, 10):
                raise self.fail(line, f"stateVector: <{_XML_STATE[len(self.state)]}> missing (a stateVector holds "
                                      f"{', '.join(_XML_STATE[:7])}, maybe {', '.join(_XML_STATE[7:])})")
            self.rows.append((line, tuple(self.state)))
        elif name == "metadata":
            self.seg = self.open_segment(self.meta, self.segment_line, self.comments)
        elif name == "data":
            seg, start = self.seg
            self.close_segment(seg, start, self.rows, self.segment_line, self.meta, self.segments)
            self.rows = []
        elif name == "segment" and "data" not in self.seen:
            raise self.fail(line, f"<segment>: <{'metadata' if 'metadata' not in self.seen else 'data'}> missing")
        elif name == "oem" and "body" not in self.seen:
            raise self.fail(line, f"<oem>: <{'header' if 'header' not in self.seen else 'body'}> missing")

    @staticmethod
    def fields(number: int, row: tuple[str, ...]) -> tuple[str, ...]:
        return row

    @staticmethod
    def label(j: int) -> str:
        return _XML_STATE[j]


def oem_format(path: str | Path, text: str | None = None) -> str:
    """The layout of an OEM, as :func:`orbits.omm.omm_format` tells an OMM's: ``kvn`` when the text starts with
    ``CCSDS_OEM_VERS =`` (after blank or COMMENT lines; XML cannot), else ``xml`` when the file name ends in
    ``.xml`` or the text's first character after blanks is ``<``, else ``kvn`` (whose reader says what the
    text lacks)."""
    if text and _KVN_START.match(text):
        return "kvn"
    if Path(path).suffix.lower() == ".xml" or (text or "").lstrip()[:1] == "<":
        return "xml"
    return "kvn"


def parse_oem_text(text: str, source: str = "<text>") -> Ephemeris:
    """Parse OEM text, KVN or NDM/XML (:func:`oem_format` of ``source`` and ``text``), into an
    :class:`Ephemeris` (:class:`OrbitError` naming ``source:line``)."""
    return (_XmlReader if oem_format(source, text) == "xml" else _Reader)(text, source).read()


def read_oem(path: str | Path, polar_motion: PolarMotion | None = None) -> Ephemeris:
    """Read an OEM file, KVN or NDM/XML (at most :data:`MAX_OEM_BYTES`, checked before it is read, and
    :data:`MAX_OEM_POINTS` states); its ITRF segments are turned into TEME with ``polar_motion``
    (:attr:`Ephemeris.polar_motion`) when it is given."""
    path = Path(path)
    eph = parse_oem_text(read_text_file(path, OrbitError, "OEM file", MAX_OEM_BYTES), str(path))
    eph.polar_motion = polar_motion
    return eph


#: Seconds between the states :func:`write_oem` writes unless told otherwise (``fol contacts --oem-step-s``):
#: the step of the reader's accuracy measurements (Hermite of degree 5 on 60 s states of the ISS: within
#: 0.31 m of SGP4 between them) and of ``examples/leo_oem.oem``.
DEFAULT_OEM_STEP_S = 60.0
#: The shortest step written (epochs are written to the microsecond).
MIN_OEM_STEP_S = 1e-3


def _oem_intervals(duration_s: float, step_s: float) -> int:
    """The steps :func:`oem_offsets_s` makes: a state every ``step_s`` that falls, to the microsecond the
    epochs are written to, before ``duration_s`` (a span a fraction of a microsecond past a whole number of
    steps gets no second state at its end, which the reader would refuse as an epoch that does not increase)."""
    intervals = max(1, math.ceil(duration_s / step_s - 1e-9))
    if intervals > 1 and round((intervals - 1) * step_s * 1e6) >= round(duration_s * 1e6):
        intervals -= 1
    return intervals


def oem_offsets_s(duration_s: float, step_s: float) -> np.ndarray:
    """The times (seconds after the start, to the microsecond) of the states :func:`write_oem` writes:
    every ``step_s`` from 0, and ``duration_s`` itself (the last step may be shorter)."""
    offsets = np.append(np.arange(_oem_intervals(duration_s, step_s)) * step_s, duration_s)
    return np.round(offsets * 1e6) / 1e6


#: The layouts :func:`write_oem` writes (and :func:`read_oem` reads): KVN text and NDM/XML.
OEM_FORMATS = ("kvn", "xml")


def _message_text(fmt: str, comments: list[str], created: str, originator: str) -> tuple[str, str]:
    """The text before the first segment and after the last one."""
    if fmt == "xml":
        lines = "".join(f"    <COMMENT>{escape(c)}</COMMENT>\n" for c in comments)
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<oem id="CCSDS_OEM_VERS" version="2.0">\n  <header>\n'
                f"{lines}    <CREATION_DATE>{created}</CREATION_DATE>\n"
                f"    <ORIGINATOR>{escape(originator)}</ORIGINATOR>\n  </header>\n  <body>\n"), "  </body>\n</oem>\n"
    lines = "".join(f"COMMENT {c}\n" for c in comments)
    return f"CCSDS_OEM_VERS = 2.0\n{lines}CREATION_DATE = {created}\nORIGINATOR = {originator}\n", ""


def _segment_text(fmt: str, name: str, object_id: str, start: str, stop: str, frame: str = "TEME"
                  ) -> tuple[str, str]:
    """The text before a segment's states and after them."""
    meta = (("OBJECT_NAME", name), ("OBJECT_ID", object_id), ("CENTER_NAME", "EARTH"), ("REF_FRAME", frame),
            ("TIME_SYSTEM", "UTC"), ("START_TIME", start), ("STOP_TIME", stop),
            ("INTERPOLATION", DEFAULT_INTERPOLATION), ("INTERPOLATION_DEGREE", str(DEFAULT_DEGREE)))
    if fmt == "xml":
        return ("    <segment>\n      <metadata>\n" + "".join(f"        <{key}>{escape(value)}</{key}>\n"
                                                             for key, value in meta) +
                "      </metadata>\n      <data>\n"), "      </data>\n    </segment>\n"
    return "\nMETA_START\n" + "".join(f"{key} = {value}\n" for key, value in meta) + "META_STOP\n\n", ""


def _states_text(fmt: str, epochs: list[str], states: list[list[float]]) -> str:
    """One data line (KVN) or ``stateVector`` (XML) per state: epochs as given, km to 1e-6, km/s to 1e-9."""
    if fmt == "xml":
        return "".join(f"        <stateVector><EPOCH>{t}</EPOCH><X>{x:.6f}</X><Y>{y:.6f}</Y><Z>{z:.6f}</Z>"
                       f"<X_DOT>{vx:.9f}</X_DOT><Y_DOT>{vy:.9f}</Y_DOT><Z_DOT>{vz:.9f}</Z_DOT></stateVector>\n"
                       for t, (x, y, z, vx, vy, vz) in zip(epochs, states))
    return "".join(f"{t} {x:.6f} {y:.6f} {z:.6f} {vx:.9f} {vy:.9f} {vz:.9f}\n"
                   for t, (x, y, z, vx, vy, vz) in zip(epochs, states))


def check_oem_export(n_objects: int, duration_s: float, step_s: float, field: str = "step_s",
                     fmt: str = "kvn") -> int:
    """Refuse, in one :class:`OrbitError` line naming ``field``, a step that is not a finite number of at
    least :data:`MIN_OEM_STEP_S`, that leaves fewer states per object than the reader's default interpolation
    (Hermite of degree :data:`DEFAULT_DEGREE`) takes, or that makes more than :data:`MAX_OEM_POINTS` data
    lines in all, or surely more than :data:`MAX_OEM_BYTES` (its shortest lines and empty names in layout
    ``fmt``, ``kvn`` or ``xml``; the file would not be read back); checked from the numbers alone, before
    anything is propagated. Returns the data lines of one object."""
    if not (math.isfinite(step_s) and step_s >= MIN_OEM_STEP_S):
        raise OrbitError(f"{field}: expected a step of at least {MIN_OEM_STEP_S:g} s, got {shown(step_s)}")
    if not (math.isfinite(duration_s) and duration_s > 0.0):
        raise OrbitError(f"duration_s: expected a positive number of seconds, got {shown(duration_s)}")
    needed = max(2, (DEFAULT_DEGREE + 2) // 2)  # OemSegment.points of the segments written
    per_object = _oem_intervals(duration_s, step_s) + 1
    if per_object < needed:
        raise OrbitError(f"{field}: {step_s:g} s gives {per_object} states over {duration_s:g} s; "
                         f"{DEFAULT_INTERPOLATION} interpolation of degree {DEFAULT_DEGREE} needs at least "
                         f"{needed}: expected a step shorter than the span")
    if n_objects * per_object > MAX_OEM_POINTS:
        most = MAX_OEM_POINTS // max(1, n_objects) - 1  # intervals per object that fit
        advice = (f"expected at least {math.ceil(duration_s / most * 1e3) / 1e3:g} s" if most >= needed - 1 else
                  f"{n_objects:,} objects take more than {MAX_OEM_POINTS:,} lines at any step; shorten the horizon "
                  "or export fewer satellites")
        raise OrbitError(f"{field}: {step_s:g} s over {duration_s:g} s makes {n_objects:,} x {per_object:,} "
                         f"states, more than the {MAX_OEM_POINTS:,} data lines an OEM file read here holds; {advice}")
    epoch = "2026-08-01T00:00:00.000000"
    shortest = len(_states_text(fmt, [epoch], [[0.0] * 6]))  # 0.000000 km, 0.000000000 km/s
    least = n_objects * (len("".join(_segment_text(fmt, "", "", epoch, epoch))) + per_object * shortest)
    if least > MAX_OEM_BYTES:
        raise OrbitError(f"{field}: {n_objects:,} objects x {per_object:,} states make an OEM of more than "
                         f"{least:,} bytes, past the {MAX_OEM_BYTES:,} read_oem reads; export fewer satellites")
    return per_object


def _comment_name(source: str, instead: str) -> str:
    """The name of the file ``source`` as a comment of an exported OEM gives it: its last part, or ``instead``
    when that is not printable (a newline in it would end the COMMENT line, and the file would not read back).

    >>> _comment_name("runs/leo.oem", "an OEM file"), _comment_name("runs/a\\nMETA_START.oem", "an OEM file")
    ('leo.oem', 'an OEM file')
    """
    name = Path(source).name
    return name if name.isprintable() else instead


def write_oem(path: str | Path, satellites, start: _dt.datetime | str, duration_s: float,
              step_s: float = DEFAULT_OEM_STEP_S, originator: str = "fol-swarm", frame: str = "TEME",
              fmt: str | None = None, polar_motion: PolarMotion | None = None) -> Path:
    """Write the states of ``satellites`` (a :class:`~orbits.constellation.Constellation`, propagated by SGP4,
    or an :class:`Ephemeris`, whose interpolated states are re-sampled) from ``start`` over ``duration_s``
    every ``step_s`` seconds (and at the end) as one OEM file, one segment per satellite, in the
    satellites' order, in ``frame`` (one of :data:`EXPORT_FRAMES`); returns the path. :func:`read_oem` reads
    it back. The layout is ``fmt`` (``"kvn"`` or ``"xml"``), else chosen by the path's suffix as
    :func:`orbits.omm.write_omm` chooses: NDM/XML for ``.xml``, KVN for any other. The XML holds the same
    metadata as elements and one ``<stateVector>`` a line with the same decimals, so it reads back to the
    same numbers as the KVN file.

    Each segment has ``OBJECT_NAME`` (the satellite's name), ``OBJECT_ID`` (the international designator as
    ``YYYY-NNNP`` when the elements carry one, as the OMM export writes it, else ``UNKNOWN``; an OEM's own),
    ``CENTER_NAME = EARTH``, ``REF_FRAME`` (``frame``), ``TIME_SYSTEM = UTC``, ``START_TIME``/``STOP_TIME``
    (the horizon), ``INTERPOLATION = HERMITE`` and ``INTERPOLATION_DEGREE = 5`` (the reader's default), then
    ``epoch x y z vx vy vz`` lines: epochs to the microsecond, km to 1e-6 (a millimetre), km/s to 1e-9.

    Frames: ``"TEME"`` (the default) writes the states as they are computed (SGP4's frame, and the one
    :meth:`Ephemeris.states_teme_km` rotates every frame into), with no rotation. Every other frame is written
    by the transpose of the matrix the reader turns it into TEME with (:func:`_to_teme_matrices`), so a file
    read back gives the TEME states again, to the rounding of the decimals written:

    * ``"GCRF"`` and ``"ICRF"`` (``CENTER_NAME = EARTH``: the same axes), for tools that do not read TEME
      (GMAT, many mission-analysis pipelines): GCRS axes, by Skyfield's ``TEME`` frame
      (:func:`orbits.groundtrack.gcrs_to_teme_matrices`), as Skyfield's ``EarthSatellite.at`` gives them.
    * ``"EME2000"``: the mean equator and equinox of J2000, GCRS axes turned by the frame bias (Skyfield's
      ``framelib.ICRS_to_J2000``, 23 mas): 0.45 to 0.76 m from the GCRF numbers for the satellites of
      ``examples/leo_oem.tle``, as the reader undoes it.
    * ``"ITRF"``, for ground-station tools: Earth-fixed, Skyfield's ITRS (``framelib.itrs``, the ground tracks'
      rotation), the velocity relative to the turning Earth: the reader's ``omega x r`` taken out before the
      rotation, ``v_itrf = M (v - omega x r)`` (``M`` TEME -> ITRS), which is Skyfield's own
      ``frame_xyz_and_velocity(itrs)`` to the rounding of the decimals written (0.81 mm) and 0.058 mm/s (the
      reader's rate :data:`~orbits.constants.EARTH_ROTATION_RAD_S` against Skyfield's ``ANGVEL``, times ``r``),
      measured for the satellites of ``examples/leo_oem.tle`` over 3 h (``tests/test_orbits_oem.py``). Without
      ``polar_motion`` Skyfield's ITRS has no polar motion (up to about 0.5 arcsec: up to 16 m in LEO) and
      Skyfield's built-in UT1; with it (:func:`orbits.iers.read_iers_finals`, a file covering the horizon, else
      one :class:`OrbitError` line before anything is propagated) the positions are Skyfield's ``itrs`` with that
      table installed and the file's UT1 (``tests/test_orbits_iers.py``), and the velocity's ``omega x r`` is
      still taken about TEME's pole, the Earth's axis of rotation, which polar motion tilts against ITRS's.
      Written as plain ``ITRF``, no realisation; Orekit reads ``ITRF`` as its latest ITRF, STK as Earth-fixed,
      and this reader as every ITRF realisation, Skyfield's ITRS. ``polar_motion`` turns ITRF states only.

    Velocities in the inertial frames are turned by the positions' matrix: the rate at which TEME's axes
    turn against GCRS (precession and nutation, 7.1e-12 rad/s) times ``r`` is left out, 6.0e-8 km/s in LEO
    (measured by finite differences of the matrix over those satellites' 3 h), as the reader leaves it out.

    The frame and the step are checked first (:func:`check_oem_export`: at most :data:`MAX_OEM_POINTS` data
    lines in all); a file that would pass :data:`MAX_OEM_BYTES` is refused while it is written. Written
    through :func:`swarmbase.fileio.atomic_writer`: the old file or the whole new one.

    >>> import tempfile
    >>> from orbits.constellation import walker_delta
    >>> c = walker_delta(2, 1, 0, 550.0, 53.0, "2026-08-01T00:00:00Z")
    >>> p = write_oem(Path(tempfile.mkdtemp()) / "shell.oem", c, c.epoch, 600.0, 60.0)
    >>> eph = read_oem(p)
    >>> eph.names, eph.segments[0].ref_frame, eph.segments[0].epochs_s.size
    (['WD-P00-S00', 'WD-P00-S01'], 'TEME', 11)
    >>> gcrf = read_oem(write_oem(p.with_name("gcrf.oem"), c, c.epoch, 600.0, 60.0, frame="GCRF"))
    >>> gcrf.segments[0].ref_frame, bool(abs(gcrf.positions_teme_km(c.epoch, [90.0])
    ...                                      - eph.positions_teme_km(c.epoch, [90.0])).max() < 1e-5)
    ('GCRF', True)
    >>> xml = read_oem(write_oem(p.with_name("shell.xml"), c, c.epoch, 600.0, 60.0))
    >>> xml.names, bool((xml.segments[1].pos_km == eph.segments[1].pos_km).all())
    (['WD-P00-S00', 'WD-P00-S01'], True)
    """
    if frame not in EXPORT_FRAMES:
        raise OrbitError(f"frame: expected one of {', '.join(EXPORT_FRAMES)}, got {shown(frame)}")
    path = Path(path)
    where = brief(path)  # as every message names it: escaped, a long path cut
    fmt = fmt or ("xml" if path.suffix.lower() == ".xml" else "kvn")
    if fmt not in OEM_FORMATS:
        raise OrbitError(f"OEM format: expected one of {', '.join(OEM_FORMATS)}, got {shown(fmt)}")
    start = parse_utc(start, field="start")
    duration_s = float(duration_s)
    names = list(satellites.names)
    check_oem_export(len(names), duration_s, float(step_s), fmt=fmt)
    polar_note = "no polar motion"
    if polar_motion is not None and frame in ITRF_FRAMES:  # the horizon inside the file, before any propagation
        polar_motion.check_covers(start, duration_s, f"{frame} states")
        polar_note = f"polar motion and UT1 of {_comment_name(polar_motion.source, 'an IERS finals file')}"
    if isinstance(satellites, Constellation):
        ids = [str(rec["OBJECT_ID"]) for rec in omm_records(satellites)]
        source = "SGP4 states of the mean elements"
    else:
        first_id: dict[str, str] = {}
        for seg in satellites.segments:
            first_id.setdefault(seg.object_name, seg.object_id)
        ids = [first_id[name] for name in names]
        source = f"re-sampled from the interpolated ephemeris of {_comment_name(satellites.source, 'an OEM file')}"
    for key, values in (("OBJECT_NAME", names), ("OBJECT_ID", ids)):  # what the reader would refuse
        bad = next((value for value in values if not value or not value.isprintable() or value != value.strip()), None)
        if bad is not None:
            raise OrbitError(f"{where}: {key}: expected a name on one line, without control characters or spaces at "
                             f"its ends, got {shown(bad)}")
    offsets = oem_offsets_s(duration_s, float(step_s))
    r, v = propagate_offsets(satellites, start, offsets)
    if frame != "TEME":  # the transpose of the reader's frame -> TEME rotation, r and v alike
        to_frame = _to_teme_matrices(frame, start, offsets, polar_motion).transpose(0, 2, 1)
        if frame in ITRF_FRAMES:  # Earth-fixed: the reader's omega x r taken out (its exact inverse)
            v = v - np.cross([0.0, 0.0, EARTH_ROTATION_RAD_S], r)
        r, v = np.einsum("nij,snj->sni", to_frame, r), np.einsum("nij,snj->sni", to_frame, v)
    base = start.replace(tzinfo=None)
    epochs = [utc_text(base + _dt.timedelta(microseconds=round(s * 1e6)), "microseconds", zone="") for s in offsets]
    created = utc_text(_dt.datetime.now(_dt.timezone.utc), "seconds", zone="")
    written = 0
    with atomic_writer(path, text=True) as fh:
        def put(text: str) -> None:
            nonlocal written
            written += len(text.encode("utf-8"))
            if written > MAX_OEM_BYTES:
                raise OrbitError(f"{where}: the OEM would pass {MAX_OEM_BYTES:,} bytes, more than read_oem reads; "
                                 "write a longer step or fewer satellites")
            fh.write(text)

        note = {"TEME": [],
                "EME2000": ["rotated from TEME onto GCRS axes, then by the 23 mas frame bias onto the mean equator "
                            "and equinox of J2000, velocities by the same matrices"],
                "ITRF": [f"rotated from TEME into Skyfield's ITRS ({polar_note}); velocities relative to the Earth "
                         "(omega x r taken out)"]}.get(frame, ["rotated from TEME onto GCRS axes, velocities by the "
                                                              "same matrix"])
        head, foot = _message_text(fmt, [f"{frame} states ({source}), km and km/s"] + note, created, originator)
        put(head)
        for k, (name, object_id) in enumerate(zip(names, ids)):
            before, after = _segment_text(fmt, name, object_id, epochs[0], epochs[-1], frame)
            put(before)
            put(_states_text(fmt, epochs, np.concatenate([r[k], v[k]], axis=1).tolist()))
            put(after)
        put(foot)
    return path
