"""TLE files, ground tracks and swath coverage."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from orbits import (OrbitError, first_coverage, format_omm, format_tle, ground_track, in_swath, omm_records, parse_omm_text,
                    parse_tle_text, propagate_offsets, read_tle, swath_half_angle_rad,
                    tle_checksum, walker_delta, write_tle)

EPOCH = "2025-03-01T00:00:00Z"
ISS = """ISS (ZARYA)
1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927
2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537
"""


def test_checksum_of_known_lines():
    l1, l2 = ISS.splitlines()[1:]
    assert tle_checksum(l1) == int(l1[-1]) == 7
    assert tle_checksum(l2) == int(l2[-1]) == 7


def test_read_three_line_tle(tmp_path):
    p = tmp_path / "iss.tle"
    p.write_text(ISS)
    c = read_tle(p)
    assert c.names == ["ISS (ZARYA)"]
    assert c.satrecs[0].satnum == 25544


def test_write_read_round_trip(tmp_path):
    c = walker_delta(12, 3, 1, 550.0, 53.0, EPOCH)
    path = write_tle(tmp_path / "shell.tle", c)
    back = read_tle(path)
    assert back.names == c.names
    for line in path.read_text().splitlines():
        if line[:2] in ("1 ", "2 "):
            assert len(line) == 69 and tle_checksum(line) == int(line[-1])
    r0, _ = propagate_offsets(c, c.epoch, [0.0, 3600.0])
    r1, _ = propagate_offsets(back, c.epoch, [0.0, 3600.0])
    # TLE fields carry 4 decimals of degrees and 8 of rev/day: ~1 km after an hour
    assert np.abs(r0 - r1).max() < 2.0


@pytest.mark.parametrize("mutate, match", [
    (lambda ls: [ls[0], ls[1][:-1] + str((int(ls[1][-1]) + 1) % 10), ls[2]], r"iss.tle:2: TLE checksum"),
    (lambda ls: [ls[0], ls[1][:-3] + ls[1][-1], ls[2]], r"iss.tle:2: TLE line 1 must be 69"),
    (lambda ls: [ls[0], ls[1], ls[2].replace("2 25544", "2 25545", 1)], r"iss.tle:3: .*catalog|iss.tle:3: TLE checksum"),
    (lambda ls: [ls[0], ls[1]], r"iss.tle:2: TLE line 1 without a following line 2"),
    (lambda ls: [ls[0], ls[2], ls[1]], r"iss.tle:2: expected TLE line 1"),
])
def test_malformed_tle_names_file_and_line(tmp_path, mutate, match):
    lines = mutate(ISS.splitlines())
    p = tmp_path / "iss.tle"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(OrbitError, match=match):
        read_tle(p)


@pytest.mark.parametrize("text", ["x" * 20_000 + "\n", ISS.replace("ISS (ZARYA)", "x" * 20_000 + "\x01")])
def test_a_long_name_line_is_quoted_cut_in_the_refusal(text):
    """A name line of 20,000 characters with no TLE lines after it (or with a control character)
    was quoted whole: a 20 kB error line."""
    with pytest.raises(OrbitError, match=r"^t\.tle:1: .*name line.*'xxx+\.\.\.") as err:
        parse_tle_text(text, "t.tle")
    assert len(str(err.value)) < 200


def test_catalog_mismatch_detected_with_valid_checksums():
    c1 = walker_delta(2, 1, 0, 550.0, 53.0, EPOCH)
    text = format_tle(c1, with_names=False).splitlines()
    # pair line 1 of satellite 1 with line 2 of satellite 2
    with pytest.raises(OrbitError, match=r"<t>:2: catalog number"):
        parse_tle_text("\n".join([text[0], text[3]]), "<t>")


def test_tle_names_are_unique_and_a_repeated_set_is_refused():
    """Node names key the plan, the batteries and the learners: two satellites with one name
    get their catalog numbers appended (as OMM does), the same set twice is an error."""
    text = format_tle(walker_delta(3, 1, 0, 550.0, 53.0, EPOCH)).splitlines()
    same_name = "\n".join("0 SHELL" if ln.startswith("0 ") else ln for ln in text)
    assert parse_tle_text(same_name, "<t>").names == ["SHELL", "SHELL-2", "SHELL-3"]
    bare = [ln for ln in text if not ln.startswith("0 ")]
    with pytest.raises(OrbitError, match=r"<t>:7: satellite SAT-1 \(00001\) appears twice"):
        parse_tle_text("\n".join(bare + bare[:2]), "<t>")
    with pytest.raises(OrbitError, match=r"<t>:5: satellite ISS \(ZARYA\) \(25544\) appears twice"):
        parse_tle_text(ISS + ISS, "<t>")


def test_missing_tle_file():
    with pytest.raises(OrbitError, match="not found"):
        read_tle("/nonexistent/x.tle")


def test_ground_track_matches_skyfield_subpoint():
    from skyfield.api import EarthSatellite, wgs84

    from orbits import skyfield_times, timescale

    c = walker_delta(3, 3, 1, 550.0, 53.0, EPOCH)
    offsets = np.arange(0.0, 6000.0, 300.0)
    gt = ground_track(c, c.epoch, offsets)
    t = skyfield_times(c.epoch, offsets)
    for i in range(3):
        geo = EarthSatellite.from_satrec(c.satrecs[i], timescale()).at(t)
        lat, lon = wgs84.latlon_of(geo)
        assert np.abs(gt.lat_deg[i] - lat.degrees).max() < 1e-6
        dlon = (gt.lon_deg[i] - lon.degrees + 180) % 360 - 180
        assert np.abs(dlon).max() < 1e-6
        assert np.abs(gt.height_km[i] - wgs84.height_of(geo).km).max() < 1e-6
    assert np.abs(gt.lat_deg).max() <= 53.3
    assert 520 < gt.height_km.mean() < 580


def test_ground_track_across_a_leap_second_matches_skyfield_at_the_utc_instant():
    # SGP4 takes offsets as UTC Julian-date seconds (86,400 to a day); the Earth
    # rotation must be taken at the same UTC instant, not one leap second early
    from skyfield.api import EarthSatellite, wgs84

    from orbits import timescale

    c = walker_delta(1, 1, 0, 550.0, 53.0, "2016-12-31T23:00:00Z")
    gt = ground_track(c, c.epoch, [7200.0])  # 2017-01-01T01:00:00Z, after the leap second
    geo = EarthSatellite.from_satrec(c.satrecs[0], timescale()).at(timescale().utc(2017, 1, 1, 1, 0, 0))
    lat, lon = wgs84.latlon_of(geo)
    assert gt.lat_deg[0, 0] == pytest.approx(lat.degrees, abs=1e-6)
    assert (gt.lon_deg[0, 0] - lon.degrees + 180) % 360 - 180 == pytest.approx(0.0, abs=1e-6)


# A Molniya-type orbit (e = 0.72, perigee 1,000 km, apogee 39,000 km) and a geostationary one,
# as TLEs: the ground track's geodetic iteration at every height up to GEO, with drag (ISS).
HIGH = """MOLNIYA-TYPE
1 40001U          24153.12500000  .00000000  00000-0  10000-4 0    06
2 40001  63.4000  40.0000 7200000 270.0000  10.0000  2.00563000    09
GEO-TYPE
1 40002U          24153.12500000  .00000000  00000-0  00000+0 0    01
2 40002   0.0500  80.0000 0002000   0.0000 100.0000  1.00270000    04
"""


@pytest.mark.parametrize("text, start", [(ISS, "2008-09-20T12:00:00Z"), (HIGH, "2024-06-01T00:00:00Z")])
def test_ground_track_of_tles_matches_skyfield_geographic_position_within_a_millimetre(text, start):
    """Sub-satellite latitude/longitude/height of TLE satellites over a day (a drag term, an
    eccentric orbit reaching 39,000 km, a geostationary one) against Skyfield's
    ``wgs84.geographic_position_of`` / ``subpoint_of``: within 1 mm on the ground and in height."""
    from skyfield.api import EarthSatellite, wgs84

    from orbits import skyfield_times, timescale

    c = parse_tle_text(text, "<t>")
    offsets = np.arange(0.0, 86400.0 + 1.0, 600.0)
    gt = ground_track(c, start, offsets)
    t = skyfield_times(start, offsets)
    for i, sat in enumerate(c.satrecs):
        geo = EarthSatellite.from_satrec(sat, timescale()).at(t)
        ref = wgs84.geographic_position_of(geo)
        lat = ref.latitude.degrees
        dlon = (gt.lon_deg[i] - ref.longitude.degrees + 180.0) % 360.0 - 180.0
        ground_m = np.radians(np.hypot(gt.lat_deg[i] - lat, dlon * np.cos(np.radians(lat)))) * 6378137.0
        assert ground_m.max() < 1e-3
        assert np.abs(gt.height_km[i] - ref.elevation.km).max() * 1e3 < 1e-3
        assert np.abs(gt.lat_deg[i] - wgs84.subpoint_of(geo).latitude.degrees).max() < 1e-8
    if text is HIGH:  # the orbits really span LEO to GEO heights
        assert gt.height_km[0].min() < 1500.0 < 35000.0 < gt.height_km[0].max()
        assert np.abs(gt.height_km[1] - 35786.0).max() < 50.0 and np.abs(gt.lat_deg[1]).max() < 0.1

def test_swath_half_angle():
    assert swath_half_angle_rad(swath_width_km=200.0) == pytest.approx(100.0 / 6371.0)
    small = swath_half_angle_rad(off_nadir_deg=1.0, altitude_km=550.0)
    assert small * 6371.0 == pytest.approx(550.0 * np.tan(np.radians(1.0)), rel=0.01)
    # wide sensors, where a flat Earth is far off: the line of sight's slant range to the sphere
    # (d from the satellite at R + h, angle eta to nadir) and the central angle it spans
    R = 6371.0
    for eta_deg, h in ((30.0, 550.0), (55.0, 550.0), (40.0, 2000.0)):
        eta = np.radians(eta_deg)
        d = (R + h) * np.cos(eta) - np.sqrt(R**2 - ((R + h) * np.sin(eta)) ** 2)
        expected = np.arcsin(d * np.sin(eta) / R)
        assert swath_half_angle_rad(off_nadir_deg=eta_deg, altitude_km=h) == pytest.approx(expected, rel=1e-9)
        assert expected * R > h * np.tan(eta)  # the flat-Earth footprint is smaller
    # past the horizon (sin eta > R / (R + h)): the footprint is the horizon circle
    horizon = np.arccos(R / (R + 550.0))
    assert swath_half_angle_rad(off_nadir_deg=80.0, altitude_km=550.0) == pytest.approx(horizon, rel=1e-9)
    assert swath_half_angle_rad(off_nadir_deg=67.0, altitude_km=550.0) < horizon
    for kwargs, message in [({}, "give exactly one of swath_width_km or off_nadir_deg"),
                            (dict(swath_width_km=200.0, off_nadir_deg=20.0, altitude_km=550.0), "exactly one of"),
                            (dict(off_nadir_deg=20.0), "off_nadir_deg needs a positive altitude_km"),
                            (dict(off_nadir_deg=20.0, altitude_km=-550.0), "needs a positive altitude_km"),
                            (dict(swath_width_km=0.0), r"swath_width_km: expected 0 < width < 20015\.086796020572 km "
                                                       r"\(pi x 6371 km, half the Earth's circumference\), got 0\.0"),
                            (dict(swath_width_km=25000.0), "swath_width_km: expected 0 < width"),
                            (dict(off_nadir_deg=95.0, altitude_km=550.0), "off_nadir_deg: expected 0 < angle < 90 deg, got 95"),
                            (dict(off_nadir_deg=0.0, altitude_km=550.0), "off_nadir_deg: expected 0 < angle < 90 deg, got 0")]:
        with pytest.raises(OrbitError, match=message):
            swath_half_angle_rad(**kwargs)


def test_swath_coverage_and_first_pass():
    c = walker_delta(4, 2, 1, 550.0, 53.0, EPOCH)
    offsets = np.arange(0.0, 3000.0, 60.0)
    gt = ground_track(c, c.epoch, offsets)
    lam = swath_half_angle_rad(swath_width_km=300.0)
    # points exactly under satellite 2 at step 10, and one antipodal to it
    lat0, lon0 = gt.lat_deg[2, 10], gt.lon_deg[2, 10]
    pts_lat = np.array([lat0, -lat0])
    pts_lon = np.array([lon0, lon0 + 180.0])
    mask = in_swath(pts_lat, pts_lon, gt.lat_deg, gt.lon_deg, lam)
    assert mask.shape == (offsets.size, 2, 4)
    assert mask[10, 0, 2] and not mask[10, 1, 2]
    first = first_coverage(pts_lat, pts_lon, gt.lat_deg, gt.lon_deg, lam)
    assert first[0, 2] <= 10
    any_t = mask.any(axis=0)
    expected = np.where(any_t, mask.argmax(axis=0), -1)
    assert np.array_equal(first, expected)
    # brute-force check of the cap test with great-circle distance
    rng = np.random.default_rng(0)
    plat, plon = rng.uniform(-60, 60, 300), rng.uniform(-180, 180, 300)
    m = in_swath(plat, plon, gt.lat_deg[:, :5], gt.lon_deg[:, :5], lam)
    la1, lo1 = np.radians(plat)[None, :, None], np.radians(plon)[None, :, None]
    la2 = np.radians(gt.lat_deg[:, :5]).T[:, None, :]
    lo2 = np.radians(gt.lon_deg[:, :5]).T[:, None, :]
    hav = np.sin((la2 - la1) / 2) ** 2 + np.cos(la1) * np.cos(la2) * np.sin((lo2 - lo1) / 2) ** 2
    ang = 2 * np.arcsin(np.sqrt(hav))
    assert np.array_equal(m, ang <= lam + 1e-12)


def test_first_coverage_matches_brute_force_on_many_points():
    c = walker_delta(6, 2, 1, 550.0, 53.0, EPOCH)
    offsets = np.arange(0.0, 6000.0, 30.0)
    gt = ground_track(c, c.epoch, offsets)
    lam = swath_half_angle_rad(swath_width_km=600.0)
    rng = np.random.default_rng(3)
    plat, plon = rng.uniform(-55, 55, 2000), rng.uniform(-180, 180, 2000)
    mask = in_swath(plat, plon, gt.lat_deg, gt.lon_deg, lam)  # (T, P, S)
    expected = np.where(mask.any(axis=0), mask.argmax(axis=0), -1)
    first = first_coverage(plat, plon, gt.lat_deg, gt.lon_deg, lam)
    assert (expected >= 0).sum() > 500  # the check is not vacuous
    assert np.array_equal(first, expected)


def test_epoch_day_past_the_end_of_its_year_is_refused():
    """Day 366 exists only in leap years: '25366.5' was read as 2026-01-01 12:00 without a word."""
    def pair(epoch: str) -> str:
        l1, l2 = ISS.splitlines()[1:]
        l1 = l1[:18] + epoch + l1[32:68]
        return f"{l1}{tle_checksum(l1)}\n{l2}\n"
    assert parse_tle_text(pair("24366.50000000"), "<t>").satrecs[0].epochdays == 366.5  # 2024 is a leap year
    assert parse_tle_text(pair("00366.50000000"), "<t>").satrecs[0].epochyr == 0        # so is 2000
    with pytest.raises(OrbitError, match=r"<t>:1: TLE epoch day '366\.50000000' is invalid; expected a day of "
                                         r"the year in 1\.\.365\.99999999 \(2025 has 365 days\)"):
        parse_tle_text(pair("25366.50000000"), "<t>")
    with pytest.raises(OrbitError, match=r"\(1999 has 365 days\)"):
        parse_tle_text(pair("99366.00000000"), "<t>")


@pytest.mark.parametrize("column, field, what", [(8, " 51.6_16", "inclination (deg)"),
                                                 (52, "15.72_25391", "mean motion (rev/day)")])
def test_a_tle_number_with_a_digit_group_is_refused_by_its_field(column: int, field: str, what: str):
    """float() read ' 51.6_16' as 51.616, so the field check passed it and SGP4's own parser, which reads it
    otherwise, refused the pair as 'nm is less than zero', naming no field."""
    l1, l2 = ISS.splitlines()[1:]
    l2 = l2[:column] + field + l2[column + len(field):68]
    with pytest.raises(OrbitError) as err:
        parse_tle_text(f"{l1}\n{l2}{tle_checksum(l2)}\n", "<t>")
    assert str(err.value).startswith(f"<t>:2: TLE {what} {field.strip()!r} is invalid; expected a number in "), \
        str(err.value)


def test_tle_file_with_a_bom_is_read_and_other_text_refused(tmp_path):
    """A TLE saved as 'UTF-8 with BOM' was refused as 'not plain ASCII text' although every
    character is ASCII; the mark is dropped like in every other input file. Non-ASCII text
    (here a name) is still refused in one line."""
    p = tmp_path / "iss.tle"
    p.write_bytes(b"\xef\xbb\xbf" + ISS.encode("ascii"))
    assert read_tle(p).names == ["ISS (ZARYA)"]
    p.write_bytes(ISS.replace("ZARYA", "ZARJA\u00e9").encode("utf-8"))
    with pytest.raises(OrbitError, match=r"iss\.tle: TLE file must be plain ASCII text"):
        read_tle(p)
    p.write_bytes(b"\xff\xfe" + ISS.encode("utf-16-le"))
    with pytest.raises(OrbitError, match=r"iss\.tle: "):
        read_tle(p)


@pytest.mark.parametrize("old, new", [("2927\n", "292\u00b2\n"), ("08264", "\u00b2\u00b2264")])
def test_tle_text_with_a_digit_of_another_script_is_one_line_from_the_parser_too(old: str, new: str) -> None:
    """parse_tle_text (orbits' public parser) took a superscript two, which str.isdigit() passes, as a
    checksum or an epoch year and int() refused it: a ValueError traceback; read_tle alone checked ASCII."""
    with pytest.raises(OrbitError, match=r"^iss\.tle: TLE file must be plain ASCII text$"):
        parse_tle_text(ISS.replace(old, new, 1), "iss.tle")


def _with_catalog(field: str) -> str:
    l1, l2 = ISS.splitlines()[1:]
    l1, l2 = l1[:2] + field + l1[7:68], l2[:2] + field + l2[7:68]
    return f"{l1}{tle_checksum(l1)}\n{l2}{tle_checksum(l2)}\n"


@pytest.mark.parametrize("field", ["I0000", "O0000", "a0000", "1234 ", "-1234", "12 34"])
def test_malformed_catalog_number_is_refused(field):
    """sgp4 reads Alpha-5's excluded letters I and O as J and P (I0000 and J0000 were both 180000),
    lowercase as numbers past Z9999, a left-aligned '1234 ' as 12340 (named SAT-1234) and '-1234'
    as a negative catalog number; all were accepted."""
    with pytest.raises(OrbitError, match=rf"<t>:1: TLE catalog number '{field}' is invalid; expected five "
                                         r"digits or Alpha-5"):
        parse_tle_text(_with_catalog(field), "<t>")


def _with_columns(line: int, start: int, text: str) -> str:
    """ISS with ``text`` in 0-based columns ``start..`` of element line ``line``, checksum recomputed."""
    lines = ISS.splitlines()[1:]
    old = lines[line - 1]
    new = old[:start] + text + old[start + len(text):68]
    lines[line - 1] = f"{new}{tle_checksum(new)}"
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("line, start, text, what", [
    (1, 62, "x", "ephemeris type"), (1, 62, "-", "ephemeris type"), (1, 64, "-123", "element set number"),
    (1, 64, "nan ", "element set number"), (2, 63, "-1234", "revolution number"), (2, 63, "1a3x5", "revolution number"),
    (2, 63, "1 2  ", "revolution number")])
def test_malformed_counts_are_refused(line, start, text, what):
    """sgp4 reads a letter in the ephemeris type, element set or revolution number as 0 or stops at it
    ('1a3x5' was revolution 1), and takes '-123' as a negative count, which the OMM export then wrote
    and the OMM reader refuses; each was accepted."""
    with pytest.raises(OrbitError, match=rf"^<t>:{line}: TLE {what} '{re.escape(text.strip())}' is invalid; "
                                         r"expected (one digit|up to \w+ digits) in column"):
        parse_tle_text(_with_columns(line, start, text), "<t>")
    assert parse_tle_text(_with_columns(line, start, " " * len(text))).satrecs[0].satnum == 25544  # blanks: 0


@pytest.mark.parametrize("text", ["x", "u", "-", "0", "?"])
def test_a_classification_other_than_u_c_s_is_refused(text):
    """sgp4 keeps whatever character column 8 of line 1 holds, and a TLE export writes it back; any was accepted."""
    with pytest.raises(OrbitError, match=rf"^<t>:1: TLE classification '{re.escape(text)}' is invalid; expected U "
                                         r"\(unclassified\), C \(classified\) or S \(secret\) in column 8"):
        parse_tle_text(_with_columns(1, 7, text), "<t>")


@pytest.mark.parametrize("text, read", [("U", "U"), ("C", "C"), ("S", "S"), (" ", "U")])
def test_the_classifications_the_format_gives_are_read(text, read):
    assert parse_tle_text(_with_columns(1, 7, text), "<t>").satrecs[0].classification == read


@pytest.mark.parametrize("column, text, error", [(52, "19.99000000", r"6: mrt is less than 1\.0 which indicates the "
                                                  r"satellite has decayed"),
                                              (26, "9999999", r"4: semilatus rectum is less than zero")])
def test_elements_sgp4_refuses_are_named_with_sgp4s_reason(column, text, error):
    """A mean motion putting the orbit inside the Earth, or an eccentricity of 0.9999999, was refused as
    'SGP4 rejected the elements (error code 6)': a number the user had to look up."""
    with pytest.raises(OrbitError, match=rf"^<t>:1: SGP4 rejected the elements \(error {error}"):
        parse_tle_text(_with_columns(2, column, text), "<t>")
    rec = omm_records(parse_tle_text(ISS))[0]
    rec.update({"MEAN_MOTION": 19.99} if column == 52 else {"ECCENTRICITY": 0.9999999})
    with pytest.raises(OrbitError, match=rf"^gp\.json: record 0: SGP4 rejected the elements \(error {error}"):
        parse_omm_text(json.dumps([rec]), "json", "gp.json")


def test_a_circular_orbit_sgp4_refuses_is_named_with_sgp4s_reason():
    """circular_satrec (a Walker shell's satellites) said 'sgp4init failed with error code 6'; it
    reports elements SGP4 refuses as the TLE and OMM readers do (orbits.errors.check_elements)."""
    from orbits import parse_utc
    from orbits.constellation import circular_satrec

    with pytest.raises(OrbitError) as exc:
        circular_satrec(7, parse_utc("2025-01-01T00:00:00Z"), -100.0, 53.0, 0.0, 0.0)  # inside the Earth
    assert str(exc.value) == ("satellite 7: SGP4 rejected the elements (error 6: mrt is less than 1.0 which "
                              "indicates the satellite has decayed)")


def test_a_satellite_has_one_name_in_tle_and_omm():
    """An unnamed satellite was SAT-00001 from a TLE file but SAT-1 from OMM (and a shared name got
    -00002 or -2), so one satellite became two nodes; ' 1234' and '01234', one catalog number, were
    not seen as the same set twice."""
    c = walker_delta(3, 1, 0, 550.0, 53.0, EPOCH)
    bare = format_tle(c, with_names=False)
    omm = json.dumps([{k: v for k, v in r.items() if k != "OBJECT_NAME"} for r in omm_records(c)])
    assert parse_tle_text(bare).names == parse_omm_text(omm, "json").names == ["SAT-1", "SAT-2", "SAT-3"]
    assert parse_tle_text(_with_catalog("A0000")).names == ["SAT-100000"]  # Alpha-5, as OMM's 100000
    with pytest.raises(OrbitError, match=r"<t>:3: satellite SAT-1234 \(01234\) appears twice"):
        parse_tle_text(_with_catalog(" 1234") + _with_catalog("01234"), "<t>")


def test_valid_catalog_number_layouts_are_read():
    assert [parse_tle_text(_with_catalog(f), "<t>").catalog_numbers[0] for f in ("A0000", "Z9999", " 1234", "01234")] \
        == [100000, 339999, 1234, 1234]


def test_a_tle_satellite_numbered_00000_survives_an_omm_round_trip():
    """TLE generators often number custom satellites 00000, which the TLE reader takes; the OMM
    export wrote NORAD_CAT_ID 0 and the OMM reader refused its own file ('expected a positive
    catalog number, got 0'), so `--export-orbits omm` of such a file could not be read back."""
    c = parse_tle_text(_with_catalog("00000"), "<t>")
    assert c.catalog_numbers == [0]
    back = parse_omm_text(format_omm(c, "json"), "json", "<omm>")
    assert back.catalog_numbers == [0] and back.names == ["SAT-0"]
    r1, _ = propagate_offsets(c, "2008-09-20T12:25:40Z", [0.0, 3600.0])
    r2, _ = propagate_offsets(back, "2008-09-20T12:25:40Z", [0.0, 3600.0])
    assert np.abs(r1 - r2).max() < 1e-3  # km: the same orbit (OMM keeps the epoch to the microsecond)
    with pytest.raises(OrbitError, match=r"<omm>: record 0\.NORAD_CAT_ID: expected a catalog number in "
                                         r"0\.\.999999999, got -1$"):
        parse_omm_text(format_omm(c, "json").replace('"NORAD_CAT_ID": 0', '"NORAD_CAT_ID": -1'), "json", "<omm>")


@pytest.mark.parametrize("epoch", ["2057-01-01T00:00:00Z", "1956-12-31T00:00:00Z"])
def test_tle_export_refuses_an_epoch_its_two_digit_year_cannot_hold(epoch):
    """A TLE year has two digits, read as 1957..2056: a 2057 epoch was written as '57001...' and read
    back 100 years early (and a 1956 one 100 years late), without a word."""
    c = walker_delta(2, 1, 0, 550.0, 53.0, epoch)
    with pytest.raises(OrbitError, match=r"satellite WD-P00-S00: epoch \d{4}-\d\d-\d\d.* has no TLE form "
                                         r"\(two-digit years cover 1957\.\.2056\); export OMM instead"):
        format_tle(c)
    edge = walker_delta(1, 1, 0, 550.0, 53.0, "2056-12-31T23:00:00Z")
    assert parse_tle_text(format_tle(edge)).satrecs[0].jdsatepoch == edge.satrecs[0].jdsatepoch


@pytest.mark.parametrize(("epoch", "field"), [("2025-12-31T23:59:59.99998Z", "26001.00000000"),   # 365 days
                                              ("2024-12-31T23:59:59.99998Z", "25001.00000000"),   # leap year
                                              ("2024-12-31T12:00:00Z", "24366.50000000")])
def test_tle_export_writes_the_last_instant_of_a_year_as_the_next_years_first_day(epoch, field):
    """The TLE day has 8 decimals: an epoch in a year's last 0.43 ms was written as day 366.00000000
    (367 in a leap year), a day that year does not have, which the TLE reader then refused."""
    c = walker_delta(1, 1, 0, 550.0, 53.0, epoch)
    text = format_tle(c)
    assert text.splitlines()[1][18:32] == field
    back = parse_tle_text(text).satrecs[0]
    assert abs((back.jdsatepoch + back.jdsatepochF) - (c.satrecs[0].jdsatepoch + c.satrecs[0].jdsatepochF)) < 1e-8
    with pytest.raises(OrbitError, match=r"epoch 2056-12-31T23:59:59Z has no TLE form"):  # it would be '57001'
        format_tle(walker_delta(1, 1, 0, 550.0, 53.0, "2056-12-31T23:59:59.99999Z"))


def test_in_swath_works_one_time_step_at_a_time():
    """The module promised one matrix product per time step; one einsum over every time built a
    float64 points x satellites x times array, 8 times the mask (1.2 GB and seconds for the
    documented 10^4 points x 50 satellites x 300 times)."""
    import tracemalloc

    rng = np.random.default_rng(1)
    plat, plon = rng.uniform(-60, 60, 2000), rng.uniform(-180, 180, 2000)
    slat, slon = rng.uniform(-53, 53, (50, 100)), rng.uniform(-180, 180, (50, 100))
    lam = swath_half_angle_rad(swath_width_km=600.0)
    tracemalloc.start()
    try:
        mask = in_swath(plat, plon, slat, slon, lam)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert mask.shape == (100, 2000, 50) and mask.dtype == bool
    assert peak < mask.nbytes + 4 * 2**20  # the mask plus one time step's products
    covered = first_coverage(plat, plon, slat, slon, lam)  # the sparse path agrees
    assert np.array_equal(covered, np.where(mask.any(axis=0), mask.argmax(axis=0), -1)) and (covered >= 0).any()


def test_a_tle_files_lines_are_the_editors_after_a_form_feed(tmp_path):
    """Only LF, CR LF or CR alone ends a TLE line (swarmbase.tomlcheck.text_lines): str.splitlines() also cut at
    a form feed (a printer's page break between sets), so every line after one was named one line late."""
    lines = ISS.splitlines()
    p = tmp_path / "iss.tle"
    p.write_text("\n".join([lines[0] + "\x0c", lines[1], lines[2][:-1] + str((int(lines[2][-1]) + 1) % 10)]) + "\n")
    with pytest.raises(OrbitError, match=r"iss.tle:3: TLE checksum"):
        read_tle(p)
