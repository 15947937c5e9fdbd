"""IERS finals fixtures shared by the polar-motion tests (``orbits.iers``; ``[time] iers_finals``): a few lines of
finals2000A.all in its fixed columns, with made-up pole values around 2008-09-20, the day of the tests' orbits."""

from __future__ import annotations

import datetime as _dt

#: The pole (x, y, arcsec) at 0 h UTC of 2008-09-19, -20 and -21: made-up values of the size of the real ones
#: (0.1 to 0.5 arcsec), changing from day to day so that the interpolation between the days is exercised.
POLE = {_dt.date(2008, 9, 19): (0.180000, 0.390000), _dt.date(2008, 9, 20): (0.200000, 0.350000),
        _dt.date(2008, 9, 21): (0.210000, 0.360000)}


def finals_line(day: _dt.date, x: float | None = None, y: float | None = None, flag: str = "I") -> str:
    """One line of finals2000A.all in its fixed columns (the IERS readme.finals2000A): date, MJD, Bulletin A's
    polar motion and UT1-UTC with their errors, LOD, nutation; only the date and MJD past the predictions."""
    mjd = (day - _dt.date(1858, 11, 17)).days
    head = f"{day.year % 100:2d}{day.month:2d}{day.day:2d} {mjd:8.2f}"
    if x is None:
        return head + "\n"
    return (f"{head} {flag} {x:9.6f}{0.000020:9.6f} {y:9.6f}{0.000020:9.6f}  {flag}{-0.4686459:10.7f}"
            f"{0.0000063:10.7f}  0.8163 0.0048  {flag}   -58.026    0.281    -6.283    0.300\n")


def finals_text(pole: dict[_dt.date, tuple[float, float]] = POLE) -> str:
    """The lines of ``pole``'s days, then one day past the predictions (a date only), as the real file ends."""
    last = max(pole) + _dt.timedelta(days=1)
    return "".join(finals_line(day, x, y) for day, (x, y) in sorted(pole.items())) + finals_line(last)
