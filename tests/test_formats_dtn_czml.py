"""Contact plans in the DTN tools' formats (ION in/out, HDTN out), a scenario driven by an
imported ION and HDTN plans, and the CZML export."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from contact_sim import (ContactError, ContactPlan, LinkModel, WindowTable, build_trajectories, format_ion,
                         hdtn_contacts, load_contact_scenario, parse_contact_scenario, parse_ion, plan_from_trajectories,
                         read_hdtn, read_ion, read_plan, write_hdtn, write_ion)
from contact_sim.cli import main as contacts_main
from contact_sim.czml import czml_packets
from contact_sim.windows import A_TO_B, B_TO_A, BOTH
from fol.cli import main

from _names import odd_folder
from _scenarios import tiny_fol

START = dt.datetime(2026, 8, 1, tzinfo=dt.timezone.utc)


def _hand_plan() -> ContactPlan:
    # node 0 <-> 1 from 0.4 s to 600.7 s, 8 Mbit/s = 1,000,000 bytes/s, 1,000 km apart;
    # node 1 <-> 2 from 100 s to 160 s at the same rate, 400,000 km apart (OWLT 1.33 s).
    w = WindowTable([0, 1], [1, 2], [0.4, 100.0], [600.7, 160.0], [900.0, 4e5], [1000.0, 4e5], [0.0, 0.0])
    return ContactPlan(["sat-a", "sat-b", "gs"], w, LinkModel("constant", 8e6, 0.0), [0.0, 700.0], START,
                       ["satellite", "satellite", "ground_station"])


def test_ion_and_hdtn_units_on_a_hand_checked_plan() -> None:
    text = format_ion(_hand_plan())
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    # ION: whole seconds inside the window, bytes per second, one direction per line.
    assert body == [
        "a contact +1 +600 1 2 1000000", "a contact +1 +600 2 1 1000000",
        "a contact +100 +160 2 3 1000000", "a contact +100 +160 3 2 1000000",
        "a range +1 +600 1 2 1", "a range +1 +600 2 1 1",
        "a range +100 +160 2 3 2", "a range +100 +160 3 2 2",
    ]
    assert "# start 2026-08-01T00:00:00Z" in text and "# node 3 gs ground_station" in text
    # HDTN: the same contacts in bits per second.
    assert hdtn_contacts(_hand_plan()) == {"contacts": [
        {"contact": 0, "source": 1, "dest": 2, "startTime": 1, "endTime": 600, "rateBitsPerSec": 8000000, "owlt": 1},
        {"contact": 1, "source": 2, "dest": 1, "startTime": 1, "endTime": 600, "rateBitsPerSec": 8000000, "owlt": 1},
        {"contact": 2, "source": 2, "dest": 3, "startTime": 100, "endTime": 160, "rateBitsPerSec": 8000000, "owlt": 2},
        {"contact": 3, "source": 3, "dest": 2, "startTime": 100, "endTime": 160, "rateBitsPerSec": 8000000, "owlt": 2},
    ]}


def test_ion_export_import_round_trips_exactly(tmp_path: Path, caplog) -> None:
    # Whole-second edges and whole byte rates: nothing to round, so the round trip is exact; a
    # symmetric plan's windows are its contacts, with nothing left out and nothing to warn about.
    w = WindowTable([0, 0, 1], [1, 2, 2], [0.0, 50.0, 300.0], [120.0, 400.0, 360.0], [1, 1, 1], [1, 1, 1],
                    [8 * 1000 * 120.0, 8 * 2500 * 350.0, 8 * 7 * 60.0])
    plan = ContactPlan(["x", "y", "z"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 200.0, 400.0], START,
                       ["satellite"] * 3)
    path = tmp_path / "plan.ion"
    path.write_text(format_ion(plan))
    back = read_ion(path, plan.round_boundaries_s)
    assert not [r for r in caplog.records if r.name == "contact_sim.dtn"]
    assert back.node_names == plan.node_names and back.node_kinds == plan.node_kinds and back.start == START
    for col in ("a", "b", "t_start_s", "t_end_s", "capacity_bytes"):
        assert np.array_equal(getattr(back.windows, col), getattr(plan.windows, col)), col
    assert format_ion(back) == path.read_text()
    assert [c.capacity_bytes for c in back.windows] == [120_000, 875_000, 420]


def test_ion_names_with_spaces_round_trip(tmp_path: Path) -> None:
    """CelesTrak names such as 'ISS (ZARYA)' are written and read back whole ('fol contacts
    --ion' stopped on them after the window search); a name that would not read back is refused."""
    plan = _hand_plan()
    named = ContactPlan(["ISS (ZARYA)", "CSS (TIANHE)", "Matera GS"], plan.windows, plan.link,
                        plan.round_boundaries_s, START, plan.node_kinds)
    (tmp_path / "p.ion").write_text(format_ion(named))
    assert "# node 1 ISS (ZARYA) satellite" in format_ion(named)
    back = read_ion(tmp_path / "p.ion")
    assert back.node_names == named.node_names and back.node_kinds == named.node_kinds
    for bad in ("two  spaces", " lead", "tab\there", "new\nline"):
        odd = ContactPlan([bad, "b", "c"], plan.windows, plan.link, plan.round_boundaries_s, START, plan.node_kinds)
        with pytest.raises(ContactError, match="an ION header line cannot carry it"):
            format_ion(odd)


def test_ion_capacity_never_wraps_around() -> None:
    """A rate x duration past int64 is held at 2**62 bytes, not wrapped to a negative count."""
    from contact_sim.dtn import ion_to_plan

    huge = "9" * 30  # over 2e9 s (ION's latest time in a plan of no start is 2**31 - 1 s)
    plan = ion_to_plan(parse_ion(f"a contact +0 +2000000000 1 2 {huge}\na contact +0 +2000000000 2 1 {huge}\n",
                                 "x.ion"), "x.ion")
    assert int(plan.windows.capacity_bytes[0]) == 2**62


def test_dtn_exports_refuse_a_rate_or_time_the_tool_cannot_hold() -> None:
    """ionadmin reads an 'a contact' rate into a 32-bit unsigned int (bytes/s): a 40 Gbit/s optical
    crosslink (5e9 bytes/s) was written as is and would wrap to 705 MB/s in ION. HDTN's
    rateBitsPerSec is a uint64_t."""
    def plan_at(rate_bps: float) -> ContactPlan:
        w = WindowTable([0], [1], [0.0], [60.0], [1000.0], [1000.0], [0.0])
        return ContactPlan(["sat-a", "sat-b"], w, LinkModel("constant", rate_bps, 0.0), [0.0, 60.0], START)

    fastest = plan_at(8.0 * (2**32 - 1))  # ION's largest rate still exports, exactly
    assert "a contact +0 +60 1 2 4294967295" in format_ion(fastest).splitlines()
    with pytest.raises(ContactError, match=r"^contact sat-a - sat-b \(nodes 1, 2\) \+0 \+60: mean rate 5e\+09 "
                                           r"bytes/s is above ION's limit of 4294967295 bytes/s"):
        format_ion(plan_at(40e9))
    assert hdtn_contacts(plan_at(40e9))["contacts"][0]["rateBitsPerSec"] == 40_000_000_000
    w = WindowTable([0], [1], [0.0], [60.0], [1000.0], [1000.0], [2e19 * 60])  # an imported plan's own rate
    imported = ContactPlan(["sat-a", "sat-b"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 60.0], START)
    with pytest.raises(ContactError, match=r"above HDTN's limit of 18446744073709551615 bit/s"):
        hdtn_contacts(imported)
    # HDTN's router reads startTime / endTime as a 32-bit int, a later one as 0
    late = WindowTable([0], [1], [3e9], [3e9 + 60], [1000.0], [1000.0], [8e6 * 60])
    far = ContactPlan(["sat-a", "sat-b"], late, LinkModel("plan", acquisition_s=0.0), [0.0, 4e9], START)
    with pytest.raises(ContactError, match=r"^contact sat-a - sat-b \(nodes 1, 2\) \+3000000000 \+3000000060: "
                                           r"ends after ION's latest time, 2038-01-19T03:14:07Z"):
        format_ion(far)  # ionadmin names no time past 2038 (tests/test_dtn_ion_rules.py)
    with pytest.raises(ContactError, match=r"^contact sat-a - sat-b \(nodes 1, 2\) \+3000000000 \+3000000060: "
                                           r"ends after HDTN's latest time, 2147483647 s"):
        hdtn_contacts(far)


def test_ion_absolute_times_and_foreign_files() -> None:
    text = ("1 3 100\ns\n# a plan from elsewhere, no node names\n"
            "a contact 2026/08/01-00:01:00 2026/08/01-00:02:00 5 9 1000\n"
            "a contact 2026/08/01-00:01:00 2026/08/01-00:02:00 9 5 2000\n"
            "a contact +0 +86400 5 5 1000000\n")
    ion = parse_ion(text, "x.ion", START)
    assert [(c[0], c[1], c[4]) for c in ion.contacts] == [(60.0, 120.0, 1000), (60.0, 120.0, 2000)]
    from contact_sim.dtn import ion_to_plan

    plan = ion_to_plan(ion, "x.ion")
    assert plan.node_names == ["ipn-5", "ipn-9"]
    assert int(plan.windows.capacity_bytes[0]) == 1000 * 60  # the smaller of the two directions
    # a day-long range line covers the window: its OWLT is written back on export
    ranged = ion_to_plan(parse_ion(text + "a range +0 +86400 5 9 5\n", "x.ion", START), "x.ion")
    assert "a range +60 +120 1 2 5" in format_ion(ranged) and "a range +60 +120 1 2 1" in format_ion(plan)


@pytest.mark.parametrize("text, message", [
    ("a contact +0 +60 1 2 fast\na contact +0 +60 2 1 1\n", r"p\.ion:1: expected an integer rate"),
    ("a contact +60 +0 1 2 1\n", r"p\.ion:1: the end time '\+0' is not after"),
    ("a contact 2026/08/01-00:00:00 +60 1 2 1\n", r"p\.ion:1: absolute time .* needs the plan start"),
    ("a plan +0 +60 1 2 1\n", r"p\.ion:1: expected 'a contact' or 'a range'"),
    ("# node 1 a\n", r"p\.ion: no 'a contact' lines"),
    ("a contact +0 +100 1 2 1\na contact +0 +150 2 1 1\na contact +50 +150 1 2 1\n",
     r"p\.ion:3: contact 1->2 \+50 \+150 overlaps the contact \+0 \+100 at .*p\.ion:1; contacts of one direction"),
    ("a contact +0 +60 1 2 1\na contact +0 +60 2 1 1\na contact +0 +60 1 2 2\n",
     r"p\.ion:3: contact 1->2 \+0 \+60 listed twice \(first at .*p\.ion:1\)"),
    ("a contact +0 +999999999999999999 1 2 1\n", r"p\.ion:1: expected a relative time \+SECONDS of 0\.\.1e\+10"),
    ("# fol-swarm contact plan\n# start 2026-08-01T00:00:00Z\na contact 2026/07/01-00:00:00 +60 1 2 1\n",
     r"p\.ion:3: 2026/07/01-00:00:00 is before the plan start 2026-08-01T00:00:00Z"),
    # integers too large for a float: one line, not an OverflowError
    ("a contact +0 +60 1 2 1%s\na contact +0 +60 2 1 1%s\n" % ("0" * 400, "0" * 400),
     r"p\.ion:1: rate \(bytes/s\) '10+' is too large; expected at most 1e100"),
    ("a contact +0 +60 1 2 1\na contact +0 +60 2 1 1\na range +0 +60 1 2 1%s\n" % ("0" * 400),
     r"p\.ion:3: OWLT \(s\) '10+' is too large"),
])
def test_malformed_ion_plan_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.ion"
    path.write_text(text)
    with pytest.raises(ContactError, match=message):
        read_ion(path)


@pytest.mark.parametrize("line, fill", [
    ("a contact +0 +60 1 2 1%s", "x"), ("a range +0 +60 1 2 1%s", "x"), ("a contact +0 +60 1 2%s 1", "x"),
    ("a contact +1%s +60 1 2 1", "x"), ("a contact 2026/08/01-00:00:00%s +60 1 2 1", "x"),
    ("a contact +0 +60 1 2 1\nd contact +0%s 1 2", "x"), ("a contact +0 +%s 1 2 1", "0"),
    ("a contact +0 +60 1 2 1\nd contact +%s1 1 2", "0")])
def test_a_long_ion_token_is_quoted_cut_in_the_refusal(tmp_path: Path, line: str, fill: str) -> None:
    """A rate, OWLT, node number or time of 20,000 characters (letters, or zeros before a valid time)
    was quoted whole: a 20 kB error line."""
    path = tmp_path / "p.ion"
    path.write_text(line % (fill * 20_000) + "\n")
    with pytest.raises(ContactError, match=r"p\.ion:\d+: (expected|the end time|no contact) .*\.\.\.") as err:
        read_ion(path)
    assert len(str(err.value)) < len(str(path)) + 200


def test_a_long_unknown_hdtn_key_is_quoted_cut_in_the_refusal(tmp_path: Path) -> None:
    """An unknown key of 20,000 characters (a mangled "owlt") was quoted whole: a 20 kB error line."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 60,
                                              "rateBitsPerSec": 8, "owlt" + "x" * 20_000: 1}]}))
    with pytest.raises(ContactError, match=r"p\.json: contacts\[0\]: unknown key 'owltx+\.\.\.; expected ") as err:
        read_hdtn(path)
    assert len(str(err.value)) < len(str(path)) + 250


# A->B 0-100 and B->A 50-150 overlap over 50-100; 3->4 is split in two (rates 10 and 20 bytes/s, a second apart:
# contacts of one direction that meet are an overlap to ionadmin) under one 4->3 contact at 15 bytes/s; 1->3 has no
# reverse at all.
def _write_contacts(path: Path, contacts) -> Path:
    """``contacts`` ``(t0, t1, from, to, bytes/s)`` as ION text (``.ion``) or HDTN JSON (``.json``)."""
    if path.suffix == ".ion":
        path.write_text("".join(f"a contact +{t0} +{t1} {a} {b} {r}\n" for t0, t1, a, b, r in contacts))
    else:
        path.write_text(json.dumps({"contacts": [
            {"contact": k, "source": a, "dest": b, "startTime": t0, "endTime": t1, "rateBitsPerSec": 8 * r}
            for k, (t0, t1, a, b, r) in enumerate(contacts)]}))
    return path


_ONE_WAY = [(0, 100, 1, 2, 1000), (50, 150, 2, 1, 1000), (0, 50, 3, 4, 10), (51, 100, 3, 4, 20),
            (20, 80, 4, 3, 15), (0, 40, 1, 3, 500)]


@pytest.mark.parametrize("fmt", ["ion", "json"])
def test_two_way_windows_where_both_directions_are_up_one_way_windows_elsewhere(tmp_path: Path, caplog, fmt: str) -> None:
    """Real plans are not symmetric (uplink and downlink windows of different lengths and rates):
    a two-way window is each overlap of an A->B and a B->A contact at the smaller rate, and the
    rest of each contact a one-way window at its own rate, counted in one line per file."""
    import logging

    from contact_sim import read_plan

    path = _write_contacts(tmp_path / f"p.{fmt}", _ONE_WAY)
    with caplog.at_level(logging.INFO, logger="contact_sim.dtn"):
        plan = read_plan(path)
    w = plan.windows
    assert plan.node_names == ["ipn-1", "ipn-2", "ipn-3", "ipn-4"]
    # 1->2 0-100 and 2->1 50-150: one-way 1->2 0-50, two-way 50-100, one-way 2->1 100-150
    assert list(zip(w.a.tolist(), w.b.tolist(), w.t_start_s.tolist(), w.t_end_s.tolist(), w.direction.tolist())) == [
        (0, 1, 0.0, 50.0, A_TO_B), (0, 2, 0.0, 40.0, A_TO_B), (2, 3, 0.0, 20.0, A_TO_B), (2, 3, 20.0, 50.0, BOTH),
        (0, 1, 50.0, 100.0, BOTH), (2, 3, 50.0, 51.0, B_TO_A), (2, 3, 51.0, 80.0, BOTH),
        (2, 3, 80.0, 100.0, A_TO_B), (0, 1, 100.0, 150.0, B_TO_A)]
    # two-way: the smaller rate over the overlap; one-way: the contact's own rate
    assert w.capacity_bytes.tolist() == [1000 * 50, 500 * 40, 10 * 20, 10 * 30, 1000 * 50, 15 * 1, 15 * 29, 20 * 20,
                                         1000 * 50]
    # one-way seconds: 1->2 0-50, 2->1 100-150, 3->4 0-20 and 80-100, 4->3 50-51, 1->3 0-40
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 181 of 399 contact-seconds have no reverse contact at the same time; kept as 6 one-way windows",
        f"{path}: 2 of 3 two-way windows have different rates in the two directions; each carries the smaller"]


def test_a_large_plan_is_read_in_time_linear_in_its_contacts() -> None:
    """A year of passes is tens of thousands of contact lines, most between the same few nodes: the
    windows and their OWLTs are found by sorting and sweeping, not by checking every contact (or
    range line) of a pair against every other (10,000 windows x 20,000 range lines took 5.7 s).
    The check compares the CPU time of 8,000 blocks with that of 2,000 (best of five each, so a busy
    machine slows both alike; wall time under a load of 4-7 on two cores came within 10 % of the bound):
    a sweep takes about 4 times as long, checking every pair 16 times."""
    import time

    from contact_sim.dtn import ion_to_plan

    def plan_of(blocks: int) -> tuple[object, float]:
        lines = []
        for k in range(blocks):  # downlink +0..+8, uplink +2..+9 of each 10 s, one range line per direction
            lines += [f"a contact +{10 * k} +{10 * k + 8} 1 2 1000", f"a contact +{10 * k + 2} +{10 * k + 9} 2 1 900",
                      f"a range +{10 * k} +{10 * k + 9} 1 2 {1 + k % 3}", f"a range +{10 * k} +{10 * k + 9} 2 1 1"]
        ion = parse_ion("\n".join(lines), "big.ion")
        best = float("inf")
        for _ in range(5):
            began = time.process_time()
            plan = ion_to_plan(ion, "big.ion")
            best = min(best, time.process_time() - began)
        assert len(ion.contacts) == 2 * blocks and len(plan.windows.a) == 3 * blocks
        return plan, best

    plan, took_large = plan_of(8_000)
    _, took_small = plan_of(2_000)
    # per 10 s: one-way 1->2 +0..+2, two-way +2..+8, one-way 2->1 +8..+9
    assert plan.windows.t_start_s[:4].tolist() == [0.0, 2.0, 8.0, 10.0]
    assert plan.windows.direction[:4].tolist() == [A_TO_B, BOTH, B_TO_A, A_TO_B]
    assert plan.meta["owlt_s_per_window"][1:12:3] == [1.0, 2.0, 3.0, 1.0]
    assert took_large < 8 * took_small, f"{took_large:.3f} s for 8,000 blocks, {took_small:.3f} s for 2,000"


def test_a_window_owlt_is_the_largest_range_line_covering_it() -> None:
    """The sweep that finds each window's OWLT agrees with checking every range line, on random
    plans with nested, partial and missing ranges."""
    import random

    from contact_sim.dtn import _largest_covering

    rng = random.Random(7)
    for _ in range(200):
        ranges = [(float(r0), float(r0 + rng.randint(1, 30)), rng.randint(1, 9))
                  for r0 in (rng.randint(0, 40) for _ in range(rng.randint(0, 8)))]
        spans = [(float(s0), float(s0 + rng.randint(1, 20)), k) for k, s0 in enumerate(rng.randint(0, 50) for _ in range(6))]
        brute = [max((o for r0, r1, o in ranges if r0 <= s0 and s1 <= r1), default=None) for s0, s1, _ in spans]
        got = _largest_covering(ranges, spans)
        assert [None if isinstance(o, float) and np.isnan(o) else o for o in got] == brute


@pytest.mark.parametrize("fmt", ["ion", "hdtn"])
def test_the_largest_owlt_a_plan_may_give_is_written_back_as_read(tmp_path: Path, fmt: str) -> None:
    """Plans allowed OWLTs to 1e100, kept as floats: 10**100 was exported as 1.000...0159e100, which the
    import refused, and 10**23 came back as 99999999999999991611392. An OWLT is now at most 1e10 s (the
    latest time a plan may name), which a float holds exactly."""
    def plan_text(owlt: int) -> str:
        if fmt == "ion":
            return f"a contact +0 +60 1 2 1000\na range +0 +60 1 2 {owlt}\n"
        return json.dumps({"contacts": [{"source": s, "dest": d, "startTime": 0, "endTime": 60,
                                         "rateBitsPerSec": 8000, "owlt": owlt} for s, d in ((1, 2), (2, 1))]})

    path = tmp_path / f"p.{'ion' if fmt == 'ion' else 'json'}"
    path.write_text(plan_text(10**10 + 1))
    with pytest.raises(ContactError, match=r"p\.(ion:2: OWLT \(s\) '10000000001' is too large; expected at most "
                                           r"1e10|json: contacts\[0\]: owlt: expected an integer of at most 1e10,)"):
        read_plan(path)
    path.write_text(plan_text(10**10))
    plan = read_plan(path)
    assert plan.meta["owlt_s_per_window"] == [1e10]
    json.dumps(plan.meta)  # the meta the JSON export writes
    back = tmp_path / f"back.{'ion' if fmt == 'ion' else 'json'}"
    (write_ion if fmt == "ion" else write_hdtn)(back, plan)
    assert read_plan(back).meta["owlt_s_per_window"] == [1e10]
    assert f" {10**10}" in back.read_text()


def test_hdtn_import_reads_back_what_the_ion_twin_gives(tmp_path: Path) -> None:
    """An exported HDTN plan reads back to the windows its ION twin gives (node names aside:
    HDTN's JSON has none), and a [contacts] plan_file ending in .json is read as HDTN."""
    plan = _hand_plan()
    (tmp_path / "p.ion").write_text(format_ion(plan))
    (tmp_path / "p.json").write_text(json.dumps(hdtn_contacts(plan)))
    ion, hdtn = read_ion(tmp_path / "p.ion", [0.0, 700.0]), read_hdtn(tmp_path / "p.json", [0.0, 700.0])
    assert hdtn.node_names == ["ipn-1", "ipn-2", "ipn-3"] and hdtn.meta["format"] == "hdtn"
    for col in ("a", "b", "t_start_s", "t_end_s", "capacity_bytes"):
        assert np.array_equal(getattr(hdtn.windows, col), getattr(ion.windows, col)), col
    assert hdtn.meta["owlt_s_per_window"] == ion.meta["owlt_s_per_window"] == [1.0, 2.0]
    assert hdtn_contacts(hdtn) == hdtn_contacts(plan)  # and out again, record for record
    assert read_plan(tmp_path / "p.json").meta["format"] == "hdtn" and read_plan(tmp_path / "p.ion").meta["format"] == "ion"
    (tmp_path / "s.toml").write_text('[contacts]\nplan_file = "p.json"\n[time]\nduration_s = 700.0\n')
    assert contacts_main(["contacts", str(tmp_path / "s.toml"), "--ion", "--out", str(tmp_path / "o")]) == 0
    assert [ln for ln in (tmp_path / "o" / "contacts.ion").read_text().splitlines() if ln.startswith("a ")] == \
        [ln for ln in format_ion(plan).splitlines() if ln.startswith("a ")]


def test_hdtn_rates_older_fields_unix_times_and_loopbacks() -> None:
    from contact_sim import parse_hdtn

    def rec(**kw):
        return {"contact": 0, "source": 1, "dest": 2, "startTime": 10, "endTime": 70, **kw}

    doc = {"contacts": [rec(rate=2), rec(source=2, dest=1, rateBitsPerSec=8_000_000, finalDestination=2),
                        rec(source=3, dest=3, rateBitsPerSec=1)]}
    plan = parse_hdtn(json.dumps(doc), "h.json")
    # 'rate' is HDTN's older field in Mbit/s; the loopback 3 -> 3 is left out; no owlt: cp_load's 0
    assert [(c[2], c[3], c[4]) for c in plan.contacts] == [(1, 2, 250_000.0), (2, 1, 1_000_000.0)]
    assert [r[:5] for r in plan.ranges] == [(10.0, 70.0, 1, 2, 0), (10.0, 70.0, 2, 1, 0)]
    unix0 = int(START.timestamp())
    both = [rec(startTime=unix0 + 60, endTime=unix0 + 120, rateBitsPerSec=8),
            rec(source=2, dest=1, startTime=unix0 + 60, endTime=unix0 + 120, rateBitsPerSec=8)]
    assert [c[:2] for c in parse_hdtn(json.dumps({"contacts": both}), "h.json", START).contacts] == [(60.0, 120.0)] * 2
    with pytest.raises(ContactError, match=r"h\.json: the times are Unix times .* set time\.start"):
        parse_hdtn(json.dumps({"contacts": both}), "h.json")


@pytest.mark.parametrize("doc, message", [
    ("[1, 2]", r"p\.json: expected an HDTN contact plan, a JSON object with a \"contacts\" list"),
    ("{not json", r"p\.json: invalid JSON"),
    ("[" * 100_000 + "]" * 100_000, r"p\.json: invalid JSON \(nested deeper than 8 levels\)"),
    ('{"contacts": [%s]}' % ("9" * 5_000), r"p\.json: invalid JSON \(an integer longer than 4,300 digits\)"),
    # a rate given twice: JSON readers differ on which one counts, so neither does
    ('{"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 60, "rateBitsPerSec": 8, '
     '"rateBitsPerSec": 8000000}]}', r"^\S*p\.json: invalid JSON \(duplicate key 'rateBitsPerSec' in a JSON object\); "
     r"expected an HDTN contact plan$"),
    ('{"contacts": [7]}', r"p\.json: contacts\[0\]: expected an object, got int"),
    ('{"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 60}]}',
     r"contacts\[0\]: expected rateBitsPerSec"),
    ('{"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 60, "rateBitsPerSec": 1, "speed": 3}]}',
     r"contacts\[0\]: unknown key 'speed'"),
    ('{"contacts": [{"source": 0, "dest": 2, "startTime": 0, "endTime": 60, "rateBitsPerSec": 1}]}',
     r"contacts\[0\]: source: expected a positive integer, got '0'"),
    ('{"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 6.5, "rateBitsPerSec": 1}]}',
     r"contacts\[0\]: endTime: expected a non-negative integer"),
    ('{"contacts": [{"source": 1, "dest": 2, "startTime": 60, "endTime": 60, "rateBitsPerSec": 1}]}',
     r"contacts\[0\]: endTime 60 is not after startTime 60"),
    ('{"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 99999999999, "rateBitsPerSec": 1}]}',
     r"contacts\[0\]: endTime: expected an integer of at most 2147483647 \(HDTN's router reads startTime and endTime "
     r"as 32-bit integers, a larger one as 0\), got '99999999999'"),  # past 1e10 s, past HDTN's bound first
    ('{"contacts": []}', r"p\.json: no contacts of a positive rate between two different nodes"),
    ('{"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 60, "rateBitsPerSec": 1}, '
     '{"source": 2, "dest": 1, "startTime": 1800000000, "endTime": 1800000060, "rateBitsPerSec": 1}]}',
     r"p\.json: contacts\[1\]: startTime is a Unix time .* where other records give seconds after the plan start"),
    ('{"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 1%s, "rateBitsPerSec": 1}]}' % ("0" * 400),
     r"contacts\[0\]: endTime: expected an integer of at most 2147483647 \(HDTN's router reads startTime and endTime "
     r"as 32-bit integers"),  # past 1e100 too: HDTN's own bound and reason
    ('{"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 60, "rateBitsPerSec": 1%s}]}' % ("0" * 400),
     r"contacts\[0\]: rateBitsPerSec: expected an integer of at most 1e100"),
])
def test_malformed_hdtn_plan_names_file_and_record(tmp_path: Path, doc: str, message: str) -> None:
    from contact_sim import read_hdtn

    path = tmp_path / "p.json"
    path.write_text(doc)
    with pytest.raises(ContactError, match=message):
        read_hdtn(path)


def test_plan_windows_after_the_horizon_are_said_to_be_unused(tmp_path: Path, caplog) -> None:
    import logging

    from contact_sim import load_plan_file

    (tmp_path / "p.ion").write_text(format_ion(_hand_plan()))  # windows start at 1 s and 100 s
    for duration, late in ((700.0, 0), (50.0, 1)):
        scn = parse_contact_scenario({"contacts": {"plan_file": "p.ion"}, "time": {"duration_s": duration}}, tmp_path)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="contact_sim.scenario"):
            assert len(load_plan_file(scn).windows.t_start_s) == 2
        said = [r.getMessage() for r in caplog.records]
        assert said == ([] if not late else [f"{tmp_path / 'p.ion'}: 1 of 2 windows start after "
                                             "time.duration_s = 50 s and are not used"])


def test_plan_file_scenario_validation(tmp_path: Path) -> None:
    doc = {"contacts": {"plan_file": "p.ion"}, "time": {"duration_s": 600.0}}
    scn = parse_contact_scenario(doc, tmp_path)
    assert scn.kind == "plan" and scn.plan_file == tmp_path / "p.ion" and scn.link.acquisition_s == 0.0
    with pytest.raises(ContactError, match=r"link\.rate_bps: not used with \[contacts\] plan_file"):
        parse_contact_scenario({**doc, "link": {"rate_bps": 1e6}}, tmp_path)
    with pytest.raises(ContactError, match="exactly one of"):
        parse_contact_scenario({**doc, "drones": {"count": 2, "radio_range_km": 1.0}}, tmp_path)
    with pytest.raises(ContactError, match="contacts: unknown key 'plan'"):
        parse_contact_scenario({**doc, "contacts": {"plan": "p.ion"}}, tmp_path)
    # no grid is searched with a plan: a step was accepted and silently ignored
    with pytest.raises(ContactError, match=r"^scenario: time\.step_s: not used with \[contacts\] plan_file \(the plan "
                                           r"lists the windows; no grid is searched\)$"):
        parse_contact_scenario({**doc, "time": {"duration_s": 600.0, "step_s": 10.0}}, tmp_path)
    # fol contacts reads the plan and re-exports it (HDTN here); CZML needs positions
    (tmp_path / "p.ion").write_text(format_ion(_hand_plan()))
    (tmp_path / "s.toml").write_text('[contacts]\nplan_file = "p.ion"\n[time]\nduration_s = 700.0\n')
    assert contacts_main(["contacts", str(tmp_path / "s.toml"), "--hdtn", "--out", str(tmp_path / "o")]) == 0
    assert json.loads((tmp_path / "o" / "contacts.hdtn.json").read_text()) == hdtn_contacts(_hand_plan())
    assert contacts_main(["contacts", str(tmp_path / "s.toml"), "--czml", "--out", str(tmp_path / "o")]) == 2


ION_SCENARIO = f"""
[scenario]
name = "tiny-ion"
seeds = [0]
[contacts]
plan_file = "plan.ion"
[time]
duration_s = 600.0
[link]
acquisition_s = 1.0
[rounds]
count = 1
[data]
dataset = "synthetic-wildfire"
size = 1600
image_size = 16
partition = "dirichlet"
psi = 1.0
per_node = 100
{tiny_fol()}[methods]
run = ["local", "fol"]
[run]
executor = "local"
threads = 1
[energy]                # starts empty: every transfer waits until the battery has charged enough
battery_wh = 1.0
solar_w = 3.0
idle_w = 1.0
j_per_byte = 1e-5
initial_charge = 0.0
"""


def test_simulate_driven_by_an_imported_ion_plan(tmp_path: Path) -> None:
    # a, b, c see each other for 10 minutes at 1 Mbit/s; "far" is in the header but has no contact.
    lines = ["# fol-swarm contact plan", "# start 2026-08-01T00:00:00Z", "# node 1 a drone", "# node 2 b drone", "# node 3 c drone",
             "# node 4 far drone"]
    for s, d in ((1, 2), (1, 3), (2, 3)):
        lines += [f"a contact +0 +600 {s} {d} 125000", f"a contact +0 +600 {d} {s} 125000"]
    (tmp_path / "plan.ion").write_text("\n".join(lines) + "\n")
    (tmp_path / "s.toml").write_text(ION_SCENARIO)
    out = tmp_path / "out"
    assert main(["simulate", str(tmp_path / "s.toml"), "--out", str(out)]) == 0
    with open(out / "results.csv") as fh:
        rows = {(r["method"], r["node"]): r for r in csv.DictReader(fh)}
    assert rows[("fol", "far")]["kept_local"] == "True" and int(rows[("fol", "far")]["bytes_down"]) == 0
    for name in ("a", "b", "c"):
        assert int(rows[("fol", name)]["received_models"]) == 2
    transfers = json.loads((out / "transfers.json").read_text())
    assert transfers and all(0.0 < t["t_start_s"] < t["t_end_s"] <= 600.0 for t in transfers)
    report = (out / "report.md").read_text()
    assert "| fol |" in report and not (out / "contacts.png").exists()
    # energy on: a sender pays size x 1e-5 J at 2 W net, so its first transfer waits size x 5e-6 s
    energy = json.loads((out / "energy.json").read_text())
    assert "## Energy" in report and len(energy["waits"]) == len(transfers) == 6
    first = min(transfers, key=lambda t: t["t_start_s"])
    assert abs(first["t_start_s"] - first["size_bytes"] * 1e-5 / 2.0) < 1e-6
    assert sum(n["transfers"] for n in energy["nodes"]) == 6


def test_czml_has_one_packet_per_node_and_window(tmp_path: Path) -> None:
    scn = tmp_path / "leo.toml"
    scn.write_text('[constellation]\nkind = "walker-delta"\ntotal = 12\nplanes = 2\nphasing = 1\naltitude_km = 550.0\n'
                   'inclination_deg = 53.0\nepoch = "2026-08-01T00:00:00Z"\n[[ground_stations]]\nname = "Matera"\n'
                   'lat_deg = 40.65\nlon_deg = 16.7\n[time]\nduration_s = 3600.0\nstep_s = 60.0\n'
                   '[link]\nmax_range_km = 8000.0\n')
    assert contacts_main(["contacts", str(scn), "--czml", "--ion", "--hdtn", "--no-plot", "--out", str(tmp_path / "o")]) == 0
    packets = json.loads((tmp_path / "o" / "contacts.czml").read_text())
    scenario = load_contact_scenario(scn)
    traj = build_trajectories(scenario)
    plan = plan_from_trajectories(traj, scenario)
    assert packets[0]["id"] == "document" and packets[0]["version"] == "1.0"
    nodes = [p for p in packets if p["id"].startswith("node-")]
    windows = [p for p in packets if p["id"].startswith("window-")]
    assert len(packets) == 1 + len(nodes) + len(windows)
    assert [p["name"] for p in nodes] == plan.node_names and len(windows) == len(plan.windows) > 0
    sat = nodes[0]["position"]
    assert sat["referenceFrame"] == "FIXED" and len(sat["cartesian"]) == 4 * traj.times_s.size
    r_m = np.linalg.norm(np.reshape(sat["cartesian"], (-1, 4))[:, 1:], axis=1)
    assert np.all(np.abs(r_m - 6_928_000) < 30_000)  # 550 km altitude, Earth-fixed metres
    station = nodes[-1]["position"]["cartesian"]
    assert abs(np.linalg.norm(station) - 6_369_000) < 10_000
    w0 = windows[0]
    assert w0["polyline"]["positions"]["references"][0].endswith("#position")
    t0, t1 = (dt.datetime.fromisoformat(x.replace("Z", "+00:00")) for x in w0["availability"].split("/"))
    assert abs((t1 - t0).total_seconds() - plan.windows.duration_s[0]) < 2e-3
    assert (tmp_path / "o" / "contacts.ion").stat().st_size > 0
    assert json.loads((tmp_path / "o" / "contacts.hdtn.json").read_text())["contacts"]
    with pytest.raises(ContactError, match="CZML export needs a satellite scenario"):
        drones = parse_contact_scenario({"drones": {"count": 2, "radio_range_km": 1.0},
                                         "time": {"duration_s": 60.0, "step_s": 10.0}}, tmp_path)
        dtraj = build_trajectories(drones)
        czml_packets(plan_from_trajectories(dtraj, drones), dtraj)


def test_exports_go_through_the_crash_safe_writer(tmp_path: Path, monkeypatch) -> None:
    """A failed export leaves the previous file as it was (docs/architecture.md, "One
    crash-safe writer"); they were written in place, so a full disk left a torn plan."""
    import os

    from contact_sim import write_hdtn, write_ion
    from orbits import walker_delta, write_omm, write_tle

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    shell = walker_delta(4, 2, 1, 550.0, 53.0, epoch="2026-08-01T00:00:00Z")
    for name, write in (("p.ion", lambda p: write_ion(p, _hand_plan())), ("p.json", lambda p: write_hdtn(p, _hand_plan())),
                        ("o.json", lambda p: write_omm(p, shell)), ("o.tle", lambda p: write_tle(p, shell))):
        target = tmp_path / name
        target.write_text("previous\n")
        with pytest.raises(OSError, match="No space left"):
            write(target)
        assert target.read_text() == "previous\n", name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.json", "o.tle", "p.ion", "p.json"]  # no temporary left
    with pytest.raises(ContactError, match=r"an ION plan is ASCII text; a node name holds 'é'"):
        write_ion(tmp_path / "n.ion", ContactPlan(["Matéra", "b", "c"], _hand_plan().windows, _hand_plan().link,
                                                  [0.0, 700.0], START, _hand_plan().node_kinds))
    with pytest.raises(ContactError, match=r"node 1: name '' .* is empty"):  # it read back as a node 'KIND'
        write_ion(tmp_path / "n.ion", ContactPlan(["", "b", "c"], _hand_plan().windows, _hand_plan().link,
                                                  [0.0, 700.0], START, _hand_plan().node_kinds))


def _czml_samples_against_skyfield(start: str, duration_s: float, rows: list[int]) -> np.ndarray:
    """The first satellite's CZML samples [t, x, y, z] of a two-satellite shell from
    ``start``; the ``rows`` given are checked within 1 m of Skyfield's Earth-fixed
    position (metres) at the written epoch + t."""
    from skyfield.api import EarthSatellite
    from skyfield.framelib import itrs

    from contact_sim.scenario import build_constellation
    from orbits.timeutil import timescale

    doc = {"constellation": {"kind": "walker-delta", "total": 2, "planes": 1, "altitude_km": 550.0,
                             "inclination_deg": 53.0, "epoch": "2025-01-01T00:00:00Z"},
           "time": {"start": start, "duration_s": duration_s, "step_s": 60.0},
           "link": {"max_range_km": 5000.0}}
    scenario = parse_contact_scenario(doc, ".")
    traj = build_trajectories(scenario)
    pos = czml_packets(plan_from_trajectories(traj, scenario), traj)[1]["position"]
    epoch = dt.datetime.fromisoformat(pos["epoch"].replace("Z", "+00:00"))
    samples = np.reshape(pos["cartesian"], (-1, 4))
    ts = timescale()
    sat = EarthSatellite.from_satrec(build_constellation(scenario).satrecs[0], ts)
    for t_s, *xyz in samples[rows]:
        ref_m = sat.at(ts.from_datetime(epoch + dt.timedelta(seconds=float(t_s)))).frame_xyz(itrs).m
        assert np.linalg.norm(np.asarray(xyz) - ref_m) < 1.0
    return samples


def test_czml_sample_times_match_their_positions_off_the_tenth_second() -> None:
    """Each [t, x, y, z] sample is where Skyfield puts the satellite (Earth-fixed, metres) at epoch + t,
    also for a horizon ending between tenths of a second (the last grid point is the horizon)."""
    samples = _czml_samples_against_skyfield("2025-01-01T00:00:00Z", 600.37, rows=[0, 1, -1])
    assert samples[-1, 0] == pytest.approx(600.37, abs=1e-3)


def test_czml_samples_stay_on_time_for_a_start_between_milliseconds() -> None:
    """ISO times are written to the millisecond; a start 0.8 ms past one must not shift every
    sample by 0.8 ms (~6 m in LEO) against Skyfield's Earth-fixed position at epoch + t."""
    _czml_samples_against_skyfield("2025-01-01T00:00:00.000800Z", 600.0, rows=[0, 5, -1])


def test_czml_times_in_a_year_before_1000_are_iso_8601() -> None:
    """The CZML export wrote its times with strftime('%Y'), which writes the year 26 as '26': a scenario of
    time.start 0026-08-01 (which parse_utc takes) failed in the export itself with a ValueError traceback
    (its own fromisoformat of the epoch it had written). Failed before."""
    from orbits import parse_utc

    doc = {"constellation": {"kind": "walker-delta", "total": 4, "planes": 2, "altitude_km": 550.0,
                             "inclination_deg": 53.0, "epoch": "0026-08-01T00:00:00Z"},
           "time": {"start": "0026-08-01T00:00:00.0008Z", "duration_s": 600.0, "step_s": 60.0},
           "link": {"max_range_km": 8000.0}}
    scenario = parse_contact_scenario(doc, ".")
    traj = build_trajectories(scenario)
    plan = plan_from_trajectories(traj, scenario)
    packets = czml_packets(plan, traj)
    assert packets[0]["clock"]["interval"] == "0026-08-01T00:00:00.000Z/0026-08-01T00:10:00.000Z"
    assert packets[1]["position"]["epoch"] == "0026-08-01T00:00:00.000Z"
    windows = [p for p in packets if p["id"].startswith("window-")]
    assert len(windows) == len(plan.windows) > 0
    t0, t1 = (parse_utc(x) for x in windows[0]["availability"].split("/"))
    assert abs((t0 - traj.start).total_seconds() - plan.windows.t_start_s[0]) < 1e-3
    assert abs((t1 - t0).total_seconds() - plan.windows.duration_s[0]) < 2e-3


def test_plan_json_of_an_imported_plan_without_range_lines_is_standard_json(tmp_path: Path) -> None:
    """A window with no covering 'a range' line kept a NaN OWLT in plan.meta, which
    ContactPlan.to_json (fol contacts --json) wrote as the bare token NaN: not JSON (RFC 8259),
    refused by strict readers. It is null now, and export still writes the default OWLT."""
    (tmp_path / "p.ion").write_text("a contact +0 +60 1 2 1000\na contact +0 +60 2 1 1000\n"
                                    "a contact +100 +160 1 2 1000\na contact +100 +160 2 1 1000\n"
                                    "a range +100 +160 1 2 7\n")
    plan = read_ion(tmp_path / "p.ion", [0.0, 600.0])
    plan.to_json(tmp_path / "c.json")

    def refuse(token):
        raise ValueError(f"non-standard JSON constant {token}")

    doc = json.loads((tmp_path / "c.json").read_text(), parse_constant=refuse)
    assert doc["meta"]["owlt_s_per_window"] == [None, 7.0]
    assert [ln for ln in format_ion(plan).splitlines() if ln.startswith("a range")] == [
        "a range +0 +60 1 2 1", "a range +0 +60 2 1 1", "a range +100 +160 1 2 7", "a range +100 +160 2 1 7"]


def test_ion_reads_ionadmins_own_commands() -> None:
    """Real ionrc files use '@' (reference time), '^' (region), 'v', registration (start -1) and
    hypothetical (start 0) contacts, and 'd' / 'c' edits; these used to stop the import at their line."""
    from contact_sim.dtn import ion_to_plan

    text = ("## begin ionadmin\r\n1 1 ''\r\nv\r\n^ 1\r\ns\r\n"
            "a contact -1 -1 1 1 0\r\na contact 0 0 1 7 0\r\n"
            "@ 2026/08/01-00:10:00\r\n"                        # '+ss' now counts from 600 s
            "a contact +0 +60 1 2 1000\r\na contact +0 +60 2 1 1000\r\n"
            "a contact +100 +160 1 3 500\r\na contact +100 +160 3 1 500\r\n"
            "c contact +0 1 2 4000\r\nc contact +0 2 1 3000\r\n"
            "a range +0 +60 1 2 4\r\na range +0 +60 2 1 9\r\nd range +0 2 1\r\n"
            "d contact * 1 3\r\nd contact +100 3 1\r\n"
            "@ +1000\r\na contact +0 +30 1 4 100\r\na contact +0 +30 4 1 100\r\n## end ionadmin\r\n")
    ion = parse_ion(text, "x.ion", START)
    assert [(c[0], c[1], c[2], c[3], c[4]) for c in ion.contacts] == [
        (600.0, 660.0, 1, 2, 4000), (600.0, 660.0, 2, 1, 3000), (1600.0, 1630.0, 1, 4, 100), (1600.0, 1630.0, 4, 1, 100)]
    assert [r[:5] for r in ion.ranges] == [(600.0, 660.0, 1, 2, 4)]
    plan = ion_to_plan(ion, "x.ion")
    assert plan.node_names == ["ipn-1", "ipn-2", "ipn-4"]
    assert plan.meta["owlt_s_per_window"] == [4.0, None]
    for text, message in (("d contact +0 1 2\n", r"x\.ion:1: no contact 1->2 starting at '\+0' to delete"),
                          ("a contact +0 +9 1 2 1\nc contact +5 1 2 7\n", r"x\.ion:2: no contact 1->2 starting at '\+5'"),
                          ("c range +0 1 2 3\n", r"x\.ion:1: expected 'c contact START"),
                          ("@ 2026/07/01-00:00:00\n", r"x\.ion:1: 2026/07/01-00:00:00 is before the plan start"),
                          ("@\n", r"x\.ion:1: expected '@ TIME'")):
        with pytest.raises(ContactError, match=message):
            parse_ion(text, "x.ion", START)


@pytest.mark.parametrize("fmt", ["ion", "json"])
def test_a_one_way_ring_plan_loads_and_delivers_only_along_its_arrows(tmp_path: Path, fmt: str) -> None:
    """HDTN's own example plans are one-way records (1->2, 2->3, ...): they load as one-way
    windows, data moves only along the arrows, and export reads back to the same windows."""
    from contact_sim import read_plan

    ring = [(0, 100, 1, 2, 1000), (0, 100, 2, 3, 1000), (0, 100, 3, 1, 1000)]
    path = _write_contacts(tmp_path / f"ring.{fmt}", ring)
    plan = read_plan(path)
    w = plan.windows
    assert list(zip(w.a.tolist(), w.b.tolist(), w.direction.tolist())) == [(0, 1, A_TO_B), (0, 2, B_TO_A),
                                                                          (1, 2, A_TO_B)]
    assert [[j for j, _ in plan.deliverable(k, 0, 1000)] for k in range(3)] == [[2], [0], [1]]
    assert plan.earliest_transfer(0, 1, 0, 1000) == (0.0, 1.0) and plan.earliest_transfer(1, 0, 0, 1000) is None
    with pytest.raises(ContactError, match="carries data only 0->1"):
        plan.record_transfer(1, 0, 0, 1000, 0.0, 10.0)
    assert [ln for ln in format_ion(plan).splitlines() if ln.startswith("a contact")] == [
        "a contact +0 +100 1 2 1000", "a contact +0 +100 3 1 1000", "a contact +0 +100 2 3 1000"]
    assert [(c["source"], c["dest"]) for c in hdtn_contacts(plan)["contacts"]] == [(1, 2), (3, 1), (2, 3)]


@pytest.mark.parametrize("reverse_rate", [1000, 500])
def test_a_mixed_plan_round_trips_through_ion_and_hdtn(tmp_path: Path, caplog, reverse_rate: int) -> None:
    """A->B 0-100 s and B->A 50-150 s: one-way A->B 0-50, two-way 50-100, one-way B->A 100-150;
    each export writes a one-way window as its direction's contact (and range) only. A direction's contacts of two
    windows that meet (A->B 0-50 and 50-100) are an overlap to ionadmin, which would ignore the second: of one rate
    they are written as one contact, and the plan reads back to the same windows; of two rates (A->B at 1000 bytes/s
    alone, 500 in the two-way window) the slower starts a second later, the 500 bytes of that second left out, said
    in a warning. HDTN, which takes contacts that meet, is written as the windows are and reads back to them.
    Failed before: 'a contact +0 +50 1 2 1000' then 'a contact +50 +100 1 2 ...' were written."""
    import logging

    from contact_sim import read_plan, write_hdtn, write_ion

    path = tmp_path / "mixed.ion"
    # 1->2 +0 +50, not +0 +100: the reverse ionadmin imputes of it, 2->1 +0 +100, would overlap 2->1 +50 +150, skipped
    path.write_text(f"a contact +0 +100 1 2 1000\na contact +50 +150 2 1 {reverse_rate}\n"
                    "a range +0 +50 1 2 2\na range +50 +150 2 1 3\n")
    plan = read_plan(path)
    rows = lambda p: list(zip(p.windows.t_start_s.tolist(), p.windows.t_end_s.tolist(),  # noqa: E731
                              p.windows.direction.tolist(), p.windows.capacity_bytes.tolist()))
    r = reverse_rate
    assert rows(plan) == [(0.0, 50.0, A_TO_B, 50_000), (50.0, 100.0, BOTH, 50 * r), (100.0, 150.0, B_TO_A, 50 * r)]
    assert plan.meta["owlt_s_per_window"] == [2.0, 3.0, 3.0]
    with caplog.at_level(logging.WARNING, logger="contact_sim.dtn"):
        text = format_ion(plan)
    assert "a range +0 +50 1 2 2" in text
    assert "+0 +50 2 1" not in text and "+100 +150 1 2" not in text
    contacts = [ln for ln in text.splitlines() if ln.startswith("a contact")]
    if r == 1000:  # what the file read held
        assert contacts == ["a contact +0 +100 1 2 1000", "a contact +50 +150 2 1 1000"] and not caplog.records
        expected, owlts = rows(plan), plan.meta["owlt_s_per_window"]
    else:
        assert contacts == ["a contact +0 +50 1 2 1000", "a contact +51 +100 1 2 500", "a contact +50 +150 2 1 500"]
        assert caplog.records[-1].getMessage().endswith(
            "the slower ends a second sooner or starts a second later; 500 of 125000 bytes left out")
        expected = [(0.0, 50.0, A_TO_B, 50_000), (50.0, 51.0, B_TO_A, 500), (51.0, 100.0, BOTH, 49 * 500),
                    (100.0, 150.0, B_TO_A, 25_000)]
        owlts = [2.0, 3.0, 3.0, 3.0]
    back = read_plan(write_ion(tmp_path / "back.ion", plan))
    assert rows(back) == expected and back.meta["owlt_s_per_window"] == owlts
    back = read_plan(write_hdtn(tmp_path / "back.json", plan))
    assert rows(back) == rows(plan) and back.meta["owlt_s_per_window"] == plan.meta["owlt_s_per_window"]


def test_dtn_exports_refuse_a_bad_plan_with_one_check_before_writing(tmp_path: Path, monkeypatch) -> None:
    """format_ion / write_ion and hdtn_contacts / write_hdtn made their checks in a different order (a
    bad name and a too-fast rate: the rate from format_ion, the name from write_ion), format_ion
    passed a name write_ion refused as not ASCII, the writers refused a rate only after writing the
    blocks before it, a NaN or infinite rate was 'above the limit' and a negative one was written. One
    check, made whole before anything is written, names the first failing window and the field."""
    import contact_sim.dtn as dtn
    import contact_sim.tablewriter as tablewriter

    def plan_of(volumes, names=("sat-a", "sat-b", "sat-c"), t_start=None) -> ContactPlan:
        n = len(volumes)  # unsorted (an imported plan's table): the check does not rely on the table's order
        t0 = np.array(t_start if t_start is not None else [600.0 - 60.0 * i for i in range(n)])
        w = WindowTable([i % 2 for i in range(n)], [2] * n, t0, t0 + 60.0, [1e3] * n, [1e3] * n, volumes,
                        sort=False)
        return ContactPlan(list(names), w, LinkModel("plan", acquisition_s=0.0), [0.0, 700.0], START)

    exports = {"ion": (format_ion, write_ion), "hdtn": (hdtn_contacts, write_hdtn)}

    def refusals(plan: ContactPlan, tools=("ion", "hdtn")) -> dict[str, str]:
        def opened(*args, **kwargs):
            raise AssertionError("the file was opened before the plan was checked")

        out = {}
        for tool in tools:
            fmt, write = exports[tool]
            with pytest.raises(ContactError) as formatted:
                fmt(plan)
            target = tmp_path / f"plan.{tool}"
            target.write_text("previous\n")
            with monkeypatch.context() as m:
                m.setattr(dtn, "atomic_writer", opened)
                with pytest.raises(ContactError) as written:
                    write(target, plan)
            assert str(written.value) == f"{target}: {formatted.value}"  # the same message, the file named
            assert target.read_text() == "previous\n"
            out[tool] = str(formatted.value)
        return out

    monkeypatch.setattr(tablewriter, "BLOCK_ROWS", 3)  # 4 blocks of 10 windows
    good = 8e6 * 60.0
    for bad, shown_volume, rate in ((np.nan, "nan", "nan"), (np.inf, "inf", "inf"), (-good, "-4.8e+08", "-8e+06")):
        plan = plan_of([good] * 10)  # the plan refuses such a volume when built: one set on its windows after
        plan.windows.volume_bits[[1, 8]] = bad  # windows +540 and +120: the second comes first in the plans
        with np.errstate(invalid="ignore"):
            got = refusals(plan)
        expected = (f"contact sat-a - sat-c (nodes 1, 3) +120 +180: mean rate {rate} bit/s (volume_bits "
                    f"{shown_volume} over 60 s); expected a finite rate >= 0")
        assert got == {"ion": expected, "hdtn": expected}, bad
    fast = [good] * 10
    fast[9] = 8.0 * 5e9 * 60.0  # ION only: 5e9 bytes/s
    assert hdtn_contacts(plan_of(fast))["contacts"][0]["rateBitsPerSec"] == 40_000_000_000
    assert refusals(plan_of(fast), ["ion"])["ion"] == (
        "contact sat-b - sat-c (nodes 2, 3) +60 +120: mean rate 5e+09 bytes/s is above ION's limit of 4294967295 "
        "bytes/s (ionadmin reads a 32-bit rate); export HDTN (--hdtn) or cap the rate (link.max_rate_bps <= "
        "34359738360)")
    # a name the header cannot carry and a too-fast rate: the name, from both
    for odd, why in (("two  spaces", "an ION header line cannot carry it"), ("Matéra", "a node name holds 'é'")):
        got = refusals(plan_of(fast, names=(odd, "sat-b", "sat-c")), ["ion"])["ion"]
        assert got.startswith(f"node 1: name {odd!r}") and got.endswith(why), got
    # a window before the plan start, or never ending
    early = plan_of([good] * 2, t_start=[100.0, -30.0])
    assert refusals(early)["ion"] == ("contact sat-b - sat-c (nodes 2, 3) +-30 +30: window times -30 .. 30 s; "
                                      "expected finite seconds at or after the plan start (>= 0)")
    endless = plan_of([good], t_start=[5.0])
    endless.windows.t_end_s[0] = np.inf
    assert refusals(endless)["hdtn"].startswith("contact sat-a - sat-c (nodes 1, 3) +5 +inf: window times 5 .. inf s")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.hdtn", "plan.ion"]  # no temporary left


def test_a_node_the_ion_header_cannot_carry_is_named_by_its_plan_number(tmp_path: Path) -> None:
    """Review: the header's refusal named a node by its index from 0 ('node 0: name ...') while the plan
    numbers it from 1 ('# node 1 ...', 'a contact +0 +60 1 2 ...') and a window's refusal names it so
    ('(nodes 1, 3)'): the first node was called 'node 0', a number the plan does not have."""
    base = _hand_plan()
    for odd, why in (("two  spaces", "an ION header line cannot carry it"), ("Matéra", "a node name holds 'é'")):
        plan = ContactPlan(["a", odd, "c"], base.windows, base.link, base.round_boundaries_s, START, base.node_kinds)
        for export in (format_ion, lambda p: write_ion(tmp_path / "p.ion", p)):
            with pytest.raises(ContactError) as err:
                export(plan)
            assert f"node 2: name {odd!r}" in str(err.value) and str(err.value).endswith(why), err.value
    ok = format_ion(ContactPlan(["a", "b", "c"], base.windows, base.link, base.round_boundaries_s, START,
                                base.node_kinds))
    assert "# node 2 b " in ok  # the number the refusal gives is the one the header line has


def test_a_window_slower_than_the_plans_unit_is_left_out_as_the_import_makes_no_window_of_it(tmp_path: Path) -> None:
    """A window whose mean rate rounds down to 0 (ION: under 1 byte/s; HDTN: under 1 bit/s) was written as a
    contact of rate 0, of which the import (as ionadmin) makes no window: the window was gone after a round
    trip, the re-export differed, and a plan of none but such windows was written as a file the import refused.
    It is left out, as a window shorter than a second is. Failed before (the 'a contact +100 +160 1 2 0' lines)."""
    w = WindowTable([0, 0], [1, 1], [0.0, 100.0], [60.0, 160.0], [1, 1], [1, 1], [8 * 1000 * 60.0, 0.5 * 60.0])
    plan = ContactPlan(["x", "y"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 200.0], START, ["satellite"] * 2)
    text = format_ion(plan)
    assert [ln for ln in text.splitlines() if ln.startswith("a ")] == [
        "a contact +0 +60 1 2 1000", "a contact +0 +60 2 1 1000", "a range +0 +60 1 2 1", "a range +0 +60 2 1 1"]
    (tmp_path / "p.ion").write_text(text)
    assert format_ion(read_ion(tmp_path / "p.ion", plan.round_boundaries_s)) == text
    hdtn = hdtn_contacts(plan)["contacts"]  # 0.5 bit/s is 0 in HDTN's whole bits/s
    assert [(c["startTime"], c["rateBitsPerSec"]) for c in hdtn] == [(0, 8000), (0, 8000)]
    (tmp_path / "p.json").write_text(json.dumps(hdtn_contacts(plan)))
    assert hdtn_contacts(read_hdtn(tmp_path / "p.json", plan.round_boundaries_s, start=START))["contacts"] == hdtn


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_late_windows_warning_names_the_plan_file_through_brief(kind: str, tmp_path: Path, caplog) -> None:
    """load_plan_file warned of windows starting past time.duration_s, and refused a horizon ending past year
    9999 from the plan's start, naming contacts.plan_file as it is: a folder of 3,000 characters made a 3 kB
    line, a newline or a terminal's escape went into it raw. Both name the file through brief(), as the
    import's refusals name it."""
    import logging

    from contact_sim.scenario import load_contact_scenario, load_plan_file
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    (folder / "p.ion").write_text(format_ion(_hand_plan()))
    (folder / "s.toml").write_text('[contacts]\nplan_file = "p.ion"\n[time]\nduration_s = 50.0\n')
    caplog.set_level(logging.WARNING, logger="contact_sim")
    load_plan_file(load_contact_scenario(folder / "s.toml"))
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1 and said[0].startswith(f"{brief(folder / 'p.ion')}: 1 of 2 windows start after "
                                                 "time.duration_s = 50 s"), said
    assert said[0].isprintable() and len(said[0]) < 400, said
    (folder / "s.toml").write_text('[contacts]\nplan_file = "p.ion"\n[time]\nduration_s = 1e12\n')
    with pytest.raises(ContactError) as info:  # the horizon from the plan's start ends past year 9999
        load_plan_file(load_contact_scenario(folder / "s.toml"))
    message = str(info.value)
    assert message.startswith(f"time.duration_s: 1e+12 s from the start of contacts.plan_file ({brief(folder / 'p.ion')}) "
                              "2026-"), message
    assert message.isprintable() and len(message) < 500, message


@pytest.mark.parametrize("kind", ["control", "long"])
def test_fol_simulate_logs_the_plan_file_it_reads_through_brief(kind: str, tmp_path: Path, monkeypatch,
                                                                caplog) -> None:
    """fol simulate's 'reading the contact plan <file>' named contacts.plan_file as it is: a folder of 3,000
    characters made a 3 kB log line, a newline or a terminal's escape went into the record raw. It names the
    file through brief(). (The run is stopped at the plan's read: only the line is looked at.)"""
    import logging

    import fol.simulation.runner
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    (folder / "plan.ion").write_text(format_ion(_hand_plan()))
    (folder / "s.toml").write_text(ION_SCENARIO)

    def stop(_contact: object) -> None:
        raise ContactError("stopped here by the test")

    monkeypatch.setattr(fol.simulation.runner, "load_plan_file", stop)
    caplog.set_level(logging.INFO, logger="fol")
    assert main(["simulate", str(folder / "s.toml"), "--out", str(tmp_path / "out")]) == 2
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reading the contact plan")]
    assert said == [f"reading the contact plan {brief(folder / 'plan.ion')}"], said
