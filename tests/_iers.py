"""IERS finals fixtures shared by the polar-motion and UT1 tests (``orbits.iers``; ``[time] iers_finals``): a few
lines of finals2000A.all in its fixed columns, with made-up pole values and the real UT1-UTC around 2008-09-20,
the day of the tests' orbits."""

from __future__ import annotations

import datetime as _dt

#: The pole (x, y, arcsec) at 0 h UTC of 2008-09-19, -20 and -21: made-up values of the size of the real ones
#: (0.1 to 0.5 arcsec), changing from day to day so that the interpolation between the days is exercised.
POLE = {_dt.date(2008, 9, 19): (0.180000, 0.390000), _dt.date(2008, 9, 20): (0.200000, 0.350000),
        _dt.date(2008, 9, 21): (0.210000, 0.360000)}
#: UT1 - UTC (s) at 0 h UTC of those days: the IERS values, as Skyfield's built-in table holds them (so the time
#: scale of a file of them turns the Earth as the built-in one does, to the 0.1 us the file writes).
UT1_MINUS_UTC_S = {_dt.date(2008, 9, 19): -0.4800210, _dt.date(2008, 9, 20): -0.4809865,
                   _dt.date(2008, 9, 21): -0.4816851}


def finals_line(day: _dt.date, x: float | None = None, y: float | None = None, flag: str = "I",
                ut1_minus_utc_s: float | None = None) -> str:
    """One line of finals2000A.all in its fixed columns (the IERS readme.finals2000A): date, MJD, Bulletin A's
    polar motion and UT1-UTC (default: :data:`UT1_MINUS_UTC_S` of ``day``) with their errors, LOD, nutation; only
    the date and MJD past the predictions."""
    mjd = (day - _dt.date(1858, 11, 17)).days
    head = f"{day.year % 100:2d}{day.month:2d}{day.day:2d} {mjd:8.2f}"
    if x is None:
        return head + "\n"
    dut1 = UT1_MINUS_UTC_S[day] if ut1_minus_utc_s is None else ut1_minus_utc_s
    return (f"{head} {flag} {x:9.6f}{0.000020:9.6f} {y:9.6f}{0.000020:9.6f}  {flag}{dut1:10.7f}"
            f"{0.0000063:10.7f}  0.8163 0.0048  {flag}   -58.026    0.281    -6.283    0.300\n")


def finals_text(pole: dict[_dt.date, tuple[float, float]] = POLE,
                ut1_minus_utc_s: dict[_dt.date, float] = UT1_MINUS_UTC_S) -> str:
    """The lines of ``pole``'s days (with ``ut1_minus_utc_s`` of each), then one day past the predictions (a date
    only), as the real file ends."""
    last = max(pole) + _dt.timedelta(days=1)
    return "".join(finals_line(day, x, y, ut1_minus_utc_s=ut1_minus_utc_s[day])
                   for day, (x, y) in sorted(pole.items())) + finals_line(last)
