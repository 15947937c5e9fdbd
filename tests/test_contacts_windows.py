"""Contact windows against independent references (brute-force scans, closed forms)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from contact_sim import (EARTH_RADIUS_KM, ContactError, GroundStation, LinkGeometry, LinkModel,
                         Trajectories, elevation_deg, find_windows, line_of_sight, los_limit_km,
                         max_los_range_km, satellite_trajectories, space_visible,
                         windows_from_samples)
from orbits import propagate_offsets, walker_delta

EPOCH = "2025-03-01T00:00:00Z"
DUR = 7200.0


@pytest.fixture(scope="module")
def shell():
    c = walker_delta(30, 5, 1, 550.0, 53.0, EPOCH)
    t = np.arange(0.0, DUR + 0.5, 1.0)
    r, _ = propagate_offsets(c, c.epoch, t)
    return c, t, r


def _assert_edges_close(ref, got, dur, tol=1.0):
    """Every brute-force window matches one computed window within ``tol`` s at both edges."""
    assert len(ref) == len(got), (ref, got)
    for (rs, re), (gs, ge) in zip(ref, got):
        # true start lies in (rs - 1, rs], true end in [re, re + 1) for a 1 s scan
        assert rs - 1.0 - 1e-6 <= gs <= rs + 1e-6 or (rs == 0.0 and gs == 0.0)
        assert re - 1e-6 <= ge <= re + 1.0 + 1e-6 or (re == dur and ge == dur)
        assert abs(gs - rs) <= tol and abs(ge - re) <= tol


@pytest.mark.parametrize("max_range", [4000.0, 8000.0])  # range-limited / Earth-limited
def test_windows_match_brute_force_1s_scan(shell, max_range):
    c, t, r = shell
    traj = satellite_trajectories(c, c.epoch, DUR, 60.0)
    table = find_windows(traj, LinkGeometry(max_range_km=max_range))
    n_edges = 0
    for a in range(len(c)):
        for b in range(a + 1, len(c)):
            vis = space_visible(r[a], r[b], max_range)  # direct segment-vs-sphere test
            ref = windows_from_samples(t, vis)
            got = table.pair(a, b)
            _assert_edges_close(ref, list(zip(got.t_start_s, got.t_end_s)), DUR)
            n_edges += sum((s > 0) + (e < DUR) for s, e in ref)
    assert n_edges > 100  # the comparison exercised many real edges


def test_window_statistics_match_sampled_values(shell):
    c, t, r = shell
    link = LinkModel(model="shannon")
    traj = satellite_trajectories(c, c.epoch, DUR, 60.0)
    table = find_windows(traj, LinkGeometry(max_range_km=4000.0), rate_fn=link.rate_at)
    checked = 0
    for w in list(table)[:40]:
        sel = (t >= w.t_start_s) & (t <= w.t_end_s)
        if sel.sum() < 30:
            continue
        d = np.linalg.norm(r[w.a, sel] - r[w.b, sel], axis=1)
        assert w.min_range_km == pytest.approx(d.min(), abs=2.0)
        assert w.mean_range_km == pytest.approx(d.mean(), rel=0.01)
        checked += 1
    assert checked >= 30  # windows of >= 30 s were compared (38 of the first 40), not skipped
    i = int(np.argmax(table.duration_s))
    w = table[i]
    sel = (t >= w.t_start_s) & (t <= w.t_end_s)
    rate = link.rate_at(np.linalg.norm(r[w.a, sel] - r[w.b, sel], axis=1))
    assert table.volume_bits[i] == pytest.approx(np.trapezoid(rate, t[sel]), rel=0.01)


def test_hypatia_maximum_isl_length():
    h = 550.0
    expected = 2 * math.sqrt((EARTH_RADIUS_KM + h) ** 2 - (EARTH_RADIUS_KM + 80.0) ** 2)
    assert max_los_range_km(h) == pytest.approx(expected)
    assert los_limit_km(EARTH_RADIUS_KM + h, EARTH_RADIUS_KM + h, EARTH_RADIUS_KM + 80.0) == \
        pytest.approx(expected)
    # two satellites symmetric about the x axis, 1 m inside / outside that length
    rr = EARTH_RADIUS_KM + h
    for delta, ok in ((-0.001, True), (0.001, False)):
        half = (expected + delta) / 2
        x = math.sqrt(rr**2 - half**2)
        assert bool(line_of_sight(np.array([x, half, 0.0]), np.array([x, -half, 0.0]))) is ok


def _drifting_pair(alpha_rad_s: float, dur: float, step: float) -> Trajectories:
    """Two nodes on a 550 km circle; B drifts ahead of A at ``alpha`` rad/s (closed form)."""
    rr = EARTH_RADIUS_KM + 550.0
    w = 2 * math.pi / 5700.0
    t = np.arange(0.0, dur + 1e-9, step)
    ang = np.stack([w * t, (w + alpha_rad_s) * t], axis=1)  # (T, 2)
    pos = np.stack([rr * np.cos(ang), rr * np.sin(ang), np.zeros_like(ang)], axis=-1)
    rate = np.array([w, w + alpha_rad_s])
    vel = np.stack([-rr * rate * np.sin(ang), rr * rate * np.cos(ang), np.zeros_like(ang)], axis=-1)
    return Trajectories(["A", "B"], np.zeros(2), t, pos, vel, vel, None, "TEME", True)


@pytest.mark.parametrize("max_range", [3000.0, 9000.0])
def test_window_end_matches_closed_form(max_range):
    rr = EARTH_RADIUS_KM + 550.0
    alpha = 2e-4
    traj = _drifting_pair(alpha, 7200.0, 60.0)
    table = find_windows(traj, LinkGeometry(max_range_km=max_range))
    assert len(table) == 1 and table.t_start_s[0] == 0.0
    limit = min(max_range, max_los_range_km(550.0))  # 9000 km: Earth occlusion decides
    t_end = 2 * math.asin(limit / (2 * rr)) / alpha
    assert table.t_end_s[0] == pytest.approx(t_end, abs=1e-2)


def test_parallel_and_chunked_scans_agree(shell):
    c, _, _ = shell
    traj = satellite_trajectories(c, c.epoch, DUR, 60.0)
    g = LinkGeometry(max_range_km=4000.0)
    one = find_windows(traj, g)
    three = find_windows(traj, g, chunks=3)
    two = find_windows(traj, g, workers=2)
    for other in (three, two):
        assert len(other) == len(one)
        assert np.array_equal(other.a, one.a) and np.array_equal(other.b, one.b)
        assert np.allclose(other.t_start_s, one.t_start_s) and np.allclose(other.t_end_s, one.t_end_s)
        assert np.allclose(other.mean_range_km, one.mean_range_km, rtol=1e-6)


@pytest.mark.parametrize("workers", [1, 2])
def test_scans_written_in_many_parts_agree_with_one_part(shell, monkeypatch, tmp_path, workers):
    """A worker hands its windows over in parts (checkpointing the open ones)
    once ``_PART_WINDOWS`` have been emitted: with parts of 7 windows the
    table, its statistics and volumes are those of a one-part scan, and no
    part file is left behind."""
    import contact_sim.windows as win

    c, _, _ = shell
    traj = satellite_trajectories(c, c.epoch, DUR, 60.0)
    g, rate = LinkGeometry(max_range_km=4000.0), LinkModel(model="shannon").rate_at
    one = find_windows(traj, g, rate_fn=rate)
    monkeypatch.setattr(win, "_PART_WINDOWS", 7)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(win.tempfile, "tempdir", None)  # re-read TMPDIR
    written = []
    save = win.np.save
    monkeypatch.setattr(win.np, "save", lambda path, *a, **k: (written.append(path), save(path, *a, **k)))
    many = find_windows(traj, g, rate_fn=rate, workers=workers)
    if workers == 1:  # the forked workers' writes are not seen here
        assert len(written) > 20
    assert list(tmp_path.iterdir()) == []
    assert len(many) == len(one) > 50
    assert np.array_equal(many.a, one.a) and np.array_equal(many.b, one.b)
    assert np.allclose(many.t_start_s, one.t_start_s) and np.allclose(many.t_end_s, one.t_end_s)
    assert np.allclose(many.mean_range_km, one.mean_range_km, rtol=1e-5)
    assert np.allclose(many.min_range_km, one.min_range_km, rtol=1e-6)
    assert np.allclose(many.volume_bits, one.volume_bits, rtol=1e-9)


def test_parts_are_joined_in_place_and_empty_windows_dropped(tmp_path):
    """``_assemble`` on two hand-made parts: a window flagged at the end of the
    first part and the start of the second becomes one row (end, range
    integral, minimum and volume combined), a window that opens exactly at
    the part edge keeps its start, and one that opens at the very end (zero
    length) is dropped."""
    from contact_sim.windows import _assemble

    dtype = [("pid", np.int32), ("t_start", float), ("t_end", float), ("d_int", np.float32),
             ("d_min", np.float32), ("bits", float), ("left", bool), ("right", bool)]
    n = 10  # pair id = a * 10 + b
    first = np.array([(1, 0.0, 10.0, 1000.0, 90.0, 5.0, False, False),
                      (2, 5.0, 10.0, 500.0, 80.0, 1.0, False, True),
                      (3, 10.0, 10.0, 0.0, np.inf, 0.0, False, True)], dtype=dtype)
    second = np.array([(2, 10.0, 15.0, 600.0, 70.0, 2.0, True, False),
                       (3, 10.0, 12.0, 300.0, 150.0, 4.0, True, False),
                       (15, 20.0, 20.0, 0.0, np.inf, 0.0, False, True)], dtype=dtype)
    parts = []
    for i, part in enumerate((first, second)):
        path = tmp_path / f"part-{i}.npy"
        np.save(path, part)
        parts.append((str(path), part.size))
    table = _assemble(parts, n, with_bits=True)
    assert list(zip(table.a, table.b)) == [(0, 1), (0, 2), (0, 3)]
    assert table.t_start_s.tolist() == [0.0, 5.0, 10.0] and table.t_end_s.tolist() == [10.0, 15.0, 12.0]
    assert np.allclose(table.mean_range_km, [100.0, 110.0, 150.0])  # (500 + 600) / 10 for the joined one
    assert table.min_range_km.tolist() == [90.0, 70.0, 150.0]
    assert table.volume_bits.tolist() == [5.0, 3.0, 4.0]
    assert list(tmp_path.iterdir()) == []  # each part is removed once read


def test_unwritable_temporary_directory_is_one_clear_error(shell, monkeypatch, tmp_path):
    import contact_sim.windows as win

    c, _, _ = shell
    traj = satellite_trajectories(c, c.epoch, 600.0, 60.0)
    monkeypatch.setattr(win.tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(ContactError, match="temporary directory.*TMPDIR"):
        find_windows(traj, LinkGeometry(max_range_km=4000.0))


def test_ground_station_windows_match_elevation_scan(shell):
    c, t, r = shell
    gs = GroundStation("Matera", 40.65, 16.70, 500.0)
    traj = satellite_trajectories(c, c.epoch, DUR, 60.0, stations=[gs])
    g = LinkGeometry(max_range_km=4000.0, min_elevation_deg=10.0, station_max_range_km=3000.0)
    table = find_windows(traj, g)
    # the reference: Skyfield's topocentric elevation (above the WGS-84 local horizontal) and range
    from skyfield.api import EarthSatellite, wgs84

    from orbits import skyfield_times, timescale

    top = wgs84.latlon(gs.lat_deg, gs.lon_deg, gs.elevation_m)
    when = skyfield_times(c.epoch, t)
    st_id = len(c)
    total = 0
    for s in range(len(c)):
        alt, _, dist = (EarthSatellite.from_satrec(c.satrecs[s], timescale()) - top).at(when).altaz()
        vis = (alt.degrees >= 10.0) & (dist.km <= 3000.0)
        ref = windows_from_samples(t, vis)
        got = table.pair(s, st_id)
        _assert_edges_close(ref, list(zip(got.t_start_s, got.t_end_s)), DUR)
        total += len(ref)
    assert total >= 2



@pytest.mark.parametrize("mask, tol_s", [(10.0, 0.01), (40.0, 0.1)])
def test_ground_station_window_edges_match_skyfield_to_the_documented_precision(mask, tol_s):
    """docs/scenario.md (time.step_s): at a 60 s grid, station edges to milliseconds at a 10 deg
    mask and to a tenth of a second at 40 deg. Reference: each edge bisected to 1e-6 s on
    Skyfield's topocentric altitude ``(sat - station).at(t).altaz()``; passes that barely clear
    the mask (peak within 2 deg of it) are grazing tangencies, whose edges are ill-conditioned."""
    from skyfield.api import EarthSatellite, wgs84

    from orbits import skyfield_times, timescale

    c = walker_delta(12, 3, 1, 550.0, 53.0, EPOCH)
    dur = 21600.0
    gs = GroundStation("Matera", 40.65, 16.70, 500.0)
    traj = satellite_trajectories(c, c.epoch, dur, 60.0, stations=[gs])
    table = find_windows(traj, LinkGeometry(max_range_km=1e5, min_elevation_deg=mask))
    top = wgs84.latlon(gs.lat_deg, gs.lon_deg, gs.elevation_m)
    n_edges = 0
    for s in range(len(c)):
        seen = EarthSatellite.from_satrec(c.satrecs[s], timescale()) - top

        def alt(x, seen=seen):
            return seen.at(skyfield_times(c.epoch, x)).altaz()[0].degrees - mask

        got = table.pair(s, len(c))
        edges = np.array([e for w in got for e in (w.t_start_s, w.t_end_s)])
        peaks = np.repeat([alt(np.linspace(w.t_start_s, w.t_end_s, 50)).max() for w in got], 2)
        keep = (edges > 0.0) & (edges < dur) & (peaks > 2.0)
        if not keep.any():
            continue
        edges = edges[keep]
        lo, hi = edges - 2.0, edges + 2.0
        f_lo = alt(lo)
        assert (np.sign(f_lo) != np.sign(alt(hi))).all()  # each edge is a crossing of the mask
        for _ in range(22):  # 4 s / 2**22: 1e-6 s
            mid = 0.5 * (lo + hi)
            same = np.sign(alt(mid)) == np.sign(f_lo)
            lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
        assert np.abs(edges - 0.5 * (lo + hi)).max() < tol_s
        n_edges += edges.size
    assert n_edges >= 4

def test_bad_geometry_rejected():
    with pytest.raises(ContactError, match="max_range_km"):
        LinkGeometry(max_range_km=0.0)
    with pytest.raises(ContactError, match="grazing"):
        LinkGeometry(max_range_km=10.0, grazing_altitude_km=-1.0)


@pytest.mark.parametrize("field, value, match", [
    ("grazing_altitude_km", math.nan, r"link.grazing_altitude_km: expected a number in 0..50000 km, got nan"),
    ("grazing_altitude_km", math.inf, r"link.grazing_altitude_km: expected a number in 0..50000 km, got inf"),
    ("grazing_altitude_km", 1e160, r"link.grazing_altitude_km: expected a number in 0..50000 km"),
    ("station_max_range_km", math.nan, r"link.station_max_range_km: expected a positive distance of at most "
                                       r"2e\+07 km, got nan"),
    ("station_max_range_km", math.inf, r"link.station_max_range_km: expected a positive distance of at most "
                                       r"2e\+07 km, got inf"),
    # finite, and squared by the window search: an OverflowError traceback after the satellites were propagated
    ("station_max_range_km", 1e308, r"link.station_max_range_km: expected a positive distance of at most "
                                    r"2e\+07 km, got 1e\+308"),
    ("max_range_km", 1e308, r"link.max_range_km: expected a positive distance of at most 2e\+07 km, got 1e\+308"),
    ("earth_radius_km", math.nan, r"earth_radius_km: expected a positive distance, got nan"),
    ("earth_radius_km", -1.0, r"earth_radius_km: expected a positive distance, got -1.0"),
])
def test_a_non_finite_geometry_is_refused_through_the_api_as_from_toml(field, value, match):
    """The TOML path refused a NaN grazing altitude but LinkGeometry(...) took it: every
    comparison against a NaN radius is False, so the occlusion test never fired and a
    6-satellite shell got 15 windows (links through the Earth) instead of 8; an
    infinite one gave none."""
    with pytest.raises(ContactError, match=match):
        LinkGeometry(**{"max_range_km": 20000.0, field: value})


def test_elevation_is_measured_above_the_local_horizontal_as_the_window_finder_does():
    """elevation_deg's default vertical was the geocentric radial while the window
    finder's mask uses the WGS-84 normal: the two disagreed by up to 0.19 deg."""
    from skyfield.api import wgs84

    station = wgs84.latlon(45.0, 10.0, 0.0).itrs_xyz.km
    zenith = station + 1000.0 * np.array([np.cos(np.radians(45.0)) * np.cos(np.radians(10.0)),
                                          np.cos(np.radians(45.0)) * np.sin(np.radians(10.0)),
                                          np.sin(np.radians(45.0))])  # along the geodetic normal
    assert float(elevation_deg(station, zenith)) == pytest.approx(90.0, abs=1e-6)


def test_an_unknown_link_model_names_every_model():
    with pytest.raises(ContactError, match=r"link.model: expected one of 'constant', .*'plan'.*, got 'laser'"):
        LinkModel(model="laser")


def test_a_mask_below_the_horizon_is_refused_it_would_link_through_the_earth():
    """A negative elevation mask was accepted (-90..90), and the window finder, which
    checks only the mask and the range for station links, then gave windows whose
    line of sight crosses the Earth: the ray from a station on the ellipsoid below its
    local horizontal enters the ground at once."""
    c = walker_delta(12, 3, 1, 550.0, 53.0, EPOCH)
    st = len(c)
    traj = satellite_trajectories(c, c.epoch, 7200.0, 60.0, stations=[GroundStation("X", 40.0, 16.0, 0.0)])
    windows = find_windows(traj, LinkGeometry(max_range_km=8000.0, min_elevation_deg=0.0))
    station = windows.select(windows.b == st)
    assert len(station) >= 3
    for a, s, e in zip(station.a, station.t_start_s, station.t_end_s):  # a mask of 0 deg: all above ground
        k = int(round((s + e) / 2 / 60.0))
        assert line_of_sight(traj.pos[k, a], traj.pos[k, st], 0.0, 6356.0)
    for mask in (-10.0, -0.5):
        with pytest.raises(ContactError, match=r"link.min_elevation_deg: expected 0\.\.90 deg .*through the Earth"):
            LinkGeometry(max_range_km=8000.0, min_elevation_deg=mask)


def test_a_mask_of_90_deg_is_refused_with_a_message_that_does_not_list_90_as_allowed():
    """A 90 deg mask was refused with "expected 0..90 deg ..., got 90.0": the message
    named 90 as allowed while refusing it."""
    with pytest.raises(ContactError, match=r"link.min_elevation_deg: expected 0..90 deg, 90 excluded .*zenith") as exc:
        LinkGeometry(max_range_km=8000.0, min_elevation_deg=90.0)
    assert "\n" not in str(exc.value)
    LinkGeometry(max_range_km=8000.0, min_elevation_deg=89.9)  # just below is a (narrow) mask


def test_a_node_below_the_grazing_altitude_sees_no_satellite():
    """A node inside the grazing sphere (altitude below link.grazing_altitude_km) was
    given windows with nodes above it: the occlusion limit took its tangent length as 0
    and kept the other node's, although every segment from inside the sphere crosses it
    (los_limit_km's docstring already said 0). Brute force: direct segment test, 1 s."""
    from orbits import Constellation
    from orbits.constellation import circular_satrec

    from contact_sim.geometry import segment_clearance_km

    epoch = walker_delta(1, 1, 0, 550.0, 53.0, EPOCH).epoch
    c = Constellation(["LOW", "HIGH"], [circular_satrec(1, epoch, 400.0, 53.0, 0.0, 0.0),
                                        circular_satrec(2, epoch, 1000.0, 53.0, 0.0, 10.0)], epoch)
    t = np.arange(0.0, 3600.0 + 0.5, 1.0)
    r, _ = propagate_offsets(c, c.epoch, t)
    traj = satellite_trajectories(c, c.epoch, 3600.0, 60.0)
    for grazing in (300.0, 500.0):  # the low node above, then below the grazing altitude
        geom = LinkGeometry(max_range_km=10000.0, grazing_altitude_km=grazing)
        vis = segment_clearance_km(r[0], r[1]) >= geom.grazing_radius_km
        ref = windows_from_samples(t, vis)
        got = find_windows(traj, geom)
        _assert_edges_close(ref, [(w.t_start_s, w.t_end_s) for w in got], 3600.0)
        assert bool(ref) == (grazing == 300.0)
    rho = EARTH_RADIUS_KM + 500.0
    assert los_limit_km(EARTH_RADIUS_KM + 400.0, EARTH_RADIUS_KM + 1000.0, rho) == 0.0
    assert max_los_range_km(400.0, 1000.0, grazing_km=500.0) == 0.0
    assert los_limit_km(EARTH_RADIUS_KM + 600.0, EARTH_RADIUS_KM + 1000.0, rho) > 0.0


def test_windows_cut_at_the_horizon_start_and_end_exactly_on_it():
    """docs/formats.md tells users a window cut at the horizon is recognised by
    t_start_s == 0 or t_end_s == time.duration_s exactly (no flag column); with a
    horizon off the grid and the search split in chunks."""
    c = walker_delta(12, 3, 1, 550.0, 53.0, EPOCH)
    horizon = 3630.5
    traj = satellite_trajectories(c, c.epoch, horizon, 60.0)
    for chunks in (1, 3):
        table = find_windows(traj, LinkGeometry(max_range_km=5000.0), chunks=chunks)
        assert table.t_start_s.min() == 0.0 and table.t_end_s.max() == horizon
        cut = (table.t_start_s == 0.0) | (table.t_end_s == horizon)
        assert 0 < cut.sum() < len(table)
        inner = table.t_start_s[~cut], table.t_end_s[~cut]
        assert inner[0].min() > 60.0 and inner[1].max() < horizon - 60.0


def test_plot_draws_links_across_the_antimeridian(tmp_path: Path, monkeypatch) -> None:
    """A satellite link whose ends lie either side of the +-180 deg meridian was left off the
    map, yet counted in the title's 'links shown'; it is drawn from both sides (each half on the map)."""
    import contact_sim.plotting as plotting
    from contact_sim import build_trajectories, parse_contact_scenario, plan_from_trajectories
    from orbits import geodetic_from_itrs, teme_to_itrs

    doc = tomllib.loads('[constellation]\nkind = "walker-delta"\ntotal = 12\nplanes = 3\nphasing = 1\n'
                        'altitude_km = 550.0\ninclination_deg = 53.0\nepoch = "2026-06-01T00:00:00Z"\n'
                        '[time]\nduration_s = 6000.0\nstep_s = 60.0\n[link]\nmax_range_km = 5000.0\n')
    scn = parse_contact_scenario(doc, tmp_path)
    traj = build_trajectories(scn)
    plan = plan_from_trajectories(traj, scn)
    pos = traj.pos.transpose(1, 0, 2)
    _, lon, _ = geodetic_from_itrs(teme_to_itrs(pos, traj.start, traj.times_s))
    crossing = [(k, plotting._edges_at(plan, float(traj.times_s[k]))) for k in range(len(traj.times_s))]
    k, edges = next((k, e) for k, e in crossing if any(abs(lon[a, k] - lon[b, k]) >= 180 for a, b in e))
    across = sum(abs(lon[a, k] - lon[b, k]) >= 180 for a, b in edges)
    figures = []
    monkeypatch.setattr(plotting, "save_figure", lambda fig, path: figures.append(fig) or Path(path))
    plotting.plot_contacts(plan, traj, tmp_path / "c.png", t_s=float(traj.times_s[k]))
    lines = [ln for ln in figures[0].axes[0].get_lines() if ln.get_color() == "tab:blue"]  # the links
    assert across >= 1 and len(lines) == len(edges) + across
    assert f"{len(edges)} link{'s' * (len(edges) != 1)} shown" in figures[0].axes[0].get_title()
    for ln in lines:  # each drawn the short way: less than 180 deg of longitude apart
        x = ln.get_xdata()
        assert abs(x[1] - x[0]) < 180


def test_window_table_direction_column_defaults_to_both_and_travels_with_its_rows():
    from contact_sim.windows import A_TO_B, B_TO_A, BOTH, WindowTable

    plain = WindowTable([0, 1], [1, 2], [5.0, 0.0], [9.0, 4.0], [1, 1], [1, 1], [0, 0])
    assert plain.direction.dtype == np.int8 and plain.direction.tolist() == [BOTH, BOTH]
    assert not plain.one_way.any() and plain[0].direction == BOTH
    # sorted by start: the directions move with their rows, and select / pair / indexing carry them
    w = WindowTable([0, 1, 0], [1, 2, 2], [5.0, 0.0, 7.0], [9.0, 4.0, 8.0], [1, 1, 1], [1, 1, 1], [0, 0, 0],
                    direction=[A_TO_B, B_TO_A, BOTH])
    assert w.t_start_s.tolist() == [0.0, 5.0, 7.0] and w.direction.tolist() == [B_TO_A, A_TO_B, BOTH]
    assert w.pair(1, 0).direction.tolist() == [A_TO_B] and w[0].direction == B_TO_A
    assert w.select(w.one_way).t_start_s.tolist() == [0.0, 5.0]
    with pytest.raises(ContactError, match="window directions"):
        WindowTable([0], [1], [0.0], [1.0], [1], [1], [0], direction=[3])


_FREEZE_LOG: Path | None = None  # where _scan_chunk_logging writes each forked worker's gc freeze count


def _scan_chunk_logging(args):
    """``contact_sim.windows._scan_chunk``, first writing the worker's ``gc.get_freeze_count()`` to a file
    of its pid in ``_FREEZE_LOG`` (set before the fork, so the forked workers see it)."""
    import gc
    import os

    import contact_sim.windows as win

    (_FREEZE_LOG / f"{os.getpid()}-{args[3]}").write_text(str(gc.get_freeze_count()))
    return win._SCAN_CHUNK(args)


@pytest.mark.parametrize("refused", [False, True])
def test_forked_workers_scan_with_the_parents_objects_frozen_and_the_parent_is_left_unfrozen(
        shell, monkeypatch, tmp_path, refused):
    """Review: each forked worker of a 4,408-satellite search wrote to ~13 MiB of the parent's heap and
    ~20 MiB of its anonymous mappings more than with ``gc.freeze()`` before the fork: a worker's garbage
    collector writes to every object it tracks, so the pages they share with the parent are copied. The
    objects are now frozen while the pool forks (every worker starts with a non-zero freeze count; before,
    0) and unfrozen once it is done, also when the search is refused inside the pool (the parent's count
    back to 0); a caller's own freeze is left as it was (gc cannot unfreeze only some objects)."""
    import gc

    import contact_sim.windows as win
    from contact_sim.trajectory import contact_search_bytes

    c, _, _ = shell
    traj = satellite_trajectories(c, c.epoch, DUR, 60.0)
    g = LinkGeometry(max_range_km=4000.0)
    one = find_windows(traj, g)
    monkeypatch.setattr(f"{__name__}._FREEZE_LOG", tmp_path)
    monkeypatch.setattr(win, "_SCAN_CHUNK", win._scan_chunk, raising=False)
    monkeypatch.setattr(win, "_scan_chunk", _scan_chunk_logging)
    monkeypatch.setattr(win, "_FORKED_WORKER_BYTES", 0)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    if refused:  # room for the grid, not for a worker's first windows: every worker refuses at its first step
        grid = contact_search_bytes(traj.times_s.size, traj.n_nodes)
        monkeypatch.setattr("contact_sim.trajectory.MAX_TRAJECTORY_BYTES", grid + 1)
    assert gc.get_freeze_count() == 0
    if refused:
        with pytest.raises(ContactError, match="budget|would hold"):
            find_windows(traj, g, workers=2, budget=True)
    else:
        two = find_windows(traj, g, workers=2, budget=True)
        assert len(two) == len(one) > 50 and np.array_equal(two.a, one.a)
    assert gc.get_freeze_count() == 0
    counts = sorted(int(p.read_text()) for p in tmp_path.iterdir())
    assert len(counts) == 2 and counts[0] > 1000, counts  # both chunks scanned in forks, the objects frozen
    # a caller that froze its objects itself keeps them frozen: not unfrozen by the search
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        assert before > 1000
        if refused:
            with pytest.raises(ContactError):
                find_windows(traj, g, workers=2, budget=True)
        else:
            find_windows(traj, g, workers=2, budget=True)
        assert gc.get_freeze_count() > before // 2  # (objects freed since leave it; gc.unfreeze() sets it to 0)
    finally:
        gc.unfreeze()


def test_a_worker_counts_the_part_it_writes_with_the_buffers_grown_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review: a part written mid-chunk takes in the windows still open (checkpointed: emitted, then restarted),
    and the emitted-window buffers grow for them (_Accumulator._reserve); what the worker then holds while it
    writes the part (its buffers as grown and _PART_WRITE_BYTES a window) was never counted at once: the count
    taken after the grid step had the buffers before they grew and the open windows at _CLOSE_BYTES. Here (120
    satellites, parts of 4,000 windows) the buffers grow from 4,096 to 8,192 rows for the first part, and the
    most the search counted was 180 kB short of it; it is now counted before every part is written."""
    import tempfile

    from contact_sim import windows as W

    c = walker_delta(120, 12, 1, 550.0, 53.0, "2025-03-01T00:00:00Z")
    traj = satellite_trajectories(c, c.epoch, 7200.0, 60.0)
    monkeypatch.setattr(W, "_PART_WINDOWS", 4000)
    scanner = W._Scanner(traj, LinkGeometry(max_range_km=5000.0), None, budget=True)
    scanner.tally.start(1, shared=False)
    written, write = [], W._Scanner._write_part

    def counted_then_written(self, acc, *args):
        # what the worker holds as it writes the part, beyond its first buffers, and the most the search counted
        need = acc._buffer_bytes() - acc._first_bytes + W._PART_WRITE_BYTES * acc.n_out
        written.append((need, self.tally._sums[3], acc.out_pid.size))
        return write(self, acc, *args)

    monkeypatch.setattr(W._Scanner, "_write_part", counted_then_written)
    with tempfile.TemporaryDirectory() as directory:
        parts = scanner.scan(0, traj.times_s.size - 1, directory)
    assert len(parts) >= 2 and written[0][2] > 1 << 12, written  # a part mid-chunk, its buffers grown for it
    for need, counted, _ in written:
        assert counted >= need, written
