"""Constellation scale: the compiled open-window table, the vectorized
plan queries against a per-window reference, and the numpy CSV / JSON writers
against Python's own formatting."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json

import numpy as np
import pytest

from contact_sim import ContactError, ContactPlan, LinkModel, WindowTable
from contact_sim.tablewriter import Fixed, Int, Lit, Lookup, utc_pieces, write_rows
from contact_sim import _kernels as K
from contact_sim.windows import _Accumulator, _order_by_start


def _events(pid, kind, t, span=None, d=None, right=False):
    """Event arrays for ``_Accumulator.apply`` (``d`` = (d_lo, d_mid, d_hi, d_min) per row)."""
    m = pid.size
    ev_i = np.zeros((m, 3), dtype=np.int64)
    ev_i[:, 0], ev_i[:, 1], ev_i[:, 2] = pid, kind, right
    ev_f = np.zeros((m, 5))
    ev_f[:, 0] = t if span is None else span
    if d is not None:
        ev_f[:, 1:] = d
    return ev_i, ev_f


def test_open_window_table_matches_a_dict_under_random_opens_pieces_and_closes() -> None:
    """The compiled hash table (linear probing, backward-shift deletion, rebuilds
    to grow and shrink) against a dict, with many pair ids hashing close together."""
    rng = np.random.default_rng(0)
    acc, ref, emitted, peak, t = _Accumulator(4408), {}, [], 0, 0.0
    for step in range(150):
        t += 1.0
        # opens: new keys, some re-opened (restart), clustered ids (consecutive pairs of a node)
        base = rng.integers(0, 4408 * 4408 - 3000)
        new = np.unique(np.concatenate([rng.integers(0, 4408 * 4408, rng.integers(0, 1500)),
                                        base + np.arange(rng.integers(0, 1500))]))
        ev_i, ev_f = _events(new, K.OPEN, t)
        acc.apply(ev_i, ev_f, new.size, np.zeros(new.size))
        for k in new.tolist():
            ref[k] = [t, 0.0, np.inf, 0.0]
        peak = max(peak, len(ref))
        live = np.array(list(ref), dtype=np.int64)
        got = live[rng.random(live.size) < 0.7]
        d = rng.uniform(1, 100, (got.size, 4))
        bits = rng.uniform(0, 10, got.size)
        ev_i, ev_f = _events(got, K.PIECE, t, span=6.0, d=d)
        acc.apply(ev_i, ev_f, got.size, bits)
        for k, row, b in zip(got.tolist(), d, bits):
            r = ref[k]
            r[1] += row[0] + 4 * row[1] + row[2]
            r[2] = min(r[2], row[3])
            r[3] += b
        gone = live[rng.random(live.size) < (0.9 if step > 120 else 0.3)]
        ev_i, ev_f = _events(gone, K.CLOSE, t + 0.5)
        acc.apply(ev_i, ev_f, gone.size, np.zeros(gone.size))
        for k in gone.tolist():
            emitted.append((k, *ref.pop(k), t + 0.5))
        assert len(acc) == len(ref)
        assert acc.open_ids().tolist() == sorted(ref)
    res = acc.result()
    order = np.lexsort((res["pid"], res["t_end"]))
    exp = sorted(emitted, key=lambda r: (r[5], r[0]))
    assert res["pid"][order].tolist() == [r[0] for r in exp]
    np.testing.assert_allclose(res["t_start"][order], [r[1] for r in exp])
    np.testing.assert_allclose(res["d_int"][order], [r[2] for r in exp], rtol=1e-6)
    np.testing.assert_allclose(res["d_min"][order], [r[3] for r in exp], rtol=1e-6)
    np.testing.assert_allclose(res["bits"][order], [r[4] for r in exp])
    # memory follows the live windows, not the key range (4408^2 ~ 2e7 possible pair ids),
    # and the table shrank after most windows closed
    assert peak > 4000 and len(ref) < 100
    assert acc.tab.shape[0] == 1 << 12  # grew past it while thousands were open


def test_checkpoint_emits_open_windows_and_restarts_them() -> None:
    acc = _Accumulator(100)
    pid = np.array([5, 17, 230])
    ev_i, ev_f = _events(pid, K.OPEN, 10.0)
    acc.apply(ev_i, ev_f, 3, np.zeros(3))
    ev_i, ev_f = _events(pid, K.PIECE, 0.0, span=6.0, d=np.tile([1.0, 2.0, 3.0, 0.5], (3, 1)))
    acc.apply(ev_i, ev_f, 3, np.ones(3))
    acc.checkpoint(20.0)
    first = acc.result()
    assert sorted(first["pid"].tolist()) == [5, 17, 230]
    assert first["right"].all() and not first["left"].any()
    assert np.allclose(first["d_int"], 12.0) and np.allclose(first["bits"], 1.0)
    acc.close_all(30.0, right=False)
    second = acc.result()
    assert second["left"].all() and not second["right"].any()
    assert np.allclose(second["t_start"], 20.0) and np.allclose(second["d_int"], 0.0)
    assert len(acc) == 0


def test_order_by_start_equals_lexsort() -> None:
    rng = np.random.default_rng(1)
    t = rng.uniform(0, 100, 5000)
    t[::4] = 50.0  # runs of equal starts (a part boundary)
    t[1::9] = 0.0
    pid = rng.integers(0, 300, 5000)
    assert np.array_equal(_order_by_start(t, pid), np.lexsort((pid, t)))


def _random_plan(n_nodes: int = 30, n_win: int = 3000, seed: int = 0) -> ContactPlan:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_nodes - 1, n_win)
    b = a + 1 + (rng.integers(0, n_nodes, n_win) % (n_nodes - 1 - a))
    t0 = rng.uniform(0, 86_000, n_win)
    t1 = t0 + rng.uniform(0.5, 2000, n_win)
    rmin = rng.uniform(100, 4000, n_win)
    w = WindowTable(a, b, t0, t1, rmin, rmin + rng.uniform(0, 500, n_win), np.zeros(n_win))
    names = [f"sat,{i}" if i % 7 == 0 else f'sat "{i}"' if i % 11 == 0 else f"sat-{i}" for i in range(n_nodes)]
    return ContactPlan(names, w, LinkModel("constant", 1e6, 20.0), np.linspace(0, 86_400 * 1.05, 9),
                       start=dt.datetime(2025, 12, 31, 23, 0, tzinfo=dt.timezone.utc))


def _deliverable_reference(plan: ContactPlan, node: int, rnd: int, size: int):
    """The per-window loop the vectorized query replaces."""
    t0, t1 = plan.round_interval(rnd)
    w, best = plan.windows, {}
    busy = plan._busy_into.get((node, rnd), {})
    for i in range(len(w)):
        if node not in (w.a[i], w.b[i]) or w.t_end_s[i] <= t0 or w.t_start_s[i] >= t1:
            continue
        nb = int(w.b[i] if w.a[i] == node else w.a[i])
        start, end, acq = max(w.t_start_s[i], t0), min(w.t_end_s[i], t1), plan.link.acquisition_s
        if (i, nb) in busy:
            start, acq = max(start, busy[(i, nb)]), 0.0
        rate = plan._mean_rate[i]
        if end <= start or np.floor(rate * max(end - start - acq, 0.0) / 8.0) < size:
            continue
        finish = start + acq + size * 8.0 / rate
        if nb not in best or finish < best[nb]:
            best[nb] = finish
    return sorted(best, key=lambda j: (best[j], j))


def test_vectorized_deliverable_and_schedule_match_the_per_window_loop() -> None:
    plan = _random_plan()
    for node in range(0, 30, 3):
        for rnd in range(plan.n_rounds):
            got = [nb for nb, _ in plan.deliverable(node, rnd, 50_000_000)]
            assert got == _deliverable_reference(plan, node, rnd, 50_000_000)
    # transfers consume capacity: after scheduling, the reference (which reads the same
    # bookkeeping) and the query still agree, and a full window stops delivering
    node, rnd = 4, 2
    first = plan.deliverable(node, rnd, 10_000_000)
    assert first
    src, win = first[0]
    tr = plan.schedule(src, node, rnd, 10_000_000)
    assert tr.t_start_s == pytest.approx(win.t_start_s)
    assert [nb for nb, _ in plan.deliverable(node, rnd, 10_000_000)] == \
        _deliverable_reference(plan, node, rnd, 10_000_000)
    with pytest.raises(ContactError, match="no contact window can carry"):
        plan.schedule(src, node, rnd, 10**15)


def test_csv_export_equals_python_formatting(tmp_path) -> None:
    plan = _random_plan()
    w = plan.windows
    rows = list(csv.DictReader(open(plan.to_csv(tmp_path / "c.csv"), newline="")))
    assert len(rows) == len(w)
    base = np.datetime64("2025-12-31T23:00:00.000")
    rounds = np.searchsorted(plan.round_boundaries_s, w.t_start_s, side="right") - 1
    for i in range(0, len(w), 37):
        r = rows[i]
        assert (int(r["a"]), int(r["b"])) == (w.a[i], w.b[i])
        assert (r["name_a"], r["name_b"]) == (plan.node_names[w.a[i]], plan.node_names[w.b[i]])
        for key, value in (("t_start_s", w.t_start_s[i]), ("t_end_s", w.t_end_s[i]),
                           ("duration_s", w.t_end_s[i] - w.t_start_s[i]),
                           ("mean_range_km", w.mean_range_km[i]), ("min_range_km", w.min_range_km[i])):
            assert abs(float(r[key]) - float(f"{value:.3f}")) <= 1.0001e-3, key
            assert len(r[key].split(".")[1]) == 3
        stamp = base + np.round(w.t_start_s[i] * 1000).astype("timedelta64[ms]")
        assert r["start_utc"] == str(stamp) + "Z"
        assert int(r["round"]) == rounds[i] and int(r["capacity_bytes"]) == w.capacity_bytes[i]


def test_json_export_parses_and_keeps_every_window(tmp_path) -> None:
    plan = _random_plan(n_win=500)
    plan.schedule(*[(nb, 3) for nb, _ in plan.deliverable(3, 1, 1000)][0], 1, 1000)
    doc = json.loads(plan.to_json(tmp_path / "c.json").read_text())
    w = plan.windows
    assert len(doc["windows"]) == len(w) and doc["transfers"][0]["size_bytes"] == 1000
    assert [d["a"] for d in doc["windows"]] == w.a.tolist()
    assert np.allclose([d["t_end_s"] for d in doc["windows"]], w.t_end_s, atol=1e-3)
    assert doc["nodes"][7]["name"] == "sat,7"
    empty = ContactPlan(["x"], WindowTable.empty(), LinkModel("constant", 1e6, 0.0), [0.0, 1.0])
    assert json.loads(empty.to_json(tmp_path / "e.json").read_text())["windows"] == []


def test_table_writer_numbers_signs_and_utc() -> None:
    buf = io.BytesIO()
    x = np.array([0.0, -0.0004, -1.5, 999.9995, 12345678.25])
    write_rows(buf, [Int(np.array([0, -7, 10, 123456789012, -1])), Lit(b";"), Fixed(x, 3), Lit(b";"),
                     Lookup([b"", b"z"], np.array([0, 1, 0, 1, 0])), Lit(b"\n")])
    lines = buf.getvalue().decode().splitlines()
    assert lines[0] == "0;0.000;" and lines[1] == "-7;0.000;z" and lines[2] == "10;-1.500;"
    assert lines[3] == "123456789012;1000.000;z" and lines[4] == "-1;12345678.250;"
    with pytest.raises(ContactError, match="finite"):
        write_rows(io.BytesIO(), [Fixed(np.array([np.nan]))])
    buf = io.BytesIO()
    write_rows(buf, utc_pieces(dt.datetime(2024, 2, 28, 23, 59, 59), np.array([0.5, 1.0, 86_400.0])))
    assert buf.getvalue() == (b"2024-02-28T23:59:59.500Z2024-02-29T00:00:00.000Z"
                              b"2024-02-29T23:59:59.000Z")
    # times spread over more calendar days than there are rows; other decimal counts
    buf = io.BytesIO()
    write_rows(buf, [*utc_pieces(dt.datetime(2024, 2, 28), np.array([40 * 86_400.0, -0.25])), Lit(b";"),
                     Fixed(np.array([2.26, -10.04]), 1), Lit(b";"), Fixed(np.array([7.0, 0.375]), 0), Lit(b"\n")])
    assert buf.getvalue() == b"2024-04-08T00:00:00.000Z;2.3;7\n2024-02-27T23:59:59.750Z;-10.0;0\n"


def test_not_before_delays_the_start_and_pays_the_acquisition_again() -> None:
    w = WindowTable([0], [1], [0.0], [500.0], [10.0], [20.0], [0.0])
    plan = ContactPlan(["a", "b"], w, LinkModel("constant", 8e6, 10.0), [0.0, 1000.0])
    assert plan.earliest_transfer(1, 0, 0, 1_000_000) == pytest.approx((0.0, 11.0))
    plan.schedule(1, 0, 0, 1_000_000)
    assert plan.earliest_transfer(1, 0, 0, 1_000_000) == pytest.approx((11.0, 12.0))  # link kept
    assert plan.earliest_transfer(1, 0, 0, 1_000_000, not_before_s=100.0) == pytest.approx((100.0, 111.0))
    assert plan.earliest_transfer(1, 0, 0, 1_000_000, not_before_s=495.0) is None


def test_held_bytes_count_the_old_open_window_table_beside_the_new_while_it_is_rebuilt() -> None:
    """Review: the open-window table is rebuilt larger by moving its rows into a new one (2.5-5x the open
    windows, every row written as it is made), the old one held until they are moved; the memory check
    counted the table at its new size alone, with 80 bytes an open window for closing them later, so a
    rebuild just past half the table held up to 48 bytes an open window more than counted (about 30 MiB a
    worker in the first grid step at 4,408 satellites). held_bytes now gives, if more, what the rebuild
    held at once since it was last asked: here both tables, 4,096 and 8,192 rows of 64 bytes, less the
    first 4,096 it leaves out; before, 426,064 bytes (the new table's growth and 80 bytes a window)."""
    import tracemalloc

    acc = _Accumulator(100_000)
    rows = acc.tab.shape[0]  # 4,096
    pid = np.arange(rows // 2 + 1, dtype=np.int64) * 7  # just past half the table: rebuilt at 8,192 rows
    ev_i, ev_f = _events(pid, K.OPEN, 0.0)
    bits = np.zeros(pid.size)
    _Accumulator(100_000).apply(ev_i, ev_f, pid.size, bits)  # the kernels loaded (or compiled) before it is traced
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        acc.apply(ev_i, ev_f, pid.size, bits)
        peak = tracemalloc.get_traced_memory()[1] - before  # what the apply held at once beyond the first buffers
    finally:
        tracemalloc.stop()
    assert acc.tab.shape[0] == 2 * rows and len(acc) == pid.size and acc.n_out == 0
    held = acc.held_bytes()
    assert held == 64 * (rows + 2 * rows) - 64 * rows  # both tables, less the first one's rows
    # what the apply held at its peak (the new table and its cache-line padding, and the events' count by kind:
    # under a kilobyte not counted), within the count
    assert peak <= held + 4096, (peak, held)
    # once the rebuild is reported, the table as it stands: its growth, 80 bytes an open window to close it
    assert acc.held_bytes() == 64 * rows + 80 * pid.size
