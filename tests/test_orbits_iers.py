"""Polar motion from an IERS finals file (orbits.iers) for OEM states in ITRF: the columns read as Skyfield's
own parser reads them, the ITRF states written are Skyfield's itrs with that table installed and move by the
pole's offset, they read back into TEME, nothing changes without the file, and a bad, huge or too short file
is refused in one line naming it."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import numpy as np
import pytest

from orbits import OrbitError, propagate_offsets, read_oem, read_tle, write_oem
from orbits import iers as iers_module
from orbits import oem as oem_module
from orbits.iers import parse_iers_finals_text, read_iers_finals
from orbits.timeutil import skyfield_times

from _iers import POLE, finals_line, finals_text

EXAMPLE_TLE = Path(__file__).resolve().parents[1] / "examples" / "leo_oem.tle"
START = dt.datetime(2008, 9, 20, 12, 0, tzinfo=dt.timezone.utc)
SPAN_S, STEP_S = 3 * 3600.0, 60.0
ARCSEC_RAD = np.pi / 180.0 / 3600.0


@pytest.fixture()
def finals(tmp_path: Path) -> Path:
    path = tmp_path / "finals2000A.all"
    path.write_text(finals_text())
    return path


def skyfield_timescale(path: Path):
    """A time scale with the file's polar motion installed by Skyfield alone (its parser and its installer)."""
    from skyfield.api import load
    from skyfield.data import iers

    ts = load.timescale(builtin=True)
    with open(path, "rb") as fh:
        iers.install_polar_motion_table(ts, iers.parse_x_y_dut1_from_finals_all(fh))
    return ts


def test_the_columns_are_read_as_skyfields_own_parser_reads_them(finals: Path) -> None:
    from skyfield.data import iers

    pm = read_iers_finals(finals)
    with open(finals, "rb") as fh:
        theirs = iers.parse_x_y_dut1_from_finals_all(fh)
    assert pm.utc_mjd.tolist() == theirs["utc_mjd"].tolist() == [54728.0, 54729.0, 54730.0]
    assert pm.x_arcsec.tolist() == theirs["x_arcseconds"].tolist() == [p[0] for p in POLE.values()]
    assert pm.y_arcsec.tolist() == theirs["y_arcseconds"].tolist() == [p[1] for p in POLE.values()]
    assert pm.source == str(finals) and pm.span_text() == "2008-09-19T00:00:00Z..2008-09-21T00:00:00Z"
    ts_table = pm.timescale.polar_motion_table
    assert all(np.array_equal(a, b) for a, b in zip(ts_table, skyfield_timescale(finals).polar_motion_table))


# measured (the three element sets of examples/leo_oem.tle, 181 states each over 3 h from 2008-09-20 12:00, the
# pole of POLE): positions 0.82 mm at most from Skyfield's itrs with the table (the 6 decimals written); moved
# 0.53 to 13.44 m from the export without polar motion, r x the pole's 0.41 arcsec being 13.45 m at most,
# and within 1.3 mm of the small rotation (y, x, 0) x r; velocities 0.98 mm/s from Skyfield's, which turns
# about the ITRS z axis where the reader and the writer turn about TEME's pole, tilted by the polar motion:
# 0.058 mm/s once that tilt is counted (the two rotation rates, as without polar motion)
def test_itrf_states_written_with_polar_motion_are_skyfields_itrs_with_the_table(tmp_path: Path,
                                                                                 finals: Path) -> None:
    from skyfield.api import EarthSatellite
    from skyfield.framelib import itrs

    from orbits.constants import EARTH_ROTATION_RAD_S

    sats = read_tle(EXAMPLE_TLE)
    pm = read_iers_finals(finals)
    plain = read_oem(write_oem(tmp_path / "plain.oem", sats, START, SPAN_S, STEP_S, frame="ITRF"))
    moved = read_oem(write_oem(tmp_path / "pm.oem", sats, START, SPAN_S, STEP_S, frame="ITRF", polar_motion=pm))
    assert (tmp_path / "pm.oem").read_text().splitlines()[2] == (
        "COMMENT rotated from TEME into Skyfield's ITRS (polar motion of finals2000A.all); velocities relative to "
        "the Earth (omega x r taken out)")
    ts = skyfield_timescale(finals)
    times = skyfield_times(START, np.arange(0.0, SPAN_S + 1.0, STEP_S), ts)
    pole_x, pole_y = (np.interp(times.tt, ts.polar_motion_table[0], ts.polar_motion_table[k]) for k in (1, 2))
    pole_z_in_itrs = np.asarray(times.polar_motion_matrix())[:, 2].T  # the rotation axis, tilted by (x, y)
    lines = EXAMPLE_TLE.read_text().splitlines()
    for k, (seg, without) in enumerate(zip(moved.segments, plain.segments)):
        at = EarthSatellite(lines[3 * k + 1], lines[3 * k + 2], lines[3 * k], ts=ts).at(times)
        position, velocity = at.frame_xyz_and_velocity(itrs)
        p, v = position.km.T, velocity.km_per_s.T
        assert np.linalg.norm(seg.pos_km - p, axis=-1).max() < 1e-6  # km: 1 mm, the decimals written
        moved_km = np.linalg.norm(seg.pos_km - without.pos_km, axis=-1)
        reach_km = np.linalg.norm(without.pos_km, axis=-1) * np.hypot(pole_x, pole_y) * ARCSEC_RAD
        assert moved_km.max() > 0.9 * reach_km.max() > 0.9 * 6.9e3 * 0.4 * ARCSEC_RAD  # about r * |pole|: 13 m
        assert (moved_km <= reach_km + 2e-6).all()
        small_turn = np.cross(np.stack([pole_y, pole_x, np.zeros_like(pole_x)], -1) * ARCSEC_RAD, without.pos_km)
        assert np.linalg.norm(seg.pos_km - (without.pos_km + small_turn), axis=-1).max() < 2e-6  # km
        apart = np.linalg.norm(seg.vel_km_s - v, axis=-1)
        assert apart.max() > 5e-7  # km/s: Skyfield turns about ITRS's z axis
        tilt = -EARTH_ROTATION_RAD_S * np.cross(pole_z_in_itrs - [0.0, 0.0, 1.0], seg.pos_km)
        assert np.linalg.norm(seg.vel_km_s - v - tilt, axis=-1).max() < 1e-7  # km/s: 0.1 mm/s


# measured (as above): read back with the file, 1.4 mm at most from the TEME export at the states, 1.8 mm between
# them (every 37.3 s), velocities 0.09 mm/s; read without it, 13.4 m from it: the polar motion left in
def test_an_itrf_export_with_polar_motion_reads_back_into_teme_with_the_file(tmp_path: Path, finals: Path) -> None:
    sats = read_tle(EXAMPLE_TLE)
    pm = read_iers_finals(finals)
    path = write_oem(tmp_path / "pm.oem", sats, START, SPAN_S, STEP_S, frame="ITRF", polar_motion=pm)
    teme = read_oem(write_oem(tmp_path / "teme.oem", sats, START, SPAN_S, STEP_S))
    offsets = np.arange(0.0, SPAN_S, 37.3)
    r_teme, v_teme = propagate_offsets(teme, START, offsets)
    r, v = propagate_offsets(read_oem(path, polar_motion=pm), START, offsets)
    assert np.linalg.norm(r - r_teme, axis=-1).max() < 3e-6  # km
    assert np.linalg.norm(v - v_teme, axis=-1).max() < 1e-6  # km/s
    r_plain, _ = propagate_offsets(read_oem(path), START, offsets)
    assert np.linalg.norm(r_plain - r_teme, axis=-1).max() > 5e-3  # km: the pole's 13 m left in


def test_without_the_file_nothing_changes_and_other_frames_do_not_use_it(tmp_path: Path, finals: Path) -> None:
    """No polar motion: the ITRF rotation is Skyfield's itrs on the built-in time scale, to the bit; a GCRF export
    and its reading are the same with and without the file (it turns ITRF states only)."""
    from orbits.groundtrack import teme_to_itrs_matrices

    offsets = np.arange(0.0, SPAN_S + 1.0, STEP_S)
    itrf = oem_module._to_teme_matrices("ITRF", START, offsets)
    assert np.array_equal(itrf, teme_to_itrs_matrices(skyfield_times(START, offsets)).transpose(0, 2, 1))
    pm = read_iers_finals(finals)
    assert not np.array_equal(oem_module._to_teme_matrices("ITRF", START, offsets, pm), itrf)
    sats = read_tle(EXAMPLE_TLE)
    texts = [write_oem(tmp_path / f"gcrf{k}.oem", sats, START, SPAN_S, STEP_S, frame="GCRF",
                       polar_motion=polar).read_text().split("\n", 3)[3] for k, polar in enumerate((None, pm))]
    assert texts[0] == texts[1]  # past the CREATION_DATE line
    r0, r1 = (propagate_offsets(read_oem(tmp_path / "gcrf0.oem", polar_motion=polar), START, offsets)[0]
              for polar in (None, pm))
    assert np.array_equal(r0, r1)


def test_times_the_file_does_not_cover_are_refused_in_one_line_before_anything_is_propagated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finals: Path) -> None:
    sats = read_tle(EXAMPLE_TLE)
    pm = read_iers_finals(finals)
    itrf = write_oem(tmp_path / "pm.oem", sats, START, SPAN_S, STEP_S, frame="ITRF", polar_motion=pm)
    late = dt.datetime(2008, 9, 20, 22, 0, tzinfo=dt.timezone.utc)
    with pytest.raises(OrbitError, match=re.escape(
            f"ITRF states: {finals} gives polar motion for 2008-09-19T00:00:00Z..2008-09-21T00:00:00Z, not for "
            "2008-09-20T22:00:00Z..2008-09-21T01:00:00Z; expected an IERS finals file covering those times")):
        with monkeypatch.context() as m:
            m.setattr(oem_module, "propagate_offsets", lambda *a, **k: pytest.fail("propagated"))
            write_oem(tmp_path / "late.oem", sats, late, SPAN_S, STEP_S, frame="ITRF", polar_motion=pm)
    assert not (tmp_path / "late.oem").exists()
    eph = read_oem(itrf, polar_motion=pm)
    with pytest.raises(OrbitError, match=r"^ITRF states: .*finals2000A.all gives polar motion for .*, not for "
                                         r"2008-09-18T23:59:59Z\.\.2008-09-20T12:00:00Z;"):
        eph.positions_teme_km(START, [-(36 * 3600.0 + 1.0), 0.0])


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines[:1] + [lines[1][:18] + " 0.2x0000" + lines[1][27:]] + lines[2:],
     r":2: expected the pole's x in columns 19-27, arcsec with 6 decimals within \+-1, got '0.2x0000'"),
    (lambda lines: lines[:1] + [lines[1][:37] + " 1.500000" + lines[1][46:]] + lines[2:],
     r":2: expected the pole's y in columns 38-46, arcsec with 6 decimals within \+-1, got '1.500000'"),
    (lambda lines: lines[:1] + [lines[1][:18] + "     0.20" + lines[1][27:]] + lines[2:],
     r":2: expected the pole's x in columns 19-27, arcsec with 6 decimals"),
    (lambda lines: lines[:1] + [lines[1][:16] + "X" + lines[1][17:]] + lines[2:],
     r":2: expected I \(IERS\) or P \(prediction\) in column 17, got 'X'"),
    (lambda lines: lines[:1] + [" " + lines[1]] + lines[2:], r":2: expected a line of an IERS finals2000A.all"),
    (lambda lines: lines[:1] + [lines[1].replace(" 920 ", " 921 ", 1)] + lines[2:],
     r":2: the date of columns 1-6, ' 8 921', is not MJD 54729.00 \(columns 8-15\); expected a line of"),
    (lambda lines: [lines[1], lines[0]] + lines[2:],
     r":2: MJD 54728.00 comes before line 1's 54729.00; expected one line a day, each the day after the line before "
     r"\(MJD 54730.00\)"),
    (lambda lines: [lines[0], lines[2], lines[3]],
     r":2: MJD 54730.00 after line 1's 54728.00 leaves out 1 day; expected one line a day, each the day after the "
     r"line before \(MJD 54729.00\)"),
    (lambda lines: [lines[0], "", lines[3]],
     r":3: MJD 54731.00 after line 1's 54728.00 leaves out 2 days; expected one line a day"),
    (lambda lines: lines[:2] + [lines[1]] + lines[2:],
     r":3: MJD 54729.00 repeats the day of line 2; expected one line a day, each the day after the line before "
     r"\(MJD 54730.00\)"),
    (lambda lines: [lines[0], finals_line(dt.date(2008, 9, 20)).rstrip("\n")] + lines[2:],
     r":3: polar motion after line 2, which had none; expected the lines without it only at the end of the file"),
    (lambda lines: ["<html>not found</html>"], r":1: expected a line of an IERS finals2000A.all or finals.all"),
    (lambda lines: [], r": no polar motion; expected a line of an IERS finals2000A.all"),
    (lambda lines: lines[3:], r": no polar motion"),
], ids=["x-not-a-number", "y-too-large", "x-misplaced", "flag", "shifted", "date-not-mjd", "out-of-order",
        "day-left-out", "days-left-out-past-a-blank-line", "day-repeated",
        "after-the-end", "not-finals", "empty", "dates-only"])
def test_a_malformed_file_is_refused_in_one_line_naming_file_and_line(tmp_path: Path, edit, message: str) -> None:
    path = tmp_path / "finals2000A.all"
    path.write_text("\n".join(edit(finals_text().splitlines())))
    with pytest.raises(OrbitError, match=re.escape(str(path)) + message) as caught:
        read_iers_finals(path)
    assert "\n" not in str(caught.value)


def test_the_size_cap_is_checked_before_the_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "finals2000A.all"
    with open(path, "wb") as fh:  # sparse: no disk used
        fh.truncate(iers_module.MAX_IERS_BYTES + 1)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("read"))
    with pytest.raises(OrbitError, match=re.escape(f"{path}: {iers_module.MAX_IERS_BYTES + 1} bytes; an IERS finals "
                                                   f"file may have at most {iers_module.MAX_IERS_BYTES}")):
        read_iers_finals(path)


def test_a_real_finals_lines_prediction_flags_and_the_empty_tail_are_read() -> None:
    """Predictions (P) are read as measured values (I) are; lines past the predictions, a date and spaces, are
    skipped; a line of Windows' CR LF too."""
    text = (finals_line(dt.date(2008, 9, 20), 0.2, 0.35) + finals_line(dt.date(2008, 9, 21), -0.01, 0.4, flag="P")
            .replace("\n", "\r\n") + finals_line(dt.date(2008, 9, 22)).rstrip("\n") + " " * 90 + "\n\n")
    pm = parse_iers_finals_text(text, "f")
    assert pm.utc_mjd.tolist() == [54729.0, 54730.0] and pm.x_arcsec.tolist() == [0.2, -0.01]
    from skyfield.data import iers

    theirs = iers.parse_x_y_dut1_from_finals_all(io.BytesIO(text.encode()))
    assert pm.y_arcsec.tolist() == theirs["y_arcseconds"].tolist()


def _whole_finals_text(issued: dt.date) -> str:
    """A finals2000A.all as the IERS Rapid Service publishes it on ``issued``, laid out by the readme's columns
    (made-up values): from 1973-01-02, a full line a day (Bulletin A's polar motion, UT1-UTC, LOD and nutation
    with their flags, then Bulletin B's columns, written as the real file writes them: ``   .143000``) up to
    ``issued``; then a year of predictions (polar motion and UT1-UTC only, flag P); then 50 days of a date
    only, as the real file ends. Every line padded to 185 columns and two spaces, as the real file's are."""
    lines = []
    day, last_p, end = dt.date(1973, 1, 2), issued + dt.timedelta(days=365), issued + dt.timedelta(days=415)
    while day <= end:
        mjd = (day - dt.date(1858, 11, 17)).days
        head = f"{day.year % 100:2d}{day.month:2d}{day.day:2d} {mjd:8.2f}"
        turn = 2 * np.pi * (mjd - 41684) / 433.0  # the Chandler wobble's 433 days, about the size of the real pole
        x, y = 0.05 + 0.2 * np.cos(turn), 0.3 + 0.2 * np.sin(turn)
        if day <= issued:
            bull_b = re.sub(r"(?<!\d)(-?)0\.", r" \1.", f"{x:10.6f}{y:10.6f}{0.3554990:11.7f}{-0.252:10.3f}{-0.119:10.3f}")
            line = (f"{head} I {x:9.6f}{0.00009:9.6f} {y:9.6f}{0.0001:9.6f}  I{0.3554784:10.7f}{0.0000099:10.7f} "
                    f"{0.9333:7.4f}{0.0076:7.4f}  I {-0.135:9.3f}{0.315:9.3f} {-0.204:9.3f}{0.298:9.3f}{bull_b}")
        elif day <= last_p:
            line = f"{head} P {x:9.6f}{0.017:9.6f} {y:9.6f}{0.027:9.6f}  P{-0.1164909:10.7f}{0.0254096:10.7f}"
        else:
            line = head
        lines.append(line.ljust(185) + "  \n")
        day += dt.timedelta(days=1)
    return "".join(lines)


def test_a_whole_finals_file_from_1973_to_a_year_ahead_is_read_as_skyfield_reads_it(tmp_path: Path) -> None:
    """The file a user downloads today (20,113 lines, 3.8 MB), by the readme's columns: well under the size cap,
    read whole (1999 and 2000, written ' 0', dated by the MJD's century rule), the I, P and date-only lines
    to the very values Skyfield's own parser reads, the date-only tail skipped."""
    from skyfield.data import iers

    path = tmp_path / "finals2000A.all"
    path.write_text(_whole_finals_text(dt.date(2026, 12, 7)))
    size = path.stat().st_size
    assert 3_700_000 < size < iers_module.MAX_IERS_BYTES / 2, size  # room for decades of growth (69 kB a year)
    pm = read_iers_finals(path)
    with open(path, "rb") as fh:
        theirs = iers.parse_x_y_dut1_from_finals_all(fh)
    assert pm.utc_mjd.size == theirs.size == (dt.date(2027, 12, 7) - dt.date(1973, 1, 2)).days + 1
    assert np.array_equal(pm.utc_mjd, theirs["utc_mjd"]) and np.array_equal(pm.x_arcsec, theirs["x_arcseconds"])
    assert np.array_equal(pm.y_arcsec, theirs["y_arcseconds"])
    assert pm.span_text() == "1973-01-02T00:00:00Z..2027-12-07T00:00:00Z"
    lines = path.read_text().splitlines()
    assert lines[-1].startswith("28 126 61796.00") and lines[-1][15:].strip() == ""
    assert any(line.startswith(" 0 1 1 51544.00 I") for line in lines)
    pm.check_covers("1999-12-31T12:00:00Z", 86400.0, "time")  # across the century of the two-digit year
