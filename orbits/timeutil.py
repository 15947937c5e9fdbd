"""Time handling: UTC parsing, Julian dates for SGP4, Skyfield time scales.

SGP4 takes UTC Julian dates split as ``(jd, fr)`` (whole + fraction, the split
keeps sub-millisecond precision). Skyfield's built-in time scale (no download:
``load.timescale(builtin=True)``) gives the leap seconds and UT1 needed for
frame conversions.

Example:
    >>> start = parse_utc("2025-03-01T00:00:00Z", field="time.start")
    >>> jd, fr = julian_dates(start, [0.0, 60.0])
    >>> float(jd[0]), round(float(fr[1]) * 86400, 6)
    (2460735.5, 60.0)
"""

from __future__ import annotations

import datetime as _dt
import re
from functools import lru_cache

import numpy as np

from swarmbase.tomlcheck import shown

from .constants import DAY_S, SGP4_EPOCH_ORIGIN_JD
from .errors import OrbitError

_J2000_UNIX = _dt.datetime(2000, 1, 1, 12, tzinfo=_dt.timezone.utc)
_SGP4_ORIGIN = _dt.datetime(1949, 12, 31, tzinfo=_dt.timezone.utc)  # day 0 of SGP4's epoch count
_JD_J2000 = 2451545.0
#: A CCSDS day-of-year date (``2026-213T06:30:00``), which ``datetime.fromisoformat`` does not read.
_DAY_OF_YEAR = re.compile(r"(\d{4}-\d{3})(?=T|$)", re.ASCII)  # as fromisoformat, ASCII digits only


@lru_cache(maxsize=1)
def timescale():
    """Skyfield's built-in timescale (offline; cached)."""
    from skyfield.api import load

    return load.timescale(builtin=True)


def utc_offset_s(scale: str, naive: _dt.datetime) -> float:
    """Seconds the time system ``scale`` (UTC, TT, TAI or GPS) runs ahead of UTC at the instant ``naive``
    (in that scale), to the millisecond: Skyfield's leap-second table; GPS time is TAI - 19 s."""
    if scale == "UTC":
        return 0.0
    ts = timescale()
    seconds = naive.second + naive.microsecond * 1e-6
    if scale == "GPS":  # GPS time = TAI - 19 s
        t = ts.tai(naive.year, naive.month, naive.day, naive.hour, naive.minute, seconds + 19.0)
    else:
        t = getattr(ts, scale.lower())(naive.year, naive.month, naive.day, naive.hour, naive.minute, seconds)
    utc = t.utc_datetime().replace(tzinfo=None)
    return round((naive - utc).total_seconds(), 3)  # whole leap seconds plus TT's 32.184 s


def parse_utc(value: str | _dt.datetime, field: str = "epoch") -> _dt.datetime:
    """Parse an ISO-8601 UTC instant (``2025-03-01T00:00:00Z``) into an aware datetime.

    Naive strings are taken as UTC; other offsets are converted to UTC.
    Raises :class:`OrbitError` naming ``field`` when the text is not ISO-8601.
    """
    if isinstance(value, _dt.datetime):
        dt = value
    else:
        text = str(value).strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise OrbitError(
                f"{field}: expected an ISO-8601 UTC time like 2025-03-01T00:00:00Z, got {shown(value)}"
            ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.timezone.utc)
    try:
        return dt.astimezone(_dt.timezone.utc)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is in the year 0 in UTC, which datetime cannot hold
        raise OrbitError(f"{field}: expected a time within the years 1..9999 in UTC, got {shown(str(value))}") from None


def utc_text(instant: _dt.datetime, timespec: str = "auto", zone: str = "Z") -> str:
    """``instant`` as ISO-8601 UTC text (a naive one is taken as UTC), ``zone`` after it (``""``: none, as a
    CCSDS time with ``TIME_SYSTEM = UTC``), to ``timespec`` (``datetime.isoformat``'s: ``auto`` gives the
    microseconds when there are any; ``milliseconds`` cuts to the millisecond). The year is written in four
    digits, as every ISO-8601 and CCSDS reader (:func:`parse_utc`, :func:`ccsds_datetime`) expects it:
    ``strftime("%Y")`` writes the year 26 as ``26``.

    >>> utc_text(parse_utc("0026-08-01T06:30:00.1239Z"), "milliseconds"), utc_text(_dt.datetime(2026, 8, 1), zone="")
    ('0026-08-01T06:30:00.123Z', '2026-08-01T00:00:00')
    """
    if instant.tzinfo is not None:
        instant = instant.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return instant.isoformat(timespec=timespec) + zone


def ccsds_datetime(text: str) -> _dt.datetime:
    """A CCSDS time (``2026-08-01T06:30:00.5``, or with a day of year, ``2026-213T06:30:00.5``, as
    CCSDS 502.0-B allows; a trailing ``Z`` or an offset is taken off, converting to UTC) as a naive
    datetime in the message's own time system; :class:`ValueError` when it is not one.

    >>> ccsds_datetime("2026-213T06:30:00Z"), ccsds_datetime("2026-08-01T06:30:00.1234567")
    (datetime.datetime(2026, 8, 1, 6, 30), datetime.datetime(2026, 8, 1, 6, 30, 0, 123456))
    """
    text = text.strip()
    if text[-1:] in "Zz":
        text = text[:-1]
    ordinal = _DAY_OF_YEAR.match(text)
    if ordinal:  # strptime's %j takes day 366 of a common year as January 1 of the next
        year, day = (int(part) for part in ordinal.group(1).split("-"))
        if not 1 <= day <= (366 if _dt.date(year, 12, 31).timetuple().tm_yday == 366 else 365):
            raise ValueError(ordinal.group(1))
        date = _dt.date(year, 1, 1) + _dt.timedelta(days=day - 1)
        text = date.isoformat() + text[len(ordinal.group(1)):]
    dt = _dt.datetime.fromisoformat(text)  # more than 6 decimals of a second: cut to the microsecond
    if dt.tzinfo is not None:  # OverflowError: 9999-12-31T23:00:00-05:00 is in the year 10000 in UTC
        dt = dt.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return dt


def julian_date(instant: _dt.datetime) -> tuple[float, float]:
    """UTC Julian date of ``instant`` as ``(whole, fraction)``; whole ends in .5."""
    instant = parse_utc(instant)
    midnight = instant.replace(hour=0, minute=0, second=0, microsecond=0)
    days = (midnight - _J2000_UNIX).days + (midnight - _J2000_UNIX).seconds / DAY_S
    whole = _JD_J2000 + days  # exact: the offset is -0.5 + integer days
    frac = (instant - midnight) / _dt.timedelta(days=1)
    return float(whole), float(frac)


def julian_dates(start: _dt.datetime, offsets_s) -> tuple[np.ndarray, np.ndarray]:
    """UTC Julian dates ``(jd, fr)`` for ``start + offsets_s`` (seconds), vectorized.

    ``jd`` stays at the whole date of ``start`` and ``fr`` carries the offset
    (SGP4 accepts fractions beyond 1), which keeps the time resolution uniform.
    """
    whole, frac = julian_date(start)
    offsets = np.asarray(offsets_s, dtype=float)
    return np.full(offsets.shape, whole), frac + offsets / DAY_S


def sgp4_epoch_days(instant: _dt.datetime) -> float:
    """Days since 1949-12-31 00:00 UTC, the epoch argument of ``Satrec.sgp4init``."""
    whole, frac = julian_date(instant)
    return (whole - SGP4_EPOCH_ORIGIN_JD) + frac


def satrec_epoch(sat) -> _dt.datetime:
    """The UTC epoch of an SGP4 satellite record (the inverse of :func:`sgp4_epoch_days`).

    >>> from orbits import circular_satrec
    >>> sat = circular_satrec(1, parse_utc("2060-05-01T06:00:00Z"), 550.0, 53.0, 0.0, 0.0)
    >>> satrec_epoch(sat).isoformat()
    '2060-05-01T06:00:00+00:00'

    The record keeps its epoch as one float count of days (``Satrec.sgp4init``), a step of about 40 us
    in the year 9999: an epoch in the last microseconds of 9999-12-31 comes back past the last instant
    a ``datetime`` holds, and is given as that instant (an epoch in the first ones of the year 1, as
    its first).

    >>> late = circular_satrec(1, parse_utc("9999-12-31T23:59:59.999999Z"), 550.0, 53.0, 0.0, 0.0)
    >>> satrec_epoch(late).isoformat()
    '9999-12-31T23:59:59.999999+00:00'
    """
    days = (sat.jdsatepoch - SGP4_EPOCH_ORIGIN_JD) + sat.jdsatepochF
    try:
        return _SGP4_ORIGIN + _dt.timedelta(days=days)
    except OverflowError:  # rounded past the calendar's end (or start): its last (first) instant
        edge = _dt.datetime.max if days > 0 else _dt.datetime.min
        return edge.replace(tzinfo=_dt.timezone.utc)


def skyfield_times(start: _dt.datetime, offsets_s, ts=None):
    """Skyfield ``Time`` array for ``start + offsets_s`` (UTC seconds), on the time scale ``ts`` (default
    :func:`timescale`; :attr:`orbits.iers.PolarMotion.timescale` has an IERS finals file's UT1 and polar motion).

    The same instants as :func:`julian_dates` (SGP4's UTC Julian dates, 86,400 s
    to every day): the offsets are cut into whole days and seconds of the day,
    so a horizon across a leap second does not slip by it (Skyfield counts
    seconds past the given day's end as SI seconds, leap seconds included).
    """
    if ts is None:
        ts = timescale()
    start = parse_utc(start)
    offsets = np.asarray(offsets_s, dtype=float)
    second_of_day = (start.hour * 3600.0 + start.minute * 60.0 + start.second
                     + start.microsecond * 1e-6 + offsets)
    days = np.floor(second_of_day / DAY_S)
    return ts.utc(start.year, start.month, start.day + days, 0, 0, second_of_day - days * DAY_S)
