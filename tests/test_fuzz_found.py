"""Minimal inputs a mutation fuzzer of the user-file readers, and of what peers send (agent messages, model
files, a folder of neighbours' models), found mishandled (a traceback in the CLI, a refusal of many lines,
or one quoting the whole input, unescaped text, memory far beyond the input's size), each now the reader's
one-line refusal naming the file or field and what was expected."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contact_sim import ContactError
from contact_sim.drones import read_waypoints_csv
from fol.errors import ConfigError
from fol.nodedata import NodeDataSpec, parse_node_data

from _memory import traced_peak
from _names import odd_folder
from _plans import plan_refusal
from _tiff import one_segment_tiff


def _one_line(message: str, limit: int = 600) -> None:
    assert "\n" not in message and "\r" not in message and len(message) < limit, message


# ------------------------------------------------------------------ --data spec (fol/nodedata.py)

@pytest.mark.parametrize("key", ["nodes", "node"])
def test_a_spec_with_nodes_or_node_none_is_refused_in_one_line(key: str) -> None:
    """``none`` unsets per_node and size; nodes=none and node=none were taken too and then compared
    with a number: a TypeError traceback out of ``fol pretrain --data``."""
    spec = {"nodes": "3", "node": "0"} | {key: "none"}
    with pytest.raises(ConfigError, match=rf"^--data: {key}='none' is not a valid integer$"):
        parse_node_data(f"dataset=synthetic-hurricane,nodes={spec['nodes']},node={spec['node']}")
    got = parse_node_data("dataset=synthetic-hurricane,nodes=3,node=0,per_node=none,size=NONE")
    assert got.per_node is None and got.size is None


@pytest.mark.parametrize("text", ["x" * 300, "a/" * 3000, "dataset=synthetic-hurricane," + "y" * 300 + "=1"])
def test_a_spec_too_long_for_a_file_name_is_refused_as_a_spec(text: str) -> None:
    """Path.is_dir() raised OSError (File name too long) on a spec longer than a file name may be;
    the refusal named neither --data nor what was expected, and quoted the whole text."""
    with pytest.raises(ConfigError, match=r"^--data\b.*(not a folder and not key=value pairs|unknown or malformed "
                                          r"entry)") as err:
        parse_node_data(text)
    _one_line(str(err.value), 700)


def test_a_long_bad_value_in_a_spec_is_quoted_cut() -> None:
    with pytest.raises(ConfigError, match=r"^--data: nodes='9{20,}\.\.\. is not a valid integer$") as err:
        parse_node_data("dataset=synthetic-hurricane,nodes=" + "9" * 5000)
    _one_line(str(err.value), 200)



@pytest.mark.parametrize("text", ["dataset=synthetic-hurricane,partition=all\npath=/tmp,partition=all",
                                  "dataset=imagefolder,path=/d\n" + "x" * 100_000 + ",b"])
def test_a_repeated_key_or_a_cut_path_with_a_newline_is_refused_in_one_short_line(text: str) -> None:
    """The refusals of a key given twice and of a path cut by a comma wrote the entries as given: a
    newline in the spec (a node.data TOML string may hold one) split the line, a long one filled the screen."""
    with pytest.raises(ConfigError, match=r"^--data: ('partition' is given twice|path='/d\\n)") as err:
        parse_node_data(text)
    _one_line(str(err.value), 700)


_SPEC_KEYS = ["dataset", "nodes", "node", "partition", "psi", "per_node", "size", "seed", "path", "splits", "bands",
              "scale", "root", "junk", ""]
_SPEC_VALUES = (st.sampled_from(["none", "nan", "inf", "-1", "0", "1", "3", "1e308", "9" * 5000, "\u00b2", "1_0",
                                 "synthetic-hurricane", "imagefolder", "all", "region", "4+3+2", "a\nb", "x" * 400])
                | st.text(max_size=12))


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_SPEC_KEYS), st.sampled_from(["=", "", "=="]), _SPEC_VALUES), max_size=6)
       | st.text(max_size=300).map(lambda t: [("", "", t)]))
def test_any_data_spec_is_a_spec_or_one_short_line_naming_data(entries: list) -> None:
    text = ",".join(f"{k}{sep}{v}" for k, sep, v in entries)
    try:
        assert isinstance(parse_node_data(text), NodeDataSpec)
    except ConfigError as exc:
        assert str(exc).startswith("--data"), str(exc)
        _one_line(str(exc), 800)

# ------------------------------------------------------------------ waypoint CSV (contact_sim/drones.py)

def test_a_waypoint_header_with_an_open_quote_is_refused_in_one_short_line(tmp_path: Path) -> None:
    """A quote left open in the header made its field run over every line of the file, and the
    refusal quoted that field: the whole file, newlines and all, in the message."""
    p = tmp_path / "w.csv"
    p.write_text('node_id,t_s,",y_km,z_km\n' + "a,0,0.0,0.0,0.1\n" * 2000)
    with pytest.raises(ContactError, match=r"w\.csv:1: expected header node_id,t_s,x_km,y_km,z_km, got 'node_id,") as err:
        read_waypoints_csv(p)
    _one_line(str(err.value))


# ------------------------------------------------------------------ agent config (fol/agent/config.py)

def test_a_position_connection_with_a_newline_is_refused_in_one_line(tmp_path: Path) -> None:
    """A [position] connection without ':' is a file or serial device, checked when the config is read;
    the refusal of a missing one wrote its path as given, so a newline in it split the line in two."""
    from fol.agent.config import AgentConfig

    data = {"node": {"id": "drone-1", "listen": "tcp://127.0.0.1:*", "secret_key": "k.key_secret",
                     "trust_dir": "trusted", "state_dir": "state", "model": "m.safetensors",
                     "data": "dataset=synthetic-hurricane,nodes=3,node=0"},
            "position": {"source": "mavlink", "connection": "a\nb\x1b[2J"}}
    with pytest.raises(ConfigError, match=r"^node\.toml: position\.connection: .*a\\nb\\x1b\[2J: no such file or "
                                          r"serial device$") as err:
        AgentConfig.from_dict(data, base_dir=tmp_path, source="node.toml")
    _one_line(str(err.value))


@pytest.mark.parametrize("port", ["9" * 5000, "\u00b2", "\u0661\u0662\u0663"])
def test_an_address_port_that_is_no_ascii_number_is_refused_in_one_line(port: str) -> None:
    """'tcp://host:<5000 digits>' raised ValueError (int() refuses over 4300 digits), a superscript two
    passed str.isdigit() and then int() refused it, and Arabic-Indic digits were taken as port 123."""
    from fol.agent.config import check_address

    with pytest.raises(ConfigError, match=r"^peers\[0\]\.address is 'tcp://h:.*; expected tcp://host:port or "
                                          r"ipc://path$") as err:
        check_address(f"tcp://h:{port}", "peers[0].address")
    _one_line(str(err.value))
    assert check_address("tcp://h:65535", "peers[0].address") == "tcp://h:65535"


# ------------------------------------------------------------------ scenario TOML (contact_sim/scenario.py)

@pytest.mark.parametrize("text, needle", [
    ('"' + "9" * 5000 + '" = 1\n', "unknown top-level key '999"),
    ("[time]\nstart = [" + "1, " * 20000 + "1]\nduration_s = 60.0\nstep_s = 10.0\n",
     "time.start: expected an ISO-8601 UTC time string, got [1, 1"),
])
def test_a_long_unknown_key_or_time_value_in_a_scenario_is_quoted_cut(tmp_path: Path, text: str, needle: str) -> None:
    """An unknown top-level key and a time that is not a string were quoted whole: a 5000-character
    key or a list of 20,000 numbers made a refusal as long as the file."""
    from contact_sim.scenario import load_contact_scenario

    p = tmp_path / "s.toml"
    p.write_text(text + '[constellation]\nkind = "tle"\ntle_file = "x.tle"\n')
    with pytest.raises(ContactError, match=rf"^{p}: ") as err:
        load_contact_scenario(p)
    assert needle in str(err.value)
    _one_line(str(err.value), 600)


_LEO = ('[constellation]\nkind = "walker-delta"\ntotal = 4\nplanes = 2\naltitude_km = 550.0\ninclination_deg = 53.0\n'
        'epoch = "2025-03-01T00:00:00Z"\n[link]\nmax_range_km = 5000.0\n')
_DRONES = '[drones]\ncount = 12\narea_km = 4.0\nradio_range_km = 1.2\n'


@pytest.mark.parametrize("text, expected", [
    # a horizon of 1e308 s without a start: its waypoint times were written with all their 308 digits
    (_DRONES + "[time]\nduration_s = 1e308\n",
     "time.duration_s: 8.63e+306 time samples x 12 node(s) would need 2.47e+301 GiB for the trajectories and their "
     "window search (limit 8 GiB)"),
    # rounds of 1e-300 s: their count was written with all its 305 digits
    (_LEO + "[time]\nduration_s = 21600.0\n[rounds]\nduration_s = 1e-300\n",
     "rounds.duration_s: 1e-300 s makes 2.16e+304 rounds of time.duration_s, expected at most 10,000"),
    # rounds of 1e-10 s over 1e308 s: int() of an infinite count, an OverflowError traceback
    (_DRONES + "[time]\nduration_s = 1e308\n[rounds]\nduration_s = 1e-10\n",
     "rounds.duration_s: 1e-10 s makes more than 1.8e+308 rounds of time.duration_s, expected at most 10,000"),
    # [energy] added the horizon to a start at the calendar's end for the Sun's span: an OverflowError
    # traceback before the horizon was checked to end within the calendar
    (_LEO.replace('epoch = "2025-03-01T00:00:00Z"', 'epoch = "9999-12-31T23:59:59.999999Z"')
     + "[time]\nduration_s = 600.0\n[energy]\nbattery_wh = 40.0\nsolar_w = 20.0\nidle_w = 5.0\n",
     "time.duration_s: 600 s from time.start (default: constellation.epoch) 9999-12-31T23:59:59Z end after "
     "9999-12-31T23:59:59Z, the last time an ISO-8601 UTC stamp names"),
])
def test_a_horizon_or_round_many_orders_off_is_one_short_line(tmp_path: Path, text: str, expected: str) -> None:
    """Counts from a horizon or a round length many orders of magnitude off are written in powers of ten
    (:func:`swarmbase.units.format_count`), and the horizon is checked to end within the calendar before
    anything adds it to the start."""
    from contact_sim.scenario import load_contact_scenario

    p = tmp_path / "s.toml"
    p.write_text(text)
    with pytest.raises(ContactError) as err:
        load_contact_scenario(p)
    assert str(err.value).startswith(f"{p}: {expected}")
    _one_line(str(err.value), 300)


@pytest.mark.parametrize("value, shown_as", [("0", "0"), ("false", "false"), ('""', "''"), ("{}", "{}")])
def test_ground_stations_of_another_type_than_an_array_is_refused(tmp_path: Path, value: str, shown_as: str) -> None:
    """``ground_stations = 0`` (or false, an empty string or table) was taken as no station, exit status 0: its
    type was checked only when it held something."""
    from contact_sim.scenario import load_contact_scenario

    p = tmp_path / "s.toml"
    p.write_text(f"ground_stations = {value}\n{_LEO}[time]\nduration_s = 600.0\n")
    with pytest.raises(ContactError) as err:
        load_contact_scenario(p)
    assert str(err.value) == (f"{p}: ground_stations: expected an array of tables [[ground_stations]], "
                              f"got {shown_as}")
    p.write_text(f"ground_stations = []\n{_LEO}[time]\nduration_s = 600.0\n")
    assert load_contact_scenario(p).ground_stations == []


_DEEP = "/".join(["f" * 200] * 14)  # 2,800 characters of folders: a path that exists


@pytest.mark.parametrize("missions, needle", [
    (['"' + "x" * 5000 + '.csv"'], "xxxx.csv': expected a QGroundControl .plan, a QGC WPL 110 .waypoints, a GPX"),
    ([f'"a/{_DEEP}/alpha.gpx"', f'"b/{_DEEP}/alpha.gpx"'], "/alpha.gpx': drone name 'alpha' (the file's stem) is "
                                                           "also that of '"),
    (['"' + "d" * 5000 + '/positions.jsonl"'] * 2, "/positions.jsonl': given twice in missions"),
])
def test_a_long_missions_name_refused_before_it_is_read_is_cut(tmp_path: Path, missions: list[str],
                                                               needle: str) -> None:
    """The refusals of a missions name made before the file is read (a suffix no reader takes, a second file of a
    drone's name, a position log given twice) wrote the names whole: a name of 5,000 characters made a 5 kB line."""
    from contact_sim.scenario import check_contact_scenario, load_contact_scenario

    examples = Path(__file__).resolve().parent.parent / "examples"
    for folder in ("a", "b"):
        (tmp_path / folder / _DEEP).mkdir(parents=True)
        (tmp_path / folder / _DEEP / "alpha.gpx").write_bytes((examples / "track_alpha.gpx").read_bytes())
    p = tmp_path / "s.toml"
    p.write_text(f"[drones]\nmissions = [{', '.join(missions)}]\nradio_range_km = 1.0\n[time]\nduration_s = 60.0\n")
    with pytest.raises(ContactError) as err:
        check_contact_scenario(load_contact_scenario(p))
    assert needle in str(err.value)
    _one_line(str(err.value), 360)  # with the CLI's prefix and the scenario's name, under 400


# ------------------------------------------------------------------ digits str.isdigit() passes and int() refuses

@pytest.mark.parametrize("degree", ["\u00b2", "9" * 5000, "\u0661"])
def test_an_oem_interpolation_degree_of_other_digits_is_one_line(degree: str) -> None:
    """``INTERPOLATION_DEGREE = ²`` (``str.isdigit()`` passes it, ``int()`` refuses it) or 5,000 digits
    (``int()`` refuses over 4,300) raised ValueError: a traceback out of ``fol contacts``."""
    from orbits import OrbitError
    from orbits.oem import parse_oem_text

    text = (Path(__file__).resolve().parents[1] / "examples" / "leo_oem.oem").read_text()
    assert "INTERPOLATION_DEGREE = 5" in text
    with pytest.raises(OrbitError, match="INTERPOLATION_DEGREE: expected an integer 1..") as err:
        parse_oem_text(text.replace("INTERPOLATION_DEGREE = 5", f"INTERPOLATION_DEGREE = {degree}", 1), "x.oem")
    _one_line(str(err.value))


_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
_FULLWIDTH = str.maketrans("0123456789", "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19")
_ARABIC_INDIC = str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")


def _omm_record(**changes: Any) -> str:
    import json

    record = {"OBJECT_NAME": "A", "OBJECT_ID": "2008-900A", "EPOCH": "2008-09-20T12:25:40.104192",
              "MEAN_MOTION": "15.72125391", "ECCENTRICITY": "0.0006703", "INCLINATION": "51.6416",
              "RA_OF_ASC_NODE": "247.4627", "ARG_OF_PERICENTER": "130.536", "MEAN_ANOMALY": "325.0288",
              "NORAD_CAT_ID": "90001"}
    return json.dumps([{**record, **changes}])


@pytest.mark.parametrize("case, needle", [
    ("oem state", "x.oem:19: field 2: expected a decimal number, got '-"),
    ("omm float", "gp.json: record 0.MEAN_MOTION: expected a number, got '"),
    ("omm integer", "gp.json: record 0.NORAD_CAT_ID: expected an integer, got '"),
    # a CCSDS day of the year: its year and day went through int(), which reads every script's digits
    ("omm day of year", "gp.json: record 0.EPOCH: expected an ISO-8601 UTC time like"),
    ("iers pole", "finals2000A.all:1: expected the pole's x in columns 19-27"),
])
def test_an_orbit_file_number_in_digits_of_another_script_is_refused(case: str, needle: str) -> None:
    """``\\d`` matches, and ``float()`` and ``int()`` read, every script's digits: an OEM state, an OMM field, a
    CCSDS day-of-year epoch or a pole coordinate written in fullwidth or Arabic-Indic digits was read as the
    number, exit status 0, where CCSDS messages and the IERS columns are ASCII (a TLE file was refused already)."""
    from orbits import OrbitError, parse_omm_text
    from orbits.iers import parse_iers_finals_text
    from orbits.oem import parse_oem_text

    oem = (_EXAMPLES / "leo_oem.oem").read_text()
    pole = "0.100000".translate(_FULLWIDTH)
    read = {
        "oem state": lambda: parse_oem_text(oem.replace("-2945.131098", "-2945.131098".translate(_FULLWIDTH), 1),
                                            "x.oem"),
        "omm float": lambda: parse_omm_text(_omm_record(MEAN_MOTION="15.72125391".translate(_ARABIC_INDIC)), "json",
                                            "gp.json"),
        "omm integer": lambda: parse_omm_text(_omm_record(NORAD_CAT_ID="90001".translate(_ARABIC_INDIC)), "json",
                                              "gp.json"),
        "omm day of year": lambda: parse_omm_text(_omm_record(EPOCH="2008".translate(_ARABIC_INDIC) + "-264T12:25:40"),
                                                  "json", "gp.json"),
        "iers pole": lambda: parse_iers_finals_text(f" 8 920 54729.00 I  {pole} 0.000020  0.300000 0.000020  "
                                                    "I-0.4600000\n", "finals2000A.all"),
    }[case]
    with pytest.raises(OrbitError) as err:
        read()
    assert str(err.value).startswith(needle), str(err.value)
    _one_line(str(err.value))


@pytest.mark.parametrize("field, text, needle", [
    ("MEAN_MOTION", "15.721_25391", "record 0.MEAN_MOTION: expected a number, got '15.721_25391'"),
    ("NORAD_CAT_ID", "90_001", "record 0.NORAD_CAT_ID: expected an integer, got '90_001'"),
])
def test_an_omm_number_with_an_underscore_is_refused(field: str, text: str, needle: str) -> None:
    """``float()`` and ``int()`` read Python's digit groups: an OMM's MEAN_MOTION '15.721_25391' was read as
    15.72125391 and NORAD_CAT_ID '90_001' as 90001, where CCSDS numbers have none (the OEM reader and the flight
    files refused them). The numbers as written are still read."""
    from orbits import OrbitError, parse_omm_text

    assert parse_omm_text(_omm_record(**{field: text.replace("_", "")}), "json", "gp.json").names == ["A"]
    with pytest.raises(OrbitError) as err:
        parse_omm_text(_omm_record(**{field: text}), "json", "gp.json")
    assert str(err.value) == f"gp.json: {needle}"


@pytest.mark.parametrize("address", ["10.0.0.1:\u00b2", "10.0.0.1:" + "9" * 5000, "ray://h:\u0661\u0662"])
def test_a_ray_address_whose_port_is_not_ascii_digits_is_one_line(address: str) -> None:
    """A Ray address's port went through ``str.isdigit()`` and ``int()``: ValueError for ``²`` and
    5,000 digits, and Arabic-Indic digits taken as a port."""
    from fol.executors import check_ray_address

    with pytest.raises(ConfigError, match="^run.ray_address .*expected 'auto'") as err:
        check_ray_address(address)
    _one_line(str(err.value))


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:005555", "tcp://127.0.0.1:0000000065535", "tcp://[::1]:00080"])
def test_an_address_port_with_leading_zeros_is_taken_as_before(address: str) -> None:
    """ZeroMQ reads a port's leading zeros (tcp://127.0.0.1:0041231 binds port 41231), and the agent took
    such an address before eea5c02, whose 1 to 5 digits refused it: the digits are counted after them."""
    from fol.agent.config import check_address

    assert check_address(address, "peers[0].address") == address
    with pytest.raises(ConfigError, match=r"^peers\[0\]\.address is 'tcp://h:0+65536'; expected"):
        check_address("tcp://h:00065536", "peers[0].address")
    with pytest.raises(ConfigError, match=r"^peers\[0\]\.address is 'tcp://h:0{20,}\.\.\.; expected"):
        check_address("tcp://h:" + "0" * 5000, "peers[0].address")


def test_an_image_folder_name_the_file_system_refuses_is_one_short_line(tmp_path: Path) -> None:
    """``imagefolder`` with a path longer than the file system takes: ``Path.exists()`` raised
    OSError (File name too long), which the CLI wrote with the 5,000-character name whole."""
    from fol.cli import main
    from fol.data.registry import image_folder_path
    from fol.errors import DataError

    name = "a" * 5000
    with pytest.raises(DataError, match="^image folder 'a+\\.\\.\\.: not a name this file system takes") as err:
        image_folder_path(name, None)
    _one_line(str(err.value))
    out = tmp_path / "m.safetensors"
    assert main(["pretrain", "--data", f"dataset=imagefolder,path={name}", "--out", str(out)]) == 2
    assert not out.exists()


# ------------------------------------------------------------------ model files from peers (fol/checkpoint.py)

def _peer_model(edit: Any) -> bytes:
    """A small model file whose card ``edit`` changed (its digest not recomputed: every case below is
    refused before the digest is compared)."""
    import json

    from safetensors.torch import save

    from fol.checkpoint import ModelCard
    from fol.models import ModelSpec, build_model

    spec = ModelSpec("cnn", 2, in_channels=1, input_size=4, options={"widths": [2], "hidden": 0})
    card = ModelCard(spec, ["a", "b"], producer="peer").to_dict()
    edit(card)
    card["sha256"] = "0" * 64
    tensors = {k: v.contiguous() for k, v in build_model(spec, seed=0).state_dict().items()}
    return save(tensors, metadata={"fol": json.dumps(card)})


@pytest.mark.parametrize("edit, needle", [
    (lambda c: c["spec"]["options"].update(hidden=10**4000),
     "spec option 'hidden' is 10000000000000000000... (4,001 digits), over the loader's limit of 65536"),
    (lambda c: c["spec"].update(num_classes=10**4000), "expected 10000000000000000000... (4,001 digits) (spec num_classes)"),
    (lambda c: c["spec"].update(input_size=10**4000), "(spec in_channels, input_size, input_size)"),
    (lambda c: c["spec"].update(in_channels=-10**4000), "got -1000000000000000000... (4,001 digits)"),
    (lambda c: c["spec"].update(arch="x" * 100_000), "is unknown; expected one of cnn,"),
    (lambda c: c["spec"]["options"].update({"\x00nul": 1, "\u202eevil": 2}), "model option(s) ['\\x00nul', '\\u202eevil']"),
    (lambda c: c["spec"].update({"\x1b[2J" + "y" * 50: 1}), "model spec has unknown field(s) ['\\x1b[2Jyyy"),
    (lambda c: c.update({"\x1b[2J" + "z" * 5000: 1}), "model card has unknown field(s) ['\\x1b[2Jzzz"),
])
def test_a_peer_model_card_with_a_huge_number_or_a_long_or_unprintable_name_is_one_short_line(edit: Any,
                                                                                              needle: str) -> None:
    """A spec option of 4,001 digits was written whole (a 4,000-character refusal); option names and unknown
    keys holding NUL, a right-to-left override or a terminal escape reached the refusal, a peer's REJECT
    reason and the receiver's log unescaped; a huge class count, input size or arch was cut after 200
    characters, before the refusal said what was expected. Values are now shown cut (a long integer by its
    first digits and its length), names escaped."""
    from fol.checkpoint import load_model_bytes
    from fol.errors import CheckpointError

    with pytest.raises(CheckpointError, match="^peer: ") as err:
        load_model_bytes(_peer_model(edit), source="peer")
    assert needle in str(err.value), str(err.value)
    _one_line(str(err.value), 300)
    assert str(err.value).isprintable(), str(err.value)


@pytest.mark.parametrize("value", ["\udcff\udcfe", "16", 16.0, True, [16, "32"], {"a": 1}])
def test_a_spec_option_that_is_not_integers_is_refused_before_the_digest(value: Any, caplog) -> None:
    """widths = "\\udcff\\udcfe" (lone surrogates, which JSON escapes) passed the card checks and then made
    model_digest raise UnicodeEncodeError while hashing the card as UTF-8: the loader's safety net turned it
    into 'model could not be validated (UnicodeEncodeError ...)' and logged a traceback. An option is an
    integer or a list of integers, checked with the architecture bounds."""
    import logging

    from fol.checkpoint import load_model_bytes
    from fol.errors import CheckpointError

    with caplog.at_level(logging.WARNING, logger="fol.checkpoint"):
        with pytest.raises(CheckpointError, match=r"^peer: spec option 'widths' is .*, expected an integer or a "
                                                  r"list of integers$") as err:
            load_model_bytes(_peer_model(lambda c: c["spec"]["options"].update(widths=value)), source="peer")
    _one_line(str(err.value), 300)
    assert not caplog.records, [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("options, needle", [
    ({"hidden": -10**4000}, "hidden must be a non-negative integer (0 for no hidden layer), got "
                            "-1000000000000000000... (4,001 digits)"),
    ({"widths": [-10**4000]}, "widths must be a non-empty list of positive integers, got [-10000"),
])
def test_a_negative_spec_option_of_a_card_whose_digest_matches_is_one_short_line(options: dict[str, Any],
                                                                                  needle: str) -> None:
    """The loader's step 4 bounds an option from above only: a negative one, in a card whose sha256 a peer
    computed (the digest is no signature), reaches the build of step 6, whose refusal wrote the option
    whole, twice (the options, then the value), inside 'cannot build ... from the card (...)' cut after 200
    characters: before it said what was expected. The builder's values are now shown cut, and its refusal
    is the line."""
    import json

    from safetensors.torch import save

    from fol.checkpoint import ModelCard, load_model_bytes, model_digest
    from fol.errors import CheckpointError
    from fol.models import ModelSpec, build_model

    spec = ModelSpec("cnn", 2, in_channels=1, input_size=4, options={"widths": [2], "hidden": 0})
    tensors = {k: v.contiguous() for k, v in build_model(spec, seed=0).state_dict().items()}
    card = ModelCard(spec, ["a", "b"], producer="peer").to_dict()
    card["spec"]["options"].update(options)
    card["sha256"] = model_digest(card, tensors)
    with pytest.raises(CheckpointError, match=r"^peer: cannot build 'cnn' with options ") as err:
        load_model_bytes(save(tensors, metadata={"fol": json.dumps(card)}), source="peer")
    assert needle in str(err.value), str(err.value)
    _one_line(str(err.value), 300)


def test_a_header_of_many_small_values_is_refused_without_a_copy_of_it() -> None:
    """A model file's header of 8 MiB listing 120,000 empty tensors (the fuzzer's largest allocation) is
    refused unparsed for its commas, but counting the commas outside strings removed the strings with
    re.sub, which built a copy from one piece per string: 46 MB of Python objects for the 7.9 MB header
    (54 MB in all), to refuse it. They are now counted in place."""
    import json
    import tracemalloc

    from swarmbase.safejson import loads

    text = json.dumps({f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(15_000)})
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="^holds more than 49216 values$"):
            loads(text, max_depth=3, max_items=49216)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(text) // 10, (peak, len(text))  # was about 6 times len(text)
    assert loads('[1, "a,b,c", 2]', max_depth=1, max_items=4) == [1, "a,b,c", 2]  # commas in a string are no values


def test_a_header_of_many_strings_is_counted_without_a_python_step_per_string() -> None:
    """Review of 40b9cec: counting in place stepped in Python from one string to the next (a match and a
    str.count each), so 8 MiB of adjacent empty strings, and one string of 50,000 commas, which makes the
    count run, took 1.1 s to pass to the parser on a loaded 2-core machine (the copy-based count: 0.38 s
    and 35 MB), a CPU cost a peer's header can ask for again and again. The count now steps once per comma
    outside strings (fewer than the limit), each stretch between them matched by one possessive regex in C:
    0.16 s there, nothing allocated. Counted here as the C functions the count calls (sys.setprofile),
    which do not depend on the machine's speed."""
    import sys
    import tracemalloc

    from swarmbase.safejson import _commas_outside_strings

    calls = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            calls[0] += 1

    for text, outside in (('"' + "," * 50_000 + '"' + '""' * 100_000, 0),  # adjacent empty strings
                          ('"' + "," * 50_000 + '"' + '"" ' * 100_000, 0),
                          ("[" + ", ".join(["1"] * 100) + ' "a,b"' * 100_000 + "]", 99)):  # commas in strings
        calls[0], previous = 0, sys.getprofile()
        sys.setprofile(profile)
        try:
            count = _commas_outside_strings(text, stop=49216)
        finally:
            sys.setprofile(previous)
        assert count == outside
        assert calls[0] < 500, calls[0]  # two per comma outside strings: 200 at most here; was one or two per string
    big = '"' + "," * 50_000 + '"' + '""' * (4 * 1024 * 1024)
    tracemalloc.start()
    try:
        assert _commas_outside_strings(big, stop=49216) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100_000, peak  # a plain * over the strings kept state to backtrack to: about 1.9 GB



def test_a_neighbour_file_whose_name_is_not_utf8_is_named_with_its_bytes_escaped(tmp_path: Path) -> None:
    """``fol personalize --neighbors`` on a folder holding a model file named ``b'\\xfe.safetensors'`` (a name
    that is not UTF-8, which Python gives with a lone surrogate) ended in a UnicodeEncodeError traceback: the
    round's seed hashes the neighbour's name as UTF-8. Names are now taken with such bytes escaped, as
    ``fol model import`` records a file's name."""
    import os

    from fol.checkpoint import save_model
    from fol.models import ModelSpec, build_model
    from fol.personalize_cli import scan_neighbours

    spec = ModelSpec("cnn", 2, in_channels=1, input_size=4, options={"widths": [2], "hidden": 0})
    save_model(tmp_path / os.fsdecode(b"\xfe.safetensors"), build_model(spec, seed=0), spec=spec, class_names=["a", "b"])
    (tmp_path / os.fsdecode(b"bad\xfd.safetensors")).write_bytes(b"junk")
    received, skipped = scan_neighbours(tmp_path)
    assert [r.name for r in received] == ["\\udcfe"]
    assert [s["file"] for s in skipped] == ["bad\\udcfd.safetensors"]
    for text in [r.name for r in received] + [s["file"] for s in skipped]:
        text.encode()  # what the round's seed and its report take


@pytest.mark.parametrize("round_", [10**4000, 10**6 + 1])
def test_a_model_card_of_a_round_past_the_agents_bound_is_refused_in_one_short_line(
        round_: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model card's round had no upper bound in the loader (the agent's OFFER has one, MAX_ROUND): a file
    whose card says round 10**4000, its digest right, loaded, and ``fol personalize --model`` wrote the whole
    number twice into its 'is the model of round N' refusal (8,200 characters). The loader now refuses a
    round over MAX_ROUND, the OFFER's bound, in one line with the number shown cut."""
    import json

    from safetensors.torch import save

    from fol.agent import protocol
    from fol.checkpoint import ModelCard, load_model, model_digest
    from fol.cli import main
    from fol.defaults import MAX_ROUND
    from fol.errors import CheckpointError
    from fol.models import ModelSpec, build_model

    assert protocol.MAX_ROUND is MAX_ROUND  # one bound: the OFFER's and the card's
    spec = ModelSpec("cnn-small", num_classes=2)
    tensors = {k: v.contiguous() for k, v in build_model(spec, seed=0).state_dict().items()}
    card = ModelCard(spec, ["a", "b"], producer="peer", round=MAX_ROUND).to_dict()  # the largest: taken
    card["sha256"] = model_digest(card, tensors)
    (tmp_path / "last.safetensors").write_bytes(save(tensors, metadata={"fol": json.dumps(card)}))
    assert load_model(tmp_path / "last.safetensors").card.round == MAX_ROUND
    card["round"] = round_
    card["sha256"] = model_digest(card, tensors)
    model = tmp_path / "m.safetensors"
    model.write_bytes(save(tensors, metadata={"fol": json.dumps(card)}))
    with pytest.raises(CheckpointError, match=r"model card field 'round' must be an integer in \[0, 1,000,000\], "
                                              r"got ") as err:
        load_model(model)
    _one_line(str(err.value), 300)
    rc = main(["personalize", "--model", str(model), "--data", "dataset=no-such-dataset",
               "--neighbors", str(tmp_path), "--out", str(tmp_path / "out")])
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err_lines) == 1, err_lines
    assert "model card field 'round' must be an integer in [0, 1,000,000]" in err_lines[0], err_lines
    _one_line(err_lines[0], 400)
    assert not (tmp_path / "out").exists()


def test_two_neighbour_files_whose_names_are_one_once_escaped_are_not_both_read(tmp_path: Path) -> None:
    """Review of d20d067: escaping the bytes of a name that are not UTF-8 made b'n\\xff.safetensors' and a
    file named 'n\\udcff.safetensors' (a backslash, then 'udcff') one name, 'n\\udcff': both were received
    under it, drew the same fine-tuning seed, and the round's report, summary and ensemble listed two
    candidates of that name (the summary gave both the weight of one; with align_fallback = "received" the
    round ended in a ValueError traceback). The later file is now skipped unread, naming why."""
    import os

    from fol.checkpoint import save_model
    from fol.models import ModelSpec, build_model
    from fol.personalize_cli import scan_neighbours

    spec = ModelSpec("cnn", 2, in_channels=1, input_size=4, options={"widths": [2], "hidden": 0})
    for seed, name in enumerate([os.fsdecode(b"n\xff.safetensors"), "n\\udcff.safetensors"]):
        save_model(tmp_path / name, build_model(spec, seed=seed), spec=spec, class_names=["a", "b"])
    received, skipped = scan_neighbours(tmp_path)
    assert [r.name for r in received] == ["n\\udcff"]
    assert [s["file"] for s in skipped] == ["n\\udcff.safetensors"]
    assert "is that of a model read before it; rename one of them" in skipped[0]["reason"]


def test_an_agent_state_of_round_true_is_refused() -> None:
    """Review of today's fuzzing: the agent's state.json took ``"round": true`` as round 1 (bool is an int in
    Python), where every other integer field a peer or a file gives refuses a boolean."""
    from fol.agent.inbox import AgentState

    doc = {**AgentState("a").to_dict(), "round": 1}
    assert AgentState.from_dict(doc, "state.json").round == 1
    with pytest.raises(ConfigError, match=r"^state\.json: field 'round' must be a positive integer, got true$"):
        AgentState.from_dict({**doc, "round": True}, "state.json")


# ------------------------------------------------------------------ orbit readers (orbits/)

@pytest.mark.parametrize("reader, name, text, says", [
    ("read_tle", "shell.tle", "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537\n",
     "TLE line 2 without a preceding line 1"),
    ("read_omm", "gp.json", '[{"EPOCH": "soon"}]', "record 0.EPOCH: expected an ISO-8601 UTC time"),
    ("read_omm", "gp.csv", "EPOCH,MEAN_MOTION\n2026-08-01T00:00:00,fast\n", "2.MEAN_MOTION: expected a number"),
    ("read_omm", "gp.xml", "<ndm><omm", "invalid XML"),
    ("read_omm", "gp.kvn", "CCSDS_OMM_VERS = 2.0\nnot a key\n", ":2: expected a 'KEY = value' line"),
    ("read_oem", "iss.oem", "hello\n", ":1: "),
    ("read_oem", "iss.xml", '<?xml version="1.0"?>\n<!DOCTYPE oem>\n<oem/>\n', ":2: a document type declaration"),
    ("read_iers_finals", "finals.all", "x" * 200 + "\n", ":1: "),
    ("read_tle", "latin1.tle", b"\xff\xfe", "not a UTF-8 text file; expected a TLE file"),
])
def test_an_orbit_reader_names_a_file_of_a_long_path_in_one_short_line(tmp_path: Path, reader: str, name: str,
                                                                       text: str | bytes, says: str) -> None:
    """The TLE, OMM, OEM and IERS readers named the file in their refusals by its whole path, which may reach
    4,096 characters: a line of several kB. They name it as swarmbase.tomlcheck.brief writes it (cut past 200
    characters), the rest of the message as it was."""
    import orbits

    folder = tmp_path
    for level in range(5):  # five folders of 200-character names: a path of more than 1,000
        folder = folder / (f"{level}-" + "d" * 198)
    folder.mkdir(parents=True)
    path = folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert len(str(path)) > 1000
    with pytest.raises(orbits.OrbitError) as info:
        getattr(orbits, reader)(path)
    message = str(info.value)
    _one_line(message)  # the path alone was over 1,000 characters
    assert says in message and "d" * 300 not in message and message.startswith(repr(str(path)[:150])[:-1]), message


# ------------------------------------------------------------------ drone flight files (contact_sim/missions.py, tracks.py)

def _survey_plan(path: Path, copies: int) -> Path:
    """A .plan of ``copies`` of one survey saved without its waypoints: a 200 m square, transects 10 m apart
    and a second pass across them, 80 waypoints each computed."""
    import json

    square = [[47.0, 8.0], [47.0018, 8.0], [47.0018, 8.00263], [47.0, 8.00263]]
    survey = {"type": "ComplexItem", "complexItemType": "survey", "version": 3, "polygon": square,
              "grid": {"altitude": 50, "relativeAltitude": True, "angle": 0, "spacing": 10.0, "turnAroundDistance": 0},
              "refly90Degrees": True}
    path.write_text(json.dumps({"fileType": "Plan", "mission": {"plannedHomePosition": [47.0, 8.0, 400.0],
                                                                "hoverSpeed": 5, "items": [survey] * copies}}))
    return path


def test_copies_of_a_survey_cannot_ask_for_more_waypoints_than_a_mission_holds(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each survey saved without its waypoints is computed, up to 10,000 transects a pass; copies of one had no
    limit in all: 50 copies of a survey of 0.5 m spacing (20 kB) computed 1,000,401 waypoints in 33 s and
    637 MB, and a plan within the size limit could ask for a billion. A mission's items, computed waypoints
    counted as they are computed, stop at missions.MAX_MISSION_ITEMS (lowered here to keep the test fast)."""
    from contact_sim import missions

    assert missions.MAX_MISSION_ITEMS >= 65_535  # what MAVLink can upload is never refused
    monkeypatch.setattr(missions, "MAX_MISSION_ITEMS", 1_000, raising=False)
    _, targets = missions.read_mission(_survey_plan(tmp_path / "twelve.plan", 12), 5.0)
    assert len(targets) == 1 + 12 * 80  # 960 waypoints: flown
    path = _survey_plan(tmp_path / "thirteen.plan", 13)
    with pytest.raises(ContactError) as info:
        missions.read_mission(path, 5.0)
    _one_line(str(info.value))
    assert str(info.value) == (f"{path}: mission.items[12] (transect 21): the mission holds more than 1,000 items, "
                               "counting the waypoints computed for its surveys and corridor scans (MAVLink uploads "
                               "at most 65,535)")
    lines = "".join(f"{k}\t0\t3\t16\t0\t0\t0\t0\t47.0\t8.0\t50\t1\n" for k in range(1, 1_002))
    wpl = tmp_path / "many.waypoints"
    wpl.write_text("QGC WPL 110\n0\t1\t0\t16\t0\t0\t0\t0\t47.0\t8.0\t400\t1\n" + lines)
    with pytest.raises(ContactError, match=r"many\.waypoints: line 1003: the mission holds more than 1,000 items"):
        missions.read_mission(wpl, 5.0)


@pytest.mark.parametrize("name, data, says", [
    ("alpha.plan", b'{"fileType": "Plan"}', "not a QGroundControl plan"),
    ("alpha.plan", b'{"fileType": "Plan", "mission": {"plannedHomePosition": [47, 8, 400], "items": [{"type": "SimpleItem", '
                   b'"command": 16, "frame": 3, "params": [0, 0, 0, 0, 95, 8, 50]}]}}',
     "mission.items[0]: expected latitude -90..90"),
    ("alpha.waypoints", b"QGC WPL 110\n0\t1\t0\t16\n", ":2: expected 12 tab-separated fields"),
    ("alpha.gpx", b"<gpx", "invalid XML"),
    ("positions.jsonl", b"[1]\n", ":1: expected a JSON object"),
    ("alpha.tlog", b"\x00" * 8 + b"\x01" * 20, "message 0 (byte 0): expected a MAVLink packet"),
    ("alpha.bin", b"\x00\x01\x02", "message 0 (byte 0): expected a DataFlash message"),
    ("wp.csv", b"node_id,t_s\n", ":1: expected header node_id,t_s,x_km,y_km,z_km"),
])
def test_a_flight_file_reader_names_a_file_of_a_long_path_in_one_short_line(tmp_path: Path, name: str, data: bytes,
                                                                           says: str) -> None:
    """The mission, track and waypoint CSV readers named the file by its whole path, which may reach 4,096
    characters: one line of several kB (1,081 to 1,174 characters here). They name it as
    swarmbase.tomlcheck.brief writes it, as the orbit readers and their own 'not found' line do."""
    from contact_sim.missions import read_missions

    folder = tmp_path
    for level in range(5):  # five folders of 200-character names: a path of more than 1,000
        folder = folder / (f"{level}-" + "d" * 198)
    folder.mkdir(parents=True)
    path = folder / name
    path.write_bytes(data)
    assert len(str(path)) > 1000
    with pytest.raises(ContactError) as info:
        read_waypoints_csv(path) if name.endswith(".csv") else read_missions([path], None, 5.0)
    message = str(info.value)
    _one_line(message)
    assert says in message and "d" * 300 not in message and message.startswith(repr(str(path)[:150])[:-1]), message


_GPX_POINT = '<trkpt lat="{lat}" lon="8.0"><ele>{ele}</ele><time>2025-06-01T10:00:{s:02d}Z</time></trkpt>'


@pytest.mark.parametrize("name, text, says", [
    ("alpha.gpx", "lat", "line 1 (trk 0, trkseg 0, trkpt 1): expected numbers lat and lon, got '4\U0001d7df.001'"),
    ("alpha.gpx", "ele", "line 1 (trk 0, trkseg 0, trkpt 1): <ele> must be a number of metres, got '4_10'"),
    ("alpha.waypoints", "lat", ":3: p1..p4, lat, lon, alt must be numbers"),
    ("alpha.waypoints", "command", ":3: frame and command must be integers"),
    ("wp.csv", "x_km", ":3: t_s, x_km, y_km, z_km must be numbers"),
])
def test_a_flight_file_number_in_another_scripts_digits_or_with_underscores_is_refused(tmp_path: Path, name: str,
                                                                                      text: str, says: str) -> None:
    """float() and int() read '1_000' and every script's digits as numbers: a GPX point at lat '4𝟟.001' was
    flown at 47.001, an <ele> of '4_10' at 410 m, a .waypoints command '2_2' was a takeoff (22) and a waypoint
    CSV's x_km '١' (Arabic-Indic one) was 1 km. The text flight files' numbers are now read by
    swarmbase.tomlcheck.decimal_number (ASCII digits; nan and inf as C writes them) and their integers checked by
    is_decimal, as the orbit readers' are."""
    from contact_sim.missions import read_missions

    path = tmp_path / name
    if name.endswith(".gpx"):
        lat, ele = ("4\U0001d7df.001", "410") if text == "lat" else ("47.001", "4_10")
        path.write_text('<gpx xmlns="http://www.topografix.com/GPX/1/1"><trk><trkseg>'
                        + _GPX_POINT.format(lat=47.0, ele=400, s=0) + _GPX_POINT.format(lat=lat, ele=ele, s=10)
                        + "</trkseg></trk></gpx>")
    elif name.endswith(".waypoints"):
        command, lat = ("2_2", "47.0") if text == "command" else ("16", "4\u0667.001")  # Arabic-Indic seven
        path.write_text(f"QGC WPL 110\n0\t1\t0\t16\t0\t0\t0\t0\t47.0\t8.0\t400\t1\n"
                        f"1\t0\t3\t{command}\t0\t0\t0\t0\t{lat}\t8.0\t50\t1\n")
    else:
        path.write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\na,10,\u0661,0,0.1\n")
    with pytest.raises(ContactError) as info:
        read_waypoints_csv(path) if name.endswith(".csv") else read_missions([path], None, 5.0)
    _one_line(str(info.value))
    assert str(info.value).startswith(str(path)) and says in str(info.value), str(info.value)


# ------------------------------------------------------------------ image loaders (fol/data/loaders.py)

def _png(width: int, height: int, rows: bytes, colour_type: int = 2) -> bytearray:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return bytearray(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
                     + chunk(b"IEND", b""))


def test_a_png_whose_idat_chunk_claims_4_gib_is_read_without_asking_for_them(tmp_path: Path) -> None:
    """A 69-byte PNG whose IDAT chunk's length says 0xFFFFFFF0 (the pixels all there): Pillow reads the rest of
    the chunk in one read of that length once the pixels are decoded, and Python makes the 4 GiB it asks for
    before reading (tracemalloc's peak was 4,096 MiB; a MemoryError on a companion computer of less memory).
    The image file is read through a reader that asks for no more than the file holds."""
    import struct
    import tracemalloc

    from fol.data.loaders import read_image
    from fol.errors import DataError

    png = _png(4, 4, b"".join(b"\0" + bytes([40, 80, 120]) * 4 for _ in range(4)))
    struct.pack_into(">I", png, png.find(b"IDAT") - 4, 0xFFFFFFF0)
    path = tmp_path / "a.png"
    path.write_bytes(png)
    tracemalloc.start()
    try:
        pixels = read_image(path, 8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak / 2**20:,.0f} MiB for a {len(png)}-byte file"
    assert pixels.shape == (3, 8, 8) and pixels[:, 0, 0].tolist() == [40, 80, 120]
    path.write_bytes(b"hello")  # Pillow names the file it cannot identify by that reader: as it names a path
    with pytest.raises(DataError, match=r"cannot identify image file '.*a\.png'\)$"):
        read_image(path, 8)


def _tiff(entries: list[tuple[int, int, int | tuple[int, ...]]], data: bytes) -> bytes:
    """A little-endian TIFF of ``data`` and one directory of ``(tag, type, value or values)`` entries
    (SHORT or LONG), values that do not fit in an entry stored after the directory."""
    import struct

    head = b"II*\0" + struct.pack("<I", 8 + len(data)) + data
    after = 8 + len(data) + 2 + 12 * len(entries) + 4  # where values stored apart begin
    body, apart = b"", b""
    for tag, kind, value in sorted(entries):
        values = value if isinstance(value, tuple) else (value,)
        packed = struct.pack(f"<{len(values)}{'H' if kind == 3 else 'I'}", *values)
        if len(packed) > 4:
            packed, apart = struct.pack("<I", after + len(apart)), apart + packed
        body += struct.pack("<HHI", tag, kind, len(values)) + packed.ljust(4, b"\0")
    return head + struct.pack("<H", len(entries)) + body + b"\0\0\0\0" + apart


def test_a_tiff_of_tiles_larger_than_an_image_may_be_is_refused_before_a_tile_is_decoded(tmp_path: Path) -> None:
    """A 2.9 kB TIFF of 13 x 24 pixels whose TileWidth said 50,331,664 (a mutant of a tiled LZMA TIFF) took
    1.5 GB: the image passed the pixel limit, and Pillow's libtiff decoder makes a buffer of a whole tile.
    Tiles over the pixel limit are refused from the tags, in one line naming the file; here 16 x 8,388,608
    (it was read, with a buffer of 134 MB)."""
    import zlib

    from fol.data.loaders import MAX_IMAGE_PIXELS, read_image
    from fol.errors import DataError

    tile = zlib.compress(bytes(16 * (1 << 23)))
    short, long_ = 3, 4
    path = tmp_path / "tiles.tif"
    path.write_bytes(_tiff([(256, long_, 13), (257, long_, 24), (258, short, 8), (259, short, 8), (262, short, 1),
                            (277, short, 1), (322, long_, 16), (323, long_, 1 << 23), (324, long_, 8),
                            (325, long_, len(tile))], tile))
    assert 16 << 23 > MAX_IMAGE_PIXELS
    with pytest.raises(DataError) as info:
        read_image(path, 8)
    message = str(info.value)
    _one_line(message)
    assert message.startswith(f"{path}: TIFF tiles of 16 x 8,388,608 pixels, more than the"), message


def test_a_tiff_of_many_bit_counts_pillow_cannot_open_is_refused_in_one_short_line(tmp_path: Path) -> None:
    """A TIFF Pillow cannot open is refused naming its bands and their bits, every distinct count joined by '/':
    a mutant whose BitsPerSample held 154 different counts was refused in 890 characters. More than 4 are
    written as their range and number."""
    from fol.data.loaders import read_image
    from fol.errors import DataError

    short, long_ = 3, 4
    path = tmp_path / "bits.tif"
    path.write_bytes(_tiff([(256, long_, 4), (257, long_, 4), (258, short, tuple(range(1, 301))), (259, short, 1),
                            (262, short, 1), (273, long_, 8), (277, short, 300), (279, long_, 16)], bytes(16)))
    with pytest.raises(DataError) as info:
        read_image(path, 8)
    message = str(info.value)
    _one_line(message, 400)
    assert message.startswith(f"{path}: a TIFF of 300 bands of 1..300 bits (300 different), which cannot be read"), \
        message


@pytest.mark.parametrize("codec", ["WEBP", "PNG"])
def test_a_tiff_strip_of_an_image_codec_is_refused_with_bands_before_it_is_decoded(tmp_path: Path, codec: str
                                                                                   ) -> None:
    """A 16 x 16 TIFF whose one strip is a WebP or PNG image of 3,000 x 3,000 pixels: imagecodecs decodes
    the size the codec's own header gives (tifffile hands it no output size), then tifffile refuses a strip
    that 'cannot be reshaped'; a 156-byte WebP strip of 16,383 x 16,383 took 1.4 GB. Under bands, a TIFF of
    an image codec is refused from its compression tag, in one line naming the file, before a strip is read."""
    import io

    import numpy as np
    from PIL import Image

    from fol.data.loaders import _read_image_and_place
    from fol.errors import DataError

    pytest.importorskip("tifffile")
    strip = io.BytesIO()
    Image.fromarray(np.zeros((3000, 3000, 3), np.uint8)).save(strip, codec, **({"lossless": True} if codec == "WEBP" else {}))
    path = tmp_path / "bomb.tif"
    one_segment_tiff(path, 16, strip.getvalue(), 50001 if codec == "WEBP" else 34933, bits=8, samples=3)
    caught: list[str] = []

    def read() -> None:
        with pytest.raises(DataError) as info:
            _read_image_and_place(path, 32, None, (1, 2, 3))
        caught.append(str(info.value))

    peak = traced_peak(read)
    assert caught[0].startswith(f"{path}: a TIFF compressed with {codec} (tag 259 = ")
    assert "which bands does not read: save it uncompressed or compressed with Deflate, JPEG, LZMA, LZW, " \
           "PackBits or ZSTD" in caught[0]
    _one_line(caught[0])
    assert peak < 4 << 20  # 27 MB of pixels decoded before


def test_a_jpeg_tiff_strip_whose_frame_is_larger_than_the_strip_is_refused_before_it_is_decoded(tmp_path: Path
                                                                                                ) -> None:
    """A 16 x 16 JPEG-compressed TIFF (compression 7) whose one strip is a JPEG of 3,000 x 3,000 pixels:
    libjpeg decodes the frame its SOF header gives (the fuzzer's 1.7 MB strip of 12,000 x 12,000, 141 MB),
    and the image was read. Each strip's frame header is read first: a frame larger than the strip is refused
    in one line naming the file; a JPEG TIFF as tifffile writes it is read."""
    import io

    import numpy as np
    from PIL import Image

    from fol.data.loaders import _read_image_and_place
    from fol.errors import DataError

    tifffile = pytest.importorskip("tifffile")
    pytest.importorskip("imagecodecs")
    strip = io.BytesIO()
    Image.fromarray(np.zeros((3000, 3000), np.uint8)).save(strip, "JPEG")
    path = tmp_path / "bomb.tif"
    one_segment_tiff(path, 16, strip.getvalue(), 7, bits=8)
    caught: list[str] = []

    def read() -> None:
        with pytest.raises(DataError) as info:
            _read_image_and_place(path, 32, None, (1, 1, 1))
        caught.append(str(info.value))

    peak = traced_peak(read)
    assert caught[0] == (f"{path}: a JPEG strip of 3,000 x 3,000 pixels of 1 component (9,000,000 bytes decoded), "
                         f"more than the 256 bytes its tags say it holds (a decompression bomb, or a damaged file)")
    assert peak < 4 << 20
    rgb = np.random.default_rng(0).integers(0, 256, (40, 24, 3), dtype=np.uint8)
    for tile in (None, (16, 16)):
        good = tmp_path / f"good-{tile}.tif"
        tifffile.imwrite(good, rgb, compression="jpeg", photometric="rgb", tile=tile, rowsperstrip=8)
        arr, _ = _read_image_and_place(good, 8, None, (1, 2, 3))
        assert arr.shape == (3, 8, 8) and abs(float(arr.mean()) - float(rgb.mean())) < 20


def test_an_old_style_jpeg_tiff_is_read_with_bands_and_its_frame_bounded(tmp_path: Path) -> None:
    """An old-style JPEG TIFF (compression 6: scanners and older software wrote it) whose one strip is a whole
    JPEG stream, as tifffile decodes it: read with bands before the compressions were listed, then refused
    as 'a TIFF compressed with OJPEG ..., which bands does not read' (Pillow, without bands, reads it). It is
    read again, and its strip's frame header is bounded by the strip as a JPEG TIFF's (compression 7) is."""
    import io

    import numpy as np
    from PIL import Image

    from fol.data.loaders import _read_image_and_place
    from fol.errors import DataError

    pytest.importorskip("tifffile")
    pytest.importorskip("imagecodecs")
    rgb = np.zeros((48, 48, 3), np.uint8)
    rgb[..., 0], rgb[:, 24:, 1] = 200, 150  # red, yellow on the right
    strip = io.BytesIO()
    Image.fromarray(rgb).save(strip, "JPEG", quality=95)
    path = tmp_path / "ojpeg.tif"
    one_segment_tiff(path, 48, strip.getvalue(), 6, bits=8, samples=3)
    arr, _ = _read_image_and_place(path, 8, None, (1, 2, 3))
    assert arr.shape == (3, 8, 8)
    assert abs(int(arr[0, 4, 1]) - 200) < 8 and int(arr[1, 4, 1]) < 8 and abs(int(arr[1, 4, 6]) - 150) < 8
    bomb = io.BytesIO()
    Image.fromarray(np.zeros((3000, 3000), np.uint8)).save(bomb, "JPEG")
    one_segment_tiff(path, 16, bomb.getvalue(), 6, bits=8)
    with pytest.raises(DataError) as info:
        _read_image_and_place(path, 32, None, (1, 1, 1))
    assert str(info.value) == (f"{path}: a JPEG strip of 3,000 x 3,000 pixels of 1 component (9,000,000 bytes "
                               f"decoded), more than the 256 bytes its tags say it holds (a decompression bomb, "
                               f"or a damaged file)")


@pytest.mark.parametrize("bands", [None, (1, 1, 1)])
def test_a_tiff_of_samples_per_pixel_0_is_refused_as_such(tmp_path: Path, bands: tuple[int, ...] | None) -> None:
    """A 16 x 16 TIFF whose SamplesPerPixel (tag 277) says 0: it was told to 'choose 3 of its bands with the
    dataset option bands' (a TIFF of 0 bands of 8 bits), and with bands that 'bands 1/1/1 name band 1, but this
    TIFF has 0 bands'. It has a line of its own, saying the tag is 0, with or without bands."""
    from fol.data.loaders import _read_image_and_place
    from fol.errors import DataError

    if bands is not None:
        pytest.importorskip("tifffile")
    path = tmp_path / "none.tif"
    one_segment_tiff(path, 16, bytes(256), 1, bits=8, samples=0)
    with pytest.raises(DataError) as info:
        _read_image_and_place(path, 32, None, bands)
    assert str(info.value) == f"{path}: a TIFF whose SamplesPerPixel (tag 277) is 0: it has no band to read (a damaged file)"


@pytest.mark.parametrize("case", ["not-an-image", "empty", "too-large", "float-out-of-range", "missing",
                                  "bands-not-tiff", "bands-webp", "bands-missing", "bands-past"])
def test_an_image_loader_names_a_file_of_a_long_path_in_one_short_line(tmp_path: Path, case: str) -> None:
    """The image loaders named the file by its whole path, and Pillow's or tifffile's message named it again
    (a path of 600 characters made a refusal of more than 800; of 1,000 here, up to 2,100). They name it as
    swarmbase.tomlcheck.brief writes it (cut past 200 characters), as the orbit and flight-file readers do,
    and leave the name out of the error they quote."""
    import warnings

    import numpy as np
    from PIL import Image

    from fol.data.loaders import _read_image_and_place
    from fol.errors import DataError

    if case.startswith("bands"):
        pytest.importorskip("tifffile")
    folder = tmp_path
    for level in range(5):  # five folders of 200-character names: a path of more than 1,000
        folder = folder / (f"{level}-" + "d" * 198)
    folder.mkdir(parents=True)
    path = folder / ("x.tif" if case.startswith("bands") else "x.png")
    if case == "not-an-image" or case == "bands-not-tiff":
        path.write_bytes(b"not an image at all")
    elif case == "empty":
        path.write_bytes(b"")
    elif case == "too-large":
        path.write_bytes(_png(10_000, 10_000, b""))
    elif case == "float-out-of-range":
        Image.fromarray(np.full((4, 4), 2.0, np.float32), mode="F").save(path, "TIFF")
    elif case == "bands-webp":
        one_segment_tiff(path, 16, b"RIFF", 50001, bits=8, samples=3)
    elif case == "bands-past":
        one_segment_tiff(path, 16, bytes(256), 1, bits=8)
    assert len(str(path)) > 1000
    with pytest.raises(DataError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # Pillow's, before the refusal
        _read_image_and_place(path, 32, None, (1, 2, 3) if case.startswith("bands") else None)
    message = str(info.value)
    _one_line(message)
    assert "d" * 300 not in message and message.startswith(repr(str(path)[:150])[:-1]), message


@pytest.mark.parametrize("bands", [None, (1, 2, 3)])
def test_an_image_loader_names_a_file_of_unprintable_characters_escaped(tmp_path: Path,
                                                                       bands: tuple[int, ...] | None) -> None:
    """A file named 'caf\\xe9\\n\\x1b[2J.png' (a byte that is not UTF-8, a newline and the terminal's 'clear
    screen'): its refusal wrote the name as it is, a line broken in two that cleared the terminal it was
    printed on, with a lone surrogate that a strict UTF-8 log cannot write. The name is escaped (as brief()
    writes it, as every line the tools print is escaped)."""
    import os

    from swarmbase.tomlcheck import brief

    from fol.data.loaders import _read_image_and_place
    from fol.errors import DataError

    if bands is not None:
        pytest.importorskip("tifffile")
    path = tmp_path / os.fsdecode(b"caf\xe9\n\x1b[2J.png")
    path.write_bytes(b"not an image")
    with pytest.raises(DataError) as info:
        _read_image_and_place(path, 32, None, bands)
    message = str(info.value)
    _one_line(message)
    assert "\x1b" not in message and message.startswith(brief(path) + ": cannot read "), message
    assert brief(path) == str(tmp_path) + "/caf\\udce9\\n\\x1b[2J.png", brief(path)  # each escaped once, unquoted
    message.encode("utf-8")  # no lone surrogate


@pytest.mark.parametrize("bands", [None, (1, 1, 1)])
def test_an_image_of_more_rows_than_an_image_may_have_is_refused_from_its_header(tmp_path: Path,
                                                                                bands: tuple[int, ...] | None) -> None:
    """A PNG (or TIFF) of 1 x 2,000,000 pixels, within the pixel limit: Pillow keeps 8 bytes for each row of an
    image besides its pixels, so that the fuzzer's 69-byte PNG of 1 x 89,000,000 took 3.5 GB (a MemoryError
    under a 2 GiB limit), and this one was read. More than MAX_IMAGE_ROWS rows is refused from the header."""
    import numpy as np

    from fol.data.loaders import _read_image_and_place
    from fol.errors import DataError

    path = tmp_path / ("tall.tif" if bands else "tall.png")
    if bands:
        tifffile = pytest.importorskip("tifffile")
        tifffile.imwrite(path, np.zeros((2_000_000, 1), np.uint8), compression="zlib")
    else:
        path.write_bytes(_png(1, 2_000_000, b"\0\0" * 2_000_000, colour_type=0))
    with pytest.raises(DataError) as info:
        _read_image_and_place(path, 32, None, bands)
    assert str(info.value).startswith(f"{path}: 1 x 2,000,000 pixels, more than the 1,048,576 rows an image "
                                      f"may have (each row of an image Pillow holds costs 8 bytes")
    _one_line(str(info.value))


@pytest.mark.parametrize("loop", [False, True])
def test_a_link_that_leads_nowhere_is_named_as_such_with_bands(tmp_path: Path, loop: bool) -> None:
    """A .tif link whose target does not exist, or two that lead to each other, read with bands: it was
    'cannot read TIFF (FileNotFoundError: ...)' (naming the target as if it were the file listed) or
    '(OSError: [Errno 40] Too many levels of symbolic links ...)'; read_image says what the link is."""
    from fol.data.loaders import _read_image_and_place
    from fol.errors import DataError

    pytest.importorskip("tifffile")
    path = tmp_path / "a.tif"
    if loop:
        (tmp_path / "b.tif").symlink_to(path)
        path.symlink_to(tmp_path / "b.tif")
    else:
        path.symlink_to(tmp_path / "gone.tif")
    with pytest.raises(DataError) as info:
        _read_image_and_place(path, 32, None, (1, 2, 3))
    target = tmp_path / ("b.tif" if loop else "gone.tif")
    assert str(info.value) == f"{path}: a link to {target}, which " + (
        "leads back to it (a loop of links)" if loop else "does not exist")


def test_skipped_images_are_named_escaped_and_cut_in_the_loaders_summary_lines(tmp_path: Path, caplog) -> None:
    """With skip_corrupt, the line saying none of the images could be read and the warning listing the
    skipped ones named them as they are: 'caf\\xe9\\n\\x1b[2J.png' broke the line in two and cleared the
    terminal (a524c12 escaped it in each file's refusal, not there), and the warning wrote five names of up
    to the file system's 4,096 characters each. Both name them as the refusals do (brief)."""
    import logging
    import os

    import numpy as np
    from PIL import Image

    from fol.data.loaders import _read_many
    from fol.errors import DataError
    from swarmbase.tomlcheck import brief

    odd = tmp_path / os.fsdecode(b"caf\xe9\n\x1b[2J.png")
    long = tmp_path / ("x" * 250 + ".png")
    for path in (odd, long):
        path.write_bytes(b"not an image")
    good = tmp_path / "good.png"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(good)
    with pytest.raises(DataError) as info:
        _read_many([odd], 8, True, 1, "train")
    message = str(info.value)
    _one_line(message)
    assert "\x1b" not in message and f"(e.g. {brief(odd)});" in message, message
    message.encode("utf-8")  # no lone surrogate
    with caplog.at_level(logging.WARNING, logger="fol.data.loaders"):
        _, ok, _ = _read_many([odd, long, good], 8, True, 1, "train")
    assert ok.tolist() == [False, False, True]
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 1, caplog.records
    _one_line(skipped[0], 500)
    assert "\x1b" not in skipped[0] and "x" * 250 not in skipped[0] and brief(odd) in skipped[0], skipped


# ------------------------------------------------------------------ agent wire (fol/agent/: protocol, transfer, inbox)

_HISTORY_ENTRY = {"round": 1, "trigger": "quorum", "model": "models/round-1.safetensors",
                  "report": "reports/round-1.json", "received": [], "used": ["drone-1"], "kept_local": True,
                  "accuracy_line": "", "time": 0.0}


@pytest.mark.parametrize("entry, needle", [
    ({}, "field 'history' entry 0: 'round' must be an integer, got None"),
    ({**_HISTORY_ENTRY, "round": True}, "'round' must be an integer, got true"),
    ({k: v for k, v in _HISTORY_ENTRY.items() if k != "trigger"}, "'trigger' must be a string, got None"),
    ({**_HISTORY_ENTRY, "used": "drone-1"}, "'used' must be a list of strings, got 'drone-1'"),
    ({**_HISTORY_ENTRY, "used": [1]}, "'used' must be a list of strings, got [1]"),
    ({**_HISTORY_ENTRY, "report": 5}, "'report' must be a string, got 5"),
])
def test_an_agent_state_whose_history_entry_lacks_a_field_is_refused_in_one_line(entry: dict, needle: str) -> None:
    """Review while fuzzing the agent's receiving side: state.json's history had to be a list of objects, but
    their fields were not checked, so an entry without 'round', 'trigger', 'model' or 'used' (or 'used' not a
    list of names) started the agent and then made 'fol agent ctl status' stop with a KeyError or TypeError
    traceback in fol.agent.cli.format_status (and the loopback exchange read 'report' the same way). The
    fields every agent writes are now checked when the state is read, as the records' are."""
    from fol.agent.cli import format_status
    from fol.agent.inbox import AgentState

    doc = {**AgentState("a").to_dict(), "round": 2, "history": [_HISTORY_ENTRY]}
    state = AgentState.from_dict(doc, "state.json")
    status = {"node": "a", "pid": 1, "listen": "tcp://127.0.0.1:1", "round": 2, "rounds": 3, "finished": False,
              "personalizing": False, "current_model": "", "received_this_round": [], "expected_models": 1,
              "inbox": 0, "trusted_peers": [], "incoming": [], "outbox": [], "history": state.history}
    assert "round 1 (quorum): used drone-1 -> models/round-1.safetensors" in format_status(status)
    with pytest.raises(ConfigError, match=r"^state\.json: field 'history' entry 0: ") as err:
        AgentState.from_dict({**doc, "history": [entry]}, "state.json")
    assert needle in str(err.value), str(err.value)
    _one_line(str(err.value), 300)


def test_the_agent_status_shows_the_state_files_names_escaped() -> None:
    """fol agent ctl status printed the state's paths and names as state.json holds them: a history entry's
    model inside the state folder (allowed) named with a newline and a terminal escape, or its
    accuracy_line, split the status into forged lines and cleared the terminal; a tab or a no-break space
    showed as blank. Each line is now escaped as every line the tools print is (printable), so the names
    show as brief() shows them elsewhere."""
    from fol.agent.cli import format_status
    from fol.agent.inbox import AgentState
    from swarmbase.tomlcheck import brief

    model = "models/round-1\n\x1b[2J\t\xa0.safetensors"
    entry = {**_HISTORY_ENTRY, "model": model, "accuracy_line": "val 1 %\nforged line"}
    doc = {**AgentState("a").to_dict(), "round": 2, "history": [entry],
           "current_model": model}
    state = AgentState.from_dict(doc, "state.json")
    status = {"node": "a", "pid": 1, "listen": "tcp://127.0.0.1:1", "round": 2, "rounds": 3, "finished": False,
              "personalizing": False, "current_model": state.current_model, "received_this_round": [],
              "expected_models": 1, "inbox": 0, "trusted_peers": [], "incoming": [], "outbox": [],
              "history": state.history}
    lines = format_status(status).splitlines()
    assert len(lines) == 6 and all(line.isprintable() for line in lines), lines
    assert lines[2] == f"current model: {brief(model)}", lines
    assert lines[-1] == f"  round 1 (quorum): used drone-1 -> {brief(model)} val 1 %\\nforged line", lines


def test_an_agent_state_of_another_long_node_name_is_refused_in_one_short_line(tmp_path: Path) -> None:
    """A mutation fuzzer of the agent's receiving side (its state.json mutations): a state whose 'node' is
    70,000 characters was refused with the whole name quoted, a line of 70,100 characters. It is now shown
    cut, as every other field of the state is."""
    import json

    from fol.agent.inbox import Inbox

    Inbox(tmp_path, "receiver", 10**6).save()
    doc = json.loads((tmp_path / "state.json").read_text())
    (tmp_path / "state.json").write_text(json.dumps({**doc, "node": "x" * 70_000 + "\n"}))
    with pytest.raises(ConfigError, match=r"state\.json: state belongs to node 'xxx.*\.\.\., this agent is 'receiver'$"
                       ) as err:
        Inbox(tmp_path, "receiver", 10**6)
    _one_line(str(err.value).replace(str(tmp_path), "<tmp>"), 200)


@pytest.mark.parametrize("edit, field, value", [
    (lambda d: d["history"][0].update(time=float("nan")), "history[0].time", "nan"),
    (lambda d: d["received"]["m"].update(arch=float("inf")), "received.m.arch", "inf"),
    (lambda d: d["outbox"]["p|m"].update(extra=[1.0, float("-inf")]), "outbox.p|m.extra[1]", "-inf"),
])
def test_an_agent_state_holding_nan_where_it_is_not_checked_is_refused_when_read(tmp_path: Path, edit: Any,
                                                                                 field: str, value: str) -> None:
    """A mutation fuzzer of the agent's receiving side (its state.json mutations): state.json is read with
    NaN and Infinity allowed (so that a checked field holding one is named), but a value the checks do not
    cover (a history entry's time, a received record's arch) was taken, and the agent's next save refused it
    (write_json_atomic writes JSON): Inbox.recover() stopped with a ValueError traceback, and every later
    save (each model received) failed. The state is now refused when read, in one line naming the field."""
    import json

    from fol.agent.inbox import Inbox

    inbox = Inbox(tmp_path, "receiver", 10**6)
    inbox.state.history.append(dict(_HISTORY_ENTRY))
    inbox.state.received["m"] = {"sender": "s", "round": 0, "sha256": "0" * 64, "size": 1,
                                 "file": "inbox/round-0/s.safetensors", "time": 0.0}
    inbox.state.outbox["p|m"] = {"peer": "p", "model_id": "m", "status": "pending", "detail": ""}
    inbox.save()
    doc = json.loads((tmp_path / "state.json").read_text())
    Inbox(tmp_path, "receiver", 10**6).save()  # as written: read and saved again
    edit(doc)
    (tmp_path / "state.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=r"state\.json: field ") as err:
        Inbox(tmp_path, "receiver", 10**6)
    assert f"field '{field}' is {value}; expected a finite number" in str(err.value), str(err.value)
    _one_line(str(err.value).replace(str(tmp_path), "<tmp>"), 200)


@pytest.mark.parametrize("value, shown_as", [("x", "'x'"), (None, "None"), (True, "true"), ([1], "[1]")])
def test_a_received_record_whose_time_is_no_number_is_refused_when_read(value: Any, shown_as: str) -> None:
    """Review while fuzzing the agent's receiving side: a received record's 'time' (when the model arrived)
    was not checked, and AgentState.received_for sorts a round's records by it: one record of a round with
    'time' a string (or null) and another with a number stopped received_for with a TypeError: 'ctl status'
    failed, and an on-board agent's loop, which checks its trigger every 50 ms, logged a traceback each time.
    It is now refused when read, in one line naming the record; a record without 'time' is still read (0)."""
    from fol.agent.inbox import AgentState

    def record(**time: Any) -> dict[str, Any]:
        return {"sender": "s", "round": 0, "sha256": "0" * 64, "size": 1, "file": "f", **time}

    doc = {**AgentState("a").to_dict()}
    state = AgentState.from_dict({**doc, "received": {"a": record(), "b": record(time=1.5)}}, "state.json")
    assert [r["model_id"] for r in state.received_for(0)] == ["a", "b"]
    with pytest.raises(ConfigError, match=rf"^state\.json: field 'received' entry 'a': 'time' must be a number of "
                                          rf"seconds, got {re.escape(shown_as)}$"):
        AgentState.from_dict({**doc, "received": {"a": record(time=value), "b": record(time=1.5)}}, "state.json")


def test_a_peers_long_model_id_is_echoed_and_kept_cut_to_128_characters(tmp_path: Path) -> None:
    """A mutation fuzzer of the agent's receiving side: a message from a key the node does not trust (or a
    FETCH, which a receiver does not take) naming a model id of 60,000 characters was answered with that id
    whole (a REJECT / ERROR of 60 kB back to the peer) and kept whole in the receiver's events, which 'fol
    agent ctl status --json' lists; an invalid OFFER's REJECT already cut it to 128 characters (the longest
    id), but not its event. Every reply and event now keeps at most 128 characters of it."""
    import json
    import time

    from fol.agent import protocol as P
    from fol.agent.inbox import Inbox
    from fol.agent.transfer import Receiver, ReceiverSettings

    class Socket:
        def __init__(self) -> None:
            self.sent: list[list[bytes]] = []

        def send_multipart(self, frames: list, flags: int = 0, copy: bool = True) -> None:
            self.sent.append([bytes(f) for f in frames])

    class KeyFrame(bytes):  # a frame with the User-Id property ZAP sets: the Z85 key of the connection
        def get(self, name: str) -> str:
            return "U" * 40

    class Trust:
        peers = {b"K" * 40: "sender"}

    receiver = Receiver(Socket(), Inbox(tmp_path, "receiver", 10**6, accept_any_round=True),  # type: ignore[arg-type]
                        ReceiverSettings(), Trust())  # type: ignore[arg-type]
    long_id = "x" * 60_000
    for kind in (P.OFFER, P.FETCH, P.CHUNK):
        frames = P.encode(kind, {"model_id": long_id, "offset": 0}, b"" if kind == P.CHUNK else None)
        receiver.handle([b"peer", KeyFrame(frames[0]), *frames[1:]], time.monotonic())
    receiver.trust = None  # the sender from the header: a trusted peer's FETCH and invalid OFFER
    for kind in (P.FETCH, P.OFFER):
        receiver.handle([b"peer", *P.encode(kind, {"sender": "sender", "model_id": long_id})], time.monotonic())
    replies = [json.loads(frames[3]) for frames in receiver.sock.sent]
    assert [r.get("model_id") for r in replies] == ["x" * 128] * 5, [len(r.get("model_id", "")) for r in replies]
    assert [len(e["model_id"]) for e in receiver.events] == [128] * 4  # 3 refused, the invalid offer


def test_a_received_record_of_a_missing_file_with_a_newline_is_dropped_in_one_line(tmp_path: Path, caplog) -> None:
    """A mutation fuzzer of the agent's receiving side (its state.json mutations): recovery drops a received
    record whose file is missing with a warning that wrote the record's id and file as they were in
    state.json, so a file 'a\\nb' (or a terminal escape) made the warning two lines: one forged in the
    agent's log. Both are now shown quoted and escaped, the file cut to 200 characters."""
    from fol.agent.inbox import Inbox

    inbox = Inbox(tmp_path, "receiver", 10**6, accept_any_round=True)
    inbox.state.received["m\n1"] = {"sender": "s", "round": 0, "sha256": "0" * 64, "size": 1,
                                    "file": "a\n2026-01-01 INFO forged\x1b[2J" + "x" * 220, "time": 0.0}
    inbox.save()
    caplog.set_level("WARNING", logger="fol.agent")
    notes = Inbox(tmp_path, "receiver", 10**6, accept_any_round=True).recover()
    assert len(notes) == 1 and notes[0].startswith("dropped 'm\\n1': 'a\\n2026-01-01 INFO forged\\x1b[2J"), notes
    assert notes[0].endswith("... is missing") and notes[0].isprintable() and len(notes[0]) < 300, notes[0]
    assert [r.getMessage() for r in caplog.records] == [f"receiver: recovery: {notes[0]}"]


@pytest.mark.parametrize("name", ["x" * 5000, "inbox/round-0/" + "y" * 300 + ".safetensors"])
def test_a_received_record_of_a_file_name_no_file_can_have_is_dropped_in_one_line(tmp_path: Path, caplog,
                                                                                   name: str) -> None:
    """Review: recovery checks that each received record's file is still there, and a state.json record
    whose 'file' is 5,000 characters (or has a part over the file system's 255 bytes) stopped the agent's
    start with an OSError traceback of 5 kB ([Errno 36] File name too long, the name whole). No file of such a name can be there: the record is dropped, as one whose file is
    missing, with one warning naming state.json's field and the name cut; the next start finds nothing."""
    from fol.agent.inbox import Inbox

    inbox = Inbox(tmp_path, "receiver", 10**6, accept_any_round=True)
    (tmp_path / "inbox" / "round-0").mkdir()
    inbox.state.received["m"] = {"sender": "s", "round": 0, "sha256": "0" * 64, "size": 1, "file": name, "time": 0.0}
    inbox.save()
    caplog.set_level("WARNING", logger="fol.agent")
    notes = Inbox(tmp_path, "receiver", 10**6, accept_any_round=True).recover()
    assert len(notes) == 1 and notes[0].startswith("dropped state.json field 'received' entry 'm': its 'file' "), notes
    assert notes[0].endswith("... names no file (File name too long)"), notes[0]
    _one_line(notes[0], 300)
    assert [r.getMessage() for r in caplog.records] == [f"receiver: recovery: {notes[0]}"]
    assert Inbox(tmp_path, "receiver", 10**6).state.received == {}
    assert Inbox(tmp_path, "receiver", 10**6).recover() == []


def test_a_received_record_whose_file_cannot_be_checked_stops_the_start_in_one_line(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """The file of a received record that cannot be checked for another reason than its name (a folder on
    its way that cannot be searched) may be there: the record is not dropped, the start stops in one line
    naming state.json's field, the name cut."""
    import errno

    from fol.agent.inbox import Inbox

    inbox = Inbox(tmp_path, "receiver", 10**6, accept_any_round=True)
    inbox.state.received["m"] = {"sender": "s", "round": 0, "sha256": "0" * 64, "size": 1, "file": "z" * 600,
                                 "time": 0.0}
    inbox.save()
    before = (tmp_path / "state.json").read_bytes()

    exists = Path.exists

    def denied(self: Path) -> bool:  # as root, a folder that cannot be searched is searched: the error made
        if self.name.startswith("zzz"):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return exists(self)

    inbox = Inbox(tmp_path, "receiver", 10**6, accept_any_round=True)
    monkeypatch.setattr(Path, "exists", denied)
    with pytest.raises(ConfigError) as err:
        inbox.recover()
    monkeypatch.undo()
    message = str(err.value).replace(str(tmp_path), "<tmp>")
    assert message.startswith("<tmp>/state.json: field 'received' entry 'm': 'file' 'zzz"), message
    assert message.endswith("... cannot be checked (Permission denied)"), message
    _one_line(message, 300)
    assert (tmp_path / "state.json").read_bytes() == before


# ------------------------------------------------------------------ run and state folders read back (fol/simulation, fol/personalize.py, fol/agent/keys.py)

def _leo_run_record(tmp_path: Path) -> Path:
    """A run folder as the tiny LEO run starts it: its record and its copy of the scenario (nothing trained)."""
    import json
    import tomllib

    from fol.simulation import parse_scenario

    from _scenarios import LEO

    out = tmp_path / "out"
    out.mkdir()
    record = parse_scenario(tomllib.loads(LEO), tmp_path, "tiny.toml").resolved()
    (out / "scenario.resolved.json").write_text(json.dumps(record))
    (out / "scenario.toml").write_text(LEO)
    (tmp_path / "tiny.toml").write_text(LEO)
    return out


def _tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: a link's target, 'dir', or a file's bytes, by relative path."""
    import os

    out = {}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = (f"link:{os.readlink(p)}" if p.is_symlink() else "dir" if p.is_dir()
                                           else p.read_bytes().hex() if p.is_file() else "special")
    return out


@pytest.mark.parametrize("where", ["state", "state/seed-0", "state/seed-0/results", "state/seed-0/pretrained"])
@pytest.mark.parametrize("kind", ["file", "broken link"])
def test_a_run_folder_whose_state_folder_is_not_a_folder_is_refused_by_the_check(
        where: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A mutation fuzzer of the run folders ``fol simulate`` leaves: with ``state/`` (or a seed's folder, its
    ``results/`` or ``pretrained/``) a file or a broken link, ``--check --resume`` said OK, and the resume
    computed the contacts, rewrote the record and then failed with 'state: File exists' (2.3 s in, a raw
    OSError line; minutes on a real swarm). It is now refused by the check, in one line naming the folder."""
    from fol.cli import main

    out = _leo_run_record(tmp_path)
    target = out / where
    target.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        target.write_text("x")
    else:
        target.symlink_to(tmp_path / "no-such-folder")
    before = _tree(out)
    for argv in (["simulate", "--resume", str(out), "--check"],
                 ["simulate", str(tmp_path / "tiny.toml"), "--resume", str(out), "--check"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--resume {out}: {target} is not a folder" in err[0], err
        _one_line(err[0], 400)
    assert _tree(out) == before


def test_run_json_files_are_read_only_as_regular_files_of_bounded_size(tmp_path: Path, monkeypatch) -> None:
    """The fuzzer's ``scenario.resolved.json`` linked to ``/dev/urandom`` took 23 s and 1.7 GiB before a
    MemoryError traceback (read whole, unbounded), a sparse file of 3 GiB a MemoryError under a 2 GiB
    limit, and a FIFO blocked ``--resume`` for ever. A run folder's JSON files are now read as regular files
    of at most MAX_RUN_JSON_BYTES (checked before reading), refused as the damaged file they are."""
    import os
    import signal

    from fol.cli import main
    from fol.simulation import check, runner

    out = _leo_run_record(tmp_path)
    monkeypatch.setattr(check, "MAX_RUN_JSON_BYTES", 4096)
    big = out / "state" / "seed-0" / "results" / "local.json"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as fh:
        fh.truncate(5000)
    with pytest.raises(ValueError, match=r"^5000 bytes; a JSON file of a run may have at most 4096$"):
        check.read_run_json(big)
    with pytest.raises(ConfigError, match=r"local\.json: not the saved results of method 'local' \(5000 bytes; "):
        check.saved_results(big, "local", ["a"])

    def timed_out(*_: object) -> None:
        raise TimeoutError("read_run_json waited on a FIFO")

    os.mkfifo(out / "state" / "wall_seconds.json")
    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(10)
    try:
        assert runner._earlier_wall_seconds(out) is None  # no writer will ever come: as unreadable
        (out / "scenario.resolved.json").unlink()
        os.symlink("/dev/zero", out / "scenario.resolved.json")
        assert main(["simulate", "--resume", str(out), "--check"]) == 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("channels, size", [(4, 32), (3, 16)])
def test_a_pool_candidate_of_another_input_shape_is_refused_naming_the_file(channels: int, size: int,
                                                                            tmp_path: Path) -> None:
    """A mutation fuzzer of the agent's pool folder (``models/pool/round-<e>/``, what :func:`save_pool_round`
    wrote and :func:`load_pool` reads back): a candidate file of the node's classes and round but another
    input shape (another node's, a multispectral one) was loaded, then scored on the node's images: a
    RuntimeError traceback from the convolution (4 channels), or a model of 16 px images ranked on 32 px
    ones. It is now refused as a received model is (ModelCard.unusable_by), a CheckpointError naming it."""
    from fol.checkpoint import ModelCard, save_model
    from fol.errors import CheckpointError
    from fol.models import ModelSpec, build_model
    from fol.nodedata import load_node_data
    from fol.personalize import NodeState, load_pool

    data = load_node_data(parse_node_data("dataset=synthetic-hurricane,nodes=2,node=0,per_node=30,size=200"))
    names = list(data.train.class_names)
    own_spec = ModelSpec("cnn-small", len(names), 3, 32)
    own = build_model(own_spec)
    state = NodeState.from_pretrained("node-0", own, own_spec, names, data)
    spec = ModelSpec("cnn-small", len(names), channels, size)
    path = tmp_path / "pool" / "round-1" / "candidate-0.safetensors"
    path.parent.mkdir(parents=True)
    save_model(path, build_model(spec), ModelCard(spec=spec, class_names=names, input_shape=[channels, size, size],
                                                  producer="node-1", round=1, extra={"candidate": "node-1 (round 1)"}))
    with pytest.raises(CheckpointError) as info:
        load_pool(tmp_path / "pool", state, 2, 10**8)
    _one_line(str(info.value), 400)
    assert str(info.value) == (f"{path}: not a candidate this node kept in round 1: its input shape "
                               f"[{channels}, {size}, {size}] differs from the node's [3, 32, 32]")


@pytest.mark.parametrize("kind", ["control", "long"])
def test_a_refused_pool_candidate_is_named_through_brief(kind: str, tmp_path: Path) -> None:
    """load_pool named a refused candidate file as it is: the agent's state folder (node.state_dir, the user's)
    holding a newline or a terminal's escape went into the message as it is, one of 3,000 characters made a
    3 kB line. The file is named through brief(), as the loader's own refusals name it."""
    from fol.checkpoint import ModelCard, save_model
    from fol.errors import CheckpointError
    from fol.models import ModelSpec, build_model
    from fol.nodedata import load_node_data
    from fol.personalize import NodeState, load_pool
    from swarmbase.tomlcheck import brief

    data = load_node_data(parse_node_data("dataset=synthetic-hurricane,nodes=2,node=0,per_node=30,size=200"))
    names = list(data.train.class_names)
    spec = ModelSpec("cnn-small", len(names), 3, 32)
    state = NodeState.from_pretrained("node-0", build_model(spec), spec, names, data)
    state_dir = odd_folder(tmp_path, kind)
    path = state_dir / "pool" / "round-1" / "candidate-0.safetensors"
    path.parent.mkdir(parents=True)
    save_model(path, build_model(spec), ModelCard(spec=spec, class_names=names, input_shape=[3, 32, 32],
                                                  producer="node-1", round=2, extra={"candidate": "node-1 (round 1)"}))
    with pytest.raises(CheckpointError) as info:
        load_pool(state_dir / "pool", state, 2, 10**8)
    message = str(info.value)
    assert message.startswith(f"{brief(path)}: not a candidate this node kept in round 1 (card: candidate name "
                              "'node-1 (round 1)', round 2)"), message
    assert message.isprintable() and len(message) < 400, message


def test_a_damaged_saved_result_refuses_the_resume_before_the_data_pool_is_read(tmp_path: Path, monkeypatch) -> None:
    """The fuzzer's damaged ``state/seed-0/results/<method>.json`` (truncated, a quote inserted, nested
    too deep) refused the resume only after the data pool was read and partitioned (2.1-2.4 s of the tiny
    scenario; minutes with a large dataset), although the check needs only the nodes' names. They are now
    read first; the folder is left as it was."""
    import tomllib

    from fol.simulation import parse_scenario, run_simulation, runner

    from _scenarios import LEO

    out = _leo_run_record(tmp_path)
    bad = out / "state" / "seed-0" / "results" / "local.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('[{"node": "WD-P00-S00", "method": "local", "test_accuracy": 0.5')

    def no_pool(*_: object) -> None:
        raise AssertionError("the data pool was read before the saved results were checked")

    monkeypatch.setattr(runner, "_load_pool", no_pool)
    before = _tree(out)
    scn = parse_scenario(tomllib.loads(LEO), tmp_path, "tiny.toml")
    with pytest.raises(ConfigError, match=rf"^--resume: {re.escape(str(bad))}: not the saved results of method "
                                          r"'local' \(not valid JSON \(Expecting"):
        run_simulation(scn, out, resume=True, progress=False)
    assert _tree(out) == before


def test_a_model_card_pretrained_on_another_long_spec_is_refused_in_a_short_line(tmp_path: Path,
                                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The fuzzer's next ``fol personalize`` round on a previous run's model whose card records the
    ``--data`` of another shard with a 200,000-character ``root``: the refusal quoted the card's spec
    whole, a line of 200,390 characters. Both specs are now cut (swarmbase.tomlcheck.brief)."""
    from fol.checkpoint import ModelCard, save_model
    from fol.cli import main
    from fol.models import ModelSpec, build_model

    spec = "dataset=synthetic-hurricane,nodes=2,node={k},per_node=30,size=200"
    model = ModelSpec("cnn-small", 2, 3, 32)
    card = ModelCard(spec=model, class_names=["no_damage", "damage"], input_shape=[3, 32, 32], producer="node-0",
                     round=1, extra={"data": spec.format(k=1) + ",root=" + "r" * 200_000, "split_seed": "node_seed"})
    save_model(tmp_path / "round1.safetensors", build_model(model), card)
    (tmp_path / "fol.toml").write_text("[fol]\nrounds = 3\n")
    (tmp_path / "received").mkdir()
    assert main(["personalize", "--model", str(tmp_path / "round1.safetensors"), "--data", spec.format(k=0),
                 "--neighbors", str(tmp_path / "received"), "--out", str(tmp_path / "out"),
                 "--config", str(tmp_path / "fol.toml")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith(("INFO ", "WARNING "))]
    assert len(err) == 1 and "round1.safetensors: pretrained on --data 'dataset=synthetic-hurricane,nodes=2," in err[0]
    assert f"but --data {spec.format(k=0)} gives another shard or split" in err[0], err
    _one_line(err[0], 600)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["drone-7-from-the-ground-station", "drone_7_from_the_ground_station"])
def test_a_missing_key_file_of_forty_characters_is_not_trusted_as_a_key(name: str, tmp_path: Path, monkeypatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Probing the key files ``fol keys`` reads: ``fol keys trust keys/drone-7-from-the-ground-station.key``
    with that file missing (not yet copied, a typo) trusted its 40-character path, every character of it Z85,
    as the peer's public key (load_public_key takes 40 characters that name no file as the key itself, for a
    node TOML's peers[].public_key). A path of 40 characters that are not all Z85 was refused as 'public key:
    not a CURVE key', naming no file. ``fol keys trust`` and the trust store now read key files only."""
    from fol.agent.keys import TrustStore, generate_keypair
    from fol.cli import main

    monkeypatch.chdir(tmp_path)
    key = f"keys/{name}.key"
    assert len(key) == 40
    generate_keypair(tmp_path / "keys", "drone-1")
    assert main(["keys", "trust", "keys/drone-1.key", "--store", "trusted"]) == 0
    capsys.readouterr()
    before = _tree(tmp_path / "trusted")
    assert main(["keys", "trust", key, "--store", "trusted"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fol keys: error: {key}: public key file not found"], err
    assert _tree(tmp_path / "trusted") == before
    assert list(TrustStore(tmp_path / "trusted").reload().values()) == ["drone-1"]


def test_a_link_loop_in_the_trust_store_is_refused_by_name_and_revocations_still_apply(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    """The fuzzer's trust store holding a link loop ``drone-3.key``: ``fol keys list`` / ``trust`` ended in
    the generic OSError line ('Too many levels of symbolic links'; DirEntry.is_file raises it), and in the
    agent TrustStore.changed() raised it every second: the store was neither reloaded nor, as the docs
    promise when one file cannot be read, were the keys of deleted files dropped (a revoked peer stayed
    trusted while the loop was there). changed() no longer raises, reload() refuses the loop in one
    ConfigError line naming it, and drop_missing() revokes the peer whose file is gone."""
    from fol.agent.keys import TrustStore, generate_keypair, trust_key
    from fol.cli import main

    store = tmp_path / "trusted"
    for name in ("drone-1", "drone-2"):
        trust_key(store, generate_keypair(tmp_path / "keys", name)[0])
    trust = TrustStore(store)
    assert sorted(trust.reload().values()) == ["drone-1", "drone-2"]
    (store / "drone-3.key").symlink_to("drone-3.key")
    (store / "drone-2.key").unlink()  # fol keys revoke drone-2, while the loop is there
    assert trust.changed()
    with pytest.raises(ConfigError, match=r"drone-3\.key: cannot read the public key file \(Too many levels of symbolic links\)$"):
        trust.reload()
    assert trust.drop_missing() == ["drone-2"] and list(trust.peers.values()) == ["drone-1"]
    assert not trust.changed()  # taken as seen: not tried again every second until the folder changes
    monkeypatch.chdir(tmp_path)
    assert main(["keys", "list", "--store", "trusted"]) == 2


def test_check_with_resume_refuses_a_damaged_saved_result_as_the_resume_does(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The fuzzer: of 169 ``--check --resume`` cases, those with a damaged saved result (truncated, a field
    of another type, nested too deep) said OK, and the resume then refused the folder; the check now reads
    the saved results too (fol.simulation.check.check_saved_results), in the same one line."""
    from fol.cli import main

    out = _leo_run_record(tmp_path)
    bad = out / "state" / "seed-0" / "results" / "fol.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("[" * 40 + "]" * 40)
    before = _tree(out)
    assert main(["simulate", "--resume", str(out), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fol simulate: error: --resume: {bad}: not the saved results of method 'fol' (not valid JSON "
                   "(nested deeper than 32 levels)); move the file away to run 'fol' again"], err
    assert _tree(out) == before


@pytest.mark.parametrize("field", ["sha256", "bytes"])
def test_a_manifest_entry_of_null_is_refused_in_one_line(field: str, tmp_path: Path) -> None:
    """The fuzzer's ``fol personalize`` run again into its earlier ``--out``, whose
    ``personalize.manifest.json`` gives a file's sha256 as ``null``: a TypeError traceback (the typed getters
    of swarmbase.tomlcheck.Table took a JSON null as absent, even for a required field, and the sha256 check
    then matched None); a null ``bytes`` was taken, a record of no size. A required value of null is now
    refused by the table checker, naming the field."""
    import json

    from fol.personalize_cli import MANIFEST

    entry = {"bytes": 5, "sha256": "0" * 64} | {field: None}
    (tmp_path / MANIFEST.name).write_text(json.dumps({"files": {"model.safetensors": entry}, "format": 1}))
    with pytest.raises(ConfigError) as info:
        MANIFEST.read(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / MANIFEST.name}: files.model.safetensors.{field}: "
                                      "required, got null; it records which files in --out"), str(info.value)
    _one_line(str(info.value))


# ------------------------------------------------------------------ contact plans and Earth orientation (contact_sim/dtn.py, orbits/iers.py)


@pytest.mark.parametrize("text, says", [
    ("a contact +0 +60 \u0661 2 10\n", "expected an integer node number in ASCII digits, got '\u0661'"),
    ("a contact +0 +60 1 2 1_000\n", "expected an integer rate (bytes/s) in ASCII digits, got '1_000'"),
    ("a contact +0 +60 1 2 +10\n", "expected an integer rate (bytes/s) in ASCII digits, got '+10'"),
    ("a contact +0 +60 1 2 \uff11\uff10\n", "rate (bytes/s) in ASCII digits"),
    ("a contact +0 +60 1 2 10\na range +0 +60 1 2 \U0001d7d9\n", "OWLT (s) in ASCII digits"),
    ("a contact +0 +60 1 2 10\nd contact +0 \u0661 2\n", ":2: expected an integer node number in ASCII digits"),
    ("a contact +1e1 +60 1 2 10\n", "expected a relative time +SECONDS of 0..1e+10 (whole seconds in ASCII digits), "
                                    "got '+1e1'"),
    ("a contact +0.5 +60 1 2 10\n", "got '+0.5'"),
    ("a contact +0 +6_0 1 2 10\n", "got '+6_0'"),
    ("@ +\u0661\u0660\na contact +0 +60 1 2 10\n", "got '+\u0661\u0660'"),
])
def test_an_ion_number_is_ascii_digits_and_a_relative_time_whole_seconds(tmp_path: Path, text: str, says: str) -> None:
    """The ION importer read its integers with int() and its relative times with float(), which take every
    script's digits, '_' groups and a '+', and (float) exponents and fractions: a node '\u0661' was node 1, a
    rate '1_000' 1000 bytes/s, '+1e1' ten seconds (ionadmin's integer reading stops at the 'e': one), each read
    with exit status 0; found by the directed cases of a fuzzer of the plan importers. Now one line naming
    file:line, as the orbit readers refuse such numbers."""
    path = tmp_path / "p.ion"
    message = plan_refusal(path, text, encoding="utf-8")
    assert message.startswith(f"{path}:") and says in message, message

@pytest.mark.parametrize("header", ["# node 1 ISS (ZARY\x00A) satellite", "# node 1 a \x1b[2Jsat",
                                    "# node 1 a\x7fb"])
def test_an_ion_header_node_name_with_a_control_character_is_refused(tmp_path: Path, header: str) -> None:
    """A '# node N NAME KIND' header line's name or kind was taken with a NUL, an escape or a DEL in it (the
    fuzzer's accepted mutant of the ISS header): the name of a node in every table, CZML and message the
    plan gives, a terminal escape in a log line, as the TLE, OMM and OEM readers refuse a name with one."""
    path = tmp_path / "p.ion"
    message = plan_refusal(path, f"# fol-swarm contact plan\n{header}\na contact +0 +60 1 2 10\na contact +0 +60 2 1 10\n")
    assert message.startswith(f"{path}:2: node 1: expected a name and kind without control characters"), message
    assert message.isprintable(), message


@pytest.mark.parametrize("start", ["0026-08-01T00:00:00Z", "0999-12-31T23:59:59.500000Z", "2026-08-01T00:00:00Z"])
def test_an_ion_plan_start_before_the_year_1000_is_exported_as_it_is_read(start: str) -> None:
    """The ION export wrote its '# start' line with strftime('%Y'), which writes the year 26 as '26': a plan the
    importer took with '# start 0026-08-01T00:00:00Z' (the fuzzer's bit flip of 2026) was exported as
    '# start 26-08-01T00:00:00Z', which the importer then refused ('start: expected an ISO-8601 UTC time'). A plan
    starting before 1970 holds no window ION can name (ionadmin refuses a time before 1970, and the import and the
    export with it): its header alone is written, and read back as the same start, which the refusal of a time of
    it names."""
    from contact_sim import ContactPlan, LinkModel, WindowTable
    from contact_sim.dtn import format_ion, ion_to_plan, parse_ion
    from orbits import parse_utc

    contacts = "a contact +0 +60 1 2 10\na contact +0 +60 2 1 10\n"
    if start < "1970":
        none = WindowTable([], [], [], [], [], [], [])
        exported = format_ion(ContactPlan(["a", "b"], none, LinkModel("constant", 8e3, 0.0), [0.0, 60.0],
                                          parse_utc(start)))
        assert f"# start {start}\n" in exported, exported
        with pytest.raises(ContactError) as info:
            parse_ion(exported + contacts, "again.ion")
        assert str(info.value).endswith(f"the plan starts at {start}); expected times from then"), str(info.value)
        return
    plan = ion_to_plan(parse_ion(f"# fol-swarm contact plan\n# start {start}\n" + contacts, "p.ion"), "p.ion")
    exported = format_ion(plan)
    assert f"# start {start}\n" in exported, exported
    again = ion_to_plan(parse_ion(exported, "again.ion"), "again.ion")
    assert again.start == plan.start and again.windows.t_end_s.tolist() == [60.0]


@pytest.mark.parametrize("brk", ["\u2028", "\x0b", "\x85", "\r", "\x0c"])
def test_an_ion_line_break_other_than_lf_is_refused_naming_the_line_an_editor_shows(tmp_path: Path, brk: str) -> None:
    """The ION importer split its text with str.splitlines(), which also breaks at CR, VT, FF, NEL, U+2028 and
    four more: an error named a line by a count no editor or grep -n shows (a bad second line of the file was
    'p.ion:3' after a U+2028), and a NEL before an 'x' made the 'x' a line of its own, an ionadmin command
    that is ignored, so the mutant was read; found by a mutation fuzzer of the plan importers. ionadmin reads
    lines ended by LF; a line holding another break is now refused, named by its LF count."""
    from contact_sim.dtn import read_ion

    path = tmp_path / "p.ion"
    message = plan_refusal(path, f"a contact +0 +60 1 2 10\r\na contact +0 +60 2 1 10{brk}x\n", encoding="utf-8", newline="")
    assert message == f"{path}:2: a line break {brk!r} inside the line; expected lines ended by LF or CR LF", message
    path.write_text("a contact +0 +60 1 2 10\r\na contact +0 +60 2 1 10\r\n", newline="")  # CR LF ends are read
    assert read_ion(path).windows.t_end_s.tolist() == [60.0]


@pytest.mark.parametrize("text, line", [("a contact +0 +60 1 2 10 garbage\n", 1), ("a contact +0 +60 1 2 10 2\n", 1),
                                        ("a contact +0 +60 1 2 10 nan\n", 1),
                                        ("a contact +0 +60 1 2 10\nc contact +0 1 2 5 \u0661\n", 2)])
def test_an_ion_contact_confidence_that_is_no_number_of_0_to_1_is_refused(tmp_path: Path, text: str, line: int) -> None:
    """An 'a contact' line's optional eighth field (and a 'c contact' line's seventh), ionadmin's confidence in
    the contact, was passed over whatever it held: 'garbage', 2, an Arabic-Indic one (found by the directed
    cases of a fuzzer of the plan importers). It is now a number of 0..1 or one line naming
    file:line; 1.0 and 0.5 are read as before (and not used)."""
    from contact_sim.dtn import read_ion

    path = tmp_path / "p.ion"
    message = plan_refusal(path, text, encoding="utf-8")
    assert message.startswith(f"{path}:{line}: expected the contact's confidence, a number of 0..1, after the "
                              "rate, got "), message
    path.write_text("a contact +0 +60 1 2 10 1.0\na contact +0 +60 2 1 10 .5\nc contact +0 1 2 20 0\n")
    assert read_ion(path).windows.volume_bits.tolist() == [8 * 10 * 60]


def _finals_lines() -> list[str]:
    import datetime as dt

    from _iers import finals_text

    text = finals_text({**{dt.date(2008, 9, 19): (0.18, 0.39), dt.date(2008, 9, 20): (0.2, 0.35)}},
                       {dt.date(2008, 9, 19): -0.4800210, dt.date(2008, 9, 20): -0.4809865})
    return text.splitlines(keepends=True)


@pytest.mark.parametrize("mutate, says", [
    (lambda lines: ["x" * 200 + "\n"] + lines, ":1: expected a line of an IERS finals2000A.all or finals.all file: "),
    (lambda lines: [lines[0].replace(" 919 ", " 929 ", 1)] + lines[1:], ":1: the date of columns 1-6, ' 8 929', is "),
    (lambda lines: [lines[0], lines[1][:58] + " 0.5190135" + lines[1][68:]] + lines[2:],
     ":2: UT1-UTC (columns 59-68) goes from -0.4800210 s on line 1 to 0.5190135 s where Skyfield "),
    (lambda lines: [], ": no polar motion; expected a line of an IERS finals2000A.all or finals.all file: "),
])
def test_an_iers_finals_refusal_is_under_300_characters_besides_the_file_name(tmp_path: Path, mutate, says: str) -> None:
    """A fuzzer of the IERS finals reader flagged its refusals as over 300 characters: each restated the whole
    column layout (205 characters) after the problem, and the leap-second refusal ran to 330 characters before
    the file's name. The layout is now written in 169 characters and the leap-second refusal shorter; each
    refusal stays one line under 260 characters besides the file's name."""
    from orbits import OrbitError, read_iers_finals

    path = tmp_path / "finals2000A.all"
    path.write_text("".join(mutate(_finals_lines())))
    with pytest.raises(OrbitError) as info:
        read_iers_finals(path)
    message = str(info.value)
    _one_line(message)
    assert message.startswith(f"{path}{says}"), message
    assert len(message) - len(str(path)) < 260, (len(message) - len(str(path)), message)


@pytest.mark.parametrize("suffix", [".ion", ".json"])
def test_a_contact_of_rate_0_makes_no_window_and_leaves_its_reverse_one_way(tmp_path: Path, suffix: str) -> None:
    """A contact of rate 0 (the fuzzer's mutant of a rate into 0, ION or HDTN) was read as a contact: with a
    reverse contact over the same time it made a two-way window at the smaller rate, 0, so the 60 kB the
    reverse direction carries at 1,000 bytes/s were lost, and alone it was a window of no capacity. An ION one
    now makes no window, as ionadmin inserts none, and the reverse one is a one-way window; an HDTN one, which
    HDTN reads as unlimited (cp_load plans it at 1e9 bit/s), is refused, naming the record (after the first
    fix, read as no contact)."""
    import json

    from contact_sim.dtn import read_plan
    from contact_sim.windows import B_TO_A

    path = tmp_path / f"p{suffix}"
    if suffix == ".json":
        for key, value in (("rateBitsPerSec", 0), ("rate", 0)):
            path.write_text(json.dumps({"contacts": [
                {"source": 2, "dest": 1, "startTime": 0, "endTime": 60, "rateBitsPerSec": 8000, "owlt": 1},
                {"source": 1, "dest": 2, "startTime": 0, "endTime": 60, key: value, "owlt": 1}]}))
            with pytest.raises(ContactError) as info:
                read_plan(path)
            assert str(info.value).startswith(f"{path}: contacts[1]: {key} 0 is HDTN's unlimited rate "), info.value
        return
    path.write_text("a contact +0 +60 1 2 0\na contact +0 +60 2 1 1000\n")
    w = read_plan(path).windows
    assert (w.volume_bits.tolist(), w.direction.tolist()) == ([8 * 60_000], [B_TO_A])
    path.write_text("a contact +0 +60 1 2 0\n")
    with pytest.raises(ContactError, match=r": no 'a contact' lines of a positive rate between two "):
        read_plan(path)


@pytest.mark.parametrize("text, line", [("a contact -1 +0 \u0664 5 1\n", 1), ("a contact 0 +0 4 5_0 1\n", 1),
                                        ("a contact +0 +60 1 3 10\nd contact -1 \u0661 2\n", 2)])
def test_a_skipped_ion_registration_contact_still_names_its_nodes_in_ascii_digits(tmp_path: Path, text: str,
                                                                                  line: int) -> None:
    """A registration ('a contact -1 ...') or hypothetical ('a contact 0 ...') contact line, and a 'd contact' of one,
    was skipped before its node numbers were read, so an Arabic-Indic four or a '5_0' there was taken (the
    rerun of the plan-importer fuzzer's accepted mutant, once the other numbers were read in ASCII digits)."""
    from contact_sim.dtn import read_ion

    path = tmp_path / "p.ion"
    message = plan_refusal(path, "a contact +0 +60 1 2 10\na contact +0 +60 2 1 10\n" + text, encoding="utf-8")
    assert message.startswith(f"{path}:{line + 2}: expected an integer node number in ASCII digits, got "), message
    path.write_text("a contact +0 +60 1 2 10\na contact -1 +0 4 4 1\na contact 0 +0 4 5 1\nd contact -1 4 4\n")
    assert read_ion(path).node_names == ["ipn-1", "ipn-2"]


@pytest.mark.parametrize("line, says", [
    ("a contact 2026/08/01-00:01:00 \u0662\u0660\u0662\u0666/08/01-00:02:00 9 5 2000",
     "expected +SECONDS or yyyy/mm/dd-hh:mm:ss, got '\u0662\u0660\u0662\u0666/08/01-00:02:00'"),
    ("a contact +0 +86400 5 5 1_000000", "expected an integer rate (bytes/s) in ASCII digits, got '1_000000'"),
    ("a range +0 +86400 5 5 \uff11", "expected an integer OWLT (s) in ASCII digits, got '\uff11'"),
])
def test_an_ion_absolute_time_and_a_loopback_rate_are_read_in_ascii_digits(tmp_path: Path, line: str, says: str) -> None:
    """The rerun of the plan-importer fuzzer, its accepted files checked against ionadmin's grammar: an absolute
    time's year in Arabic-Indic digits was read (strptime's %Y takes every script's digits), and a loopback
    contact's rate (or range's OWLT) was skipped unread, so '1_000000' there was taken."""
    path = tmp_path / "p.ion"
    message = plan_refusal(path, f"# fol-swarm contact plan\n# start 2026-08-01T00:00:00Z\na contact +0 +60 1 2 10\n{line}\n",
                           encoding="utf-8")
    assert message == f"{path}:4: {says}", message


@pytest.mark.parametrize("digits", [400, 4000])
def test_an_ion_relative_time_of_hundreds_of_digits_is_refused_in_one_line(tmp_path: Path, digits: int) -> None:
    """Once relative times were read as integers (ASCII digits), '+1000...' of 400 digits was added to the
    reference time as a float: an OverflowError traceback (a float() of it had been infinite, and refused);
    found by the last rerun of the plan-importer fuzzer. Now refused as past 1e10 s."""
    path = tmp_path / "p.ion"
    message = plan_refusal(path, "a contact +0 +1" + "0" * digits + " 1 2 10\n")
    assert message.startswith(f"{path}:1: expected a relative time +SECONDS of 0..1e+10 (whole seconds in ASCII "
                              "digits), got '+10000"), message


@pytest.mark.parametrize("brk", ["\u2028", "\x0b", "\x85", "\r", "\x0c"])
def test_an_ion_comment_may_hold_any_line_break_ionadmin_does_not_end_a_line_at(tmp_path: Path, brk: str) -> None:
    """ionadmin ends a line at LF only and passes over a comment, so a form feed (a page break), a U+2028 or a
    lone CR inside a '#' comment breaks nothing: the importer refused such a plan since the line-break check
    (4281328) searched the whole text, comments too. A break after a comment on the same line is still the
    comment's, and one before it is refused. Failed before (each plan refused naming line 1 or 2)."""
    from contact_sim.dtn import read_ion

    path = tmp_path / "p.ion"
    path.write_text(f"# page one{brk}# page two {brk}{brk}\na contact +0 +60 1 2 10 # up{brk}link\r\n"
                    "a contact +0 +60 2 1 10\n", encoding="utf-8", newline="")
    assert read_ion(path).windows.t_end_s.tolist() == [60.0]
    message = plan_refusal(path, f"# a note{brk}\na contact +0 +60 1 2 10{brk}# x\n", encoding="utf-8", newline="")
    assert message == f"{path}:2: a line break {brk!r} inside the line; expected lines ended by LF or CR LF", message


def test_an_ion_comment_that_begins_like_a_header_but_holds_no_number_is_a_comment(tmp_path: Path) -> None:
    """ionadmin passes over every '#' line; the importer read '# start WORD' and '# node WORD ...' as the
    project's header lines, so a user's '# start here' or '# node numbers: 1 is the ground station' above a
    valid plan was refused ('start: expected an ISO-8601 UTC time', 'expected an integer node number').
    A header's value starts with an ASCII digit; a comment that does not is passed over, and a header that
    does is read and checked as before. Failed before (both plans refused)."""
    from contact_sim.dtn import read_ion

    path = tmp_path / "p.ion"
    marker = "# fol-swarm contact plan\n"  # headers are read only in the project's plans (test_dtn_ion_rules.py)
    path.write_text(marker + "# start here\n# node numbers: 1 is the ground station\n# node\n"
                    "a contact +0 +60 1 2 10\na contact +0 +60 2 1 10\n")
    back = read_ion(path)
    assert back.start is None and back.node_names == ["ipn-1", "ipn-2"]
    message = plan_refusal(path, marker + "# start 2026-13-01T00:00:00Z\na contact +0 +60 1 2 10\n")
    assert message.startswith(f"{path}:2: start: expected an ISO-8601 UTC time"), message
    message = plan_refusal(path, marker + "# node 1_0 gs ground\na contact +0 +60 1 2 10\n")
    assert message == f"{path}:2: expected an integer node number in ASCII digits, got '1_0'", message


@pytest.mark.parametrize("text, line", [("a contact -1 +0 4 4 1_000\n", 1), ("a contact 0 +0 4 5 \u0661\n", 1),
                                        ("a contact -1 +0 4 4 +10\n", 1), ("a contact 0 0 5 4 1_000\n", 1)])
def test_a_skipped_ion_registration_contact_still_has_its_rate_in_ascii_digits(tmp_path: Path, text: str,
                                                                              line: int) -> None:
    """bf2151c read a registration or hypothetical contact's node numbers before skipping it, but not its
    rate: '1_000', '+10' or an Arabic-Indic one there was taken, where every other rate is refused (the module
    doc and docs/formats.md: every number in ASCII digits). Failed before (the four plans read)."""
    from contact_sim.dtn import read_ion

    path = tmp_path / "p.ion"
    message = plan_refusal(path, "a contact +0 +60 1 2 10\na contact +0 +60 2 1 10\n" + text, encoding="utf-8")
    assert message.startswith(f"{path}:{line + 2}: expected an integer rate (bytes/s) in ASCII digits, got "), message
    path.write_text("a contact +0 +60 1 2 10\na contact -1 +0 4 4 0\na contact 0 0 4 5 7\n")
    assert read_ion(path).node_names == ["ipn-1", "ipn-2"]


@pytest.mark.parametrize("space", ["\xa0", "\x1f", "\u2003", "\u3000", "\u202f"])
def test_an_ion_field_separated_by_a_space_other_than_a_space_or_tab_is_refused(tmp_path: Path, space: str) -> None:
    """str.split() also splits at US (\\x1f), a no-break space and the other Unicode spaces, which ionadmin
    takes for part of a field: 'a contact<NBSP>+0 +60 1 2 10' was read as a contact with exit status 0. Such a
    character outside a comment is refused naming the line; inside one it is passed over, as ionadmin passes
    over comments. Failed before (the five plans read)."""
    from contact_sim.dtn import read_ion

    path = tmp_path / "p.ion"
    message = plan_refusal(path, f"# a{space}note\na contact +0 +60 1 2 10\na contact +0 +60 2 1{space}10\n",
                           encoding="utf-8")
    assert message == (f"{path}:3: a character {space!r} between or inside fields; expected fields separated by "
                       "spaces or tabs"), message
    path.write_text(f"# a{space}note\na\tcontact +0 +60 1 2 10 # up{space}link\na contact +0 +60 2 1 10\n",
                    encoding="utf-8")
    assert read_ion(path).windows.t_end_s.tolist() == [60.0]


# ------------------------------------------------------------------ swarm scenario, FL side (fol/simulation/scenario.py, check.py)

def _swarm_check(tmp_path: Path, capsys: pytest.CaptureFixture[str], methods: str) -> str:
    """``fol simulate --check`` of examples/drone_swarm.toml with its ``[methods]`` table replaced: the one
    line it printed on stderr (exit status 2)."""
    from fol.cli import main

    text = (Path(__file__).resolve().parents[1] / "examples" / "drone_swarm.toml").read_text()
    head, _, tail = text.partition("[methods]")
    path = tmp_path / "s.toml"
    path.write_text(head + methods + "\n[run]" + tail.partition("[run]")[2])
    assert main(["simulate", str(path), "--check"]) == 2
    err = capsys.readouterr().err.strip()
    _one_line(err)
    assert err.startswith(f"fol simulate: error: {path}: "), err
    err = err.removeprefix(f"fol simulate: error: {path}: ")
    assert len(err) < 300, err  # after the file's name, which is as long as the caller made it
    return err


@pytest.mark.parametrize("method", ["dense", "co-boosting"])
@pytest.mark.parametrize("budget", ["[]", '["tiny"]', "{ a = 1 }"])
def test_a_data_free_budget_that_is_not_a_name_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    method: str, budget: str) -> None:
    """The scenario fuzzer, FL side: ``[methods.dense] budget = []`` (an array or a table) was looked up in the
    budgets' dict, and the refusal was 'methods.dense: invalid option(s): unhashable type: 'list'', naming
    neither the field nor what it takes."""
    err = _swarm_check(tmp_path, capsys, f'[methods]\nrun = ["local", "{method}"]\n[methods.{method}]\nbudget = {budget}\n')
    assert err.startswith(f"methods.{method}.budget must be one of 'tiny', "), err


@pytest.mark.parametrize("method", ["dense", "co-boosting"])
def test_an_unknown_data_free_option_is_refused_in_a_short_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                method: str) -> None:
    """The scenario fuzzer, FL side: an unknown ``[methods.dense]`` key was refused listing all 24 options,
    a line of about 390 characters, and every unknown key whole (a table of 2,000 made a line of 30 kB).
    Now the first unknown key, their count and the options as an unknown ``[fol]`` key lists its keys."""
    err = _swarm_check(tmp_path, capsys, f'[methods]\nrun = ["local", "{method}"]\n[methods.{method}]\nkd_bach = 1\n')
    assert err.startswith(f"methods.{method}: invalid option(s): unknown 'kd_bach'; expected some of "), err
    assert err.endswith("; the closest: kd_batch)"), err
    many = "".join(f"zz{i} = 1\n" for i in range(2000))
    err = _swarm_check(tmp_path, capsys, f'[methods]\nrun = ["local", "{method}"]\n[methods.{method}]\n{many}')
    assert err.startswith(f"methods.{method}: invalid option(s): unknown 'zz0' and 1,999 more; expected some of "), err


# ------------------------------------------------------------------ swarm scenario runs, beyond --check (fol simulate, fol/train.py)


def test_batch_norm_statistics_that_overflow_end_training_naming_the_stage() -> None:
    """The run fuzzer (``fol simulate`` for real): ``fol.weight_decay = 1e6`` gave finite but huge weights, whose
    recomputed batch-norm variances overflowed float32 to inf; pretraining ended "successfully", saved that
    checkpoint, and the run stopped reading it back, blaming the file ("tensor 'features.5.running_var' has 64
    non-finite value(s)"). Training now stops at the epoch, naming the stage, as a non-finite loss or weight does."""
    import torch
    from torch import nn

    from fol.errors import TrainingError
    from fol.train import TrainConfig, fit

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
    with torch.no_grad():
        model[0].weight.mul_(1e20)
        model[0].bias.mul_(1e20)
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    x, y = torch.rand(16, 3, 8, 8), torch.randint(0, 2, (16,))
    with pytest.raises(TrainingError, match=r"^pretrain: the batch-norm statistics became non-finite at epoch 0 "
                                            r"\(finite but huge weights; learning rate 1e-10; "):
        fit(model, (x, y), TrainConfig(epochs=1, batch_size=8, lr=1e-10, weight_decay=0.0, desc="pretrain"))


def test_a_weight_decay_that_zeroes_the_weights_is_refused_before_the_run_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The run fuzzer: ``[fol] weight_decay = 1e6`` passed ``--check``; the run computed the contacts, pretrained
    every node into non-finite batch-norm statistics and stopped with an error naming a checkpoint file of
    its own state folder. lr x weight_decay >= 1 is now refused when the scenario is read, before any folder is made."""
    from _scenarios import LEO
    from fol.cli import main

    path = tmp_path / "s.toml"
    path.write_text(LEO.replace("[methods]", "weight_decay = 1e6\n[methods]"))
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    _one_line(err)
    assert err.startswith(f"fol simulate: error: {path}: fol.weight_decay must be below 1 / the learning rate "), err
    assert err.endswith("got 1000000.0 with a learning rate of 0.01 (fol.pretrain_lr)"), err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ an allocation that fails (fol/cli.py)

def test_a_pool_the_machine_cannot_hold_ends_in_one_line_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The run fuzzer (``fol simulate`` for real, 5.4 GiB address space): ``[data] size = 1000000`` is within
    the 8 GiB pool limit (2.9 GiB of 16x16 images), but torch's allocator could not grant it and the run ended
    in a 30-line traceback (a ``RuntimeError``: "DefaultCPUAllocator: can't allocate memory"). An allocation
    that fails now ends the command in one line, exit status 1, before the output folder is made. Here the
    pool is a tensor no machine holds (2^48 float32 values), so torch's own refusal is what is tested."""
    import torch

    import fol.simulation.runner as runner
    from _scenarios import LEO
    from fol.cli import main

    monkeypatch.setattr(runner, "_load_pool", lambda scn, seed: torch.empty(2 ** 48))
    path = tmp_path / "s.toml"
    path.write_text(LEO)
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    _one_line(err)
    assert err.startswith("fol simulate: error: out of memory: a tensor of 1,048,576.0 GiB could not be allocated "
                          "(fewer or smaller images, a smaller batch, or more memory for the process)"), err
    assert not (tmp_path / "out").exists()


def test_only_an_allocation_failure_is_read_as_out_of_memory() -> None:
    """Another ``RuntimeError`` (a bug) keeps its traceback: it is not worded as out of memory."""
    from fol.cli import out_of_memory_line

    assert out_of_memory_line(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) is None
    assert out_of_memory_line(ValueError("DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                                         "8 bytes")) is None
    assert out_of_memory_line(MemoryError()).startswith("out of memory (fewer or smaller images")


# ------------------------------------------------------------------ a local Ray that does not start (fol/executors.py)

def test_a_ray_node_that_times_out_at_startup_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run fuzzer (``[run] executor = "ray"`` under a 5.4 GiB address-space limit on a loaded machine): Ray's
    node startup timed out after 30 s and ``ray.init`` raised a bare ``Exception`` ("The current node timed out
    during startup ..."), which no handler took: a 40-line traceback. It is now the one line of a local instance
    that cannot start; another exception type is still a bug's traceback."""
    ray = pytest.importorskip("ray")
    from fol.errors import ConfigError
    from fol.executors import RayExecutor

    def init_timing_out(**kwargs: Any) -> None:
        raise Exception("The current node timed out during startup. This could happen because some of the "
                        "raylet failed to startup or the GCS has become overloaded.")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init_timing_out)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # no token file made in the test's home folder
    with pytest.raises(ConfigError) as info:
        RayExecutor()
    _one_line(str(info.value))
    assert str(info.value).startswith("executor 'ray': cannot start a local Ray instance (The current")
    assert str(info.value).endswith("(The current node timed out during startup. This could happen because some "
                                    "of the raylet failed to startup or the GCS has become overloaded.)")

    def init_with_a_bug(**kwargs: Any) -> None:
        raise TypeError("init() got an unexpected keyword argument")

    monkeypatch.setattr(ray, "init", init_with_a_bug)
    with pytest.raises(TypeError):
        RayExecutor()


def _diverging_linear() -> tuple:
    """A model and inputs on which one step at a learning rate of 1e6 sends the weights to inf:
    a loss of about 1e33, finite in float32, and gradients of the same size."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Linear(2, 2), torch.full((8, 2), 1e33), torch.tensor([0, 1] * 4)


def test_a_diverging_distillation_names_fol_distill_lr() -> None:
    """fol.distill_lr = 1e6 in a scenario ended the run with 'distill: the weights became
    non-finite at epoch 0 (learning rate 1e+06; a smaller one usually fixes this)', which did
    not say which of the scenario's rates to lower. (Failed before: no field named.)"""
    import torch

    from fol.config import FOLConfig
    from fol.distill import distill
    from fol.errors import TrainingError

    cfg = FOLConfig(distill_lr=1e6)
    student, x, _ = _diverging_linear()
    teacher_logits = torch.tensor([[1.0, -1.0]] * 8)
    with pytest.raises(TrainingError) as err:
        distill(student, x, teacher_logits, cfg.distill_train(0), cfg.temperature, cfg.lam)
    assert str(err.value).startswith("distill: the ")
    assert "learning rate 1e+06; a smaller fol.distill_lr usually fixes this" in str(err.value)


def test_a_divergence_names_the_epoch_of_the_callers_loop() -> None:
    """DENSE's KD step (and FOL's warm start on synthesized inputs) trains one epoch per call of fit, so a
    divergence always said 'at epoch 0'; fit's first_epoch numbers it as the caller's loop does."""
    from fol.errors import TrainingError
    from fol.train import TrainConfig, fit

    model, x, y = _diverging_linear()
    cfg = TrainConfig(epochs=1, lr=1e6, momentum=0.0, weight_decay=0.0, desc="data-free distillation")
    with pytest.raises(TrainingError, match=r"^data-free distillation: the weights became non-finite at epoch 7 "):
        fit(model, (x, y), cfg, first_epoch=7)


@pytest.mark.parametrize("view, field", [
    (lambda c: c.pretrain_train(), "fol.pretrain_lr"),
    (lambda c: c.finetune_train(1, 0, "fine-tune"), "fol.finetune_lr"),
    (lambda c: c.finetune_train(1, 0, "post fine-tune"), "fol.finetune_lr"),
    (lambda c: c.distill_train(0), "fol.distill_lr"),
])
def test_each_fol_stage_that_diverges_names_the_rate_to_lower(view, field: str) -> None:
    import dataclasses

    from fol.config import FOLConfig
    from fol.errors import TrainingError
    from fol.train import fit

    tcfg = dataclasses.replace(view(FOLConfig()), lr=1e6, momentum=0.0, weight_decay=0.0, patience=0)
    model, x, y = _diverging_linear()
    with pytest.raises(TrainingError, match=rf"^{tcfg.desc}: .* a smaller {field} usually fixes this\)$"):
        fit(model, (x, y), tcfg)


def test_a_baselines_local_training_names_its_own_rate_or_the_swarms() -> None:
    """A baseline's local steps run at methods.<name>.lr when set, else at the swarm's
    fol.pretrain_lr; MTFL-Adam's at methods.mtfl-adam.adam_lr. A divergence names that one."""
    import types

    from fol.config import FOLConfig
    from fol.errors import TrainingError
    from fol.methods.fedavg import FedAvgMethod
    from fol.methods.mtfl import MTFLAdamMethod
    from fol.train import fit

    node = types.SimpleNamespace(spec=None, data=None)
    ctx = types.SimpleNamespace(train=FOLConfig().pretrain_train(), seed=0, nodes=[node, node])
    assert FedAvgMethod().local_cfg(ctx, 0, 0).lr_field == "fol.pretrain_lr"
    cfg = FedAvgMethod(lr=1e6).local_cfg(ctx, 0, 1)
    assert (cfg.lr, cfg.lr_field) == (1e6, "methods.fedavg.lr")
    model, x, y = _diverging_linear()
    with pytest.raises(TrainingError, match=r"a smaller methods\.fedavg\.lr usually fixes this\)$"):
        fit(model, (x, y), cfg)
    mtfl = MTFLAdamMethod()
    state = {"global": {}, "patches": [{}, {}], "moments": {}, "private_moments": [{}, {}]}
    task = mtfl.client_task(state, ctx, 0, 0, mtfl.local_cfg(ctx, 0, 0))
    assert task.cfg.lr_field == "methods.mtfl-adam.adam_lr"
