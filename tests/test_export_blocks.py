"""The contact plan's exports (contacts.csv, contacts.json, ION, HDTN) are written a block of windows at a
time: the same bytes whatever the block size, against a per-window reference for ION and HDTN, and what
they allocate is bounded by the block (plus the DTN plans' sort order), not a column per window."""

from __future__ import annotations

import datetime as dt
import json
import tracemalloc

import numpy as np
import pytest

import contact_sim.tablewriter as tablewriter
from contact_sim import ContactPlan, LinkModel, WindowTable, format_ion, hdtn_contacts, write_hdtn, write_ion
from contact_sim.windows import B_TO_A, BOTH

START = dt.datetime(2025, 12, 31, 23, 30, tzinfo=dt.timezone.utc)  # the windows run into the next day and year


def _plan(n: int, seed: int = 0, sort: bool = True) -> ContactPlan:
    """``n`` windows of 12 nodes: all three directions, a window shorter than a second once rounded inward
    (left out of the DTN plans), an unknown range, a run of 14 windows starting in the same whole second
    (longer than two blocks of 7), six of them with the same whole-second edges too (ordered by their nodes),
    windows before, inside and after the rounds; in start order (a search's) or not (``sort=False``)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 11, n)
    b = np.minimum(a + 1 + rng.integers(0, 3, n), 11)
    t0 = rng.uniform(0.0, 5000.0, n)
    t1 = t0 + rng.uniform(0.2, 400.0, n)
    t0[:14] = np.linspace(1999.1, 2000.0, 14)  # all start at +2000 once rounded up
    t1[:6] = 2060.0
    t0[20], t1[20] = 200.2, 200.9  # empty once rounded inward
    mean = rng.uniform(100.0, 45000.0, n)
    mean[21] = np.nan
    w = WindowTable(a, b, t0, t1, mean * 0.9, mean, rng.uniform(1e6, 1e10, n),
                    direction=rng.integers(0, 3, n), sort=sort)
    names = [f"sat-{i}" for i in range(12)]
    names[3] = 'odd,"name"'  # quoted in the CSV
    return ContactPlan(names, w, LinkModel("constant", 8e6, 5.0), [300.0, 1000.0, 3000.0, 4000.0], START,
                       ["satellite"] * 12)


def _reference(plan: ContactPlan) -> list[tuple[int, int, int, int, int, int, int]]:
    """Per contact, window by window in Python: ``(from, to, start, end, rate bits/s, rate bytes/s, owlt)``,
    the DTN plans' order and rounding (module docstring of contact_sim.dtn)."""
    w = plan.windows
    t0 = np.ceil(w.t_start_s - 1e-9)
    t1 = np.floor(w.t_end_s + 1e-9)
    rate = plan.link.mean_rate(w.duration_s, w.volume_bits)
    out = []
    for k in np.lexsort((w.b, w.a, t1, t0)):
        if t1[k] <= t0[k]:
            continue
        rng = 0.0 if np.isnan(w.mean_range_km[k]) else float(w.mean_range_km[k])
        owlt = max(int(np.ceil(rng / 299_792.458 - 1e-12)), 1)
        a, b = int(w.a[k]) + 1, int(w.b[k]) + 1
        d = int(w.direction[k])
        for src, dst in ((a, b), (b, a)) if d == BOTH else ((b, a),) if d == B_TO_A else ((a, b),):
            out.append((src, dst, int(t0[k]), int(t1[k]), int(rate[k]), int(rate[k] // 8), owlt))
    return out


def _outputs(plan: ContactPlan, folder) -> dict[str, bytes]:
    folder.mkdir()
    plan.to_csv(folder / "c.csv")
    plan.to_json(folder / "c.json")
    write_ion(folder / "c.ion", plan)
    write_hdtn(folder / "c.hdtn.json", plan)
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize("sort", [True, False])
def test_exports_written_in_blocks_are_the_bytes_of_one_block_and_of_the_per_window_reference(
        tmp_path, monkeypatch, sort) -> None:
    plan = _plan(60, sort=sort)
    assert (np.diff(plan.windows.t_start_s) >= 0).all() == sort
    whole = _outputs(plan, tmp_path / "whole")  # every table in one block (60 rows < BLOCK_ROWS)
    monkeypatch.setattr(tablewriter, "BLOCK_ROWS", 7)  # 9 blocks of windows, blocks of two-way contacts split
    blocks = _outputs(plan, tmp_path / "blocks")
    assert blocks == whole
    ref = _reference(plan)
    assert 60 < len(ref) < 120  # some windows carry both ways, one is left out
    lines = whole["c.ion"].decode().splitlines()
    assert [ln for ln in lines if ln.startswith("a ")] == (
        [f"a contact +{s} +{e} {f} {t} {rb}" for f, t, s, e, _, rb, _ in ref]
        + [f"a range +{s} +{e} {f} {t} {o}" for f, t, s, e, _, _, o in ref])
    assert format_ion(plan).encode() == whole["c.ion"]
    records = [{"contact": i, "source": f, "dest": t, "startTime": s, "endTime": e, "rateBitsPerSec": r, "owlt": o}
               for i, (f, t, s, e, r, _, o) in enumerate(ref)]
    assert hdtn_contacts(plan) == {"contacts": records}
    assert whole["c.hdtn.json"] == (json.dumps({"contacts": records}, indent=1) + "\n").encode()
    assert len(whole["c.csv"].splitlines()) == 61 and json.loads(whole["c.json"])["windows"][59]["a"] == plan.windows.a[59]


@pytest.mark.parametrize("n", [0, 1, 7])
def test_exports_of_a_few_windows_at_block_edges(tmp_path, monkeypatch, n) -> None:
    """No window (an empty HDTN list is ``[]``), one, and exactly one block."""
    ten = _plan(30)
    plan = ContactPlan(ten.node_names, ten.windows.select(np.arange(30) >= 30 - n), ten.link,
                       ten.round_boundaries_s, START, ten.node_kinds)  # the last n windows
    whole = _outputs(plan, tmp_path / "whole")
    monkeypatch.setattr(tablewriter, "BLOCK_ROWS", 7)
    assert _outputs(plan, tmp_path / "blocks") == whole
    assert whole["c.hdtn.json"] == (json.dumps(hdtn_contacts(plan), indent=1) + "\n").encode()
    if not n:
        assert whole["c.hdtn.json"] == b'{\n "contacts": []\n}\n'


def test_hdtn_rates_past_int64_are_written_whole(tmp_path) -> None:
    """HDTN's rate is a 64-bit unsigned integer: a rate of 1.5e19 bit/s (an imported plan's) is written as
    json.dumps writes the integer, not wrapped to a negative int64."""
    w = WindowTable([0], [1], [0.0], [60.0], [1.0], [1.0], [1.5e19 * 60.0])
    plan = ContactPlan(["a", "b"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 60.0])
    write_hdtn(tmp_path / "h.json", plan)
    assert (tmp_path / "h.json").read_bytes() == (json.dumps(hdtn_contacts(plan), indent=1) + "\n").encode()
    assert hdtn_contacts(plan)["contacts"][0]["rateBitsPerSec"] == 15_000_000_000_000_000_000


@pytest.mark.parametrize("export, most", [("csv", 2), ("ion", 32), ("hdtn", 32)])
def test_exports_allocate_per_block_not_per_window(tmp_path, monkeypatch, export, most) -> None:
    """With blocks of 500 rows, writing 50,000 windows allocates at most ``most`` bytes a window on top of
    the plan and 1 MB: next to nothing for contacts.csv (its round, duration and UTC columns were
    full-length, 91 bytes a window), the sort order for the DTN plans (25 bytes: whole-second edges and the
    order; they held a Python string or dict per contact, 420 and 2,300 bytes a window as traced here)."""
    plan = _plan(50_000, seed=1)
    monkeypatch.setattr(tablewriter, "BLOCK_ROWS", 500)
    write = {"csv": lambda p: plan.to_csv(p), "ion": lambda p: write_ion(p, plan),
             "hdtn": lambda p: write_hdtn(p, plan)}[export]
    write(tmp_path / "warm")  # tables built once (UTC clock), imports
    tracemalloc.start()
    try:
        write(tmp_path / "out")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < most * len(plan.windows) + 1_000_000, f"{peak / len(plan.windows):.1f} bytes per window"


def test_the_plan_summary_allocates_one_column() -> None:
    """`fol contacts` prints the plan's summary after writing: its duration column (8 bytes a window), taken
    in place by the median, not the two nodes' columns joined and the median's copy too (24 bytes)."""
    plan = _plan(50_000, seed=2)
    expected = plan.summary()
    tracemalloc.start()
    try:
        again = plan.summary()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert again == expected
    assert peak < 12 * len(plan.windows), f"{peak / len(plan.windows):.1f} bytes per window"
    dur = plan.windows.duration_s
    assert expected["median_duration_s"] == float(np.median(dur)) and expected["mean_duration_s"] == float(dur.mean())
    assert expected["windows_per_node_max"] == np.bincount(np.r_[plan.windows.a, plan.windows.b]).max()
