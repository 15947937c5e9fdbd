"""Link model, contact plan (deliverable, transfers, rounds), exports."""

from __future__ import annotations

import dataclasses

import csv
import json
import math

import numpy as np
import pytest

from contact_sim import ContactError, ContactPlan, LinkModel, WindowTable


def _plan(rate=8e6, acq=10.0, bounds=(0.0, 1000.0, 2000.0)):
    # node 0 meets 1 (long), 2 (short, early), 3 (straddles the round boundary)
    w = WindowTable([0, 0, 0, 1], [1, 2, 3, 2], [100.0, 20.0, 900.0, 0.0],
                    [700.0, 80.0, 1300.0, 50.0], [100, 200, 300, 50], [150, 250, 350, 60],
                    [0, 0, 0, 0])
    return ContactPlan(["n0", "n1", "n2", "n3"], w, LinkModel("constant", rate, acq), list(bounds))


def test_shannon_rate_formula_and_monotonicity():
    m = LinkModel(model="shannon", tx_power_dbw=10, tx_gain_dbi=32, rx_gain_dbi=32, frequency_hz=26e9,
                  bandwidth_hz=100e6, noise_temperature_k=500, losses_db=3)
    d = 2000.0
    fspl = 20 * math.log10(4 * math.pi * d * 1e3 * 26e9 / 299_792_458.0)
    snr_db = 10 + 32 + 32 - fspl - 3 - (10 * math.log10(1.380649e-23) + 10 * math.log10(500 * 100e6))
    assert m.snr_db(d) == pytest.approx(snr_db)
    assert m.rate_at(d) == pytest.approx(100e6 * math.log2(1 + 10 ** (snr_db / 10)))
    r = m.rate_at(np.array([500.0, 1000.0, 5000.0]))
    assert r[0] > r[1] > r[2] > 0
    capped = LinkModel(model="shannon", max_rate_bps=1e8)
    assert capped.rate_at(10.0) == pytest.approx(1e8)



def test_shannon_defaults_give_the_documented_rates_from_exact_constants():
    """docs/scenario.md and contact_sim/link.py: the Shannon defaults (10 dBW, 2 x 32 dBi, 26 GHz,
    100 MHz, 500 K, 3 dB) give about 400 Mbit/s at 1,000 km and 70 Mbit/s at 5,000 km. Recomputed
    in linear units with CODATA k and c (no dB constants): metres, hertz, watts, bit/s."""
    from scipy.constants import Boltzmann, speed_of_light

    m = LinkModel(model="shannon")
    for d_km, docs_bps in ((1000.0, 400e6), (5000.0, 70e6)):
        d_m = d_km * 1e3
        path_gain = (speed_of_light / (4 * math.pi * d_m * 26e9)) ** 2  # free space, linear
        p_rx_w = 10.0 * 10 ** (64.0 / 10) * path_gain / 10 ** (3.0 / 10)  # 10 W, 64 dBi, 3 dB losses
        snr = p_rx_w / (Boltzmann * 500.0 * 100e6)
        rate = 100e6 * math.log2(1 + snr)
        assert float(m.rate_at(d_km)) == pytest.approx(rate, rel=1e-9)
        assert float(m.snr_db(d_km)) == pytest.approx(10 * math.log10(snr), abs=1e-9)
        assert rate == pytest.approx(docs_bps, rel=0.02)
    # free space: 6.02 dB lost per doubling of the range, none of it depending on the bandwidth
    assert float(m.snr_db(2000.0) - m.snr_db(1000.0)) == pytest.approx(-20 * math.log10(2))

def test_capacity_after_acquisition():
    m = LinkModel("constant", 8e6, 10.0)
    assert m.capacity_bytes(np.array([5.0, 10.0, 110.0]), None).tolist() == [0, 0, 100_000_000]
    s = LinkModel("shannon", acquisition_s=0.0)
    cap = s.capacity_bytes(np.array([100.0]), np.array([8e9]))  # 8 Gbit over 100 s
    assert cap.tolist() == [1_000_000_000]


@pytest.mark.parametrize("model", ["shannon", "plan"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -8e6])
def test_a_volume_that_is_no_number_of_bits_is_refused_naming_the_window(model, bad):
    """NaN volume_bits made the window's capacity -2**63 bytes (numpy warned on the cast), a negative one a
    negative capacity: the plan refuses them when built, in one line naming the first such window and the field."""
    w = WindowTable([0, 0, 1], [1, 2, 2], [0.0, 100.0, 200.0], [60.0, 160.0, 260.0], [1e3] * 3, [1e3] * 3,
                    [8e6, bad, bad])
    with pytest.raises(ContactError) as err:
        ContactPlan(["a", "b", "c"], w, LinkModel(model, acquisition_s=0.0), [0.0, 300.0])
    assert str(err.value) == f"window 1 (a - c, 100 .. 160 s): volume_bits {bad:g}; expected a finite number of bits >= 0"
    # with a constant rate the volumes are not read: the capacities are the rate's
    plan = ContactPlan(["a", "b", "c"], w, LinkModel("constant", 8e6, 0.0), [0.0, 300.0])
    assert plan.windows.capacity_bytes.tolist() == [60_000_000] * 3


@pytest.mark.parametrize("kwargs, field", [
    (dict(model="laser"), "link.model"), (dict(rate_bps=0.0), "link.rate_bps"),
    (dict(acquisition_s=-1.0), "link.acquisition_s"),
    # NaN passed the '< 0' check and every capacity became -2**63 bytes; inf made them all 0
    (dict(acquisition_s=float("nan")), r"link.acquisition_s: expected a number of seconds >= 0, got nan"),
    (dict(acquisition_s=float("inf")), r"link.acquisition_s: expected a number of seconds >= 0, got inf"),
    (dict(model="shannon", bandwidth_hz=-5.0), "link.bandwidth_hz"),
    (dict(rate_bps=1e308), r"link.rate_bps: expected a positive number of at most 1e\+15"),
    (dict(model="shannon", max_rate_bps=2e15), r"link.max_rate_bps: expected a positive number of at most 1e\+15"),
])
def test_bad_link_parameters(kwargs, field):
    with pytest.raises(ContactError, match=field):
        LinkModel(**kwargs)


@pytest.mark.parametrize("bounds", [(0.0, float("nan")), (float("nan"), 1000.0), (0.0, 1000.0, float("inf")),
                                    (0.0, 2000.0, 1000.0), (0.0,)])
def test_round_boundaries_must_be_finite_and_increasing(bounds):
    """A NaN boundary passed the 'strictly increasing' check (NaN compares False): the plan
    was built with a NaN horizon and no window deliverable in any round, silently."""
    with pytest.raises(ContactError, match=r"rounds: expected at least two strictly increasing finite boundaries"):
        _plan(bounds=bounds)


def test_deliverable_orders_by_completion_and_respects_size_and_round():
    plan = _plan()
    # round 0 = [0, 1000): windows with 1 (100..700) and 2 (20..80) and 3 (900..1000 part)
    got = plan.deliverable(0, 0, 10_000_000)  # 10 s of transfer at 1 MB/s
    # finish times: via 2 at 20+10+10 = 40 s, via 1 at 120 s, via 3 at 920 s
    assert [nb for nb, _ in got] == [2, 1, 3]
    nb, w = got[0]
    assert (w.t_start_s, w.t_end_s, w.capacity_bytes) == (20.0, 80.0, 50_000_000)
    big = plan.deliverable(0, 0, 100_000_000)
    assert [nb for nb, _ in big] == [1]
    # the straddling window is clipped: round 1 part is 1000..1300 -> 290 MB after acquisition
    r1 = plan.deliverable(0, 1, 1)
    assert [(nb, w.t_start_s, w.capacity_bytes) for nb, w in r1] == [(3, 1000.0, 290_000_000)]
    assert plan.deliverable(3, 0, 100_000_000) == []  # only 90 MB fit before the boundary
    assert plan.deliverable(0, 1, 10**12) == []


def test_record_transfer_consumes_capacity():
    plan = _plan()
    tr = plan.record_transfer(1, 0, 0, 300_000_000, 100.0, 410.0)
    assert tr.window_index >= 0 and plan.transfers == [tr]
    # the rest of that window (410..700) carries no more than 290 MB, no new acquisition
    nb, w = plan.deliverable(0, 0, 290_000_000)[0]
    assert nb == 1 and w.t_start_s == 410.0 and w.capacity_bytes == 290_000_000
    assert 1 not in [nb for nb, _ in plan.deliverable(0, 0, 290_000_001)]
    with pytest.raises(ContactError, match="before the previous transfer"):
        plan.record_transfer(1, 0, 0, 1000, 200.0, 300.0)
    # the opposite direction is independent (full duplex)
    plan.record_transfer(0, 1, 0, 1000, 100.0, 120.0)
    with pytest.raises(ContactError, match="do not fit"):
        plan.record_transfer(2, 0, 0, 60_000_000, 20.0, 80.0)
    with pytest.raises(ContactError, match="no contact window"):
        plan.record_transfer(3, 1, 0, 10, 100.0, 110.0)
    with pytest.raises(ContactError, match="not inside round"):
        plan.record_transfer(3, 0, 0, 10, 950.0, 1100.0)
    tr2 = plan.schedule(2, 0, 0, 1_000_000)
    assert tr2.t_start_s == 20.0 and tr2.t_end_s == pytest.approx(31.0)


def test_round_helpers_and_errors():
    plan = _plan()
    assert plan.n_rounds == 2 and plan.round_of(999.9) == 0 and plan.round_of(1000.0) == 1
    assert plan.round_of(5000.0) == -1
    with pytest.raises(ContactError, match="round"):
        plan.deliverable(0, 2, 1)
    with pytest.raises(ContactError, match="node"):
        plan.deliverable(9, 0, 1)
    with pytest.raises(ContactError, match="rounds"):
        ContactPlan(["a"], WindowTable.empty(), LinkModel(), [0.0])


def test_graph_and_exports(tmp_path):
    plan = _plan()
    g = plan.graph
    assert g.number_of_nodes() == 4 and g.number_of_edges() == 4
    assert g.nodes[2]["name"] == "n2"
    assert sorted(d["capacity_bytes"] for _, _, d in g.edges(data=True))[0] == 40_000_000
    cg = plan.contact_graph(t_s=50.0)
    assert set(map(frozenset, cg.edges())) == {frozenset({0, 2}), frozenset({1, 2})}
    plan.record_transfer(2, 0, 0, 1000, 30.0, 45.0)
    rows = list(csv.DictReader(open(plan.to_csv(tmp_path / "c.csv"))))
    assert len(rows) == 4 and rows[0]["name_a"] in {"n0", "n1"}
    assert {r["capacity_bytes"] for r in rows} >= {"590000000"}
    doc = json.loads(plan.to_json(tmp_path / "c.json").read_text())
    assert len(doc["windows"]) == 4 and doc["transfers"][0]["size_bytes"] == 1000
    assert doc["link"]["model"] == "constant"
    s = plan.summary()
    assert s["windows"] == 4 and s["windows_per_node_max"] == 3
    assert s["mean_duration_s"] == pytest.approx((600 + 60 + 400 + 50) / 4)


def test_window_table_sequence_behaviour():
    t = WindowTable([1, 0], [2, 1], [50.0, 10.0], [60.0, 20.0], [1, 2], [1, 2], [0, 0])
    assert len(t) == 2 and t[0].a == 0 and t[-1].t_start_s == 50.0  # sorted by start
    assert [w.duration_s for w in t] == [10.0, 10.0]
    with pytest.raises(IndexError):
        t[2]


def test_acquisition_is_waived_only_within_the_same_round():
    """The plan's rule: a second transfer on the same window and direction skips
    the acquisition only in the same round; a window straddling a boundary is
    acquired again in the next round."""
    # window 0-3 from 900 s to 1300 s straddles the boundary at 1000 s; 1 MB/s, 10 s acquisition
    plan = _plan(rate=8e6, acq=10.0)
    first = plan.schedule(0, 3, 0, 10_000_000)  # round 0: 900 + 10 + 10 = 920
    assert (first.t_start_s, first.t_end_s) == pytest.approx((900.0, 920.0))
    same_round = plan.schedule(0, 3, 0, 10_000_000)  # continues at 920, no new acquisition
    assert (same_round.t_start_s, same_round.t_end_s) == pytest.approx((920.0, 930.0))
    next_round = plan.schedule(0, 3, 1, 10_000_000)  # round 1 starts at 1000: acquired again
    assert (next_round.t_start_s, next_round.t_end_s) == pytest.approx((1000.0, 1020.0))
    [(nb, win)] = [(j, w) for j, w in plan.deliverable(3, 1, 1) if j == 0]
    assert win.t_start_s == pytest.approx(1020.0)
    fresh = _plan(rate=8e6, acq=10.0)
    fresh.schedule(0, 3, 0, 10_000_000)
    with pytest.raises(ContactError, match="do not fit"):  # no waiver claimed in a later round
        fresh.record_transfer(0, 3, 1, 10_000_000, 1000.0, 1010.0)
    assert fresh.record_transfer(0, 3, 1, 10_000_000, 1000.0, 1020.0).t_end_s == pytest.approx(1020.0)


def test_plan_deliveries_takes_the_earliest_arrivals_not_the_earliest_window_starts():
    """Q = 1: the model that arrives first is taken (docs: later arrivals are ignored).
    By hand, 1 MB = 8 Mbit to node 0, no acquisition time:
    * per-window rates: node 1 from 0 s at 80 kbit/s ends at 100 s, node 2 from 10 s
      at 80 Mbit/s ends at 10.1 s -> node 2;
    * one rate (8 Mbit/s), two sizes: node 1's 8 MB from 0 s ends at 8 s, node 2's
      1 MB from 5 s ends at 6 s -> node 2."""
    from fol.simulation.runner import plan_deliveries

    w = WindowTable([0, 0], [1, 2], [0.0, 10.0], [1000.0, 100.0], [1, 1], [1, 1], [8e4 * 1000, 8e7 * 90])
    plan = ContactPlan(["r", "slow", "fast"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 1000.0])
    assert plan.arrivals(0, 0, 1_000_000) == [(2, pytest.approx(10.1)), (1, pytest.approx(100.0))]
    assert plan_deliveries(plan, [0, 1, 2], [1_000_000] * 3, 1, 1)[0][0] == [2]
    assert [(t.src, t.t_start_s, t.t_end_s) for t in plan.transfers if t.dst == 0] == [(2, 10.0, pytest.approx(10.1))]

    w = WindowTable([0, 0], [1, 2], [0.0, 5.0], [100.0, 100.0], [1, 1], [1, 1], [0, 0])
    plan = ContactPlan(["r", "big", "small"], w, LinkModel("constant", 8e6, 0.0), [0.0, 1000.0])
    assert plan_deliveries(plan, [0, 1, 2], [1_000_000, 8_000_000, 1_000_000], 1, 1)[0][0] == [2]


def test_csv_round_column_is_minus_one_outside_the_rounds(tmp_path):
    # rounds [100, 1000) and [1000, 2000); windows start at 50 (before), 150, 1500 and 2500 (after the last)
    w = WindowTable([0, 0, 0, 0], [1, 1, 1, 1], [50.0, 150.0, 1500.0, 2500.0], [60.0, 160.0, 1600.0, 2600.0],
                    [1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0])
    plan = ContactPlan(["a", "b"], w, LinkModel("constant", 8e6, 0.0), [100.0, 1000.0, 2000.0])
    rows = list(csv.DictReader(open(plan.to_csv(tmp_path / "c.csv"))))
    assert [(r["t_start_s"], r["round"]) for r in rows] == [
        ("50.000", "-1"), ("150.000", "0"), ("1500.000", "1"), ("2500.000", "-1")]
    assert [plan.round_of(t) for t in (50.0, 150.0, 1500.0, 2500.0)] == [-1, 0, 1, -1]


def test_fol_payload_sizes_are_the_bytes_fol_sends_in_each_round(tiny_swarm):
    """The plan sized every round's transfer with a round-0 card without the input
    shape; the payloads FOL sends carry the round, so from the 11th exchange on they
    were 8 bytes longer than the capacity the plan had checked."""
    from fol.checkpoint import model_to_bytes
    from fol.methods.fol_method import payload_card
    from fol.simulation.runner import fol_payload_sizes, plan_deliveries

    base = tiny_swarm("hurricane", 0)[:2]
    # names of 1..8 characters: one of them puts the header at an 8-byte boundary,
    # so a two-digit round makes the padded payload longer
    nodes = next(pair for pair in ([dataclasses.replace(n, name=f"{'x' * length}{k}") for k, n in enumerate(base)]
                                   for length in range(1, 9))
                 if len(model_to_bytes(pair[0].pretrained, payload_card(pair[0], 10)))
                 > len(model_to_bytes(pair[0].pretrained, payload_card(pair[0], 0))))
    sizes = fol_payload_sizes(nodes, 12)
    for r in (0, 9, 10, 11):
        assert sizes[r] == [len(model_to_bytes(n.pretrained, payload_card(n, r))) for n in nodes]
    assert sizes[10][0] > sizes[9][0] == sizes[0][0]
    # one window of exactly the round-0 payload in each of two rounds: the larger payload does not fit
    w = WindowTable([0, 0], [1, 1], [0.0, 100.0], [10.0, 110.0], [1, 1], [1, 1], [0, 0])
    rate = 8 * max(sizes[0]) / 10.0
    plan = ContactPlan(["a", "b"], w, LinkModel("constant", rate, 0.0), [0.0, 50.0, 200.0])
    got = plan_deliveries(plan, [0, 1], [sizes[0], [max(sizes[0]) + 8] * 2], 2, 1)
    assert got == [{0: [1], 1: [0]}, {0: [], 1: []}]


def test_a_window_is_offered_only_when_the_transfer_ends_inside_it():
    """A window shorter than the acquisition time (or of no volume, as an imported plan gave
    for an ION rate of 0 bytes/s before such contacts were skipped) has no capacity; for an empty payload deliverable/arrivals still offered it, with a
    finish after the window's end (or infinite), and schedule then refused what they offered."""
    w = WindowTable([0, 0], [1, 2], [0.0, 0.0], [5.0, 50.0], [10, 10], [20, 20], [0, 0])
    plan = ContactPlan(["a", "b", "c"], w, LinkModel("constant", 8e6, 10.0), [0.0, 600.0])
    assert plan.deliverable(0, 0, 0) and [j for j, _ in plan.deliverable(0, 0, 0)] == [2]
    assert plan.arrivals(0, 0, 0) == [(2, 10.0)]
    assert plan.earliest_transfer(1, 0, 0, 0) is None
    assert plan.schedule(2, 0, 0, 0).t_end_s == 10.0
    imported = ContactPlan(["a", "b"], WindowTable([0], [1], [0.0], [50.0], [1], [1], [0.0]),
                           LinkModel("plan", acquisition_s=0.0), [0.0, 600.0])  # a window of no volume
    assert imported.deliverable(1, 0, 0) == [] and imported.arrivals(1, 0, 0) == []


def _ring():
    """A one-way ring 0 -> 1 -> 2 -> 0 (windows a < b: 0-1 a->b, 1-2 a->b, 0-2 b->a) and a duplex 0-3."""
    from contact_sim.windows import A_TO_B, B_TO_A, BOTH

    w = WindowTable([0, 1, 0, 0], [1, 2, 2, 3], [0.0, 0.0, 0.0, 0.0], [100.0] * 4, [1] * 4, [1] * 4, [0] * 4,
                    direction=[A_TO_B, A_TO_B, B_TO_A, BOTH])
    return ContactPlan(["n0", "n1", "n2", "n3"], w, LinkModel("constant", 8e3, 0.0), [0.0, 100.0])


def test_one_way_windows_deliver_only_along_their_direction():
    plan = _ring()
    assert [j for j, _ in plan.deliverable(1, 0, 1000)] == [0]  # 0 -> 1 only
    assert sorted(j for j, _ in plan.deliverable(0, 0, 1000)) == [2, 3]  # 2 -> 0 and the duplex 3
    assert [j for j, _ in plan.deliverable(3, 0, 1000)] == [0]
    assert [win.direction for _, win in plan.deliverable(2, 0, 1000)] == [1]
    assert plan.earliest_transfer(0, 1, 0, 1000) == (0.0, 1.0)
    assert plan.earliest_transfer(1, 0, 0, 1000) is None and plan.earliest_transfer(0, 2, 0, 1000) is None
    with pytest.raises(ContactError, match=r"transfer 1->0: .* carries data only 0->1"):
        plan.record_transfer(1, 0, 0, 1000, 0.0, 10.0)
    with pytest.raises(ContactError, match="no contact window can carry"):
        plan.schedule(0, 2, 0, 1000)
    assert plan.schedule(2, 0, 0, 1000).window_index == 1  # rows sorted by (start, a, b): 0-2 is row 1


def test_server_baselines_need_both_directions_of_a_one_way_plan():
    from fol.simulation.runner import _participants

    plan = _ring()
    # no station: a learner must reach a neighbour up and down; on the ring only the duplex 0-3 does
    assert _participants(plan, [0, 1, 2, 3], [1000] * 4, 1) == [[0, 3]]


def test_exports_graphs_and_summary_carry_the_window_direction(tmp_path):
    plan = _ring()
    with open(plan.to_csv(tmp_path / "c.csv"), newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0])[-2:] == ["min_range_km", "direction"]  # a trailing column: the others keep their place
    assert [(r["a"], r["b"], r["direction"]) for r in rows] == [("0", "1", "a->b"), ("0", "2", "b->a"),
                                                                ("0", "3", "both"), ("1", "2", "a->b")]
    doc = json.loads(plan.to_json(tmp_path / "c.json").read_text())
    assert [x["direction"] for x in doc["windows"]] == ["a->b", "b->a", "both", "a->b"]
    assert sorted(d["sender"] for _, _, d in plan.graph.edges(data=True) if d["sender"] is not None) == [0, 1, 2]
    assert plan.contact_graph()[0][2]["one_way_windows"] == 1 and plan.contact_graph()[0][3]["one_way_windows"] == 0
    assert plan.summary()["one_way_windows"] == 3


def test_the_simulation_delivers_models_only_along_a_one_way_plan():
    """The runner's delivery schedule on the one-way ring: each learner hears only from the node
    whose arrow points at it (0 -> 1 -> 2 -> 0; 3 meets 0 both ways), and every recorded transfer
    follows a window's direction."""
    from fol.simulation.runner import plan_deliveries

    plan = _ring()
    got = plan_deliveries(plan, [0, 1, 2, 3], [1000] * 4, 1, 4)
    assert {k: sorted(v) for k, v in got[0].items() if v} == {0: [2, 3], 1: [0], 2: [1], 3: [0]}
    assert sorted((t.src, t.dst) for t in plan.transfers) == [(0, 1), (0, 3), (1, 2), (2, 0), (3, 0)]


def test_a_transfer_is_recorded_on_the_window_that_carries_it():
    """Two windows of one pair overlap (a slow one over 0-100 s, a fast one over 10-20 s): schedule
    found the transfer on the fast window, then recorded it on the first covering window, the slow
    one, which refused it ("do not fit"); a later transfer on the fast window then saw no
    predecessor. Now the transfer is recorded on its own window, and record_transfer takes the
    first covering window that can carry it."""
    w = WindowTable([0, 0], [1, 1], [0.0, 10.0], [100.0, 20.0], [1, 1], [1, 1], [80.0 * 100, 8000.0 * 10])
    plan = ContactPlan(["a", "b"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 100.0])
    first = plan.schedule(0, 1, 0, 5000)  # 1,000 B/s on the fast window: 10..15 s
    assert (first.t_start_s, first.t_end_s, first.window_index) == (10.0, 15.0, 1)
    second = plan.schedule(0, 1, 0, 5000)  # after the first, on the same window
    assert (second.t_start_s, second.t_end_s, second.window_index) == (15.0, 20.0, 1)
    assert plan.record_transfer(1, 0, 0, 5000, 10.0, 15.0).window_index == 1
    with pytest.raises(ContactError, match="do not fit"):
        plan.record_transfer(1, 0, 0, 5001, 10.0, 15.0)


def test_a_plan_without_transfers_shares_the_windows_and_books_its_own_transfers():
    """``without_transfers`` (the simulation's plan for each seed) gives the same windows, capacities and
    per-node index without copying them (a deep copy took about 65 bytes a window more for every seed's
    plan), and a transfer booked on it is neither on the plan it came from nor in the way of the same
    transfer on another plan made from it."""
    base = _plan()
    base.schedule(1, 0, 0, 1_000_000)  # a transfer already booked: not carried over
    base.deliverable(0, 0, 1)  # the per-node index, built once
    first, second = base.without_transfers(), base.without_transfers()
    for plan in (first, second):
        assert plan.transfers == [] and plan is not base
        for name in WindowTable._columns():
            assert getattr(plan.windows, name) is getattr(base.windows, name)
        assert plan._mean_rate is base._mean_rate and plan._by_node is base._by_node
        assert plan.node_names == base.node_names and plan.meta == base.meta and plan.meta is not base.meta
    fresh = _plan().schedule(1, 0, 0, 1_000_000)
    assert first.schedule(1, 0, 0, 1_000_000) == fresh  # not after base's transfer on that window
    assert second.schedule(1, 0, 0, 1_000_000) == fresh  # nor after first's
    assert len(base.transfers) == len(first.transfers) == len(second.transfers) == 1


@pytest.mark.parametrize("n_nodes", [7, 70_000])  # the uint16 keys' radix sort, and past 65,536 nodes
def test_the_per_node_index_holds_each_nodes_windows_in_order_in_int32(n_nodes):
    """Each node's index is the ids of the windows it is an end of, ascending; held as int32 (4 bytes a
    window an end, 8 in all), not int64: a random plan of 4 M windows held 61 MiB in the index and peaked
    244 MiB building it, now 30.5 and 91.6 MiB, the ids the same."""
    rng = np.random.default_rng(1)
    n = 5_000
    a = rng.integers(0, n_nodes - 1, n)
    b = a + 1 + rng.integers(0, n_nodes, n) % (n_nodes - 1 - a)
    t0 = np.sort(rng.uniform(0.0, 1000.0, n))
    w = WindowTable(a, b, t0, t0 + 10.0, np.zeros(n), np.zeros(n), np.zeros(n), sort=False)
    plan = ContactPlan([f"n{k}" for k in range(n_nodes)], w, LinkModel("constant", 1e6, 0.0), [0.0, 1010.0])
    index = plan._node_index()
    assert len(index) == n_nodes and {v.dtype for v in index.values()} == {np.dtype(np.int32)}
    for k in set(a[:50].tolist()) | set(b[:50].tolist()) | {0, n_nodes - 1}:
        assert index[k].tolist() == np.flatnonzero((a == k) | (b == k)).tolist()
    assert sum(v.size for v in index.values()) == 2 * n
