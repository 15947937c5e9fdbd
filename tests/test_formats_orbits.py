"""OMM / GP orbits: six-digit catalog numbers, the three layouts, malformed files, TLE export limits."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import time
from pathlib import Path

import numpy as np
import pytest
from sgp4.api import WGS72, Satrec

from contact_sim import ContactError, compute_contacts, parse_contact_scenario
from contact_sim.cli import main as contacts_main
from orbits import (Constellation, OrbitError, circular_satrec, format_omm, format_tle, parse_omm_text, parse_tle_text, propagate_offsets,
                    read_omm, tle_checksum, walker_delta, write_omm)
from orbits.timeutil import parse_utc, satrec_epoch, sgp4_epoch_days

EPOCH = "2026-08-01T06:30:00.000000"
RECORD = {
    "OBJECT_NAME": "NEWSAT 1", "OBJECT_ID": "2026-123A", "EPOCH": EPOCH, "MEAN_MOTION": 15.21834587,
    "ECCENTRICITY": 0.0012345, "INCLINATION": 97.4412, "RA_OF_ASC_NODE": 123.4567, "ARG_OF_PERICENTER": 88.1234,
    "MEAN_ANOMALY": 272.0011, "EPHEMERIS_TYPE": 0, "CLASSIFICATION_TYPE": "U", "NORAD_CAT_ID": 412345,
    "ELEMENT_SET_NO": 999, "REV_AT_EPOCH": 123, "BSTAR": 0.00021345, "MEAN_MOTION_DOT": 0.00001234,
    "MEAN_MOTION_DDOT": 0,
}


def _direct_satrec(rec: dict) -> Satrec:
    """The same elements given straight to sgp4init (units converted by hand)."""
    sat = Satrec()
    xpdotp = 1440.0 / (2.0 * math.pi)  # rev/day per rad/min
    sat.sgp4init(WGS72, "i", 0, sgp4_epoch_days(parse_utc(rec["EPOCH"])), rec["BSTAR"],
                 rec["MEAN_MOTION_DOT"] / (xpdotp * 1440.0), rec["MEAN_MOTION_DDOT"] / (xpdotp * 1440.0 * 1440.0),
                 rec["ECCENTRICITY"], math.radians(rec["ARG_OF_PERICENTER"]), math.radians(rec["INCLINATION"]),
                 math.radians(rec["MEAN_ANOMALY"]), rec["MEAN_MOTION"] / xpdotp, math.radians(rec["RA_OF_ASC_NODE"]))
    return sat


def test_six_digit_omm_matches_direct_sgp4_within_1m(tmp_path: Path) -> None:
    path = tmp_path / "gp.json"
    path.write_text(json.dumps([RECORD, {**RECORD, "OBJECT_NAME": "OLDSAT", "NORAD_CAT_ID": 25544}]))
    c = read_omm(path)
    assert c.names == ["NEWSAT 1", "OLDSAT"]
    assert c.catalog_numbers == [412345, 25544]
    offsets = np.arange(0.0, 86400.0, 600.0)
    r_omm, _ = propagate_offsets(c.satrecs[:1], EPOCH + "Z", offsets)
    r_direct, _ = propagate_offsets([_direct_satrec(RECORD)], EPOCH + "Z", offsets)
    err_m = np.linalg.norm(r_omm - r_direct, axis=-1).max() * 1e3
    assert err_m < 1.0


def test_the_libraries_refuse_six_digit_catalog_numbers_so_sgp4_gets_0() -> None:
    """What docs/formats.md says the installed libraries do above 339999 (Alpha-5's Z9999): sgp4init,
    sgp4.omm.initialize and Skyfield's EarthSatellite.from_omm raise the same ValueError; 339999 itself
    is taken. So the reader keeps the real number aside and gives sgp4 the number 0."""
    from sgp4 import omm as sgp4_omm
    from skyfield.api import EarthSatellite, load

    text_record = {k: str(v) for k, v in RECORD.items()}
    refusals = {
        "sgp4init": lambda: Satrec().sgp4init(WGS72, "i", 412345, 26000.0, 0.0, 0.0, 0.0, 0.001, 0.0, 1.0, 0.0,
                                              0.06, 0.0),
        "sgp4.omm.initialize": lambda: sgp4_omm.initialize(Satrec(), text_record),
        "EarthSatellite.from_omm": lambda: EarthSatellite.from_omm(load.timescale(builtin=True), text_record),
    }
    for name, call in refusals.items():
        with pytest.raises(ValueError, match=r"^satellite number cannot exceed 339999"):
            call()
    edge = Satrec()
    edge.sgp4init(WGS72, "i", 339999, 26000.0, 0.0, 0.0, 0.0, 0.001, 0.0, 1.0, 0.0, 0.06, 0.0)
    assert edge.satnum == 339999
    c = parse_omm_text(json.dumps([RECORD]), "json", "gp.json")
    assert c.catalog_numbers == [412345] and c.satrecs[0].satnum == 0


@pytest.mark.parametrize("fmt", ["json", "csv", "xml", "kvn"])
def test_omm_round_trip_each_layout(fmt: str) -> None:
    c = parse_omm_text(json.dumps([RECORD]), "json", "gp.json")
    back = parse_omm_text(format_omm(c, fmt), fmt, f"gp.{fmt}")
    assert back.catalog_numbers == [412345] and back.names == ["NEWSAT 1"]
    r1, _ = propagate_offsets(c, EPOCH, [0.0, 3600.0])
    r2, _ = propagate_offsets(back, EPOCH, [0.0, 3600.0])
    assert np.abs(r1 - r2).max() * 1e3 < 1e-3


def test_tle_export_alpha5_and_refusal() -> None:
    epoch = parse_utc("2026-08-01T00:00:00Z")
    c = Constellation(["a", "b", "c"], [circular_satrec(n, epoch, 550.0, 53.0, 0.0, 10.0 * n % 360)
                                        for n in (99999, 123456, 339999)])
    text = format_tle(c)
    assert "1 C3456U" in text and "1 Z9999U" in text
    assert [s.satnum for s in parse_tle_text(text).satrecs] == [99999, 123456, 339999]
    from skyfield.api import EarthSatellite  # Skyfield reads the Alpha-5 lines back too (docs/formats.md)
    lines = text.splitlines()
    assert [EarthSatellite(lines[k + 1], lines[k + 2]).model.satnum for k in range(0, 9, 3)] == [
        99999, 123456, 339999]
    c = parse_omm_text(json.dumps([RECORD]), "json", "gp.json")
    with pytest.raises(OrbitError, match="catalog number 412345 cannot be written as a TLE"):
        format_tle(c)


@pytest.mark.parametrize("change, message", [
    ({"MEAN_MOTION": "fast"}, r"record 0\.MEAN_MOTION: expected a number"),
    ({"EPOCH": "yesterday"}, r"record 0\.EPOCH: expected an ISO-8601"),
    ({"ECCENTRICITY": 1.5}, r"record 0\.ECCENTRICITY: expected 0 <= e < 1"),
    ({"NORAD_CAT_ID": "abc"}, r"record 0\.NORAD_CAT_ID: expected an integer"),
    ({"REF_FRAME": "GCRF"}, r"record 0\.REF_FRAME: SGP4 elements are TEME"),
    ({"TIME_SYSTEM": "TT"}, r"record 0\.TIME_SYSTEM: SGP4 epochs are UTC, got 'TT'"),
    # integers sgp4 stores in C fields: 10**20 was an OverflowError traceback
    ({"REV_AT_EPOCH": 10**20}, r"record 0\.REV_AT_EPOCH: expected an integer in 0\.\.999999999, got 1000"),
    ({"REV_AT_EPOCH": -5}, r"record 0\.REV_AT_EPOCH: expected an integer in 0\.\.999999999, got -5"),
    ({"ELEMENT_SET_NO": 10**20}, r"record 0\.ELEMENT_SET_NO: expected an integer in 0\.\.9999, got 1000"),
    ({"ELEMENT_SET_NO": 12345}, r"record 0\.ELEMENT_SET_NO: expected an integer in 0\.\.9999, got 12345"),
    ({"EPHEMERIS_TYPE": 10**20}, r"record 0\.EPHEMERIS_TYPE: expected an integer in 0\.\.9, got 1000"),
    # angles outside the CCSDS range: sgp4 took a mean anomaly of 1e300 deg and gave a position, silently wrong
    ({"MEAN_ANOMALY": 1e300}, r"record 0\.MEAN_ANOMALY: expected -360\.\.360 deg, got 1e\+300$"),
    ({"ARG_OF_PERICENTER": 1e20}, r"record 0\.ARG_OF_PERICENTER: expected -360\.\.360 deg, got 1e\+20$"),
    ({"RA_OF_ASC_NODE": 720}, r"record 0\.RA_OF_ASC_NODE: expected -360\.\.360 deg, got 720\.0$"),
])
def test_malformed_omm_names_file_and_field(tmp_path: Path, change: dict, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{**RECORD, **change}]))
    with pytest.raises(OrbitError, match=message) as info:
        read_omm(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_omm_names_are_unique_and_a_repeated_record_is_refused() -> None:
    """Two satellites sharing a name get their catalog numbers appended; the same record twice
    is an error on its second copy (it used to become a second node, named NAME-<number>)."""
    other = {**RECORD, "NORAD_CAT_ID": RECORD["NORAD_CAT_ID"] + 1}
    c = parse_omm_text(json.dumps([RECORD, other]), "json", "gp.json")
    assert c.names == [RECORD["OBJECT_NAME"], f"{RECORD['OBJECT_NAME']}-{other['NORAD_CAT_ID']}"]
    with pytest.raises(OrbitError, match=r"gp\.json: record 1\.NORAD_CAT_ID: satellite \d+ appears twice"):
        parse_omm_text(json.dumps([RECORD, RECORD]), "json", "gp.json")


def test_omm_xml_declaring_entities_is_refused_before_they_expand(tmp_path: Path) -> None:
    """sgp4 parses OMM XML with ElementTree, whose expat expands internal entities: 400 bytes of
    nested declarations became megabytes of text (expat's own limit acts past 8 MiB). A document
    type declaration, where entities live and which no OMM file has, is refused naming its line."""
    lol = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 6))
    path = tmp_path / "gp.xml"
    path.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE ndm [<!ENTITY l0 "lol">{lol}]>\n'
                    '<ndm><omm><body><segment><metadata><OBJECT_NAME>&l5;</OBJECT_NAME></metadata>'
                    '</segment></body></omm></ndm>\n')
    with pytest.raises(OrbitError) as exc:
        read_omm(path)
    assert str(exc.value) == (f"{path}:2: a document type declaration (<!DOCTYPE); this file kind has none, "
                              "and entities are not expanded")


def test_malformed_omm_missing_field_csv_and_bad_xml(tmp_path: Path) -> None:
    rec = {k: v for k, v in RECORD.items() if k != "INCLINATION"}
    csv_path = tmp_path / "gp.csv"
    csv_path.write_text(",".join(rec) + "\n" + ",".join(str(v) for v in rec.values()) + "\n")
    with pytest.raises(OrbitError, match=r"gp\.csv:2\.INCLINATION: missing"):
        read_omm(csv_path)
    xml_path = tmp_path / "gp.xml"
    xml_path.write_text("<ndm><omm><body><segment><metadata/></segment></body></omm></ndm>")
    with pytest.raises(OrbitError, match="expected CCSDS OMM segments"):
        read_omm(xml_path)
    deep = tmp_path / "deep.json"  # 200 kB of brackets: a RecursionError inside json, not a traceback
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(OrbitError, match=r"deep\.json: invalid JSON \(nested deeper than 8 levels\)"):
        read_omm(deep)
    long = tmp_path / "long.json"  # 5 kB of digits: int() refuses them with a ValueError inside json
    long.write_text('[{"NORAD_CAT_ID": %s}]' % ("9" * 5_000))
    with pytest.raises(OrbitError, match=r"long\.json: invalid JSON \(an integer longer than 4,300 digits\)"):
        read_omm(long)


def test_a_satellite_name_over_200_characters_is_refused_where_it_is_read(tmp_path: Path) -> None:
    """A name of 128 kB was accepted and became a node's key in every table the run writes
    (the CSV export unreadable, each message quoting it whole); 200 characters are read."""
    elements = format_tle(walker_delta(1, 1, 0, 550.0, 53.0, EPOCH + "Z")).splitlines()[1:]
    tle = "\n".join(["x" * 201, *elements])
    with pytest.raises(OrbitError) as err:
        parse_tle_text(tle, "a.tle")
    assert str(err.value) == f"a.tle:1: TLE name line: expected a name of at most 200 characters, got 201: '{'x' * 36}..."
    assert parse_tle_text(tle[1:], "a.tle").names == ["x" * 200]
    with pytest.raises(OrbitError, match=r"^gp\.json: record 0\.OBJECT_NAME: expected a name of at most 200 "
                                         r"characters, got 201: 'xxx"):
        parse_omm_text(json.dumps([{**RECORD, "OBJECT_NAME": "x" * 201}]), "json", "gp.json")
    kvn = format_omm(parse_omm_text(json.dumps([{**RECORD, "OBJECT_NAME": "x" * 200}]), "json"), "kvn")
    assert parse_omm_text(kvn, "kvn").names == ["x" * 200]
    line = next(n for n, ln in enumerate(kvn.splitlines(), 1) if ln.startswith("OBJECT_NAME"))
    with pytest.raises(OrbitError, match=rf"^gp\.kvn:{line}\.OBJECT_NAME: expected a name of at most 200"):
        parse_omm_text(kvn.replace("x" * 200, "x" * 131_072), "kvn", "gp.kvn")


def test_omm_json_with_a_key_given_twice_is_refused_naming_file_and_key(tmp_path: Path) -> None:
    """JSON readers keep the last of two EPOCHs: the record would silently take the other epoch
    (the KVN reader refuses a key given twice too)."""
    path = tmp_path / "twice.json"
    path.write_text(json.dumps([RECORD])[:-2] + ', "EPOCH": "2026-09-01T00:00:00"}]')
    with pytest.raises(OrbitError) as err:
        read_omm(path)
    assert str(err.value) == f"{path}: invalid JSON (duplicate key 'EPOCH' in a JSON object)"


def test_a_celestrak_sized_omm_json_loads(tmp_path: Path) -> None:
    """10,000 GP records (CelesTrak's whole catalog is about that) are within the JSON limits."""
    records = [{**RECORD, "OBJECT_NAME": f"SAT {k}", "NORAD_CAT_ID": 10_000 + k} for k in range(10_000)]
    text = json.dumps(records)
    assert len(parse_omm_text(text, "json", "gp.json").names) == 10_000


@pytest.mark.parametrize(("key", "value", "shown"), [
    ("MEAN_MOTION", 10**400, "expected a finite number, got 10000000000000000000... (401 digits)"),
    ("NORAD_CAT_ID", 10**400, "expected a catalog number in 0..999999999, got 10000000000000000000... (401 digits)"),
    ("REV_AT_EPOCH", -(10**300), "expected an integer in 0..999999999, got -1000000000000000000... (301 digits)"),
    ("ELEMENT_SET_NO", "9x" * 2000, "expected an integer, got '9x9x9x9x9x"),
    ("EPOCH", "2026-" + "1" * 4000, "expected an ISO-8601 UTC time like 2025-03-01T12:00:00.000000, got '2026-111"),
    ("TIME_SYSTEM", "TT" * 2000, "SGP4 epochs are UTC, got 'TTTTTTTT"),
])
def test_a_huge_value_in_an_omm_record_is_shown_bounded(key: str, value: object, shown: str) -> None:
    """A value of an OMM file is quoted in the error as every other message quotes one: a huge integer by
    its first digits and its length, a long text cut; the whole value was written (a 400-digit line)."""
    with pytest.raises(OrbitError) as info:
        parse_omm_text(json.dumps([{**RECORD, key: value}]), "json", "gp.json")
    msg = str(info.value)
    assert msg.startswith(f"gp.json: record 0.{key}: ") and shown in msg and len(msg) < 200, msg


def test_scenario_kind_omm_and_cli_export(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    c = walker_delta(24, 2, 1, 550.0, 53.0, "2026-08-01T00:00:00Z")
    c.catalog_numbers = list(range(400001, 400025))
    (tmp_path / "shell.json").write_text(format_omm(c, "json"))
    doc = {"constellation": {"kind": "omm", "omm_file": "shell.json"},
           "time": {"start": "2026-08-01T00:00:00Z", "duration_s": 3600.0, "step_s": 60.0},
           "link": {"max_range_km": 5000.0}}
    via_omm = compute_contacts(parse_contact_scenario(doc, tmp_path))
    direct = compute_contacts(parse_contact_scenario(
        {**doc, "constellation": {"kind": "walker-delta", "total": 24, "planes": 2, "phasing": 1,
                                  "altitude_km": 550.0, "inclination_deg": 53.0, "epoch": "2026-08-01T00:00:00Z"}},
        tmp_path))
    assert len(via_omm.windows) == len(direct.windows) > 0
    assert np.allclose(via_omm.windows.t_start_s, direct.windows.t_start_s, atol=1e-3)
    with pytest.raises(ContactError, match="constellation.total: not used with kind = 'omm'"):
        parse_contact_scenario({**doc, "constellation": {"kind": "omm", "omm_file": "x.json", "total": 3}}, tmp_path)

    scn = tmp_path / "scn.toml"
    scn.write_text('[constellation]\nkind = "omm"\nomm_file = "shell.json"\n[time]\nstart = "2026-08-01T00:00:00Z"\n'
                   'duration_s = 600.0\n[link]\nmax_range_km = 5000.0\n')
    assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", "omm", "--out", str(tmp_path / "o")]) == 0
    assert read_omm(tmp_path / "o" / "orbits.omm.json").catalog_numbers == c.catalog_numbers
    assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", "tle", "--out", str(tmp_path / "t")]) == 2
    assert "catalog number 400001 cannot be written as a TLE" in capsys.readouterr().err
    # ... and so does --check (it said OK), and the run refuses it before the window search
    monkeypatch.setattr("contact_sim.scenario.plan_from_trajectories", lambda *a, **k: pytest.fail("searched"))
    for extra in (["--check"], []):
        assert contacts_main(["contacts", str(scn), "--export-orbits", "tle", "--out", str(tmp_path / "t"), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--export-orbits tle: satellite" in err[0] and "400001" in err[0], err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("fmt", ["csv", "xml", "kvn"])
def test_fol_contacts_writes_the_omm_in_the_layout_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         fmt: str) -> None:
    """--orbits-format csv / xml / kvn writes orbits.omm.<fmt>, which read_omm (so kind = "omm") takes by its name
    and reads back to the elements of the default JSON export: the same names, six-digit catalog numbers and
    positions, to the last bit."""
    c = walker_delta(4, 2, 1, 550.0, 53.0, "2026-08-01T00:00:00Z")
    c.catalog_numbers = list(range(400001, 400005))
    (tmp_path / "shell.json").write_text(format_omm(c, "json"))
    scn = tmp_path / "scn.toml"
    scn.write_text('[constellation]\nkind = "omm"\nomm_file = "shell.json"\n[time]\nstart = "2026-08-01T00:00:00Z"\n'
                   'duration_s = 600.0\n[link]\nmax_range_km = 5000.0\n')
    for layout, out in (([], tmp_path / "json"), (["--orbits-format", fmt], tmp_path / fmt)):
        assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", "omm", *layout,
                              "--out", str(out)]) == 0
    name = f"orbits.omm.{fmt}"
    assert f"wrote      {tmp_path / fmt / name}" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / fmt).iterdir()) == ["contacts.csv", "contacts.manifest.json", name]
    got, default = read_omm(tmp_path / fmt / name), read_omm(tmp_path / "json" / "orbits.omm.json")
    assert parse_omm_text((tmp_path / fmt / name).read_text(), fmt).names == c.names  # that layout's text
    assert got.names == default.names == c.names and got.catalog_numbers == c.catalog_numbers
    offsets = np.arange(0.0, 86400.0, 617.0)
    assert np.array_equal(propagate_offsets(got, c.epoch, offsets)[0], propagate_offsets(default, c.epoch, offsets)[0])


@pytest.mark.parametrize("group", ["metadata", "meanElements", "tleParameters"])
def test_omm_xml_segment_missing_a_group_is_one_line(tmp_path: Path, group: str) -> None:
    """A segment whose metadata, meanElements or tleParameters is absent made sgp4's parse_xml
    iterate over None: a bare TypeError traceback instead of the file's one-line error."""
    import re
    c = parse_omm_text(json.dumps([RECORD]), "json", "gp.json")
    path = tmp_path / "gp.xml"
    path.write_text(re.sub(rf"<{group}>.*?</{group}>", "", format_omm(c, "xml"), flags=re.S))
    with pytest.raises(OrbitError, match=r"gp\.xml: expected CCSDS OMM segments with metadata"):
        read_omm(path)


def test_omm_csv_saved_with_a_bom_keeps_its_names(tmp_path: Path) -> None:
    """Excel's "CSV UTF-8" starts the file with a byte-order mark; it stuck to the first header
    (OBJECT_NAME in CelesTrak's CSV), so every satellite was silently renamed SAT-<number>."""
    c = parse_omm_text(json.dumps([RECORD]), "json", "gp.json")
    path = tmp_path / "gp.csv"
    path.write_bytes(b"\xef\xbb\xbf" + format_omm(c, "csv").encode("utf-8"))
    assert read_omm(path).names == ["NEWSAT 1"]


def test_omm_csv_rows_left_blank_by_a_spreadsheet_are_skipped(tmp_path: Path) -> None:
    """A spreadsheet saves emptied rows as bare commas (and editors leave whitespace lines): such a
    row was read as a record and refused ('gp.csv:3.EPOCH: expected an ISO-8601 UTC time ..., got ''),
    though the CSV reader already skips empty lines, as the TLE reader skips blank ones."""
    text = format_omm(parse_omm_text(json.dumps([RECORD]), "json", "gp.json"), "csv")
    path = tmp_path / "gp.csv"
    path.write_text(text + "," * (len(RECORD) - 1) + "\n  \n" + ", ," + "\n")
    c = read_omm(path)
    assert c.names == ["NEWSAT 1"] and c.catalog_numbers == [RECORD["NORAD_CAT_ID"]]
    path.write_text(text + ",,,,\n" + text.splitlines()[1] + "\n")
    with pytest.raises(OrbitError, match=r"gp\.csv:4\.NORAD_CAT_ID: satellite 412345 appears twice"):
        read_omm(path)  # a row after a blank one keeps its line number


def _kvn(rec: dict, units: bool = True) -> str:
    """One OMM message in CCSDS KVN layout as Space-Track writes it (units as CCSDS 502.0-B gives them)."""
    unit = {"MEAN_MOTION": "rev/day", "INCLINATION": "deg", "RA_OF_ASC_NODE": "deg", "ARG_OF_PERICENTER": "deg",
            "MEAN_ANOMALY": "deg", "BSTAR": "1/ER", "MEAN_MOTION_DOT": "rev/day**2", "MEAN_MOTION_DDOT": "rev/day**3"}
    head = ("CCSDS_OMM_VERS = 2.0\nCOMMENT GENERATED VIA SPACE-TRACK.ORG API\nCREATION_DATE = 2026-08-01T07:00:00\n"
            "ORIGINATOR = 18 SPCS\n\nCENTER_NAME = EARTH\nREF_FRAME = TEME\nTIME_SYSTEM = UTC\nMEAN_ELEMENT_THEORY = SGP4\n")
    return head + "".join(f"{k} = {v}" + (f" [{unit[k]}]" if units and k in unit else "") + "\n" for k, v in rec.items())


KVN_PAIR = [RECORD, {**RECORD, "OBJECT_NAME": "OLDSAT [DEB]", "NORAD_CAT_ID": 25544, "MEAN_ANOMALY": 12.5}]


def test_omm_in_kvn_layout_reads_as_the_same_json(tmp_path: Path) -> None:
    """Space-Track's format/kvn ('KEY = value' lines, CCSDS 502.0-B's own layout) was refused with a line
    saying KVN is not supported; two concatenated messages now give the satellites the JSON gives."""
    path = tmp_path / "gp.kvn"
    path.write_text(_kvn(KVN_PAIR[0]) + "\n" + _kvn(KVN_PAIR[1], units=False))
    kvn, js = read_omm(path), parse_omm_text(json.dumps(KVN_PAIR), "json", "gp.json")
    assert kvn.names == js.names == ["NEWSAT 1", "OLDSAT [DEB]"] and kvn.catalog_numbers == [412345, 25544]
    offsets = np.arange(0.0, 86400.0 + 1.0, 3600.0)
    r_kvn, _ = propagate_offsets(kvn, EPOCH + "Z", offsets)
    r_js, _ = propagate_offsets(js, EPOCH + "Z", offsets)
    assert np.linalg.norm(r_kvn - r_js, axis=-1).max() * 1e3 < 1.0
    for name in ("gp.omm", "gp.txt", "gp.csv"):  # found by its first line whatever the file is called
        (tmp_path / name).write_text("\n" + path.read_text())
        assert read_omm(tmp_path / name).catalog_numbers == [412345, 25544]
        # a COMMENT line first, or lowercase keys (read in .kvn files), were taken for a CSV header
        (tmp_path / name).write_text("COMMENT from a script\r\nCOMMENT\r\n\n" + path.read_text())
        assert read_omm(tmp_path / name).catalog_numbers == [412345, 25544]
        (tmp_path / name).write_text(path.read_text().replace("CCSDS_OMM_VERS", "ccsds_omm_vers"))
        assert read_omm(tmp_path / name).catalog_numbers == [412345, 25544]
    path.write_text(_kvn(KVN_PAIR[0]).replace("COMMENT ", "COMMENT\t").replace(" = ", "\t=\t"))  # tabs, as blanks
    assert read_omm(path).catalog_numbers == [412345]  # 'COMMENT\tGENERATED ...' was not a COMMENT line
    for theory in ("SGP/SGP4", "SDP4"):  # the CCSDS standard's example writes SGP/SGP4: the same elements
        path.write_text(_kvn(KVN_PAIR[0]).replace("MEAN_ELEMENT_THEORY = SGP4", f"MEAN_ELEMENT_THEORY = {theory}"))
        assert read_omm(path).catalog_numbers == [412345]


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: t.replace("ORIGINATOR = 18 SPCS", "ORIGINATOR 18 SPCS"),
     r"^gp\.kvn:4: expected a 'KEY = value' line or a COMMENT line, got 'ORIGINATOR 18 SPCS'$"),
    (lambda t: "OBJECT_NAME = X\n" + t, r"^gp\.kvn:1: OBJECT_NAME: an OMM message must start with a CCSDS_OMM_VERS line$"),
    (lambda t: t.replace("EPHEMERIS_TYPE = 0", "EPHEMERIS_TYPE = 0\nInclination = 3.0"),
     r"^gp\.kvn:20: INCLINATION: given twice in one message \(first on line 15\)$"),
    (lambda t: t.replace("MEAN_MOTION = 15.21834587 [rev/day]", "MEAN_MOTION = 0.0011 [rad/s]"),
     r"^gp\.kvn:13: MEAN_MOTION: expected the unit \[rev/day\] or none, got 'rad/s'$"),
    (lambda t: t.replace("MEAN_MOTION = 15.21834587", "MEAN_MOTION = fast"),  # the checks of every layout, at the line
     r"^gp\.kvn:13\.MEAN_MOTION: expected a number, got 'fast'$"),
    (lambda t: t.replace("EPOCH = 2026", "EPOCH = 1e9"), r"^gp\.kvn:12\.EPOCH: expected an ISO-8601 UTC time"),
    (lambda t: t.replace("MEAN_ELEMENT_THEORY = SGP4", "MEAN_ELEMENT_THEORY = DSST"),
     r"^gp\.kvn:9\.MEAN_ELEMENT_THEORY: only SGP4 mean elements are supported \(SGP4, SGP/SGP4, SDP4, SGP4/SDP4\), "
     r"got 'DSST'$"),
    (lambda t: t.replace("MEAN_ELEMENT_THEORY = SGP4", "MEAN_ELEMENT_THEORY = SGP4-XP"),
     r"^gp\.kvn:9\.MEAN_ELEMENT_THEORY: only SGP4 mean elements .* got 'SGP4-XP'$"),
    (lambda t: t.replace("INCLINATION = 97.4412 [deg]\n", ""), r"^gp\.kvn:1\.INCLINATION: missing \(required\)$"),
    (lambda t: t + t, r"^gp\.kvn:47\.NORAD_CAT_ID: satellite 412345 appears twice$"),
    # a regular expression for the unit took 0.6 s on 20,000 blanks (quadratic; minutes for a 64 MB line)
    (lambda t: t.replace("BSTAR = 0.00021345", "BSTAR = 1" + " " * 200_000 + "x"),
     r"^gp\.kvn:24\.BSTAR: expected a number, got '1 x'$"),
])
def test_malformed_kvn_is_one_line_naming_the_line(tmp_path: Path, change, message: str) -> None:
    path = tmp_path / "gp.kvn"
    path.write_text(change(_kvn(RECORD)))
    t0 = time.perf_counter()
    with pytest.raises(OrbitError, match=message.replace("gp\\.kvn", re.escape(str(path)))):
        read_omm(path)
    assert time.perf_counter() - t0 < 5.0  # milliseconds; a minute with the quadratic unit pattern


def test_kvn_export_round_trips_every_satrec_field(tmp_path: Path) -> None:
    """write_omm / format_omm write KVN (CCSDS_OMM_VERS and header per message, CCSDS units) that reads
    back to the same elements; format_omm(c, "kvn") was refused."""
    c = parse_omm_text(json.dumps(KVN_PAIR), "json", "gp.json")
    text = write_omm(tmp_path / "out.kvn", c).read_text()
    assert text.count("CCSDS_OMM_VERS = 2.0\nCREATION_DATE = ") == 2 and re.search(r"\nMEAN_MOTION = 15\.218345\d* \[rev/day\]\n", text)
    back = read_omm(tmp_path / "out.kvn")
    assert back.names == c.names and back.catalog_numbers == c.catalog_numbers
    c.names = ["12 [3]", "2026 [DEB]"]  # a name that is a number and a bracket read back as '12': a unit dropped
    assert read_omm(write_omm(tmp_path / "out.kvn", c)).names == c.names
    fields = ("jdsatepoch", "jdsatepochF", "no_kozai", "ecco", "inclo", "nodeo", "argpo", "mo", "bstar", "ndot",
              "nddot", "revnum", "elnum", "intldesg", "classification")
    assert [[getattr(s, f) for f in fields] for s in back.satrecs] == [[getattr(s, f) for f in fields] for s in c.satrecs]


def test_a_day_of_year_epoch_reads_as_the_calendar_date() -> None:
    """CCSDS writes epochs as YYYY-MM-DDThh:mm:ss or YYYY-DDDThh:mm:ss (the day-of-year form is the one
    of its KVN examples); the second was refused as 'expected an ISO-8601 UTC time'."""
    doy = parse_omm_text(_kvn({**RECORD, "EPOCH": "2026-213T06:30:00.000000"}), "kvn", "gp.kvn").satrecs[0]
    iso = parse_omm_text(json.dumps([RECORD]), "json", "gp.json").satrecs[0]
    assert (doy.jdsatepoch, doy.jdsatepochF) == (iso.jdsatepoch, iso.jdsatepochF)
    with pytest.raises(OrbitError, match=r"gp\.kvn:12\.EPOCH: expected an ISO-8601 UTC time .*, got '2026-367T00:00:00'"):
        parse_omm_text(_kvn({**RECORD, "EPOCH": "2026-367T00:00:00"}), "kvn", "gp.kvn")
    leap = parse_omm_text(_kvn({**RECORD, "EPOCH": "2024-366T00:00:00"}), "kvn", "gp.kvn").satrecs[0]
    assert (leap.epochyr, leap.epochdays) == (24, 366.0)
    for bad in ("2026-366T00:00:00", "2026-000T00:00:00", "0000-001T00:00:00"):  # 2026-366 was read as 2027-01-01
        with pytest.raises(OrbitError, match=rf"gp\.kvn:12\.EPOCH: expected an ISO-8601 UTC time .*, got '{bad}'"):
            parse_omm_text(_kvn({**RECORD, "EPOCH": bad}), "kvn", "gp.kvn")


def test_a_bad_kvn_file_stops_fol_contacts_with_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "gp.kvn").write_text(_kvn(RECORD).replace("ECCENTRICITY = 0.0012345", "ECCENTRICITY = 1.5"))
    scn = tmp_path / "scn.toml"
    scn.write_text('[constellation]\nkind = "omm"\nomm_file = "gp.kvn"\n[time]\nstart = "2026-08-01T00:00:00Z"\n'
                   'duration_s = 600.0\n[link]\nmax_range_km = 5000.0\n')
    assert contacts_main(["contacts", str(scn), "--no-plot", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gp.kvn:14.ECCENTRICITY: expected 0 <= e < 1, got 1.5" in err, err


@pytest.mark.parametrize("ext", ["json", "csv", "xml", "kvn", "txt"])
def test_a_saved_server_error_answer_is_named_and_quoted(tmp_path: Path, ext: str) -> None:
    """Space-Track answers a bad query with {"error": "..."} and CelesTrak with a line of text; saved as the
    data they were blamed on a missing EPOCH, a missing CSV header or invalid JSON / XML."""
    path = tmp_path / f"gp.{ext}"
    path.write_text(json.dumps({"error": "You must be logged in to complete this action " + "x" * 5000}))
    with pytest.raises(OrbitError, match=r"gp\.\w+: holds a server's error message, not OMM data: 'You must be "
                                         r"logged in to complete this action xxx") as info:
        read_omm(path)
    assert len(str(info.value)) - len(str(path)) < 320
    path.write_text("No GP data found\n")
    with pytest.raises(OrbitError, match=r"gp\.\w+: holds one line of text, not OMM data: 'No GP data found' "
                                         r"\(a server's error message saved as the file\?\)$"):
        read_omm(path)


def test_an_omm_csv_the_csv_module_refuses_is_one_line(tmp_path):
    """A quote left open makes its field run past the csv module's limit: that was a
    _csv.Error traceback."""
    bad = tmp_path / "gp.csv"
    bad.write_text("OBJECT_NAME,EPOCH,MEAN_MOTION\n\"b" + "x" * 140_000 + "\n")
    with pytest.raises(OrbitError, match=r"gp.csv:\d+: not a valid CSV record .*field limit") as exc:
        read_omm(bad)
    assert "\n" not in str(exc.value)


def test_tle_export_of_omm_satellites_keeps_only_real_international_designators() -> None:
    """sgp4 takes a TLE's designator from OBJECT_ID[2:] whatever it holds, so the 'UNKNOWN' that OMM
    export writes for synthetic satellites became the designator 'KNOWN' in an exported TLE (and
    'TBD-X' became 'DX'); only a COSPAR designator YYYY-NNNP.. is kept, anything else is left blank."""
    shell = parse_omm_text(format_omm(walker_delta(2, 1, 0, 550.0, 53.0, "2026-08-01T00:00:00Z"), "json"), "json")
    odd = parse_omm_text(json.dumps([{**RECORD, "OBJECT_ID": "TBD-X", "NORAD_CAT_ID": 70001}]), "json")
    real = parse_omm_text(json.dumps([{**RECORD, "NORAD_CAT_ID": 70002}]), "json")
    line1 = [ln for c in (shell, odd, real) for ln in format_tle(c).splitlines() if ln.startswith("1 ")]
    assert [ln[9:17] for ln in line1] == [" " * 8, " " * 8, " " * 8, "26123A  "]
    assert [r["OBJECT_ID"] for c in (shell, odd, real) for r in json.loads(format_omm(c, "json"))] \
        == ["UNKNOWN", "UNKNOWN", "UNKNOWN", "2026-123A"]


def test_a_satellite_name_with_control_characters_is_refused_when_read() -> None:
    """An OBJECT_NAME holding a newline or a control character was accepted and then written into
    exports that no reader takes back: '0 A\\nB' splits a TLE name line, '\\x01' is not XML 1.0."""
    for name in ("A\nB", "C\x01D", "E\tF"):
        with pytest.raises(OrbitError, match=r"^gp\.json: record 0\.OBJECT_NAME: expected a name on one line "
                                             r"without control characters, got "):
            parse_omm_text(json.dumps([{**RECORD, "OBJECT_NAME": name}]), "json", "gp.json")
    tle = format_tle(walker_delta(1, 1, 0, 550.0, 53.0, "2026-08-01T00:00:00Z")).replace("0 WD-P00-S00", "0 WD\x01P00")
    with pytest.raises(OrbitError, match=r"^x\.tle:1: TLE name line: expected a name without control characters, "
                                         r"got 'WD\\x01P00'$"):
        parse_tle_text(tle, "x.tle")
    assert parse_omm_text(json.dumps([{**RECORD, "OBJECT_NAME": "NEWSAT Ñ 1"}]), "json").names == ["NEWSAT Ñ 1"]


@pytest.mark.parametrize("epoch", ["1950-05-01T06:00:00Z", "2056-12-31T23:59:59.5Z", "2057-01-01T00:00:00Z",
                                   "2060-05-01T06:00:00.123456Z"])
@pytest.mark.parametrize("fmt", ["json", "csv", "xml", "kvn"])
def test_omm_export_writes_an_epoch_outside_the_two_digit_years_with_its_own_year(epoch: str, fmt: str) -> None:
    """sgp4's export_omm dates the epoch by the TLE's two-digit year: a constellation of 2060 was
    written (and read back) as of 1960, one of 1950 as of 2050, without a word."""
    c = walker_delta(2, 1, 0, 550.0, 53.0, epoch)
    back = parse_omm_text(format_omm(c, fmt), fmt, "gp." + fmt)
    assert [satrec_epoch(s) for s in back.satrecs] == [parse_utc(epoch)] * 2


def test_an_omm_epoch_before_the_year_1000_is_read_as_written() -> None:
    """The epoch was handed to sgp4 through strftime, which writes the year 999 as '999': sgp4 refused
    it quoting a time the file does not hold ('sgp4 rejected the record (time data '999-06-01T...')."""
    back = parse_omm_text(json.dumps([{**RECORD, "EPOCH": "0999-06-01T00:00:00"}]), "json", "gp.json")
    assert satrec_epoch(back.satrecs[0]) == dt.datetime(999, 6, 1, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("epoch", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"])
def test_an_omm_epoch_whose_offset_leaves_the_calendar_is_refused(epoch: str) -> None:
    """An EPOCH with an offset that puts it in the year 0 or 10000 in UTC was an OverflowError traceback."""
    with pytest.raises(OrbitError, match=rf"\Agp\.json: record 0\.EPOCH: expected a time within the years "
                                         rf"1\.\.9999 in UTC, got '{re.escape(epoch)}'\Z"):
        parse_omm_text(json.dumps([{**RECORD, "EPOCH": epoch}]), "json", "gp.json")


def test_an_epoch_in_the_last_microsecond_of_9999_is_exported_and_refused_as_tle_in_one_line(tmp_path: Path,
                                                                                           capsys) -> None:
    """The record keeps its epoch as a float count of days (40 us a step in 9999): 9999-12-31T23:59:59.999999
    came back past the calendar's end, and OMM export and the TLE check of --export-orbits tle (with --check
    too) ended in an OverflowError traceback."""
    last = "9999-12-31T23:59:59.999999"
    c = parse_omm_text(json.dumps([{**RECORD, "EPOCH": last, "NORAD_CAT_ID": 25544}]), "json", "gp.json")
    assert satrec_epoch(c.satrecs[0]) == dt.datetime.max.replace(tzinfo=dt.timezone.utc)
    assert json.loads(format_omm(c, "json"))[0]["EPOCH"] == last
    with pytest.raises(OrbitError, match=r"^satellite NEWSAT 1: epoch 9999-12-31T23:59:59Z has no TLE form"):
        format_tle(c)
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[constellation]\nkind = "walker-delta"\ntotal = 2\nplanes = 1\naltitude_km = 550.0\n'
                        f'inclination_deg = 53.0\nepoch = "{last}Z"\n[time]\nstart = "9999-12-31T23:00:00Z"\n'
                        'duration_s = 3000.0\n[link]\nmax_range_km = 3000.0\n')
    assert contacts_main(["contacts", str(scenario), "--check", "--export-orbits", "tle"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "epoch 9999-12-31T23:59:59Z has no TLE form" in err


def test_tle_export_wraps_a_six_digit_revolution_count() -> None:
    """An OMM REV_AT_EPOCH of 123456 made the exported TLE's line 2 70 characters long (no reader,
    ours included, takes it back); a TLE's five-digit counter rolls over, so 23456 is written."""
    c = parse_omm_text(json.dumps([{**RECORD, "NORAD_CAT_ID": 70003, "REV_AT_EPOCH": 123456}]), "json")
    text = format_tle(c)
    assert all(len(ln) == 69 for ln in text.splitlines()[1:])
    back = parse_tle_text(text)
    assert back.satrecs[0].revnum == 23456 and c.satrecs[0].revnum == 123456
    assert json.loads(format_omm(c, "json"))[0]["REV_AT_EPOCH"] == 123456  # OMM keeps the whole count


def test_tle_export_writes_negative_omm_angles_in_0_to_360() -> None:
    """OMM angles may be negative (CCSDS allows -360..360); sgp4's export_tle refuses them, so an OMM
    with RA_OF_ASC_NODE = -10.5 could not be exported as TLE ('cannot be written as a TLE (('RAAN must be
    between 0 and 2 pi, got %r', -0.18...))'). They are written as the same angle in 0..360."""
    negative = {"RA_OF_ASC_NODE": -10.5, "ARG_OF_PERICENTER": -359.9, "MEAN_ANOMALY": -0.25}
    positive = {"RA_OF_ASC_NODE": 349.5, "ARG_OF_PERICENTER": 0.1, "MEAN_ANOMALY": 359.75}
    c = parse_omm_text(json.dumps([{**RECORD, "NORAD_CAT_ID": 70005, **negative}]), "json")
    text = format_tle(c)
    assert text == format_tle(parse_omm_text(json.dumps([{**RECORD, "NORAD_CAT_ID": 70005, **positive}]), "json"))
    back = parse_tle_text(text)
    r1, _ = propagate_offsets(c, EPOCH, [0.0, 3600.0])
    r2, _ = propagate_offsets(back, EPOCH, [0.0, 3600.0])
    assert np.abs(r1 - r2).max() < 0.05  # km: the TLE's columns round the epoch and angles
    assert [round(math.degrees(a), 6) for a in (c.satrecs[0].nodeo, c.satrecs[0].argpo)] == [-10.5, -359.9]


@pytest.mark.parametrize("change", [{"BSTAR": -3e-12}, {"BSTAR": 1e12}, {"MEAN_MOTION_DDOT": 1e9}])
def test_tle_export_refuses_elements_its_columns_cannot_hold(change: dict) -> None:
    """A TLE's B* and second derivative carry a one-digit exponent: an OMM B* of -3e-12 was written
    as '-30000-11', a 71-character line 1 that no reader takes back; now one line pointing to OMM."""
    c = parse_omm_text(json.dumps([{**RECORD, "NORAD_CAT_ID": 70004, **change}]), "json")
    with pytest.raises(OrbitError, match=r"^satellite NEWSAT 1: its elements do not fit the TLE's columns "
                                         r"\(line 1 would be 71 characters; B\* .*\); export OMM instead$"):
        format_tle(c)


def test_one_catalog_number_under_two_names_is_a_warning(caplog) -> None:
    """Two downloads that name one satellite differently ('ISS (ZARYA)', 'ISS') concatenated into one
    file were read as two satellites at one place, always in contact, without a word; it is now a
    warning naming the file, line and the first name (0, which home-made element sets share, is not)."""
    import logging

    lines = format_tle(walker_delta(2, 1, 0, 550.0, 53.0, "2026-06-01T00:00:00Z")).splitlines()
    twice = "\n".join(lines[:3] + ["ISS"] + lines[1:3]) + "\n"
    with caplog.at_level(logging.WARNING, logger="orbits"):
        assert parse_tle_text(twice, "x.tle").names == ["WD-P00-S00", "ISS"]
    assert [r.getMessage() for r in caplog.records] == [
        "x.tle:5: catalog number 1 is also satellite 'WD-P00-S00': two element sets of one satellite make two "
        "nodes at one place; keep one of them"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="orbits"):
        parse_tle_text("\n".join(lines) + "\n", "x.tle")  # two satellites, two numbers
        zero = [ln.replace("00001", "00000", 1)[:-1] for ln in lines[1:3]]
        zero = [ln + str(tle_checksum(ln)) for ln in zero]
        parse_tle_text("\n".join(["A", *zero, "B", *zero]) + "\n", "home.tle")  # 00000 twice: home-made
    assert caplog.records == []


def test_elements_sgp4_turns_into_nan_without_an_error_code_stop_fol_contacts_in_one_line(tmp_path: Path, capsys) -> None:
    """A subnormal mean motion passes sgp4init (error 0) and every position is NaN: the window search
    then died in scipy's k-d tree with a traceback. Propagation now names the satellite."""
    path = tmp_path / "gp.json"
    path.write_text(json.dumps([RECORD, {**RECORD, "OBJECT_NAME": "DRIFTER", "NORAD_CAT_ID": 25544,
                                         "MEAN_MOTION": 1.5e-319}]))
    c = read_omm(path)
    with pytest.raises(OrbitError, match="DRIFTER: SGP4 gave no finite position"):
        propagate_offsets(c, EPOCH, [0.0, 60.0])
    scn = tmp_path / "scn.toml"
    scn.write_text('[constellation]\nkind = "omm"\nomm_file = "gp.json"\n[time]\nstart = "2026-08-01T07:00:00Z"\n'
                   'duration_s = 600.0\n[link]\nmax_range_km = 5000.0\n')
    assert contacts_main(["contacts", str(scn), "--no-plot", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "DRIFTER: SGP4 gave no finite position" in err, err


@pytest.mark.parametrize("encoding", ["UTF-1", "x" * 300])
def test_omm_xml_declaring_an_unknown_encoding_is_one_line(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "gp.xml"
    c = parse_omm_text(json.dumps([RECORD]), "json")
    path.write_text(format_omm(c, "xml").replace('encoding="UTF-8"', f'encoding="{encoding}"'))
    with pytest.raises(OrbitError) as info:
        read_omm(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:1: the XML declaration names an encoding Python does not know") and len(msg) < 300, msg
    from swarmbase.tomlcheck import shown

    assert msg.endswith(f"({shown(encoding)})"), msg  # quoted as every other message quotes a value


def test_omm_xml_declaring_a_multi_byte_encoding_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "gp.xml"
    path.write_text(format_omm(parse_omm_text(json.dumps([RECORD]), "json"), "xml")
                    .replace('encoding="UTF-8"', 'encoding="EUC-JP"'))
    with pytest.raises(OrbitError) as info:
        read_omm(path)
    assert str(info.value) == (f"{path}:1: the XML declaration names a multi-byte encoding the XML parser cannot read "
                               "('EUC-JP'); save the file as UTF-8")


@pytest.mark.parametrize("source", ["json", "csv", "xml", "kvn", "tle"])
@pytest.mark.parametrize("mark", ["C", "S"])
def test_fol_contacts_exports_the_classification_it_read(tmp_path: Path, source: str, mark: str) -> None:
    """An element set read as C (classified) or S (secret) was exported as U by --export-orbits omm / tle:
    sgp4.omm.initialize sets the classification, then its sgp4init resets it to U. Every layout read
    (OMM JSON, CSV, XML, KVN, and TLE line 1 column 8) is written back with its own, in every layout."""
    rec = {**RECORD, "NORAD_CAT_ID": 25544, "CLASSIFICATION_TYPE": mark}
    c = parse_omm_text(json.dumps([rec]), "json", "gp.json")
    assert c.satrecs[0].classification == mark
    text = format_tle(c) if source == "tle" else format_omm(c, source)
    assert ("1 25544" + mark in text) if source == "tle" else (mark in text)
    (tmp_path / f"gp.{source}").write_text(text)
    kind = "tle" if source == "tle" else "omm"
    scn = tmp_path / "scn.toml"
    scn.write_text(f'[constellation]\nkind = "{kind}"\n{kind}_file = "gp.{source}"\n[time]\n'
                   'start = "2026-08-01T00:00:00Z"\nduration_s = 600.0\n[link]\nmax_range_km = 5000.0\n')
    for export, layout in (("tle", None), ("omm", "json"), ("omm", "csv"), ("omm", "xml"), ("omm", "kvn")):
        out = tmp_path / f"{export}-{layout}"
        assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", export, "--out", str(out),
                              *(["--orbits-format", layout] if layout else [])]) == 0
        written = next(out.glob("orbits.*"))
        if export == "tle":
            line1 = written.read_text().splitlines()[1]
            assert line1.startswith("1 25544") and line1[7] == mark, line1
            assert parse_tle_text(written.read_text(), "o.tle").satrecs[0].classification == mark
        else:
            assert read_omm(written).satrecs[0].classification == mark


@pytest.mark.parametrize("given", ["X", "CONFIDENTIAL", "u", 1])
def test_an_omm_classification_other_than_u_c_s_is_one_line(tmp_path: Path, given) -> None:
    """CLASSIFICATION_TYPE was cut to its first character ('CONFIDENTIAL' read as C, 'X' written into a TLE's
    column 8, which the TLE reader refuses); anything but U, C or S is refused naming the file and field.
    Left out or empty it is U, as CelesTrak always writes it."""
    path = tmp_path / "gp.json"
    path.write_text(json.dumps([{**RECORD, "CLASSIFICATION_TYPE": given}]))
    with pytest.raises(OrbitError, match=r"^\S*gp\.json: record 0\.CLASSIFICATION_TYPE: expected U \(unclassified\), "
                                         r"C \(classified\) or S \(secret\), got ") as info:
        read_omm(path)
    assert "\n" not in str(info.value)
    for unset in ("", None):
        path.write_text(json.dumps([{**RECORD, "CLASSIFICATION_TYPE": unset}]))
        assert read_omm(path).satrecs[0].classification == "U"
    (tmp_path / "gp.kvn").write_text(_kvn({**RECORD, "CLASSIFICATION_TYPE": "Q"}))
    with pytest.raises(OrbitError, match=r"gp\.kvn:20\.CLASSIFICATION_TYPE: expected U"):
        read_omm(tmp_path / "gp.kvn")


def test_an_omm_csv_with_lines_ended_by_cr_alone_reads_as_with_lf(tmp_path: Path) -> None:
    """A CSV whose lines end in CR alone (a Mac spreadsheet's) was handed to the csv module as one line and
    refused at 'gp.csv:0' (a new-line character in an unquoted field). It reads as the LF file does, and a
    bad field is named at its own line, as in the LF and CR LF files."""
    c = parse_omm_text(json.dumps(KVN_PAIR), "json", "gp.json")
    lines = format_omm(c, "csv").splitlines()
    path = tmp_path / "gp.csv"
    for end in ("\r", "\r\n", "\n"):
        path.write_bytes((end.join(lines) + end).encode())
        back = read_omm(path)
        assert back.names == c.names and back.catalog_numbers == c.catalog_numbers
        bad = lines[:2] + ["", lines[2].replace(",12.5,", ",fast,", 1)]  # an empty line, then line 4
        path.write_bytes((end.join(bad) + end).encode())
        with pytest.raises(OrbitError, match=r"gp\.csv:4\.MEAN_ANOMALY: expected a number, got 'fast'$"):
            read_omm(path)


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_an_omm_csv_quote_left_open_is_named_at_the_line_it_opens(tmp_path: Path, end: str) -> None:
    """A quote left open was reported at the line before the one the csv module failed in (which it does
    not count): 'gp.csv:1' for a quote on line 2, and for one that ran over many lines a line far from it.
    The line is now the one the refused record starts on, the empty lines before it skipped as the module does."""
    path = tmp_path / "gp.csv"
    text = format_omm(parse_omm_text(json.dumps([RECORD]), "json", "gp.json"), "csv")
    head = end.join(text.splitlines() + ["", ""]) + end  # header (1), a record (2), two empty lines (3, 4)
    for tail in ('"' + "x" * 140_000, '"' + ("x" * 70 + end) * 2_000):  # on one line, over 2,000 lines
        path.write_bytes((head + tail).encode())
        with pytest.raises(OrbitError, match=r"gp\.csv:5: not a valid CSV record \(field larger than field "
                                             r"limit \(131072\)\); a quote left open\?$"):
            read_omm(path)
    path.write_bytes(('"OBJECT' + ("y" * 70 + end.replace("\r", "\n")) * 2_000).encode())  # in the header
    with pytest.raises(OrbitError, match=r"gp\.csv:1: not a valid CSV record"):
        read_omm(path)


def test_an_omm_kvn_files_lines_are_the_editors_whatever_a_comment_holds(tmp_path: Path) -> None:
    """Only LF, CR LF or CR alone ends a KVN line (swarmbase.tomlcheck.text_lines): str.splitlines() also cut at
    U+2028 and a form feed, so a COMMENT holding one was refused as a line that is not 'KEY = value', and the
    lines after a form feed were named one late."""
    path = tmp_path / "gp.kvn"
    path.write_text(_kvn(RECORD).replace("COMMENT GENERATED", "COMMENT GENERATED\u2028BY A SCRIPT\x0c"))
    assert read_omm(path).catalog_numbers == [412345]
    path.write_text(_kvn(RECORD).replace("COMMENT GENERATED", "COMMENT\x0cGENERATED")
                    .replace("ORIGINATOR = 18 SPCS", "ORIGINATOR 18 SPCS"))
    with pytest.raises(OrbitError, match=re.escape(f"{path}:4: expected a 'KEY = value' line")):
        read_omm(path)


def test_refusals_naming_a_time_in_a_year_before_1000_write_its_year_in_four_digits() -> None:
    """The refusals formatted their times with strftime('%Y'), which writes the year 26 as '26': a horizon or
    an epoch in the year 26 (which parse_utc takes) was named '26-08-01T06:30:00Z', a time no ISO-8601 reader
    takes back. Failed before (each line below)."""
    from _iers import finals_text
    from orbits.iers import parse_iers_finals_text
    from orbits.sunlight import check_sunlight_span

    start = "0026-08-01T06:30:00Z"
    with pytest.raises(OrbitError, match=r"^satellite WD-P00-S00: epoch 0026-08-01T06:30:00Z has no TLE form "):
        format_tle(walker_delta(1, 1, 0, 550.0, 53.0, start))
    with pytest.raises(OrbitError, match=r"^time\.start: the horizon from 0026-08-01T06:30:00Z over 60 s leaves "
                                         r"1899-07-30\.\.2053-10-08, the span of the de421\.bsp ephemeris"):
        check_sunlight_span(start, 60.0)
    with pytest.raises(OrbitError, match=r"^time\.iers_finals: finals\.all gives polar motion for "
                                         r"2008-09-19T00:00:00Z\.\.2008-09-21T00:00:00Z, not for "
                                         r"0026-08-01T06:30:00Z\.\.0026-08-01T06:31:00Z; expected an IERS finals"):
        parse_iers_finals_text(finals_text(), "finals.all").check_covers(start, 60.0, "time.iers_finals")
    doc = {"constellation": {"kind": "walker-delta", "total": 2, "planes": 1, "altitude_km": 550.0,
                             "inclination_deg": 53.0, "epoch": start},
           "time": {"start": start, "duration_s": 4e11}, "link": {"max_range_km": 3000.0}}
    with pytest.raises(ContactError, match=r"^scenario: time\.duration_s: 4e\+11 s from time\.start "
                                           r"0026-08-01T06:30:00Z end after 9999-12-31T23:59:59Z, the last time an "
                                           r"ISO-8601 UTC stamp names$"):
        parse_contact_scenario(doc, ".")


def test_every_message_names_the_file_through_brief(tmp_path: Path) -> None:
    """The readers named the file through brief() (escaped, a long path cut), but write_tle and write_oem
    wrote the path as it is: a name holding a terminal escape went raw into the line, and a long one whole.
    Every refusal of a malformed file, read or written, now names it as brief() does."""
    from orbits import read_iers_finals, read_oem, read_omm, read_tle, walker_delta, write_oem, write_tle
    from swarmbase.tomlcheck import brief

    folder = tmp_path / ("d" * 80)
    folder.mkdir()

    def named(suffix: str, text: str | None = None) -> Path:
        path = folder / ("o\x1b[2J" + "x" * 200 + suffix)  # a 2xx-byte file name in a path of over 290 characters
        if text is not None:
            path.write_text(text)
        return path

    bad_name = walker_delta(2, 1, 0, 550.0, 53.0, EPOCH)
    bad_name.names[1] = "TWO\nLINES"
    accented = walker_delta(2, 1, 0, 550.0, 53.0, EPOCH)
    accented.names[0] = "CAF\xc9"
    calls = [
        (named(".tle", "1 25544U\n"), read_tle, "TLE line 1 without a following line 2"),
        (named(".json", "["), read_omm, "invalid JSON"),
        (named(".oem", "CCSDS_OEM_VERS = 2.0\nNONSENSE = 1\n"), read_oem, "not a header keyword"),
        (named(".all", "no polar motion here\n"), read_iers_finals, ""),
        (named(".tle"), lambda p: write_tle(p, accented), "a TLE file is ASCII text"),
        (named(".oem"), lambda p: write_oem(p, bad_name, EPOCH, 600.0), "OBJECT_NAME: expected a name on one line"),
    ]
    for path, call, fragment in calls:
        with pytest.raises(OrbitError) as info:
            call(path)
        msg = str(info.value)
        assert msg.startswith(f"{brief(path)}:") and fragment in msg, msg
        assert "\x1b" not in msg and "\n" not in msg and len(msg) < 600, msg
