"""Polar motion and UT1 from an IERS finals file (``finals2000A.all`` or ``finals.all``), for Earth-fixed ITRF
states and ground stations.

Skyfield's ITRS turns the true equator and equinox of date by the Earth's rotation; the pole of that rotation
wanders over the crust by up to about 0.5 arcsec (the polar motion ``x``, ``y`` the IERS measures and predicts),
which Skyfield adds only when a table of it is installed on the time scale. Skyfield ships no such table and the
project runs without network, so the user gives the file: the IERS Rapid Service's ``finals2000A.all`` (or
``finals.all``, or the shorter ``finals2000A.data`` and ``.daily`` of the same layout), one line a day in fixed
columns (the IERS ``readme.finals2000A``): year, month and day in columns 1-6, the MJD in 8-15, ``I`` (IERS) or
``P`` (prediction) in 17, the pole's ``x`` in 19-27 and ``y`` in 38-46 (arcsec), their errors (not read), ``I``
or ``P`` in 58 and UT1-UTC in 59-68 (s), then its error, LOD and nutation (not read)::

    73 1 2 41684.00 I  0.120733 0.009786  0.136966 0.015902  I 0.8084178 0.0002710 ...

The days must follow one another, a line each (a day left out, repeated or out of order is refused, where
Skyfield's table would interpolate across it). Lines at the end that carry only a date (past the predictions) are
skipped. :func:`read_iers_finals` reads the file bounded (its size checked before it is read), checks every line
and refuses a bad one in one :class:`OrbitError` line naming ``file:line``; :class:`PolarMotion` gives the
Skyfield time scale of the file and refuses times the file does not cover (Skyfield would hold the first or last
value, or extrapolate UT1).

The time scale is Skyfield's ``Timescale`` with the built-in leap seconds and, in place of its built-in UT1 (a
table that ends where Skyfield was released, then a smooth extrapolation), the file's: TT - UT1 on each day's 0 h
UTC, ``32.184 s + (TAI - UTC) - (UT1 - UTC)``, rounded to 0.1 us, as Skyfield's ``iers.build_timescale_arrays``
makes it when it loads ``finals2000A.all`` itself (that function counts the leap seconds from the file's first
day, 1973-01-02, so it would be wrong for a file that starts later, such as ``finals2000A.data``); the polar
motion is installed by Skyfield's ``iers.install_polar_motion_table``. Skyfield interpolates both linearly between
the days. A leap second the file shows (UT1 - UTC stepping by a second) must be one of Skyfield's, and the other
way round: a day on which TT - UT1 steps by :data:`MAX_DELTA_T_STEP_S` or more is refused.

Example:
    >>> pm = parse_iers_finals_text(  # two days of made-up values, then a day past the predictions
    ...     "08 920 54729.00 I  0.100000 0.000020  0.300000 0.000020  I-0.4600000 0.0000060\\n"
    ...     "08 921 54730.00 P  0.102000 0.000020  0.301000 0.000020  P-0.4610000 0.0000060\\n"
    ...     "08 922 54731.00\\n", "finals2000A.all")
    >>> pm.utc_mjd.tolist(), pm.x_arcsec.tolist(), pm.ut1_minus_utc_s.tolist(), pm.span_text()
    ([54729.0, 54730.0], [0.1, 0.102], [-0.46, -0.461], '2008-09-20T00:00:00Z..2008-09-21T00:00:00Z')
    >>> round(float(pm.timescale.utc(2008, 9, 20, 12).dut1), 7)  # UT1 - UTC, halfway between the two days
    -0.4605
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from swarmbase.tomlcheck import brief, read_text_file, shown

from .constants import DAY_S
from .errors import OrbitError
from .timeutil import parse_utc, timescale, utc_text

#: Files larger than this are refused before they are read: ``finals2000A.all``, a line of under 190 bytes a
#: day from 1973 to a year ahead, is about 3.8 MB (20,113 lines when issued in December 2026: the whole file of
#: tests/test_orbits_iers.py) and grows by under 70 kB a year.
MAX_IERS_BYTES = 8 * 1024 * 1024
#: Largest pole coordinate read (arcsec): the pole has stayed within 0.6 arcsec of the IERS reference pole
#: since 1962; a larger number is a misplaced column, not polar motion.
MAX_POLE_ARCSEC = 1.0
#: Largest UT1 - UTC read (s): leap seconds keep UTC within 0.9 s of UT1; a larger number is a misplaced column.
MAX_UT1_MINUS_UTC_S = 1.0
#: Largest change of TT - UT1 from one day to the next (s): the Earth's day has stayed within 5 ms of 86,400 s;
#: a larger step is a bad value, or a leap second of the file that Skyfield's table lacks (or the other way round).
MAX_DELTA_T_STEP_S = 0.1
_MJD_ORIGIN = _dt.datetime(1858, 11, 17, tzinfo=_dt.timezone.utc)
_MJD = re.compile(r"\d{5}\.\d{2}", re.ASCII)  # ASCII digits: float() reads every script's, and \d matches them
_ARCSEC = re.compile(r"-?\d?\.\d{6}", re.ASCII)
_SECONDS = re.compile(r"-?\d?\.\d{7}", re.ASCII)
#: What a line is, for the messages.
_LAYOUT = ("a line of an IERS finals2000A.all or finals.all file: the date in columns 1-6, MJD 8-15, I or P 17, the "
           "pole's x 19-27 and y 38-46 (arcsec), I or P 58, UT1-UTC 59-68 (s)")


def _utc(mjd: float) -> _dt.datetime:
    return _MJD_ORIGIN + _dt.timedelta(days=mjd)


def _tt_minus_utc_s(utc_mjd: np.ndarray) -> np.ndarray:
    """TT - UTC (s) at 0 h UTC of each day: 32.184 s and TAI - UTC, the leap seconds of Skyfield's built-in table."""
    t = timescale().utc(1858, 11, 17.0 + utc_mjd)
    return 32.184 + np.round((t.tai - (utc_mjd + 2400000.5)) * DAY_S)  # a whole number of seconds: exact once rounded


def _delta_t_s(utc_mjd: np.ndarray, ut1_minus_utc_s: np.ndarray) -> np.ndarray:
    """TT - UT1 (s) at 0 h UTC of each day, as Skyfield's ``iers.build_timescale_arrays`` rounds it."""
    return (_tt_minus_utc_s(utc_mjd) - ut1_minus_utc_s).round(7)


@dataclass(frozen=True, eq=False)
class PolarMotion:
    """The pole's daily ``x``, ``y`` (arcsec) and UT1 - UTC (s) at 0 h UTC of each ``utc_mjd`` (one a day, in
    order), read from ``source``."""

    source: str
    utc_mjd: np.ndarray
    x_arcsec: np.ndarray
    y_arcsec: np.ndarray
    ut1_minus_utc_s: np.ndarray

    def __repr__(self) -> str:
        return f"PolarMotion({self.source!r}, {self.utc_mjd.size} days, {self.span_text()})"

    def span_text(self) -> str:
        """The UTC span the file covers, ``first..last``."""
        first, last = (utc_text(_utc(float(d)), "seconds") for d in self.utc_mjd[[0, -1]])
        return f"{first}..{last}"

    def check_covers(self, start: _dt.datetime | str, duration_s: float, field: str) -> None:
        """Refuse, in one :class:`OrbitError` line naming ``field`` and the file, times from ``start`` over
        ``duration_s`` seconds (UTC) that are not between the file's first and last day (outside them Skyfield
        would hold the pole's end value and extrapolate UT1: neither is)."""
        start = parse_utc(start, field=field)
        end = start + _dt.timedelta(seconds=float(duration_s))
        first, last = _utc(float(self.utc_mjd[0])), _utc(float(self.utc_mjd[-1]))
        if start < first or end > last:
            raise OrbitError(f"{field}: {brief(self.source)} gives polar motion for {self.span_text()}, not for "
                             f"{utc_text(start, 'seconds')}..{utc_text(end, 'seconds')}; expected an IERS finals file "
                             "covering those times (finals2000A.all from the IERS Rapid Service reaches a year ahead)")

    def timescale_for(self, start: _dt.datetime | str, offsets_s, field: str):
        """:attr:`timescale`, once the times ``start + offsets_s`` (seconds, any order; none: nothing to check)
        are found covered (:meth:`check_covers`): the time scale every Earth-fixed rotation with this file is
        computed on."""
        offsets = np.asarray(offsets_s, dtype=float)
        if offsets.size:
            first = float(offsets.min())
            self.check_covers(parse_utc(start, field=field) + _dt.timedelta(seconds=first),
                              float(offsets.max()) - first, field)
        return self.timescale

    @cached_property
    def timescale(self):
        """A Skyfield ``Timescale`` with the built-in leap seconds, this file's UT1 (TT - UT1 a day, the module's
        docstring) and its polar motion installed by Skyfield's ``iers.install_polar_motion_table``: its ``itrs``
        frame applies both (the Earth's rotation angle from UT1, then the pole)."""
        from skyfield.data import iers
        from skyfield.timelib import Timescale

        builtin = timescale()
        daily_tt = self.utc_mjd + _tt_minus_utc_s(self.utc_mjd) / DAY_S + 2400000.5  # as build_timescale_arrays
        ts = Timescale((daily_tt, _delta_t_s(self.utc_mjd, self.ut1_minus_utc_s)), builtin.leap_dates,
                       builtin.leap_offsets)
        iers.install_polar_motion_table(ts, {"utc_mjd": self.utc_mjd, "x_arcseconds": self.x_arcsec,
                                             "y_arcseconds": self.y_arcsec})
        return ts


def _calendar_date(line: str, mjd: float) -> _dt.date | None:
    """The date of columns 1-6, None when there is none: the year's two digits are of 19yy up to MJD 51543 and of
    20yy after, as the IERS ``readme.finals2000A`` says."""
    parts = [line[k:k + 2].strip() for k in (0, 2, 4)]
    if not all(p.isascii() and p.isdigit() for p in parts):
        return None
    year, month, day = (int(p) for p in parts)
    try:
        return _dt.date(year + (1900 if mjd <= 51543 else 2000), month, day)
    except ValueError:
        return None


def _day_step(mjd: float, previous: float, previous_number: int) -> str:
    """What is wrong with a line's MJD after ``previous``, the MJD of line ``previous_number``."""
    if mjd == previous:
        return f"repeats the day of line {previous_number}"
    if mjd < previous:
        return f"comes before line {previous_number}'s {previous:.2f}"
    missing = int(mjd - previous) - 1
    return f"after line {previous_number}'s {previous:.2f} leaves out {missing} day{'s' if missing > 1 else ''}"


def parse_iers_finals_text(text: str, source: str = "<text>") -> PolarMotion:
    """The polar motion and UT1 - UTC of the text of an IERS finals file (:class:`OrbitError` naming
    ``source:line``)."""
    where = brief(source)  # as every message names it: escaped, a long path cut
    days: list[float] = []
    xs: list[float] = []
    ys: list[float] = []
    dut1s: list[float] = []
    numbers: list[int] = []  # the line of each day
    previous, previous_number = -1.0, 0  # the MJD and number of the line before (none yet)
    ended = 0  # the first line with a date and no polar motion

    def fail(number: int, message: str) -> OrbitError:
        return OrbitError(f"{where}:{number}: {message}")

    for number, raw in enumerate(text.split("\n"), start=1):
        # Lines end at LF or CR LF, as the IERS writes its fixed-column files; not swarmbase.tomlcheck.text_lines,
        # which also ends one at a CR alone: no IERS file has one, so a CR inside a line is refused naming it (a
        # file of CR-ended lines at its line 1: before this check, its first day alone was read and the rest
        # passed over). As in text_lines no other character ends a line (U+2028, a form feed: a column's
        # character, checked with the column's value, or in a column not read).
        line = raw.rstrip("\r")
        if "\r" in line:
            raise fail(number, "a carriage return (CR) inside the line; expected lines ended by LF or CR LF")
        if not line.strip():
            continue
        mjd_text = line[7:15].strip()
        if not _MJD.fullmatch(mjd_text) or line[6:7] != " ":
            raise fail(number, f"expected {_LAYOUT}, got {shown(line)}")
        mjd = float(mjd_text)
        date = _calendar_date(line, mjd)
        if date is None or (date - _MJD_ORIGIN.date()).days != mjd:
            raise fail(number, f"the date of columns 1-6, {shown(line[:6])}, is not MJD {mjd_text} (columns 8-15); "
                               f"expected {_LAYOUT}")
        if previous_number and mjd != previous + 1:  # Skyfield would interpolate across a gap, silently
            raise fail(number, f"MJD {mjd_text} {_day_step(mjd, previous, previous_number)}; expected one line a "
                               f"day, each the day after the line before (MJD {previous + 1:.2f})")
        previous, previous_number = mjd, number
        x_text, y_text = line[18:27].strip(), line[37:46].strip()
        if not x_text and not y_text:  # past the predictions: a date only
            ended = ended or number
            continue
        if ended:
            raise fail(number, f"polar motion after line {ended}, which had none; expected the lines without it "
                               "only at the end of the file")
        if line[16:17] not in ("I", "P"):
            raise fail(number, f"expected I (IERS) or P (prediction) in column 17, got {shown(line[16:17])}")
        for axis, value in (("x", x_text), ("y", y_text)):
            if not _ARCSEC.fullmatch(value) or abs(float(value)) > MAX_POLE_ARCSEC:
                columns = "19-27" if axis == "x" else "38-46"
                raise fail(number, f"expected the pole's {axis} in columns {columns}, arcsec with 6 decimals within "
                                   f"+-{MAX_POLE_ARCSEC:g}, got {shown(value)}")
        if line[57:58] not in ("I", "P"):
            raise fail(number, f"expected I (IERS) or P (prediction) in column 58, for UT1-UTC, got "
                               f"{shown(line[57:58])}")
        dut1_text = line[58:68].strip()
        if not _SECONDS.fullmatch(dut1_text) or abs(float(dut1_text)) > MAX_UT1_MINUS_UTC_S:
            raise fail(number, f"expected UT1-UTC in columns 59-68, seconds with 7 decimals within "
                               f"+-{MAX_UT1_MINUS_UTC_S:g}, got {shown(dut1_text)}")
        days.append(mjd)
        xs.append(float(x_text))
        ys.append(float(y_text))
        dut1s.append(float(dut1_text))
        numbers.append(number)
    if not days:
        raise OrbitError(f"{where}: no polar motion; expected {_LAYOUT}")
    utc_mjd, dut1 = np.array(days), np.array(dut1s)
    _check_leap_seconds(utc_mjd, dut1, numbers, fail)
    return PolarMotion(source, utc_mjd, np.array(xs), np.array(ys), dut1)


def _check_leap_seconds(utc_mjd: np.ndarray, dut1: np.ndarray, numbers: list[int], fail) -> None:
    """Refuse (``fail(line, message)``) the first day on which TT - UT1 steps by :data:`MAX_DELTA_T_STEP_S` or
    more: UT1 - UTC steps by a second at a leap second of the file that is not one of Skyfield's, or stays put
    at one of Skyfield's, or is a bad value."""
    steps = np.abs(np.diff(_delta_t_s(utc_mjd, dut1)))
    bad = np.flatnonzero(steps >= MAX_DELTA_T_STEP_S)
    if bad.size:
        import skyfield

        k = int(bad[0]) + 1
        before, after = _tt_minus_utc_s(utc_mjd[k - 1:k + 1])
        leap = f"a leap second ({after - before:+.0f} s)" if after != before else "no leap second"
        raise fail(numbers[k], f"UT1-UTC (columns 59-68) goes from {dut1[k - 1]:.7f} s on line {numbers[k - 1]} to "
                               f"{dut1[k]:.7f} s where Skyfield {skyfield.__version__} has {leap}; expected a change "
                               f"of milliseconds a day, or of a second at a leap second (TT-UT1 steps by "
                               f"{steps[k - 1]:.4f} s; a later leap second needs a newer Skyfield)")


def read_iers_finals(path: str | Path) -> PolarMotion:
    """Read an IERS finals file (at most :data:`MAX_IERS_BYTES`, checked before it is read)."""
    path = Path(path)
    return parse_iers_finals_text(read_text_file(path, OrbitError, "IERS finals file", MAX_IERS_BYTES), str(path))
