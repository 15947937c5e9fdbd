"""The ION / HDTN contact-plan importer and exporter (contact_sim/dtn.py): node numbers as ION and HDTN hold
them, the project's header lines, skipped contacts' fields, duplicate contacts and exports that carry nothing."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from contact_sim import ContactError
from contact_sim.dtn import format_ion, hdtn_contacts, read_hdtn, read_ion, write_hdtn
from contact_sim.windows import A_TO_B, BOTH

from _memory import traced_peak
from _names import odd_folder
from _plans import plan_refusal

MAX_NODE = 2**64 - 1


# ------------------------------------------------------------------------------------------- node numbers

@pytest.mark.parametrize("text, line, token", [
    ("a contact +0 +60 18446744073709551616 2 1000\n", 1, "18446744073709551616"),
    ("a contact +0 +60 1 2 1000\na contact +0 +60 2 1%s 1000\n" % ("0" * 99), 2, "1" + "0" * 38),
    ("a contact +0 +60 1 2 1000\na range +0 +60 1 18446744073709551616 1\n", 2, "18446744073709551616"),
    ("a contact +0 +60 1 2 1000\nd contact +0 1 99999999999999999999\n", 2, "99999999999999999999"),
    ("a contact -1 +0 18446744073709551616 2 1000\na contact +0 +60 1 2 1000\n", 1, "18446744073709551616"),
    ("# fol-swarm contact plan\n# node 18446744073709551616 gs ground_station\na contact +0 +60 1 2 1000\n", 2,
     "18446744073709551616"),
])
def test_an_ion_node_number_above_2_64_minus_1_is_refused(tmp_path: Path, text: str, line: int, token: str) -> None:
    """ION's node numbers are unsigned 64-bit (uvast): a node number of 2**64 .. 1e100 was taken (the import
    allowed every integer up to 1e100), a plan ionadmin cannot hold. Failed before (every one read)."""
    path = tmp_path / "p.ion"
    message = plan_refusal(path, text)
    assert message.startswith(f"{path}:{line}: node number '{token}"), message
    assert message.endswith(f"is too large; expected at most {MAX_NODE} (unsigned 64-bit)"), message


@pytest.mark.parametrize("key, value", [("source", 2**31), ("dest", 2**31), ("dest", MAX_NODE), ("source", 2**64)])
def test_an_hdtn_import_refuses_a_node_number_its_router_reads_as_0(tmp_path: Path, key: str, value: int) -> None:
    """HDTN's router (ProcessContacts, and FilterContactsPropertyTree before cp_load) reads source and dest as
    32-bit ints with a default of 0, so a node number past 2**31 - 1 becomes 0: the router of the contact's sending
    node ignores the record, never taking the link up. The import read such a record (up to 2**64 - 1); it now
    refuses it, naming the record, the field and the reason. Failed before (2**31 and 2**64 - 1 read; 2**64
    refused naming 2**64 - 1 as the limit)."""
    record = {"source": 1, "dest": 2, "startTime": 0, "endTime": 60, "rateBitsPerSec": 8, key: value}
    path = tmp_path / "p.json"
    message = plan_refusal(path, json.dumps({"contacts": [_record(0, 60, 2, 1), record]}), read_hdtn)
    assert message == (f"{path}: contacts[1]: {key}: expected an integer of at most {2**31 - 1} (HDTN's router reads "
                       f"source and dest as 32-bit integers, a larger one as 0), got '{value}'"), message
    record[key] = 2**31 - 1  # the largest it reads: taken
    path.write_text(json.dumps({"contacts": [record]}))
    assert f"ipn-{2**31 - 1}" in read_hdtn(path).node_names


def test_the_hdtn_export_numbers_the_nodes_from_1_whatever_their_ion_numbers(tmp_path: Path) -> None:
    """The HDTN export writes node i as i + 1 (the JSON has no names), so an ION plan of node numbers past what
    HDTN's router reads (2**63, 2**64 - 1) is written as nodes 1 .. 3, which the HDTN import reads back: no node
    number past 2**31 - 1 is written unless a plan held that many nodes."""
    path = tmp_path / "p.ion"
    path.write_text(f"a contact +0 +60 {MAX_NODE} {2**63} 1000\na contact +0 +60 {2**63} {MAX_NODE} 1000\n"
                    f"a contact +60 +120 {2**63} 7 1000\n")
    plan = read_ion(path)
    records = hdtn_contacts(plan)["contacts"]
    assert sorted({(r["source"], r["dest"]) for r in records}) == [(2, 1), (2, 3), (3, 2)]
    back = read_hdtn(write_hdtn(tmp_path / "p.json", plan))
    assert back.node_names == ["ipn-1", "ipn-2", "ipn-3"]
    assert back.windows.t_start_s.tolist() == plan.windows.t_start_s.tolist()


def test_the_largest_node_numbers_are_read_without_overflow_and_round_trip(tmp_path: Path) -> None:
    """A node number of up to 2**64 - 1 is a label: the plan's node index counts the nodes it names (0, 1, 2),
    nothing is sized or typed by the number (2**64 - 1 fits no int64), and the names come back on export."""
    path = tmp_path / "p.ion"
    path.write_text(f"a contact +0 +60 {MAX_NODE} {2**63} 1000\na contact +0 +60 {2**63} {MAX_NODE} 1000\n"
                    f"a contact +60 +120 {2**63} 7 1000\n")
    plan = read_ion(path)
    assert plan.node_names == ["ipn-7", f"ipn-{2**63}", f"ipn-{MAX_NODE}"]
    assert sorted(zip(plan.windows.a.tolist(), plan.windows.b.tolist())) == [(0, 1), (1, 2)]
    assert plan.windows.a.max() < 3 and plan.windows.b.max() < 3
    out = tmp_path / "back.ion"
    out.write_text(format_ion(plan))
    back = read_ion(out)
    assert back.node_names == plan.node_names
    assert back.windows.t_start_s.tolist() == plan.windows.t_start_s.tolist()


# ------------------------------------------------------------------------------------------- header lines

PAIR = "a contact +0 +60 3 5 1000\na contact +0 +60 5 3 1000\n"


def test_a_comment_shaped_like_a_node_header_in_a_hand_written_plan_is_a_comment(tmp_path: Path, caplog) -> None:
    """'# node 5 goes offline' in a hand-written ION file was read as the header '# node N NAME KIND': node 5
    named 'goes', of kind 'offline' (and '# node 3 is the ground station' named node 3 'is the ground', of
    kind 'station'). ionadmin passes over every '#' line; only a plan opening with the project's first line
    has headers. Failed before (names 'goes' and 'is the ground')."""
    import logging

    path = tmp_path / "p.ion"
    path.write_text("# my pass schedule\n# node 3 is the ground station\n" + PAIR + "# node 5 goes offline\n")
    with caplog.at_level(logging.INFO, logger="contact_sim.dtn"):
        plan = read_ion(path)
    assert plan.node_names == ["ipn-3", "ipn-5"] and plan.node_kinds == ["node", "node"]
    said = [r.getMessage() for r in caplog.records if "read as a comment" in r.getMessage()]
    assert said == [f"{path}:2: a '# start' or '# node' line is read as a comment: header lines are read only at "
                    "the top of a plan whose first line is '# fol-swarm contact plan'"], said


def test_a_hand_written_plan_without_the_first_line_has_no_start_header(tmp_path: Path) -> None:
    """A plan without the project's first line gives no start: its absolute times need time.start, and the
    refusal names the '# start' line that was read as a comment and why (before, it said the plan needed the
    '# start ...' header of a fol-swarm plan, beside the user's own '# start' line, and the info line naming
    that line is logged only for a plan that reads, so nothing said why it was not read)."""
    path = tmp_path / "p.ion"
    message = plan_refusal(path, "# start 2026-08-01T00:00:00Z\na contact +0 +60 3 5 1000\n"
                                 "d contact 2026/08/01-00:00:00 3 5\n")
    assert message == (f"{path}:3: absolute time '2026/08/01-00:00:00' needs the plan start (time.start; the "
                       "'# start' of line 1 is read only in a plan whose first line is "
                       "'# fol-swarm contact plan')"), message
    message = plan_refusal(path, "# start 2026-08-01T00:00:00Z\na contact 2026/08/01-00:00:00 +60 3 5 1000\n")
    assert message == (f"{path}:2: absolute time '2026/08/01-00:00:00' needs the plan start (time.start; the "
                       "'# start' of line 1 is read only in a plan whose first line is "
                       "'# fol-swarm contact plan')"), message
    message = plan_refusal(path, "# node 3 gs ground_station\na contact 2026/08/01-00:00:00 +60 3 5 1000\n")
    assert message == (f"{path}:2: absolute time '2026/08/01-00:00:00' needs the plan start (time.start, or the "
                       "'# start ...' header of a fol-swarm plan)"), message
    path.write_text("# fol-swarm contact plan\n# start 2026-08-01T00:00:00Z\n"
                    "a contact 2026/08/01-00:00:00 +60 3 5 1000\n")
    assert read_ion(path).windows.t_end_s.tolist() == [60.0]


def test_headers_are_read_at_the_top_of_the_projects_plan_only(tmp_path: Path) -> None:
    """In a plan opening with '# fol-swarm contact plan', the comment lines before the first command are its
    headers (as the export writes them); a '# node' line after a command is a comment, a user's note in an
    exported plan."""
    path = tmp_path / "p.ion"
    path.write_text("\n  # fol-swarm contact plan (ION)\n# start 2026-08-01T00:00:00Z\n# node 3 Matera ground_station\n"
                    "# node 5 ISS (ZARYA) satellite\n" + PAIR + "# node 5 goes offline\n")
    plan = read_ion(path)
    assert plan.node_names == ["Matera", "ISS (ZARYA)"] and plan.node_kinds == ["ground_station", "satellite"]
    assert plan.start is not None and plan.start.isoformat() == "2026-08-01T00:00:00+00:00"
    message = plan_refusal(path, "# fol-swarm contact plan\n# node 5 a drone\n# node 5 goes offline\n" + PAIR)
    assert message == f"{path}:3: node 5 named twice in the header", message


def test_the_projects_plan_round_trips_its_headers_exactly(tmp_path: Path) -> None:
    """Export -> import -> export of a named plan with a start gives the same text, names, kinds and start."""
    path = tmp_path / "p.ion"
    path.write_text("# fol-swarm contact plan\n# start 2026-08-01T00:00:00Z\n# node 1 Matera ground_station\n"
                    "# node 2 ISS (ZARYA) satellite\n# node 3 far drone\n"
                    "a contact +0 +60 1 2 1000\na contact +0 +60 2 1 1000\na contact +60 +90 2 3 7\n")
    plan = read_ion(path)
    text = format_ion(plan)
    (tmp_path / "back.ion").write_text(text)
    back = read_ion(tmp_path / "back.ion")
    assert (back.node_names, back.node_kinds, back.start) == (plan.node_names, plan.node_kinds, plan.start)
    assert back.node_names == ["Matera", "ISS (ZARYA)", "far"]
    assert format_ion(back) == text


# ------------------------------------------------------------------------------------------- skipped contacts

@pytest.mark.parametrize("line, says", [
    ("a contact -1 +1_0 4 4 10", "the registration contact's stop time (0, -1, +SECONDS or yyyy/mm/dd-hh:mm:ss) with "
     "+SECONDS of 0..1e+10 in ASCII digits, got '+1_0'"),
    ("a contact -1 +1e3 4 4 10", "the registration contact's stop time (0, -1, +SECONDS or yyyy/mm/dd-hh:mm:ss) with "
     "+SECONDS of 0..1e+10 in ASCII digits, got '+1e3'"),
    ("a contact -1 +99999999999 4 4 10", "the registration contact's stop time (0, -1, +SECONDS or "
     "yyyy/mm/dd-hh:mm:ss) with +SECONDS of 0..1e+10 in ASCII digits, got '+99999999999'"),
    ("a contact -1 soon 4 4 10", "the registration contact's stop time (0, -1, +SECONDS or yyyy/mm/dd-hh:mm:ss), "
     "got 'soon'"),
    ("a contact -1 -2 4 4 10", "the registration contact's stop time (0, -1, +SECONDS or yyyy/mm/dd-hh:mm:ss), "
     "got '-2'"),
    ("a contact 0 2026/13/01-00:00:00 4 5 10", "the hypothetical contact's stop time (0, -1, +SECONDS or "
     "yyyy/mm/dd-hh:mm:ss), got '2026/13/01-00:00:00'"),
    ("a contact 0 +\u0661 4 5 10", "the hypothetical contact's stop time (0, -1, +SECONDS or yyyy/mm/dd-hh:mm:ss) "
     "with +SECONDS of 0..1e+10 in ASCII digits, got '+\u0661'"),
    ("a contact 0 1.5 4 5 10", "the hypothetical contact's stop time (0, -1, +SECONDS or yyyy/mm/dd-hh:mm:ss), "
     "got '1.5'"),
])
def test_a_registration_or_hypothetical_contacts_other_time_is_read(tmp_path: Path, line: str, says: str) -> None:
    """A registration contact (start -1) or a hypothetical one (start 0) was skipped with its other time unread,
    so '+1_0', 'soon' or a 13th month there was taken, where ionadmin reads that time as any other. Failed
    before (each plan read)."""
    path = tmp_path / "p.ion"
    path.write_text(PAIR + line + "\n", encoding="utf-8")
    with pytest.raises(ContactError) as info:
        read_ion(path)
    assert str(info.value) == f"{path}:3: expected {says}", str(info.value)


def test_well_formed_registration_and_hypothetical_contacts_are_skipped(tmp_path: Path) -> None:
    """Their other time may be 0, -1 (ionadmin's two special times), +SECONDS or an absolute time (checked as
    written: the plan needs no start for a contact it does not schedule); none makes a window."""
    path = tmp_path / "p.ion"
    path.write_text(PAIR + "a contact -1 0 4 4 10\na contact -1 +60 4 4 10\na contact 0 +10 4 5 10\n"
                    "a contact -1 -1 4 4 0\n"
                    "a contact 0 2026/08/01-00:00:00 5 4 10\na contact 0 0 4 5 10\na contact 0 -1 4 6 0\n")
    plan = read_ion(path)
    assert plan.node_names == ["ipn-3", "ipn-5"] and len(plan.windows) == 1


def test_a_hypothetical_contact_is_told_by_its_start_of_0_as_ionadmin_tells_it(tmp_path: Path) -> None:
    """ionadmin (ici/utils/ionadmin.c, executeAdd; ici/library/rfx.c, rfx_insert_contact) takes a contact of
    start 0 for a hypothetical one and refuses one of stop 0 after its start ("Interval end time must be later
    than start time"), where its ionrc(5) page says a stop of 0 marks one. The import followed the page: the
    first plan was refused at its start '0' and the second read, its stop-0 line skipped. Failed before."""
    path = tmp_path / "p.ion"
    path.write_text(PAIR + "a contact 0 +3600 3 7 100\n")
    assert len(read_ion(path).windows) == 1
    assert plan_refusal(path, PAIR + "a contact +10 0 3 7 100\n") == (
        f"{path}:3: the stop time 0 is not after the start time '+10'; a hypothetical contact is written with a "
        "start of 0 ('a contact 0 0 FROM TO RATE'), as ionadmin reads it")


@pytest.mark.parametrize("line, says", [
    ("a contact -1 -1 3 7 0", "a registration contact (start -1) from node 3 to node 7; expected FROM and TO the same "
     "node, the one it registers"),
    ("a contact 0 0 7 7 0", "a hypothetical contact (start 0) from node 7 to itself; expected FROM and TO two "
     "different nodes"),
])
def test_a_registration_of_two_nodes_or_a_hypothetical_contact_of_one_is_refused(tmp_path: Path, line: str,
                                                                                 says: str) -> None:
    """ionadmin (executeAdd) refuses a registration contact whose FROM and TO differ and a hypothetical one whose
    FROM and TO are the same node; the import skipped both. Failed before (both plans read)."""
    path = tmp_path / "p.ion"
    assert plan_refusal(path, PAIR + line + "\n") == f"{path}:3: {says}"


@pytest.mark.parametrize("edits, says", [
    ("d contact 0 3 7\n", "no hypothetical contact 3->7 (start 0) to delete (an 'a contact 0' line must come first)"),
    ("a contact 0 0 3 7 0\nd contact 0 3 7\nd contact 0 3 7\n",
     "no hypothetical contact 3->7 (start 0) to delete (an 'a contact 0' line must come first)"),
    ("a contact 0 0 3 7 0\nd contact * 3 7\nd contact 0 3 7\n",
     "no hypothetical contact 3->7 (start 0) to delete (an 'a contact 0' line must come first)"),
    # the hint said to add 'a contact 0 0 7 7', which is refused: a hypothetical contact joins two different nodes
    ("a contact +0 +60 7 7 10\nd contact 0 7 7\n", "no hypothetical contact (start 0) from node 7 to itself to "
     "delete; a hypothetical contact joins two different nodes"),
    ("a contact 0 0 3 7 0\nc contact 0 3 7 10\n", "'c contact' of start 0: a registration (-1) or hypothetical (0) "
     "contact has no rate to change; expected the start of a scheduled contact"),
    ("a contact -1 -1 3 3 0\nc contact -1 3 3 10\n", "'c contact' of start -1: a registration (-1) or hypothetical "
     "(0) contact has no rate to change; expected the start of a scheduled contact"),
])
def test_a_hypothetical_contact_is_deleted_by_its_start_0_and_nodes_and_not_changed(tmp_path: Path, edits: str,
                                                                                    says: str) -> None:
    """ionadmin (executeDelete, rfx_remove_contact) finds the contact to delete by start, FROM and TO, a
    hypothetical one by start 0; 'c contact' of start 0 or -1 is a syntax error there (executeChange). The
    import let every 'd contact 0' and 'c contact 0' / '-1' pass, whether a hypothetical contact of those nodes
    was live or not. Failed before (each plan read)."""
    path = tmp_path / "p.ion"
    message = plan_refusal(path, PAIR + edits)
    assert message == f"{path}:{3 + edits.count(chr(10)) - 1}: {says}", message
    path.write_text(PAIR + "a contact 0 0 3 7 0\na contact 0 +60 3 7 0\nd contact 0 3 7\na contact 0 0 7 3 0\n"
                    "d contact * 7 3\nd contact -1 3 3\n")
    assert len(read_ion(path).windows) == 1


# ------------------------------------------------------------------------------------------- duplicate contacts

@pytest.mark.parametrize("second, says", [
    ("a contact +0 +60 1 2 7", "contact 1->2 +0 +60 listed twice (first at {path}:1)"),
    ("a contact +0 +90 1 2 7", "contact 1->2 +0 +90 overlaps the contact +0 +60 at {path}:1; contacts of one "
     "direction must not overlap"),
])
def test_a_second_contact_of_the_same_start_and_nodes_is_refused_where_it_is_read(tmp_path: Path, second: str,
                                                                                  says: str) -> None:
    """A contact of the same start, FROM and TO as an earlier one was found only once the whole file was
    parsed; it is refused at its own line, naming the first, so a malformed line further down does not hide it.
    Failed before (the third line was named first)."""
    path = tmp_path / "p.ion"
    message = plan_refusal(path, f"a contact +0 +60 1 2 1000\n{second}\na contact +0 +60 1 2 x\n")
    assert message == f"{path}:2: " + says.format(path=path), message


@pytest.mark.parametrize("lines, rates", [
    ("a contact +0 +60 1 2 1000\na contact +0 +60 1 2 0", [1000]),
    ("a contact +0 +60 1 2 0\na contact +0 +60 1 2 1000", [1000]),
    ("a contact +0 +90 1 2 0\na contact +0 +60 1 2 1000", [1000]),
    ("a contact +0 +60 1 2 0\nd contact +0 1 2\na contact +0 +60 1 2 1000", [1000]),
    ("a contact +0 +60 1 2 0\nd contact * 1 2\na contact +0 +60 1 2 1000", [1000]),
    ("a contact +0 +60 1 2 1000\nc contact +0 1 2 0\nc contact +0 1 2 500", [500]),
])
def test_an_ion_contact_of_rate_0_is_not_held_as_ionadmin_does_not_insert_it(tmp_path: Path, lines: str,
                                                                             rates: list) -> None:
    """ionadmin does not insert a scheduled contact of rate 0 (rfx_insert_contact: "Can't insert contact with xmit
    rate 0") and reads on, so its start, FROM and TO hold nothing: a later contact of them is taken, and a 'd
    contact' of it finds nothing to delete, as in ionadmin. A contact changed to rate 0 ('c contact', which
    ionadmin takes) keeps its start, and a later 'c contact' gives it a rate again. Failed before for the first
    three (the contact of a positive rate was refused as 'listed twice' or overlapping)."""
    path = tmp_path / "p.ion"
    path.write_text(lines + "\n")
    plan = read_ion(path)
    w = plan.windows
    assert [v / 8 / (t1 - t0) for v, t0, t1 in zip(w.volume_bits, w.t_start_s, w.t_end_s)] == rates
    assert w.direction.tolist() == [A_TO_B] * len(rates)


@pytest.mark.parametrize("lines, says", [
    ("a contact +0 +60 1 2 0\nc contact +0 1 2 1000\na contact +0 +60 2 1 10",
     "{path}:2: no contact 1->2 starting at '+0' to change: its line ({path}:1) gives rate 0, which ionadmin does "
     "not insert; give the rate there"),
    ("a contact +0 +60 1 2 1000\nc contact +0 1 2 0\na contact +0 +60 1 2 500",
     "{path}:3: contact 1->2 +0 +60 listed twice (first at {path}:1)"),
    ("a contact +0 +60 1 2 1000\nc contact +0 1 2 0\na contact +30 +90 1 2 500\na contact +0 +60 2 1 10",
     "{path}:3: contact 1->2 +30 +90 overlaps the contact +0 +60 at {path}:1; contacts of one direction must not "
     "overlap"),
])
def test_a_change_of_an_ion_contact_of_rate_0_is_refused(tmp_path: Path, lines: str, says: str) -> None:
    """'c contact' of an 'a contact' line of rate 0 finds nothing in ionadmin ("Attempt to revise a nonexistent
    contact"), so the contact meant is not in its plan: refused, naming the line of rate 0, rather than read as a
    contact ION does not hold. A contact changed to rate 0 is still held (rfx_revise_contact keeps it), so a second
    one of its start, or one overlapping it, is refused (rfx_insert_contact: "Overlapping contact ignored"). Failed
    before for the first (the change made a window of 1000 bytes/s) and, until the contact changed to rate 0 was kept
    to the overlap check, the third (read as a window of 500 bytes/s)."""
    path = tmp_path / "p.ion"
    message = plan_refusal(path, lines + "\n")
    assert message == says.format(path=path), message


def test_a_deleted_contact_may_be_added_again(tmp_path: Path) -> None:
    """'d contact' frees its start: the same contact added again is not a duplicate, nor a range repeated."""
    path = tmp_path / "p.ion"
    path.write_text("a contact +0 +60 1 2 1000\nd contact +0 1 2\na contact +0 +60 1 2 500\n"
                    "a range +0 +60 1 2 1\na range +0 +60 1 2 2\n")
    plan = read_ion(path)
    assert plan.windows.volume_bits.tolist() == [8 * 500 * 60.0]


# ------------------------------------------------------------------------------------------- exports of nothing

def _plan(t_end_s: list[float], rate_bps: float):
    from contact_sim import ContactPlan, LinkModel, WindowTable

    n = len(t_end_s)
    w = WindowTable([0] * n, [1] * n, [0.0] * n, t_end_s, [1000.0] * n, [1000.0] * n, [0.0] * n)
    return ContactPlan(["a", "b"], w, LinkModel("constant", rate_bps, 0.0), [0.0, 600.0])


@pytest.mark.parametrize("t_end_s, rate_bps, tool, says", [
    ([600.0, 0.5], 4.0, "ion", "of the plan's 2 window(s), 1 shorter than a whole second once rounded inward "
     "and 1 slower than 1 byte/s"),
    ([0.5, 0.9], 8e6, "hdtn", "of the plan's 2 window(s), 2 shorter than a whole second once rounded inward "
     "and 0 slower than 1 bit/s"),
    ([600.0], 0.5, "hdtn", "of the plan's 1 window(s), 0 shorter than a whole second once rounded inward "
     "and 1 slower than 1 bit/s"),
    ([600.0], 0.5, "ion", "of the plan's 1 window(s), 0 shorter than a whole second once rounded inward "
     "and 1 slower than 1 byte/s"),
])
def test_an_export_that_would_carry_no_contact_is_refused_before_writing(tmp_path: Path, t_end_s, rate_bps, tool,
                                                                           says) -> None:
    """An export whose every window is left out (shorter than a second once rounded, or slower than ION's
    1 byte/s or HDTN's 1 bit/s) wrote a plan of no contact, which the import then refused. It is refused
    before anything is written, naming the output; an earlier file there is kept. Failed before (written)."""
    from contact_sim.dtn import hdtn_contacts, write_hdtn, write_ion

    plan = _plan(t_end_s, rate_bps)
    out = tmp_path / f"contacts.{tool}"
    out.write_text("earlier\n")
    with pytest.raises(ContactError) as info:
        (write_ion if tool == "ion" else write_hdtn)(out, plan)
    message = str(info.value)
    assert message.startswith(f"{out}: no window to write: {says}"), message
    assert f"an {tool.upper()} plan of no contact would not read back" in message and "\n" not in message
    # the hint only where HDTN would carry a window: 4 bit/s is, 0.5 bit/s (below HDTN's 1 bit/s too) is not
    assert message.endswith("export HDTN (--hdtn), whose unit is 1 bit/s") == (tool == "ion" and rate_bps >= 1), message
    assert out.read_text() == "earlier\n" and sorted(p.name for p in tmp_path.iterdir()) == [out.name]
    with pytest.raises(ContactError, match="^no window to write"):
        format_ion(plan) if tool == "ion" else hdtn_contacts(plan)


@pytest.mark.parametrize("kind", ["control", "long"])
@pytest.mark.parametrize("tool", ["ion", "hdtn"])
def test_a_refused_export_names_its_file_through_brief(kind: str, tool: str, tmp_path: Path) -> None:
    """write_ion / write_hdtn named the output of a refused export as it is: a newline or a terminal's escape
    in a folder's name (fol contacts --out) went into the message as it is, a folder of 3,000 characters made a
    3 kB line. The file is named through brief(), as the scenario's refusals name theirs."""
    from contact_sim.dtn import write_hdtn, write_ion
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    out = folder / f"contacts.{tool}"
    with pytest.raises(ContactError) as info:
        (write_ion if tool == "ion" else write_hdtn)(out, _plan([600.0], 0.5))
    message = str(info.value)
    assert message.startswith(f"{brief(out)}: no window to write: ") and message.isprintable(), message
    assert len(message) < 700 and not out.exists(), message


def test_an_export_that_carries_one_window_is_written_and_reads_back(tmp_path: Path) -> None:
    """4 bit/s is below ION's 1 byte/s but not HDTN's 1 bit/s: the HDTN plan carries it and reads back; so does
    an ION plan with one window of 1 byte/s beside a dropped short one."""
    from contact_sim.dtn import write_hdtn, write_ion

    back = read_hdtn(write_hdtn(tmp_path / "c.json", _plan([600.0], 4.0)))
    assert back.windows.volume_bits.tolist() == [4.0 * 600]
    back = read_ion(write_ion(tmp_path / "c.ion", _plan([600.0, 0.5], 8.0)))
    assert back.windows.t_end_s.tolist() == [600.0]


def test_a_plan_of_no_window_is_written_as_a_plan_of_no_contact(tmp_path: Path) -> None:
    """A scenario that finds no window loses nothing: its ION and HDTN plans are written, with no contact
    (what ionadmin and HDTN read as an empty plan; the import refuses them as a plan_file, saying so)."""
    from contact_sim.dtn import write_hdtn, write_ion

    text = write_ion(tmp_path / "c.ion", _plan([], 8e6)).read_text()
    assert text.startswith("# fol-swarm contact plan") and "a contact" not in text
    assert json.loads(write_hdtn(tmp_path / "c.json", _plan([], 8e6)).read_text()) == {"contacts": []}
    assert plan_refusal(tmp_path / "c.ion", text) == (f"{tmp_path / 'c.ion'}: no 'a contact' lines of a positive "
                                                       "rate between two different nodes")


# ------------------------------------------------------------------------------------------- memory

def test_parse_ion_holds_no_key_tuple_a_line_nor_a_list_of_every_line() -> None:
    """parse_ion's traced peak was 15.2 times its text's length (20,000 contact lines): the list of every line
    (text.split), a (start, FROM, TO) key tuple and a set entry a contact for 'd' / 'c', and a tuple copy of the
    contacts beside their lists at the end. Lines one at a time, one small dict a pair of nodes keyed by start,
    and the lists made tuples in place: 12.6 times. Failed before (15.2 > 14)."""
    from contact_sim.dtn import parse_ion

    text = "".join(f"a contact +{100 * i} +{100 * i + 60} {1 + i % 97} {1 + (i * 7 + 1) % 89} {1000 + i}\n"
                   for i in range(20_000))
    got: list = []
    peak = traced_peak(lambda: got.append(parse_ion(text, "/some/folder/plan.ion")))
    plan = got[0]
    loopbacks = sum(1 + i % 97 == 1 + (i * 7 + 1) % 89 for i in range(20_000))
    assert len(plan.contacts) == 20_000 - loopbacks and all(type(c) is tuple for c in plan.contacts)
    assert peak < 14 * len(text), peak / len(text)


@pytest.mark.parametrize("delete", ["d range +0 1 2", "d range * 1 2"])
def test_a_range_repeated_at_one_start_is_skipped_and_the_first_deleted(tmp_path: Path, delete: str) -> None:
    """ionadmin skips a second range of one start, FROM and TO (rfx_insert_range: "Range OWLT not revised"), so the
    first stays; 'd range' of that start (or '*') deletes it, and no line of it is left to cover a window."""
    path = tmp_path / "p.ion"
    path.write_text("a contact +0 +60 1 2 1000\na contact +0 +60 2 1 1000\n"
                    f"a range +0 +60 1 2 5\na range +0 +60 1 2 9\n{delete}\n")
    assert read_ion(path).meta["owlt_s_per_window"] == [None]


_RANGES = "a contact +0 +60 1 2 1000\na contact +0 +60 2 1 1000\n"


@pytest.mark.parametrize("lines, owlt, skipped", [
    ("a range +0 +60 1 2 5\na range +0 +60 1 2 9", 5.0, 2),  # was 9: the largest of the two
    ("a range +0 +60 1 2 5\na range +0 +60 1 2 5", 5.0, 2),
    ("a range +10 +60 1 2 5\na range +0 +60 1 2 9", None, 2),  # overlaps the next range of 1->2: was 9
    ("a range +0 +60 1 2 9\na range +30 +90 1 2 5", 9.0, 2),  # overlaps the one before
    ("a range +10 +70 1 2 5\na range +0 +60 2 1 9", None, 2),  # overlaps 2->1 +10 +70, imputed: was 9
    ("a range +0 +30 1 2 5\na range +0 +60 2 1 9", 9.0, None),  # replaces the imputed 2->1 of its start
    ("a range +10 +70 2 1 5\na range +0 +60 1 2 9", 9.0, None),  # 2->1 imputes no 1->2
    # ranges that meet do not overlap; together they cover the window, which takes the larger (was None)
    ("a range +0 +30 1 2 5\na range +30 +60 1 2 9", 9.0, None),
    ("a range +0 +60 1 2 5\nd range +0 1 2\na range +0 +60 1 2 9", 9.0, None),
    ("a range +10 +70 1 2 5\nd range +10 2 1\na range +0 +60 2 1 9", 9.0, None),  # the imputed deleted: was refused
    ("a range +10 +70 1 2 5\nd range +10 1 2\na range +0 +60 2 1 9", 9.0, None),  # with the range it was imputed of
    ("a range +10 +70 1 2 5\nd range * 1 2\na range +0 +60 2 1 9", 9.0, None),
])
def test_ranges_are_held_as_ionadmin_inserts_them(tmp_path: Path, caplog, lines: str, owlt, skipped) -> None:
    """rfx_insert_range skips (a note in ionadmin's log; the earlier range stays) a range of the start, FROM and TO of
    a live one, whatever its OWLT, and one overlapping the range of its direction that starts before or after it,
    an imputed one too (a range of FROM < TO imputes its reverse, which a range of the reverse and the same start
    replaces); rfx_remove_range deletes an imputed range as a live one. The import holds the same ranges, one warning
    naming the first line skipped. Failed before for those marked 'was', and for every skip (read silently)."""
    import logging

    path = tmp_path / "p.ion"
    path.write_text(_RANGES + lines + "\n")
    with caplog.at_level(logging.WARNING, logger="contact_sim.dtn"):
        assert read_ion(path).meta["owlt_s_per_window"] == [owlt]
    said = [r.getMessage() for r in caplog.records]
    if skipped is None:
        assert said == [], said
    else:
        assert said == [
            f"{path}: 1 'a range' line(s) skipped, as ionadmin skips them (the first at {path}:{2 + skipped}): a "
            "range of the start, FROM and TO of an earlier one, or overlapping one of its direction (or one ionadmin "
            "imputes, the reverse of a range of FROM < TO); the earlier stays"]


def test_parse_hdtn_lets_each_record_go_as_it_is_read() -> None:
    """parse_hdtn's traced peak was 7.9 times its text's length (20,000 compact records): every record's dict
    of the parsed JSON stayed alive beside the rows made of them, and the rows beside the contacts. Each dict
    and then each row is now let go as the next form of it is made: 4.2 times. Failed before (7.9 > 6)."""
    from contact_sim.dtn import parse_hdtn

    records = [{"contact": i, "source": 1 + i % 97, "dest": 1 + (i * 7 + 1) % 89, "startTime": 100 * i,
                "endTime": 100 * i + 60, "rateBitsPerSec": 8000 + i, "owlt": 1} for i in range(20_000)]
    text = json.dumps({"contacts": records}, separators=(",", ":"))
    got: list = []
    peak = traced_peak(lambda: got.append(parse_hdtn(text, "/some/folder/plan.json")))
    plan = got[0]
    loopbacks = sum(r["source"] == r["dest"] for r in records)
    assert len(plan.contacts) == len(plan.ranges) == 20_000 - loopbacks
    assert plan.contacts[-1] == (1999900.0, 1999960.0, 1 + 19_999 % 97, 1 + (19_999 * 7 + 1) % 89,
                                 (8000 + 19_999) / 8, "/some/folder/plan.json: contacts[19999]")
    assert peak < 6 * len(text), peak / len(text)


# (t0 s, t1 s, FROM, TO, rate bytes/s[, OWLT s]) of each contact, in file order (each case is read with a contact
# 4->5 after); an OWLT is an 'a range' line of the contact's times and nodes (after every contact line), or the
# record's "owlt"
_SAME_RULES = {
    "repeat": [(0, 60, 1, 2, 1000), (0, 60, 1, 2, 1000)],
    "same start, other end": [(0, 60, 1, 2, 1000), (0, 90, 1, 2, 1000)],
    "repeat, second of rate 0": [(0, 60, 1, 2, 1000), (0, 60, 1, 2, 0)],
    "repeat, first of rate 0": [(0, 60, 1, 2, 0), (0, 60, 1, 2, 1000)],
    "repeat, both of rate 0": [(0, 60, 1, 2, 0), (0, 60, 1, 2, 0)],
    "same start, other end, one of rate 0": [(0, 90, 1, 2, 0), (0, 60, 1, 2, 1000)],
    "later start overlapping": [(0, 60, 1, 2, 1000), (30, 90, 1, 2, 1000)],
    "earlier start overlapping, listed second": [(30, 90, 1, 2, 1000), (0, 60, 1, 2, 1000)],
    "later start inside": [(0, 60, 1, 2, 1000), (10, 20, 1, 2, 1000)],
    "later start overlapping, one of rate 0": [(0, 60, 1, 2, 1000), (30, 90, 1, 2, 0)],
    "back to back": [(0, 60, 1, 2, 1000), (60, 90, 1, 2, 1000)],
    "back to back, the later listed first": [(60, 90, 1, 2, 1000), (0, 60, 1, 2, 500)],
    "a second of rate 0 between two contacts": [(0, 60, 1, 2, 1000), (60, 61, 1, 2, 0), (61, 90, 1, 2, 1000)],
    "the reverse direction at the same start": [(0, 60, 1, 2, 1000), (0, 60, 2, 1, 500)],
    "loopback repeated": [(0, 60, 1, 2, 1000), (0, 60, 3, 3, 1000), (0, 60, 3, 3, 1000)],
    "light time of a contact of rate 0, the reverse without": [(0, 60, 1, 2, 0, 5), (0, 60, 2, 1, 1000)],
    "light times of both directions, one of rate 0": [(0, 60, 1, 2, 0, 5), (0, 60, 2, 1, 1000, 3)],
    "light time of a contact of rate 0 to a node of no other contact": [(0, 60, 1, 2, 1000), (0, 60, 1, 3, 0, 5)],
    "light times of two ranges together over a window, of contacts of rate 0": [
        (0, 120, 1, 2, 1000), (0, 120, 2, 1, 1000), (0, 60, 1, 2, 0, 3), (60, 120, 2, 1, 0, 5)],
}


@pytest.mark.parametrize("case", sorted(_SAME_RULES))
def test_the_ion_and_hdtn_imports_refuse_and_accept_the_same_duplicates_and_overlaps(tmp_path: Path,
                                                                                    case: str) -> None:
    """docs/formats.md: the HDTN import follows the ION import's rules. The same contacts written in both
    formats are refused by both, with the same words naming the same two contacts, or read into the same
    windows, with the same light times, by both, but for a contact of rate 0: an ION one, which ionadmin does not
    insert, holds no start (a contact of its start or overlapping it is read), and an HDTN one, which HDTN reads as
    unlimited, is refused, naming its record; and for a contact given no light time: an ION one (no 'a range'
    line) has none (None), an HDTN one (no owlt) has 0, as cp_load reads it. Failed before for the three light
    times of a contact of rate 0 (HDTN dropped the record's owlt where ION keeps its 'a range' line for the reverse window; ION refused
    a range of a node of contacts of rate 0 only, which HDTN read), and, in both formats, for the four repeats with
    a contact of rate 0 (each refused as 'listed twice' or overlapping, where ionadmin reads the contact of a
    positive rate). Contacts of one direction that meet (one ends at the second the other starts) are an overlap to
    ionadmin's rfx_insert_contact, which ignores the later-listed: the ION import refuses them, naming both (failed
    before: read), and the HDTN import reads them, as HDTN does, when listed in time order; listed the other way,
    HDTN's router takes the link down where they meet, and the HDTN import refuses them, naming both. The HDTN
    refusal of a record of rate 0 failed before (read as no contact, as ION's)."""
    contacts = [*_SAME_RULES[case], (0, 120, 4, 5, 1000)]
    ion, hdtn = tmp_path / "p.ion", tmp_path / "p.json"
    ion.write_text("".join(f"a contact +{t0} +{t1} {a} {b} {rate}\n" for t0, t1, a, b, rate, *_ in contacts)
                   + "".join(f"a range +{t0} +{t1} {a} {b} {owlt[0]}\n" for t0, t1, a, b, _, *owlt in contacts if owlt))
    hdtn.write_text(json.dumps({"contacts": [
        {"source": a, "dest": b, "startTime": t0, "endTime": t1, "rateBitsPerSec": 8 * rate,
         **({"owlt": owlt[0]} if owlt else {})} for t0, t1, a, b, rate, *owlt in contacts]}))
    said = {}
    for path, reader, where in ((ion, read_ion, lambda k: f"{ion}:{k + 1}"),
                                (hdtn, read_hdtn, lambda k: f"{hdtn}: contacts[{k}]")):
        try:
            plan = reader(path)
        except ContactError as exc:
            message = str(exc)
            for k in range(len(contacts)):  # each format's name of a contact -> '#k'
                message = message.replace(where(k), f"#{k}")
            said[reader] = message
        else:
            w = plan.windows
            said[reader] = sorted(zip(w.a.tolist(), w.b.tolist(), w.t_start_s.tolist(), w.t_end_s.tolist(),
                                      w.volume_bits.tolist(), w.direction.tolist(), plan.meta["owlt_s_per_window"]))
    if case.startswith("back to back"):  # an overlap to ionadmin; HDTN reads them as written, in time order
        assert said[read_ion].startswith("#1: contact 1->2 ") and " meets the contact " in said[read_ion], said
        if "listed first" in case:  # HDTN's router would take the link down at +60 (failed before: read)
            assert said[read_hdtn] == (
                "#1: contact 1->2 +0 +60 meets the contact +60 +90 listed before it, contacts[0], which HDTN's "
                "router takes down at +60 (events of one second in record order); expected the records in time "
                "order"), said
            return
        windows = sorted((0, 1, float(t0), float(t1), 8.0 * rate * (t1 - t0), A_TO_B, 0.0)
                         for t0, t1, a, b, rate, *_ in _SAME_RULES[case] if rate)
        assert said[read_hdtn] == sorted([*windows, (2, 3, 0.0, 120.0, 8e3 * 120, A_TO_B, 0.0)]), said
        return
    zero = next((k for k, c in enumerate(contacts) if c[4] == 0), None)
    if zero is None:  # a window of no 'a range' line has no light time (None); of no owlt, cp_load's 0
        assert said[read_hdtn] == (said[read_ion] if isinstance(said[read_ion], str) else
                                   [(*row[:6], 0.0 if row[6] is None else row[6]) for row in said[read_ion]]), said
    else:  # HDTN reads a rate of 0 as unlimited (cp_load): refused, naming the record (failed before: no contact)
        assert said[read_hdtn] == (
            f"#{zero}: rateBitsPerSec 0 is HDTN's unlimited rate (its CGR plans with 1e9 bit/s, its router sets no "
            "rate limit), a capacity this import cannot know; expected the link's rate, > 0"), said
    refused = isinstance(said[read_ion], str)
    assert refused == (case not in ("the reverse direction at the same start", "loopback repeated")
                       and "rate 0" not in case), said
    # the light time of the pair's window: the largest range covering it, any direction's, or, where no one range
    # covers it, the largest of those that together cover it (failed before for the last case: None)
    if "light time" in case:
        assert [row[-1] for row in said[read_ion] if row[:2] == (0, 1)] == [
            max((c[5] for c in contacts if len(c) > 5 and {c[2], c[3]} == {1, 2}), default=None)], said
    if refused:
        assert said[read_ion].startswith("#1: contact 1->2 "), said


def _record(t0: int, t1: int, src: int = 1, dst: int = 2, rate=8000) -> dict:
    return {"source": src, "dest": dst, "startTime": t0, "endTime": t1, "rateBitsPerSec": rate}


def test_hdtn_contact_numbers_are_bookkeeping_and_a_second_record_of_one_start_is_refused_whatever_its_number(
        tmp_path: Path) -> None:
    """docs/formats.md: HDTN's router drops a second record of the same contact number, source, dest and
    startTime (its events' map is one-to-one) and takes records that share a number but differ in any of these,
    as cp_load does; the import reads records of one number as any others, and refuses a second record of one
    start, source and dest whatever the numbers (the case HDTN drops is among those). Pins the decision; no
    behaviour changed."""
    path = tmp_path / "p.json"
    same = [{**_record(0, 60), "contact": 7}, {**_record(0, 60, 2, 1), "contact": 7},
            {**_record(60, 90), "contact": 7}, {**_record(120, 180), "contact": 7, "owlt": 3}]
    path.write_text(json.dumps({"contacts": same}))
    plan = read_hdtn(path)
    w = plan.windows
    assert list(zip(w.t_start_s.tolist(), w.t_end_s.tolist(), w.direction.tolist())) == [
        (0.0, 60.0, BOTH), (60.0, 90.0, A_TO_B), (120.0, 180.0, A_TO_B)]
    assert plan.meta["owlt_s_per_window"] == [0.0, 0.0, 3.0]  # no owlt: cp_load's 0
    for numbers in ((4, 4), (4, 5)):
        records = [{**_record(0, 60), "contact": numbers[0]}, {**_record(0, 90), "contact": numbers[1]}]
        assert plan_refusal(path, json.dumps({"contacts": records}), read_hdtn) == (
            f"{path}: contacts[1]: contact 1->2 +0 +90 overlaps the contact +0 +60 at {path}: contacts[0]; contacts "
            "of one direction must not overlap")


def test_an_hdtn_record_without_owlt_is_read_as_0_as_cp_load_reads_it_and_written_back_so(tmp_path: Path) -> None:
    """HDTN's cp_load (libcgr.cpp) reads a record's missing owlt as 0 (get<time_t>("owlt", 0)). The import kept no
    light time for it (None), and the export then wrote the default, "owlt": 1, so a plan read and written back gave
    HDTN's CGR a light time of 1 s where it had 0. The import reads it as 0 now, and the export writes 0 back. Failed
    before (the light times were [None, None, 2.0] and the records written back [1, 1, 1, 2])."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"contacts": [_record(0, 60), _record(0, 60, 2, 1), _record(100, 160),
                                             {**_record(200, 260), "owlt": 2}]}))
    plan = read_hdtn(path)
    assert plan.meta["owlt_s_per_window"] == [0.0, 0.0, 2.0]
    back = hdtn_contacts(plan)["contacts"]
    assert [(c["startTime"], c["source"], c["dest"], c["owlt"]) for c in back] == [
        (0, 1, 2, 0), (0, 2, 1, 0), (100, 1, 2, 0), (200, 1, 2, 2)]
    write_hdtn(tmp_path / "back.json", plan)
    assert read_hdtn(tmp_path / "back.json").meta["owlt_s_per_window"] == [0.0, 0.0, 2.0]
    assert [ln for ln in format_ion(plan).splitlines() if ln.startswith("a range")][:2] == [
        "a range +0 +60 1 2 0", "a range +0 +60 2 1 0"]


@pytest.mark.parametrize("records, says", [
    ([_record(0, 60), _record(0, 60), _record(0, 60, rate="fast")],
     "contacts[1]: contact 1->2 +0 +60 listed twice (first at {path}: contacts[0])"),
    ([_record(0, 60), _record(0, 99_999_999_999, 2, 1), _record(0, 60, rate="fast")],
     "contacts[1]: endTime: expected an integer of at most 2147483647 (HDTN's router reads startTime and endTime as "
     "32-bit integers, a larger one as 0), got '99999999999'"),
    ([_record(0, 60), _record(1_800_000_000, 1_800_000_060, 2, 1), _record(0, 60, rate="fast")],
     "contacts[1]: startTime is a Unix time (after 2000-01-01) where other records give seconds after the plan start "
     "(the first, contacts[0]); use one kind of time in a plan"),
    ([_record(1_800_000_000, 1_800_000_060), _record(0, 60, 2, 1), _record(0, 60, rate="fast")],
     "contacts[1]: startTime is seconds after the plan start where other records give Unix times (after 2000-01-01; "
     "the first, contacts[0]); use one kind of time in a plan"),
])
def test_an_hdtn_plan_is_refused_at_its_first_problem_in_file_order(tmp_path: Path, records: list, says: str) -> None:
    """The HDTN import read every record's fields before any record's times (to tell Unix times from relative
    ones), so a bad field of a later record was named before an earlier duplicate, a time out of range or a
    record of the other kind of time; the first record's kind is now every record's, and each record is checked
    whole where it is read. Failed before (each named contacts[2]'s rateBitsPerSec)."""
    path = tmp_path / "p.json"
    message = plan_refusal(path, json.dumps({"contacts": records}), read_hdtn)
    assert message == f"{path}: " + says.format(path=path), message


# ------------------------------------------------------------------------------------------- a stop time of -1

_ION_END = "2038-01-19T03:14:07Z"  # ION's MAX_POSIX_TIME, 2**31 - 1 s after 1970


def test_an_ion_contact_stop_of_minus_1_is_ionadmins_latest_time_and_builds_nothing_per_second(tmp_path: Path) -> None:
    """ionadmin reads a scheduled contact's stop time of -1 as its latest time, MAX_POSIX_TIME (2038-01-19T03:14:07Z),
    so the contact lasts until then: read so, as the absolute time 2038/01/19-03:14:07 is, when the plan start is
    known. Reading the plan into windows, and writing it back in both formats, holds less than 1 MB at the peak:
    nothing is built a second of the 11-year window. Failed before (refused: "expected +SECONDS or
    yyyy/mm/dd-hh:mm:ss, got '-1'")."""
    import datetime as dt

    from contact_sim.dtn import format_ion, hdtn_contacts

    path = tmp_path / "p.ion"
    path.write_text("# fol-swarm contact plan\n# start 2026-12-01T00:00:00Z\na contact +0 -1 1 2 1000\n"
                    "a contact +60 2038/01/19-03:14:07 2 1 10\n")
    got: list = []
    peak = traced_peak(lambda: got.append(read_ion(path)))  # the file read too (swarmbase.tomlcheck.read_at_most)
    plan = got[0]
    end_s = (dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=dt.timezone.utc) - plan.start).total_seconds()
    w = plan.windows
    assert sorted(zip(w.t_start_s.tolist(), w.t_end_s.tolist())) == [(0.0, 60.0), (60.0, end_s)]
    peak = max(peak, traced_peak(lambda: (format_ion(plan), hdtn_contacts(plan))))
    assert peak < 1_000_000, peak
    # A->B at 1000 bytes/s alone, then at 10 in the two-way window: the slower starts a second later (the two would
    # meet, an overlap to ionadmin)
    assert f"a contact +61 +{end_s:.0f} 1 2 10" in format_ion(plan)


@pytest.mark.parametrize("text, start, says", [
    ("a contact +0 -1 1 2 1000\n", None,
     f"the stop time -1 (ionadmin's latest time, {_ION_END}) needs the plan start (time.start, or the '# start ...' "
     "header of a fol-swarm plan); or write the contact's end as +SECONDS"),
    ("# start 2026-12-01T00:00:00Z\na contact +0 -1 1 2 1000\n", None,
     f"the stop time -1 (ionadmin's latest time, {_ION_END}) needs the plan start (time.start; the '# start' of line "
     "1 is read only in a plan whose first line is '# fol-swarm contact plan'); or write the contact's end as +SECONDS"),
    ("a contact +0 -1 1 2 1000\n", "2040-01-01T00:00:00Z",  # a plan starting after 2038: its start is refused first
     f"'+0' (0 s after the plan start) is after ION's latest time, {_ION_END} (ionadmin's MAX_POSIX_TIME; the plan "
     "starts at 2040-01-01T00:00:00Z); expected times by then"),
    ("a range +0 -1 1 2 1\na contact +0 +5 1 2 1000\n", "2030-01-01T00:00:00Z",
     "expected +SECONDS or yyyy/mm/dd-hh:mm:ss, got '-1'"),
])
def test_an_ion_contact_stop_of_minus_1_without_a_place_in_time_is_refused(tmp_path: Path, text: str, start, says: str
                                                                          ) -> None:
    """A stop of -1 without the plan start cannot be placed (its offset is 2038 minus the start); the refusal says
    what ionadmin means by it and what to write instead. In a range line ionadmin reads -1 as a malformed time and
    refuses the line, and so does the import. Failed before for the first three (each 'expected +SECONDS or
    yyyy/mm/dd-hh:mm:ss, got '-1'', which did not say what -1 means)."""
    from orbits import parse_utc

    path = tmp_path / "p.ion"
    path.write_text(text)
    with pytest.raises(ContactError) as info:
        read_ion(path, start=parse_utc(start) if start else None)
    assert str(info.value) == f"{path}:{text.count(chr(10), 0, text.index(' -1 ')) + 1}: {says}", str(info.value)


def test_a_range_naming_a_header_node_of_no_contact_is_read_as_the_docs_say(tmp_path: Path) -> None:
    """docs/formats.md said any range naming a node of no contact is an error; a node the project's '# node'
    header names is a node of the plan (its name kept, written back on export), so a range naming it was
    read without a word. The page now says so, and both cases are pinned here."""
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text().split())
    assert ("a range naming a node of no contact with another node (its contacts to itself are skipped; and not "
            "named by the plan's `# node` header, which makes it a node of the plan) is an error naming its "
            "line") in text
    path = tmp_path / "p.ion"
    says = "range 3->9 names a node with no contact to another node"
    assert plan_refusal(path, PAIR + "a range +0 +60 3 9 1\n") == f"{path}:3: {says}"
    # a node whose only contact is to itself (skipped): 'no contact' was not true of it
    assert plan_refusal(path, PAIR + "a contact +0 +60 9 9 10\na range +0 +60 3 9 1\n") == f"{path}:4: {says}"
    path.write_text("# fol-swarm contact plan\n# node 3 three node\n# node 5 five node\n# node 9 nine node\n"
                    + PAIR + "a range +0 +60 3 9 1\n")
    plan = read_ion(path)
    assert plan.node_names == ["three", "five", "nine"] and plan.meta["owlt_s_per_window"] == [None]


@pytest.mark.parametrize("start, says", [
    ("soon", "expected +SECONDS or yyyy/mm/dd-hh:mm:ss, got 'soon'"),
    ("\u0660", "expected +SECONDS or yyyy/mm/dd-hh:mm:ss, got '\u0660'"),
    ("+1e3", "expected a relative time +SECONDS of 0..1e+10 (whole seconds in ASCII digits), got '+1e3'"),
])
def test_a_stop_of_0_after_a_start_that_is_no_time_names_the_start(tmp_path: Path, start: str, says: str) -> None:
    """aceb522 refused 'a contact START 0 ...' before START was read, so a start that is no time ('soon', an
    Arabic-Indic zero) was called "the start time" that the stop 0 is not after. The start is read first now,
    and the refusal names what is wrong with it. Failed before (each said 'the stop time 0 is not after ...')."""
    path = tmp_path / "p.ion"
    assert plan_refusal(path, PAIR + f"a contact {start} 0 3 7 100\n") == f"{path}:3: {says}"
    assert plan_refusal(path, PAIR + "a contact +10 0 3 7 100\n").startswith(
        f"{path}:3: the stop time 0 is not after the start time '+10'; ")


def test_an_hdtn_overlap_is_found_after_every_record_is_read_as_the_docs_say(tmp_path: Path) -> None:
    """2e5be32's docs said the HDTN import names "the first problem in file order"; an overlap of one direction
    is found once every record is read, so a malformed record after it is named first. The page says so now."""
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text().split())
    assert ("overlaps of one direction are checked once every record is read, so a malformed record anywhere is "
            "named before them") in text
    path = tmp_path / "p.json"
    overlapping = [_record(0, 60), _record(30, 90)]
    records = overlapping + [_record(0, 60, 3, 4, rate="fast")]
    assert plan_refusal(path, json.dumps({"contacts": records}), read_hdtn) == (
        f"{path}: contacts[2]: rateBitsPerSec: expected a non-negative integer, got 'fast'")
    assert plan_refusal(path, json.dumps({"contacts": overlapping + [_record(0, 60, 3, 4)]}), read_hdtn).startswith(
        f"{path}: contacts[1]: contact 1->2 +30 +90 overlaps the contact +0 +60 at {path}: contacts[0]")


# ------------------------------------------------------------------------------------------- ION's latest time

_LATEST = 2**31 - 1  # ION's MAX_POSIX_TIME: ionadmin's readTimestamp refuses a later time, a +SECONDS one too


@pytest.mark.parametrize("start", [None, dt.datetime(2026, 8, 1, tzinfo=dt.timezone.utc)])
def test_an_ion_export_reaching_past_2038_is_refused_before_writing(tmp_path: Path, start) -> None:
    """ionadmin refuses any time past MAX_POSIX_TIME (2038-01-19T03:14:07Z), a relative one after adding it to its
    reference time, so a window ending later would not load in ION. The export refuses it before writing anything,
    naming the output and the first window past it; a window ending at that second is written, and HDTN (whose
    times count from the plan start) writes the later one of a plan starting in 2026. Failed before: written as
    '+361941248'."""
    from contact_sim import ContactPlan, LinkModel, WindowTable
    from contact_sim.dtn import hdtn_contacts, write_ion

    last = _LATEST - (0 if start is None else int(start.timestamp()))  # seconds after the plan start

    def plan(end: int) -> ContactPlan:
        w = WindowTable([0, 0], [1, 1], [0.0, end - 60.0], [60.0, float(end)], [1000.0] * 2, [1000.0] * 2, [0.0] * 2)
        return ContactPlan(["a", "b"], w, LinkModel("constant", 8e3, 0.0), [0.0, end], start)

    out = tmp_path / "c.ion"
    assert f"a contact +{last - 60} +{last} 1 2 1000" in write_ion(out, plan(last)).read_text()
    with pytest.raises(ContactError) as info:
        write_ion(out, plan(last + 1))
    message = str(info.value)
    assert message.startswith(f"{out}: contact a - b (nodes 1, 2) +{last - 59} +{last + 1}: ends after ION's latest "
                              "time, 2038-01-19T03:14:07Z"), message
    assert ("the plan starts at 2026-08-01T00:00:00Z" if start else "the plan has no start") in message
    # HDTN's times reach 2**31 - 1 s after the plan start: past ION's latest time only where the plan starts after 1970
    assert message.endswith("expected windows ending by then" + (", or export HDTN (--hdtn)" if start else ""))
    assert "\n" not in message and f"+{last} 1 2" in out.read_text()  # the earlier file is kept
    if start is not None:  # without one, last + 1 is past HDTN's 32-bit times too
        assert hdtn_contacts(plan(last + 1))["contacts"][-1]["endTime"] == last + 1


_AFTER_2038 = "is after ION's latest time, 2038-01-19T03:14:07Z (ionadmin's MAX_POSIX_TIME; "
_LAST_2026 = _LATEST - int(dt.datetime(2026, 8, 1, tzinfo=dt.timezone.utc).timestamp())  # 2038 after 2026-08-01


@pytest.mark.parametrize("lines, bad, says", [
    (f"a contact +0 +{_LAST_2026} 1 2 10", None, None),  # a window ending at ION's latest second is read
    (f"a contact +0 +{_LAST_2026 + 1} 1 2 10", 1, f"'+{_LAST_2026 + 1}' ({_LAST_2026 + 1} s after the plan start)"),
    ("a contact +0 2038/01/19-03:14:08 1 2 10", 1, f"'2038/01/19-03:14:08' ({_LAST_2026 + 1} s after the plan start)"),
    (f"a range +0 +{_LAST_2026 + 1} 1 2 1", 1, f"'+{_LAST_2026 + 1}' ({_LAST_2026 + 1} s after the plan start)"),
    (f"@ +{_LAST_2026}\na contact +0 +1 1 2 10", 2, f"'+1' ({_LAST_2026 + 1} s after the plan start)"),
    ("@ 2038/01/19-03:14:08", 1, f"'2038/01/19-03:14:08' ({_LAST_2026 + 1} s after the plan start)"),
    ("d contact 2038/01/19-03:14:08 1 2", 1, f"'2038/01/19-03:14:08' ({_LAST_2026 + 1} s after the plan start)"),
])
def test_an_ion_import_refuses_a_time_past_2038_as_ionadmin_does(tmp_path: Path, lines: str, bad, says) -> None:
    """ionadmin's readTimestamp refuses a time past MAX_POSIX_TIME (2038-01-19T03:14:07Z), a +SECONDS one after
    adding it to the reference time ('@' moves it), and goes on with 0 in its place (a start read as a hypothetical
    contact, a stop before the start, a reference time of 1970), so no such time is in its plan. The export refused
    such windows; the import read them. It now refuses the line, naming it and the plan start. Failed before (each
    read, the '@' line's as a reference 11 years out)."""
    text = f"# fol-swarm contact plan\n# start 2026-08-01T00:00:00Z\n{lines}\na contact +0 +60 2 1 10\n"
    path = tmp_path / "p.ion"
    if bad is None:
        path.write_text(text)
        assert read_ion(path).windows.t_end_s.max() == _LAST_2026
        return
    assert plan_refusal(path, text) == (f"{path}:{2 + bad}: {says} {_AFTER_2038}the plan starts at 2026-08-01T00:00:00Z); "
                                    "expected times by then")


def test_an_ion_import_without_a_start_counts_its_latest_time_from_1970_as_the_export_does(tmp_path: Path) -> None:
    """Without a plan start, ionadmin adds +SECONDS to the time it reads the plan, at the least 1970: the export
    refuses a window ending past 2**31 - 1 s, and the import now refuses such a time too (failed before: read);
    what the export writes of a plan of no start, the import reads back."""
    from contact_sim import ContactPlan, LinkModel, WindowTable
    from contact_sim.dtn import write_ion

    w = WindowTable([0], [1], [_LATEST - 60.0], [float(_LATEST)], [1000.0], [1000.0], [0.0])
    path = write_ion(tmp_path / "p.ion", ContactPlan(["a", "b"], w, LinkModel("constant", 8e3, 0.0), [0.0, _LATEST]))
    assert read_ion(path).windows.t_end_s.tolist() == [_LATEST]
    assert plan_refusal(path, f"a contact +0 +{_LATEST + 1} 1 2 10\n") == (
        f"{path}:1: '+{_LATEST + 1}' ({_LATEST + 1} s after the plan start) {_AFTER_2038}the plan has no start, and "
        "ionadmin adds +SECONDS to its own time); expected times by then")


_BEFORE_1970 = ("is before ION's earliest time, 1970-01-01T00:00:00Z (ionadmin's readTimestamp refuses a time before "
                "1970; the plan starts at 1969-12-31T23:00:00Z); expected times from then")


@pytest.mark.parametrize("lines, bad, says", [
    ("a contact +3601 +7200 1 2 10", None, None),  # a window starting after 1970 is read
    ("a contact +0 +7200 1 2 10", 1, "'+0' (0 s after the plan start)"),
    ("a contact 1969/12/31-23:59:59 +7200 1 2 10", 1, "'1969/12/31-23:59:59' (3599 s after the plan start)"),
    ("a range +3599 +7200 1 2 1", 1, "'+3599' (3599 s after the plan start)"),
    ("@ 1969/12/31-23:30:00", 1, "'1969/12/31-23:30:00' (1800 s after the plan start)"),
    ("@ +1800", 1, "'+1800' (1800 s after the plan start)"),
    ("a contact +3601 +7200 1 2 10\nd contact +3599 1 2", 2, "'+3599' (3599 s after the plan start)"),
])
def test_an_ion_import_refuses_a_time_before_1970_as_ionadmin_does(tmp_path: Path, lines: str, bad, says) -> None:
    """ionadmin's readTimestamp (ici/library/ion.c) refuses a negative POSIX time, an absolute one (mktime's) or a
    +SECONDS one once added to the reference time, as it refuses one past 2038 ("Time value not supported") and
    puts 0 in its place, so no time before 1970 is in its plan. A plan starting before 1970 could name one, and the
    import read it. It now refuses the line, naming it and the plan start. Failed before (each read)."""
    text = f"# fol-swarm contact plan\n# start 1969-12-31T23:00:00Z\n{lines}\na contact +3601 +7200 2 1 10\n"
    path = tmp_path / "p.ion"
    if bad is None:
        path.write_text(text)
        assert read_ion(path).windows.t_start_s.tolist() == [3601.0]
        return
    assert plan_refusal(path, text) == f"{path}:{2 + bad}: {says} {_BEFORE_1970}"


_TIME_0 = ("1970-01-01T00:00:00Z, ionadmin's time 0, which it reads as a hypothetical contact's start (no scheduled "
           "data)")


def _one_window_plan(t0: float, start: dt.datetime | None):
    """A plan of nodes a and b starting at ``start``, one window between them from ``t0`` to 7,200 s (8 kb/s)."""
    from contact_sim import ContactPlan, LinkModel, WindowTable

    w = WindowTable([0], [1], [t0], [7200.0], [1000.0], [1000.0], [0.0])
    return ContactPlan(["a", "b"], w, LinkModel("constant", 8e3, 0.0), [0.0, 7200.0], start)


@pytest.mark.parametrize("start, token", [("1969-12-31T23:00:00Z", "+3600"), ("1970-01-01T00:00:00Z", "+0"),
                                          ("1969-12-31T23:00:00Z", "1970/01/01-00:00:00")])
def test_an_ion_contact_starting_at_1970_is_refused_as_ionadmin_reads_it_hypothetical(tmp_path: Path, start: str,
                                                                                       token: str) -> None:
    """readTimestamp reads 1970-01-01T00:00:00Z as 0 without a word, and executeAdd takes a contact of start 0 for
    a hypothetical one (no rate, no scheduled data): the import read a window, and the export wrote one. Both refuse
    it now, naming the line or the window; a range of that start (ionadmin inserts it) and a contact a second later
    are read, and a plan of no start, whose '+0' is ionadmin's own time, not 1970, is not touched. Failed before
    (read; written)."""
    from contact_sim.dtn import write_ion

    head = f"# fol-swarm contact plan\n# start {start}\n"
    path = tmp_path / "p.ion"
    assert plan_refusal(path, head + f"a contact {token} +7200 1 2 10\n") == (
        f"{path}:3: the start time {token!r} is {_TIME_0}; expected a later start")
    after = 3601 if start.startswith("1969") else 1
    path.write_text(head + f"a range {token} +7200 1 2 1\na contact +{after} +7200 1 2 10\n")
    assert read_ion(path).windows.t_start_s.tolist() == [after]
    path.write_text("a contact +0 +60 1 2 10\n")
    assert read_ion(path).windows.t_start_s.tolist() == [0.0]

    out = tmp_path / "c.ion"
    with pytest.raises(ContactError) as info:
        write_ion(out, _one_window_plan(after - 1.0, dt.datetime.fromisoformat(start.replace("Z", "+00:00"))))
    assert str(info.value) == (f"{out}: contact a - b (nodes 1, 2) +{after - 1} +7200: starts at {_TIME_0}; expected "
                               "windows starting after it, or export HDTN (--hdtn)")
    assert "a contact +0 +7200 1 2 1000" in write_ion(out, _one_window_plan(0.0, None)).read_text()


@pytest.mark.parametrize("start, line, says", [
    ("2026-08-01T00:00:00Z", "a contact -1 2038/01/19-03:14:08 4 4 10", "the registration contact's stop time "
     "'2038/01/19-03:14:08' is after ION's latest time, 2038-01-19T03:14:07Z (ionadmin's MAX_POSIX_TIME); expected "
     "times by then"),
    (None, "a contact 0 1969/12/31-23:59:59 4 5 10", "the hypothetical contact's stop time '1969/12/31-23:59:59' is "
     "before ION's earliest time, 1970-01-01T00:00:00Z (ionadmin's readTimestamp refuses a time before 1970); "
     "expected times from then"),
    ("2026-08-01T00:00:00Z", f"a contact 0 +{_LAST_2026 + 1} 4 5 10", f"'+{_LAST_2026 + 1}' ({_LAST_2026 + 1} s "
     f"after the plan start) {_AFTER_2038}the plan starts at 2026-08-01T00:00:00Z); expected times by then"),
    (None, f"@ +{_LATEST - 10}\na contact -1 +11 4 4 10", f"'+11' ({_LATEST + 1} s after the plan start) "
     f"{_AFTER_2038}the plan has no start, and ionadmin adds +SECONDS to its own time); expected times by then"),
    ("1969-12-31T23:00:00Z", "a contact -1 +3599 4 4 10", f"'+3599' (3599 s after the plan start) {_BEFORE_1970}"),
])
def test_a_registration_or_hypothetical_contacts_stop_is_held_to_ions_times(tmp_path: Path, start, line: str,
                                                                          says: str) -> None:
    """ionadmin (executeAdd) reads a registration (start -1) or hypothetical (start 0) contact's stop with the
    readTimestampUTC that reads a scheduled contact's, which refuses a time past 2038 or before 1970 ("Time value
    not supported"); the import refused such a time in a scheduled contact only, and skipped these lines with it.
    It now refuses it alike, naming the line (an absolute time as written, a +SECONDS one counted from the plan
    start, or from 1970 in a plan of no start). Failed before (each read)."""
    head = f"# fol-swarm contact plan\n# start {start}\n" if start else ""
    path = tmp_path / "p.ion"
    text = head + line + "\na contact +3601 +7200 1 2 10\n"
    assert plan_refusal(path, text) == f"{path}:{head.count(chr(10)) + line.count(chr(10)) + 1}: {says}"
    path.write_text(text.replace("2038/01/19-03:14:08", "2038/01/19-03:14:07").replace("1969/12/31-23:59:59",
                                                                                         "1970/01/01-00:00:00"))
    if "/" in line:  # at ION's latest and earliest second: read
        assert read_ion(path).windows.t_start_s.tolist() == [3601.0]


def test_an_ion_export_starting_before_1970_is_refused_before_writing(tmp_path: Path) -> None:
    """The ION export of a plan starting before 1970 wrote a window starting before 1970 as '+0', a time ionadmin
    cannot name and the import now refuses. It is refused before anything is written, naming the output and the
    window; a window starting after 1970 is written, and HDTN (whose times count from its plan's start) writes
    the earlier one. Failed before: written as 'a contact +0 +7200 1 2 1000'."""
    from contact_sim.dtn import write_ion

    start = dt.datetime(1969, 12, 31, 23, tzinfo=dt.timezone.utc)
    out = tmp_path / "c.ion"
    assert "a contact +3601 +7200 1 2 1000" in write_ion(out, _one_window_plan(3601.0, start)).read_text()
    with pytest.raises(ContactError) as info:
        write_ion(out, _one_window_plan(0.0, start))
    assert str(info.value) == (
        f"{out}: contact a - b (nodes 1, 2) +0 +7200: starts before ION's earliest time, 1970-01-01T00:00:00Z "
        "(ionadmin's readTimestamp refuses a time before 1970; the plan starts at 1969-12-31T23:00:00Z); expected "
        "windows starting from then, or export HDTN (--hdtn)")
    assert "+3601 +7200 1 2" in out.read_text()  # the earlier file is kept
    assert hdtn_contacts(_one_window_plan(0.0, start))["contacts"][0]["startTime"] == 0


@pytest.mark.parametrize("t0, t1, start, says", [
    (_LATEST - 60, _LATEST, dt.datetime(2038, 1, 1, tzinfo=dt.timezone.utc), None),  # at its latest second: read
    (0, _LATEST + 1, None, f"endTime: {_LATEST + 1}"),
    (_LATEST + 1, _LATEST + 61, None, f"startTime: {_LATEST + 1}"),
    (_LATEST - 60, _LATEST + 1, dt.datetime(2038, 1, 1, tzinfo=dt.timezone.utc), f"endTime: {_LATEST + 1}"),  # Unix
])
def test_an_hdtn_import_refuses_a_time_its_router_reads_as_0(tmp_path: Path, t0: int, t1: int, start, says) -> None:
    """HDTN's router (ProcessContacts) reads startTime and endTime as 32-bit ints with a default of 0, so a time
    past 2**31 - 1 (a relative one past 68 years, a Unix one past 2038) becomes 0: the link up and down at its
    epoch, never up. The export refused such a window; the import read the record. It now refuses it, naming the
    record and the field. Failed before (each read)."""
    path = tmp_path / "p.json"
    text = json.dumps({"contacts": [_record(t0, t1), _record(t0, t1, 2, 1)]})
    if says is None:
        path.write_text(text)
        assert read_hdtn(path, start=start).windows.t_end_s.tolist() == [t1 - start.timestamp()]
        return
    path.write_text(text)
    with pytest.raises(ContactError) as info:
        read_hdtn(path, start=start)
    key, value = says.split(" ")
    assert str(info.value) == (f"{path}: contacts[0]: {key} expected an integer of at most {_LATEST} (HDTN's router "
                               f"reads startTime and endTime as 32-bit integers, a larger one as 0), got '{value}'")


@pytest.mark.parametrize("record, says", [
    # a time past 2**31 - 1 gives the times' reason, however far past (it said 'at most 1e100', or 'too long after
    # the plan start' past 1e10 s), never the node numbers'
    (_record(0, 10**101), f"endTime: expected an integer of at most {_LATEST} (HDTN's router reads startTime and "
     f"endTime as 32-bit integers, a larger one as 0), got '{str(10**101)[:40]}'"),
    (_record(0, 2 * 10**10), f"endTime: expected an integer of at most {_LATEST} (HDTN's router reads startTime and "
     f"endTime as 32-bit integers, a larger one as 0), got '{2 * 10**10}'"),
    (_record(-5, 60), "startTime: expected a non-negative integer (HDTN's router holds startTime and endTime as "
     "unsigned 64-bit integers, a negative one as about 2**64), got '-5'"),
    (_record(0, 60, 1, _LATEST + 1), f"dest: expected an integer of at most {_LATEST} (HDTN's router reads source and "
     f"dest as 32-bit integers, a larger one as 0), got '{_LATEST + 1}'"),
    (_record(0, 60, 0), "source: expected a positive integer, got '0'"),
    # HDTN's cp_load reads owlt as a signed time_t: refused with that reason (it had none)
    ({**_record(0, 60), "owlt": -5}, "owlt: expected a non-negative integer (HDTN's CGR reads owlt as a signed 64-bit "
     "time_t and adds it to a contact's start, a negative one as a bundle arriving before it is sent), got '-5'"),
])
def test_an_hdtn_time_and_node_number_out_of_range_each_give_their_own_reason(tmp_path: Path, record: dict,
                                                                             says: str) -> None:
    """_limit_text picked a limit's reason by its value, and HDTN's latest time and its largest node number are both
    2**31 - 1: a time passed to it would have been explained as a node number. Each caller now gives its own reason.
    A time past HDTN's bound was refused by its own check only up to 1e100 (past 1e10 s, a relative one as too long
    after the plan start), and a negative one without HDTN's reason: HDTN's router (router.cpp, ProcessContacts)
    reads startTime and endTime with get<int> into the uint64_t fields of contactPlan_t. A negative owlt gives HDTN's
    reason too (libcgr.cpp, cp_load: get<time_t>, added to a contact's start as the arrival). Failed before (the first
    three: 'at most 1e100', 'too long after the plan start', no reason; the owlt case: no reason)."""
    path = tmp_path / "p.json"
    assert plan_refusal(path, json.dumps({"contacts": [record]}), read_hdtn) == f"{path}: contacts[0]: {says}"


def test_an_ion_node_number_past_its_limit_gives_ions_reason(tmp_path: Path) -> None:
    """An ION node number past 2**64 - 1 is refused with ION's reason, not HDTN's (the two limits' reasons are each
    their caller's, _limit_text no longer picks one by the value)."""
    path = tmp_path / "p.ion"
    assert plan_refusal(path, f"a contact +0 +60 1 {MAX_NODE + 1} 10\n") == (
        f"{path}:1: node number '{MAX_NODE + 1}' is too large; expected at most {MAX_NODE} (unsigned 64-bit)")


# ------------------------------------------------------------------------------------------- contacts that meet

@pytest.mark.parametrize("block_rows", [1, 2, 1 << 18])
def test_an_ion_export_writes_no_contacts_of_one_direction_that_meet(tmp_path: Path, monkeypatch, caplog,
                                                                     block_rows: int) -> None:
    """ionadmin takes two contacts of one direction that meet (+0 +10, then +10 +20) for an overlap and ignores the
    later-listed. The export writes a run of them of one rate as one contact and, where two rates meet, the slower
    gives up that second (a one-second contact between two faster is left out), one warning counting the bytes,
    whichever blocks of windows the writer takes them in; the file reads back (the import refuses contacts that
    meet). Failed before: '+0 +10 1 2 1000' and '+10 +20 1 2 1000' were written."""
    import logging

    import contact_sim.tablewriter as tablewriter
    from contact_sim import ContactPlan, LinkModel, WindowTable

    monkeypatch.setattr(tablewriter, "BLOCK_ROWS", block_rows)
    # A->B only, bytes/s: 1000 over 0..30 (three windows), 200 over 30..31, 500 over 31..40
    edges = [(0, 10, 1000), (10, 20, 1000), (20, 30, 1000), (30, 31, 200), (31, 40, 500)]
    n = len(edges)
    w = WindowTable([0] * n, [1] * n, [float(e[0]) for e in edges], [float(e[1]) for e in edges], [1e3] * n,
                    [1e3] * n, [8.0 * r * (b - a) for a, b, r in edges], direction=[A_TO_B] * n, sort=False)
    plan = ContactPlan(["a", "b"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 40.0])
    with caplog.at_level(logging.WARNING, logger="contact_sim.dtn"):
        text = format_ion(plan)
    assert [ln for ln in text.splitlines() if ln.startswith("a contact")] == [
        "a contact +0 +30 1 2 1000", "a contact +31 +40 1 2 500"], text
    assert [r.getMessage() for r in caplog.records] == [
        "ION plan: 2 time(s) two contacts of one direction at different rates meet, which ionadmin takes for an "
        "overlap: the slower ends a second sooner or starts a second later; 200 of 34700 bytes left out"]
    path = tmp_path / "p.ion"
    path.write_text(text)
    back = read_ion(path).windows
    assert list(zip(back.t_start_s.tolist(), back.t_end_s.tolist(), back.capacity_bytes.tolist())) == [
        (0.0, 30.0, 30_000), (31.0, 40.0, 4_500)]


@pytest.mark.parametrize("start", ["00", "-2"])
def test_an_unscheduled_start_other_than_0_or_minus_1_is_refused_as_the_docs_say(tmp_path: Path, start: str) -> None:
    """ionadmin's executeAdd takes the starts '0' and '-1' as written (strncmp of the whole field) and reads any other
    with readTimestampUTC, which reads a malformed one as 0 ("Timestamp format invalid"): '00' and '-2' make
    hypothetical contacts there. The import takes '0' and '-1' only, as docs/formats.md says, and refuses the others
    in one line."""
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text().split())
    assert ("it takes the starts `0` and `-1` as they are written and refuses any other (`00`, `-2`) in one line "
            "naming it") in text
    path = tmp_path / "p.ion"
    assert plan_refusal(path, PAIR + f"a contact {start} +60 3 3 0\n") == (
        f"{path}:3: expected +SECONDS or yyyy/mm/dd-hh:mm:ss, got '{start}'")


def test_windows_written_as_one_ion_contact_read_back_with_the_larger_light_time(tmp_path: Path) -> None:
    """Two two-way windows of a pair that meet at one rate are written as one ION contact a direction (ionadmin would
    ignore the second of two that meet), with the ranges of the two windows as they were (OWLT 1, then 2). Read
    back, the one window no single range covers takes the larger OWLT of the ranges that together cover it, 2 (a
    range gives the light time at each time within it); a window with a stretch no range covers has none. Failed
    before: [None], the light time lost on the round trip."""
    from contact_sim import ContactPlan, LinkModel, WindowTable
    from contact_sim.link import SPEED_OF_LIGHT_M_S

    one_s_km, two_s_km = SPEED_OF_LIGHT_M_S / 1e3 * 0.5, SPEED_OF_LIGHT_M_S / 1e3 * 1.5  # OWLT 1 s and 2 s
    w = WindowTable([0, 0], [1, 1], [0.0, 50.0], [50.0, 100.0], [one_s_km, two_s_km], [one_s_km, two_s_km],
                    [8e3 * 50] * 2)
    plan = ContactPlan(["a", "b"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 100.0])
    text = format_ion(plan)
    assert [ln for ln in text.splitlines() if ln.startswith("a ")] == [
        "a contact +0 +100 1 2 1000", "a contact +0 +100 2 1 1000", "a range +0 +50 1 2 1", "a range +0 +50 2 1 1",
        "a range +50 +100 1 2 2", "a range +50 +100 2 1 2"], text
    path = tmp_path / "p.ion"
    path.write_text(text)
    back = read_ion(path)
    assert back.windows.t_start_s.tolist() == [0.0] and back.windows.t_end_s.tolist() == [100.0]
    assert back.meta["owlt_s_per_window"] == [2.0]
    assert format_ion(back).splitlines()[-2:] == ["a range +0 +100 1 2 2", "a range +0 +100 2 1 2"]
    # the ranges leave 50..60 uncovered, or cover it in the other direction only
    for ranges, owlt in (("a range +0 +50 1 2 1\na range +60 +100 1 2 2\n", None),
                         ("a range +0 +50 2 1 1\na range +40 +100 1 2 2\n", 2.0)):
        path.write_text("a contact +0 +100 1 2 1000\na contact +0 +100 2 1 1000\n" + ranges)
        assert read_ion(path).meta["owlt_s_per_window"] == [owlt], ranges


def _ion_cgr_owlt(text: str, src: int, dst: int, start: int) -> int | None:
    """The OWLT ION's CGR takes for a contact of ``src -> dst`` starting at ``start`` (``getApplicableRange`` in
    bpv7/cgr/libcgr.c): of the direction's ranges by start, the first that does not end before the contact starts
    (one ending at its start is taken). The direction's ranges are the plan's ``a range`` lines of it and, for
    ``src > dst``, those ionadmin imputes of the lines ``dst -> src`` (rfx.c, insertRXref) of a start no line of
    ``src -> dst`` has (a plan whose ranges ionadmin skips none of)."""
    lines = [(int(t0[1:]), int(t1[1:]), int(f), int(t), int(owlt)) for _, _, t0, t1, f, t, owlt in
             (ln.split() for ln in text.splitlines() if ln.startswith("a range "))]
    own = {(t0, t1, owlt) for t0, t1, f, t, owlt in lines if (f, t) == (src, dst)}
    if src > dst:
        own |= {(t0, t1, owlt) for t0, t1, f, t, owlt in lines
                if (f, t) == (dst, src) and t0 not in {r[0] for r in own}}
    return next((owlt for _, t1, owlt in sorted(own) if t1 >= start), None)


@pytest.mark.parametrize("rates, contacts, ranges, back", [
    # the slower first: it ends a second sooner, and so does its range (before: 'a range +0 +50 1 2 1', which ION's
    # CGR took for the contact starting at +50, 1 s where the window's is 3 s)
    ((500, 1000), ["a contact +0 +49 1 2 500", "a contact +50 +100 1 2 1000"],
     ["a range +0 +49 1 2 1", "a range +50 +100 1 2 3"], [(0.0, 49.0, 1.0), (50.0, 100.0, 3.0)]),
    # the faster first: the slower starts a second later, its range as it was (the range before ends before it)
    ((1000, 500), ["a contact +0 +50 1 2 1000", "a contact +51 +100 1 2 500"],
     ["a range +0 +50 1 2 1", "a range +50 +100 1 2 3"], [(0.0, 50.0, 1.0), (50.0, 51.0, 3.0), (51.0, 100.0, 3.0)]),
])
def test_ion_cgr_takes_each_cut_contacts_own_light_time(tmp_path: Path, rates, contacts, ranges, back) -> None:
    """A one-way window 1->2 then a two-way one that meet at two rates are written as two contacts 1->2 a second
    apart (ionadmin takes contacts that meet for an overlap). ION's CGR takes for a contact the first range of its
    direction that does not end before the contact starts, so the first window's range, ending at the second
    contact's start, gave that contact the first window's light time, 1 s where its window's is 3 s. The range
    now ends with its contact; each contact gets its own window's light time, and the plan reads back to the
    windows of the contacts with the same light times. Failed before for the slower first (ION's CGR: 1 for the second contact)."""
    from contact_sim import ContactPlan, LinkModel, WindowTable
    from contact_sim.link import SPEED_OF_LIGHT_M_S

    km = [SPEED_OF_LIGHT_M_S / 1e3 * 0.5, SPEED_OF_LIGHT_M_S / 1e3 * 2.5]  # OWLT 1 s and 3 s
    w = WindowTable([0, 0], [1, 1], [0.0, 50.0], [50.0, 100.0], km, km, [8.0 * r * 50 for r in rates],
                    direction=[A_TO_B, BOTH])
    text = format_ion(ContactPlan(["a", "b"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 100.0]))
    lines = text.splitlines()
    assert [ln for ln in lines if ln.startswith("a contact +") and " 1 2 " in ln] == contacts, text
    assert [ln for ln in lines if ln.startswith("a range +") and " 1 2 " in ln] == ranges, text
    assert [_ion_cgr_owlt(text, 1, 2, int(c.split()[2][1:])) for c in contacts] == [1, 3]
    path = tmp_path / "p.ion"
    path.write_text(text)
    plan = read_ion(path)
    assert list(zip(plan.windows.t_start_s.tolist(), plan.windows.t_end_s.tolist(),
                    plan.meta["owlt_s_per_window"])) == back


def test_where_ion_cgr_reads_a_contacts_light_time_below_the_import_as_the_docs_say(tmp_path: Path) -> None:
    """docs/formats.md: ION holds one light time a contact, the first range of its direction not ending before it
    starts. Of the mixed plan A->B 0-100 s (OWLT 2 s over 0-50) and B->A 50-150 s (3 s), written back, ION takes
    2 s for the contact 1->2 joined of the windows 0-50 and 50-100 (the latter's 3 s is the import's) and 2 s for
    2->1 +50 +150, the range ionadmin imputes of 'a range +0 +50 1 2 2' ending at its start; the import reads 2, 3,
    3. Pins the limits the page states (the export writes each window's range as it is, so the plan reads back to
    its own light times)."""
    path = tmp_path / "mixed.ion"
    path.write_text("a contact +0 +100 1 2 1000\na contact +50 +150 2 1 1000\na range +0 +50 1 2 2\n"
                    "a range +50 +150 2 1 3\n")
    plan = read_ion(path)
    text = format_ion(plan)
    assert [ln for ln in text.splitlines() if ln.startswith("a ")] == [
        "a contact +0 +100 1 2 1000", "a contact +50 +150 2 1 1000", "a range +0 +50 1 2 2", "a range +50 +100 1 2 3",
        "a range +50 +100 2 1 3", "a range +100 +150 2 1 3"], text
    assert (_ion_cgr_owlt(text, 1, 2, 0), _ion_cgr_owlt(text, 2, 1, 50)) == (2, 2)
    path.write_text(text)
    assert read_ion(path).meta["owlt_s_per_window"] == plan.meta["owlt_s_per_window"] == [2.0, 3.0, 3.0]


def test_hdtn_records_that_meet_are_read_in_time_order_and_refused_listed_the_other_way(tmp_path: Path) -> None:
    """HDTN's router (module/router/src/router.cpp) schedules a link up at each record's start and a link down at
    its end, the events of one second in record order: 1->2 +0 +60, +60 +90, +90 +120 listed in time order keep the
    link up from 0 to 120, and are read as three windows; with +90 +120 listed before +60 +90, the link goes down at
    +90 and stays down, so the record +60 +90 is refused, naming the one listed before it. Failed before: read."""
    def records(*spans):
        return json.dumps({"contacts": [_record(t0, t1) for t0, t1 in spans]})

    path = tmp_path / "p.json"
    path.write_text(records((0, 60), (60, 90), (90, 120)))
    w = read_hdtn(path).windows
    assert list(zip(w.t_start_s.tolist(), w.t_end_s.tolist())) == [(0.0, 60.0), (60.0, 90.0), (90.0, 120.0)]
    message = plan_refusal(path, records((0, 60), (90, 120), (60, 90)), read_hdtn)
    assert message == (f"{path}: contacts[2]: contact 1->2 +60 +90 meets the contact +90 +120 listed before it, "
                       "contacts[1], which HDTN's router takes down at +90 (events of one second in record "
                       "order); expected the records in time order"), message


def test_an_at_line_of_the_plan_start_pins_an_exported_plan_and_changes_none_of_its_times(tmp_path: Path) -> None:
    """docs/formats.md: ionadmin counts +SECONDS from the time it starts unless an '@ TIME' line sets it; an
    '@ yyyy/mm/dd-hh:mm:ss' of the plan start after the header comments pins the exported plan to its start, and the
    import reads it to the same windows (an '@' of a minute later moves them a minute)."""
    from contact_sim import ContactPlan, LinkModel, WindowTable

    start = dt.datetime(2025, 3, 1, tzinfo=dt.timezone.utc)
    w = WindowTable([0], [1], [62.0], [535.0], [1e3], [1e3], [8e3 * 473])
    text = format_ion(ContactPlan(["a", "b"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 600.0], start))
    head, _, body = text.partition("a contact")
    path = tmp_path / "p.ion"
    for at, shift in (("2025/03/01-00:00:00", 0.0), ("2025/03/01-00:01:00", 60.0)):
        path.write_text(f"{head}@ {at}\na contact{body}")
        back = read_ion(path)
        assert back.start == start and back.node_names == ["a", "b"]
        assert (back.windows.t_start_s.tolist(), back.windows.t_end_s.tolist()) == ([62.0 + shift], [535.0 + shift])


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_imports_name_the_plan_file_through_brief(kind: str, tmp_path: Path, caplog) -> None:
    """read_ion / read_hdtn handed the plan's path as it is to the parser, whose every refusal and log line
    names the file (<file>:<line>: ..., <file>: contacts[i]: ...): a newline or a terminal's escape in a
    folder's name (a scenario's contacts.plan_file) went into the message as it is, a folder of 3,000
    characters made a 3 kB line. The file is named through brief(), as the reader's other refusals name it;
    the plan's meta keeps the path whole."""
    import logging

    from contact_sim.dtn import read_plan
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    ion, hdtn = folder / "p.ion", folder / "p.json"
    ion.write_text("a contact +1 +600 1 2 1000\na contact +1 +600 2 1 many\n")
    hdtn.write_text(json.dumps({"contacts": [{"source": 1, "dest": 2, "startTime": 0, "endTime": 60}]}))
    for path, where in ((ion, ":2: "), (hdtn, ": contacts[0]")):
        with pytest.raises(ContactError) as info:
            read_plan(path)
        message = str(info.value)
        assert message.startswith(f"{brief(path)}{where}") and message.isprintable(), message
        assert len(message) < 600, message
    ion.write_text("a contact +1 +600 1 2 1000\n")  # one way only: said in an info line naming the file
    with caplog.at_level(logging.INFO, logger="contact_sim"):
        plan = read_plan(ion)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(f"{brief(ion)}: 599 of 599 contact-seconds have no reverse"), said
    assert said[0].isprintable() and plan.meta["source"] == str(ion), said
